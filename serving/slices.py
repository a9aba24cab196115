"""What one node of a pool offers a model replica: its GPU slices, their memory and price.

A slice is the unit the device plugin advertises: a whole GPU (`nvidia.com/gpu`, `amd.com/gpu`),
a MIG instance (`nvidia.com/mig-3g.40gb` under the mixed strategy), a time-sliced share of a GPU,
or an AMD compute partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from serving.hardware import Cloud, MachineShape, Vendor
from serving.models import ModelCard, Quantization

# vLLM's default --gpu-memory-utilization: the share of a slice vLLM may take for weights, KV
# cache and activations; the rest is CUDA context and allocator slack.
GPU_MEMORY_UTILIZATION = 0.90
# A replica must hold at least this much context in its KV cache to be worth starting.
MIN_CONTEXT_TOKENS = 4096


class SharingMode(StrEnum):
    WHOLE = "whole"
    MIG = "mig"
    TIME_SLICE = "time_slice"
    PARTITION = "partition"


@dataclass(frozen=True)
class Slice:
    mode: SharingMode
    resource: str  # the extended resource name pods request
    memory_gb: float
    per_node: int  # how many of this slice one node offers
    node_price_share: float  # $/h of the node this slice accounts for
    mig_profile: str | None = None  # the MIG profile of a MIG slice
    shares: int = 1  # time-sliced replicas or AMD partitions per GPU


def mig_resource(shape: MachineShape, profile: str) -> str:
    """The extended resource a MIG instance is advertised as.

    The NVIDIA device plugin's mixed strategy names each profile (`nvidia.com/mig-3g.40gb`).
    GKE partitions a pool itself and its device plugin advertises every instance as
    `nvidia.com/gpu`; pods pick the size by the node label
    `cloud.google.com/gke-gpu-partition-size` (GKE "Running multi-instance GPUs")."""
    return "nvidia.com/gpu" if shape.cloud is Cloud.GCP else f"nvidia.com/mig-{profile}"


def node_slices(
    shape: MachineShape,
    mode: SharingMode,
    mig_layout: Mapping[str, int] | None = None,
    time_slice_replicas: int = 1,
    partitions_per_gpu: int = 1,
) -> list[Slice]:
    """The slices one node of `shape` offers under the given sharing mode."""
    gpu = shape.gpu_spec
    whole = "amd.com/gpu" if gpu.vendor is Vendor.AMD else "nvidia.com/gpu"
    if mode is SharingMode.MIG:
        layout = dict(mig_layout or {})
        total_compute = sum(gpu.mig_profile(n).compute_slices * c for n, c in layout.items())  # type: ignore[union-attr]
        slices = []
        for name, count in layout.items():
            profile = gpu.mig_profile(name)
            assert profile is not None
            # Price each instance by its share of the GPU's compute actually used by the layout.
            share = profile.compute_slices / total_compute * shape.price_per_hour / shape.gpu_count
            slices.append(Slice(mode, mig_resource(shape, name), profile.memory_gb,
                                count * shape.gpu_count, share, mig_profile=name))
        return slices
    if mode is SharingMode.TIME_SLICE:
        # Time-sliced replicas share one GPU's memory with no partitioning: each may use its share.
        n = time_slice_replicas
        return [Slice(mode, whole, gpu.memory_gb / n, n * shape.gpu_count,
                      shape.price_per_hour / shape.gpu_count / n, shares=n)]
    if mode is SharingMode.PARTITION:
        n = partitions_per_gpu
        return [Slice(mode, whole, gpu.memory_gb / n, n * shape.gpu_count,
                      shape.price_per_hour / shape.gpu_count / n, shares=n)]
    return [Slice(mode, whole, gpu.memory_gb, shape.gpu_count,
                  shape.price_per_hour / shape.gpu_count)]


def required_memory_gb(
    card: ModelCard, quantization: Quantization, context_tokens: int = MIN_CONTEXT_TOKENS
) -> float:
    """Weights plus the KV cache of one sequence of `context_tokens`, before the utilization cap."""
    return card.variant_weights_gb(quantization) + card.kv_bytes_per_token * context_tokens / 1e9


def fits(card: ModelCard, quantization: Quantization, slice_memory_gb: float,
         tensor_parallel: int = 1, context_tokens: int = MIN_CONTEXT_TOKENS) -> bool:
    usable = slice_memory_gb * tensor_parallel * GPU_MEMORY_UTILIZATION
    return required_memory_gb(card, quantization, context_tokens) <= usable


__all__ = [
    "GPU_MEMORY_UTILIZATION",
    "MIN_CONTEXT_TOKENS",
    "SharingMode",
    "Slice",
    "fits",
    "mig_resource",
    "node_slices",
    "required_memory_gb",
]
