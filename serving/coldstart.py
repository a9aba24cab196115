"""Cold-start budget: seconds from a scale-up decision to a ready replica, part by part.

Two paths. On a warm node (a node of the pool with a free slice, the image already pulled and
the model in its local NVMe cache) only the weights load and the engine start remain. On a new
node everything counts, and the weights stream from the regional bucket, because a node that
has just joined has an empty cache.

Figures (FACTS.md section 7):
- node provisioning follows the node autoscaler each cloud uses (serving/nodescaling.py:
  Karpenter on EKS, the cluster autoscalers of GKE and AKS); every row still holds the 284 s of
  kaito-project/kaito#2325 (AKS), the one measurement on file, and its `source` says so.
- node init (driver, device plugin) 126 s, image pull 101 s, engine warm-up 195 s: the
  16-minute end-to-end vLLM scale-up in kaito-project/kaito#2325 (AKS). No per-cloud
  measurement of node init is on file, so EKS and GKE use the same figure until one is.
- image pull: the ~12 GB compressed vLLM image in 101 s, i.e. 0.119 GB/s.
- weights: Llama-3-8B (15 GB) in 4.9 s with the Run:ai streamer from S3 (~3 GB/s) and in 14 s
  from a GP3 volume (~1.07 GB/s). Local NVMe reads at least as fast as GP3, so the GP3 rate is
  the floor used for the cache; GCS and Blob Storage are assumed at the S3 rate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from serving.hardware import Cloud
from serving.nodescaling import NODE_AUTOSCALER

VLLM_IMAGE_GB = 12.0
IMAGE_PULL_GB_S = VLLM_IMAGE_GB / 101
BUCKET_STREAM_GB_S = 15.0 / 4.9
NVME_CACHE_GB_S = 15.0 / 14
ENGINE_START_S = 195.0


@dataclass(frozen=True)
class CloudTimings:
    autoscaler: str  # the node autoscaler whose provisioning time the budget holds
    node_provisioning_s: float
    node_init_s: float
    bucket_stream_gb_s: float
    source: str


_KAITO = "kaito-project/kaito#2325 (measured on AKS)"


def _timings(cloud: Cloud, bucket: str) -> CloudTimings:
    scaler = NODE_AUTOSCALER[cloud]
    return CloudTimings(scaler.name, scaler.node_provisioning_s, 126, BUCKET_STREAM_GB_S,
                        f"node provisioning ({scaler.name}): {scaler.source}; node init: {_KAITO}; "
                        f"{bucket}")


TIMINGS: dict[Cloud, CloudTimings] = {
    Cloud.AWS: _timings(Cloud.AWS, "S3 stream rate measured"),
    Cloud.GCP: _timings(Cloud.GCP, "GCS assumed at the S3 rate"),
    Cloud.AZURE: _timings(Cloud.AZURE, "Blob assumed at the S3 rate"),
}


@dataclass(frozen=True)
class ColdStart:
    node_provisioning_s: float
    node_init_s: float
    image_pull_s: float
    weights_load_s: float
    engine_start_s: float
    weights_source: str  # where a new node's replica reads the weights from
    warm_node_s: float  # the same scale-up when a warm node has room
    node_autoscaler: str  # who adds the new node (serving/nodescaling.py)

    @property
    def total_s(self) -> float:
        return round(self.node_provisioning_s + self.node_init_s + self.image_pull_s
                     + self.weights_load_s + self.engine_start_s, 1)

    def to_json(self) -> dict[str, float | str]:
        return {"total_s": self.total_s, **asdict(self)}


def budget(cloud: Cloud, weights_gb: float, nvme_cache: bool) -> ColdStart:
    """The cold-start budget of one replica of a model whose weights are `weights_gb`."""
    t = TIMINGS[cloud]
    from_bucket = weights_gb / t.bucket_stream_gb_s
    warm_weights = weights_gb / NVME_CACHE_GB_S if nvme_cache else from_bucket
    return ColdStart(
        node_provisioning_s=t.node_provisioning_s,
        node_init_s=t.node_init_s,
        image_pull_s=round(VLLM_IMAGE_GB / IMAGE_PULL_GB_S, 1),
        weights_load_s=round(from_bucket, 1),
        engine_start_s=ENGINE_START_S,
        weights_source="regional bucket (new node: empty cache)",
        warm_node_s=round(warm_weights + ENGINE_START_S, 1),
        node_autoscaler=t.autoscaler,
    )


__all__ = ["TIMINGS", "CloudTimings", "ColdStart", "budget"]
