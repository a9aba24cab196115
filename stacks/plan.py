"""Per model and region: where its replicas run and how many, from the validated spec."""

from __future__ import annotations

from dataclasses import dataclass, replace

from serving.autoscaling import Autoscaling, autoscaling
from serving.capacity import ReplicaCapacity
from serving.coldstart import ColdStart
from serving.hardware import Cloud
from serving.models import CATALOG, ModelCard, Quantization
from serving.placement import PoolOption, candidates
from serving.profiles import SliceKind, profile
from serving.slices import GPU_MEMORY_UTILIZATION, MIN_CONTEXT_TOKENS
from serving.tiers import TIERS, Tier
from stacks import pools
from stacks.naming import MODELS_NAMESPACE, source_uri
from stacks.schema import GpuPoolSpec, ModelSpec, RegionSpec, StackSpec, TimeSlicing
from stacks.sizing import Sized, SizingError, size


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
    tier: Tier
    peak_qps: float
    pool: str
    slice: SliceKind  # GPU, sharing mode, TP degree, MIG profile or time-slice width
    # The extended resource of one GPU of a replica: nvidia.com/gpu, nvidia.com/mig-3g.40gb, amd.com/gpu.
    resource: str
    slice_memory_gb: float  # memory of one such resource
    quantization: Quantization
    max_model_len: int  # context vLLM serves (--max-model-len)
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
    def resource_count(self) -> int:
        """How many of `resource` one replica requests (its tensor-parallel degree)."""
        return self.slice.tensor_parallel

    @property
    def cost_per_hour_at_min(self) -> float:
        return round(self.cost_per_replica_hour * self.min_replicas, 4)

    @property
    def cost_per_hour_at_max(self) -> float:
        return round(self.cost_per_replica_hour * self.max_replicas, 4)


def tier_of(spec: StackSpec, model: ModelSpec) -> Tier:
    return Tier(model.tier or spec.default_tier)


# Specs are frozen, so a region's pool options never change: build them once per region object
# instead of once per (model, region), which made validation O(models x regions x pools).
_OPTIONS: dict[int, tuple[RegionSpec, list[tuple[GpuPoolSpec, PoolOption]]]] = {}
_OPTIONS_KEPT = 512


def region_options(region: RegionSpec) -> list[tuple[GpuPoolSpec, PoolOption]]:
    cached = _OPTIONS.get(id(region))
    if cached is not None and cached[0] is region:
        return cached[1]
    if len(_OPTIONS) >= _OPTIONS_KEPT:
        _OPTIONS.clear()
    built = [(p, pools.option(region.cloud, p, len(region.zones))) for p in region.gpu_pools]
    _OPTIONS[id(region)] = (region, built)
    return built


def model_options(spec: StackSpec, model: ModelSpec, region: RegionSpec) -> list[PoolOption]:
    """The pools of `region` the model may use: its named pool or all, minus time-sliced pools
    when its tier forbids sharing SMs without isolation."""
    allows_ts = TIERS[tier_of(spec, model)].allows_time_slicing
    return [
        option for p, option in region_options(region)
        if model.pool in (None, p.name) and (allows_ts or not isinstance(p.sharing, TimeSlicing))
    ]


def size_model(spec: StackSpec, model: ModelSpec, region: RegionSpec) -> Sized:
    """The cheapest placement of `model` in `region` that serves its peak within its tier.

    Raises SizingError when none does (stacks.checks turns that into a problem at the model).
    Validation, the program and the report all ask; specs are frozen, so the answer is cached on
    what it depends on."""
    return _size_model(model.model_dump_json(), region.model_dump_json(), spec.default_tier, spec,
                       model, region)


_SIZED: dict[tuple[str, str, str], Sized | SizingError] = {}
_SIZED_KEPT = 4096


def _size_model(model_json: str, region_json: str, default_tier: str, spec: StackSpec,
                model: ModelSpec, region: RegionSpec) -> Sized:
    key = (model_json, region_json, default_tier)
    if key not in _SIZED:
        if len(_SIZED) > _SIZED_KEPT:
            _SIZED.clear()
        try:
            _SIZED[key] = _size_uncached(spec, model, region)
        except SizingError as err:
            _SIZED[key] = err
    found = _SIZED[key]
    if isinstance(found, SizingError):
        raise found
    return found


