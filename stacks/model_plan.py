"""One model in one region: where its replicas run, how many, and how they scale.

The numbers come from the region's packing (stacks.layout.plan_region): the slice, pool and
weights variant the planner chose, the replicas that serve peak within the tier with any one zone
lost, and the KEDA parameters derived from the same profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from serving import drain, gpu_config
from serving.autoscaling import Autoscaling, autoscaling
from serving.capacity import ReplicaCapacity
from serving.coldstart import ColdStart
from serving.hardware import Cloud
from serving.measured import visible_memory_gb
from serving.models import CATALOG, Quantization
from serving.packing import ModelPlacement
from serving.profiles import SliceKind, profile
from serving.slices import served_context
from serving.tiers import TierSpec
from stacks.naming import MODELS_NAMESPACE, source_uri
from stacks.schema import ModelSpec, RegionSpec, StackSpec


@dataclass(frozen=True)
class ModelRegionPlan:
    """One model in one region: where its replicas run, how many, and how they scale.

    This is everything the model's deployment needs: the slice its predictor requests
    (`resource` x `resource_count`), the pool whose nodes it selects, the weights variant and
    context vLLM serves, and the KEDA parameters."""

    model: str
    catalog: str
    region: str
    cloud: str
    tier: str
    tier_spec: TierSpec
    peak_qps: float
    pool: str
    slice: SliceKind  # GPU, sharing mode, TP degree, MIG profile or time-slice width
    # The extended resource one GPU of a replica is, as the cluster's device plugin advertises it:
    # nvidia.com/gpu, nvidia.com/mig-3g.40gb, amd.com/gpu, amd.com/cpx_nps4.
    resource: str
    quantization: Quantization
    weights_gb: float  # of the weights variant served
    max_model_len: int  # context vLLM serves (--max-model-len)
    max_output_tokens: int  # vLLM's server-wide cap on one response (serving/drain.py)
    min_replicas: int
    max_replicas: int
    replicas_source: str  # "spec" or the rule that set them
    cold_start: ColdStart
    source_uri: str  # the model in this region's own weights store
    capacity: ReplicaCapacity  # one replica's latency-limited operating point
    headroom: float  # fraction of peak held above it for autoscale lag
    cost_per_replica_hour: float
    autoscaling: Autoscaling  # KEDA trigger, thresholds, HPA behavior, fallback

    @property
    def slice_memory_gb(self) -> float:
        """Memory of one of `resource`."""
        return round(self.slice.memory_gb, 2)

    @property
    def grace_s(self) -> int:
        """The predictor's terminationGracePeriodSeconds: a capped response finishes in it."""
        return drain.grace_s(self.tier_spec.ttft_s, self.tier_spec.tpot_s, self.max_output_tokens)

    @property
    def resource_count(self) -> int:
        """How many of `resource` one replica requests (its tensor-parallel degree)."""
        return self.slice.tensor_parallel

    @property
    def cost_per_hour_at_min(self) -> float:
        return round(self.cost_per_replica_hour * self.min_replicas, 4)

    @property
    def cost_per_hour_at_max(self) -> float:
        return round(self.cost_per_replica_hour * self.max_replicas, 4)


def growth_words(model: ModelSpec) -> str:
    """How the stack states the model's traffic growth, for the replica source."""
    if model.growth_per_minute is not None:
        return f"growth {model.growth_per_minute:g} of peak a minute"
    return f"{model.traffic} traffic"


def model_region_plan(spec: StackSpec, model: ModelSpec, region: RegionSpec, tier: TierSpec,
                      placed: ModelPlacement, pools: Sequence[gpu_config.PoolSharing]) -> ModelRegionPlan:
    """`pools` are the region's pools as planned (concrete sharing), so the resource is the one
    its device plugin advertises: under MIG's single strategy, or on GKE, a MIG slice is
    `nvidia.com/gpu`, not `nvidia.com/mig-<profile>`."""
    card = CATALOG[model.catalog]
    cloud = Cloud(region.cloud)
    resource = gpu_config.resource_name(cloud is Cloud.GCP, pools,
                                        next(p for p in pools if p.name == placed.pool),
                                        placed.slice.mig_profile)
    reps = placed.replicas
    source = "spec" if model.replicas is not None else (
        f"peak {model.peak_qps:g} QPS / {placed.capacity.qps:.2f} QPS a replica, "
        f"+{reps.headroom:.0%} headroom ({growth_words(model)}), one zone lost")
    context = served_context(card, placed.quantization, placed.slice.memory_gb, model.max_model_len,
                             tensor_parallel=placed.slice.tensor_parallel,
                             device_memory_gb=visible_memory_gb(placed.slice),
                             device_name=str(placed.slice.gpu))
    scaling = autoscaling(model.name, model.name, MODELS_NAMESPACE, placed.capacity,
                          profile(card, placed.slice, placed.quantization), reps,
                          model.tokens.input_tokens, model.tokens.output_tokens,
                          model.peak_qps * (1 + tier.burst_headroom), placed.cold_start.total_s,
                          warm_start_s=placed.cold_start.warm_node_s)
    return ModelRegionPlan(
        model=model.name, catalog=card.id, region=region.region, cloud=str(cloud),
        tier=tier.tier, tier_spec=tier, peak_qps=model.peak_qps, pool=placed.pool,
        slice=placed.slice, resource=resource, quantization=placed.quantization,
        weights_gb=card.variant_weights_gb(placed.quantization),
        max_model_len=context, max_output_tokens=drain.response_cap(tier, model.max_output_tokens, context),
        min_replicas=reps.min_replicas, max_replicas=reps.max_replicas, replicas_source=source,
        cold_start=placed.cold_start,
        source_uri=model.source_uri or source_uri(spec, region, model.name),
        capacity=placed.capacity, headroom=reps.headroom,
        cost_per_replica_hour=placed.cost_per_replica_hour, autoscaling=scaling,
    )


__all__ = ["ModelRegionPlan", "model_region_plan"]
