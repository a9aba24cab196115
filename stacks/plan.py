"""Per model and region: where its replicas run and how many, from the validated spec."""

from __future__ import annotations

from dataclasses import dataclass

from serving.capacity import ReplicaCapacity
from serving.coldstart import ColdStart
from serving.hardware import Cloud
from serving.models import CATALOG
from serving.placement import Placement, PoolOption, candidates
from serving.tiers import TIERS, Tier
from stacks import pools
from stacks.naming import source_uri
from stacks.schema import GpuPoolSpec, ModelSpec, RegionSpec, StackSpec, TimeSlicing
from stacks.sizing import Sized, SizingError, size


@dataclass(frozen=True)
class ModelRegionPlan:
    model: str
    catalog: str
    region: str
    cloud: str
    tier: Tier
    peak_qps: float
    placement: Placement
    min_replicas: int
    max_replicas: int
    replicas_source: str  # "spec" or the rule that set them
    cold_start: ColdStart
    source_uri: str  # the model in this region's own weights store
    capacity: ReplicaCapacity  # one replica's latency-limited operating point
    headroom: float  # fraction of peak held above it for autoscale lag

    @property
    def cost_per_hour_at_min(self) -> float:
        return round(self.placement.cost_per_replica_hour * self.min_replicas, 4)

    @property
    def cost_per_hour_at_max(self) -> float:
        return round(self.placement.cost_per_replica_hour * self.max_replicas, 4)


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


def plan_models(spec: StackSpec) -> list[ModelRegionPlan]:
    """Per model and region: placement and replicas sized from the tier (or the spec's replicas).

    `stacks.checks` has already proven every model can be sized in every region it runs in.
    """
    plans: list[ModelRegionPlan] = []
    for model in spec.models:
        card = CATALOG[model.catalog]
        for region in spec.regions:
            if model.regions is not None and region.region not in model.regions:
                continue
            sized = size_model(spec, model, region)
            if model.replicas is not None:
                low, high, source = model.replicas.min, model.replicas.max, "spec"
            else:
                low, high = sized.replicas.min_replicas, sized.replicas.max_replicas
                source = (f"peak {model.peak_qps:g} QPS / {sized.capacity.qps:.2f} QPS a replica, "
                          f"+{sized.replicas.headroom:.0%} headroom, one zone lost")
            plans.append(ModelRegionPlan(
                model=model.name, catalog=card.id, region=region.region, cloud=region.cloud,
                tier=tier_of(spec, model), peak_qps=model.peak_qps, placement=sized.placement,
                min_replicas=low, max_replicas=high, replicas_source=source,
                cold_start=sized.cold_start,
                source_uri=model.source_uri or source_uri(spec, region, model.name),
                capacity=sized.capacity, headroom=sized.replicas.headroom,
            ))
    return plans


__all__ = ["ModelRegionPlan", "model_options", "plan_models", "size_model", "tier_of"]