def _size_uncached(spec: StackSpec, model: ModelSpec, region: RegionSpec) -> Sized:
    card = CATALOG[model.catalog]
    options = model_options(spec, model, region)
    placements = candidates(card, options, model.allowed_quantization, model.tensor_parallel,
                            model.max_model_len, exhaustive=True)
    shapes = {p.name: pools.shape_of(region.cloud, p) for p in region.gpu_pools}
    zones = {o.pool: o.zones for o in options}
    return size(card, TIERS[tier_of(spec, model)], model.peak_qps, model.tokens.input_tokens,
                model.tokens.output_tokens, model.max_model_len, placements, shapes, zones,
                Cloud(region.cloud))


def served_context(card: ModelCard, quantization: Quantization, slice_memory_gb: float,
                   tensor_parallel: int, requested: int | None) -> int:
    """The --max-model-len vLLM serves: the spec's, else the longest context whose KV cache fits
    beside the weights (vLLM refuses to start when one full-length sequence does not fit)."""
    if requested is not None:
        return requested
    weights = card.weights_for(quantization) or card.weights_gb
    free_gb = slice_memory_gb * tensor_parallel * GPU_MEMORY_UTILIZATION - weights
    fits_tokens = int(free_gb * 1e9 // card.kv_bytes_per_token)
    # vLLM's KV blocks hold 16 tokens; a multiple of 256 keeps the number readable.
    return max(MIN_CONTEXT_TOKENS, min(card.context_max, fits_tokens // 256 * 256))


def plan_models(spec: StackSpec) -> list[ModelRegionPlan]:
    """Per model and region: placement and replicas sized from the tier (or the spec's replicas).

    `stacks.checks` has already proven every model can be sized in every region it runs in.
    """
    plans: list[ModelRegionPlan] = []
    for model in spec.models:
        card = CATALOG[model.catalog]
        tier = tier_of(spec, model)
        for region in spec.regions:
            if model.regions is not None and region.region not in model.regions:
                continue
            sized = size_model(spec, model, region)
            p = sized.placement
            replicas = sized.replicas
            if model.replicas is not None:
                replicas = replace(replicas, min_replicas=model.replicas.min,
                                   max_replicas=model.replicas.max)
                source = "spec"
            else:
                source = (f"peak {model.peak_qps:g} QPS / {sized.capacity.qps:.2f} QPS a replica, "
                          f"+{sized.replicas.headroom:.0%} headroom, one zone lost")
            shape = next(pools.shape_of(region.cloud, g) for g in region.gpu_pools if g.name == p.pool)
            kind = SliceKind(gpu=shape.gpu, mode=p.slice.mode, tensor_parallel=p.tensor_parallel,
                             mig_profile=p.slice.mig_profile, shares=p.slice.shares)
            scaling = autoscaling(model.name, model.name, MODELS_NAMESPACE, sized.capacity,
                                  profile(card, kind, p.quantization), TIERS[tier], replicas,
                                  sized.cold_start.total_s, model.tokens.input_tokens,
                                  model.tokens.output_tokens)
            plans.append(ModelRegionPlan(
                model=model.name, catalog=card.id, region=region.region, cloud=region.cloud,
                tier=tier, peak_qps=model.peak_qps, pool=p.pool, slice=kind,
                resource=p.slice.resource, slice_memory_gb=round(p.slice.memory_gb, 2),
                quantization=p.quantization,
                max_model_len=served_context(card, p.quantization, p.slice.memory_gb,
                                             p.tensor_parallel, model.max_model_len),
                min_replicas=replicas.min_replicas, max_replicas=replicas.max_replicas,
                replicas_source=source, cold_start=sized.cold_start,
                source_uri=model.source_uri or source_uri(spec, region, model.name),
                capacity=sized.capacity, headroom=sized.replicas.headroom,
                cost_per_replica_hour=p.cost_per_replica_hour, autoscaling=scaling,
            ))
    return plans


__all__ = ["ModelRegionPlan", "model_options", "plan_models", "served_context", "size_model",
           "tier_of"]
