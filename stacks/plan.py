"""Per model and region: where its replicas run and how many, from the validated spec."""

from __future__ import annotations

from dataclasses import dataclass

from serving import coldstart
from serving.coldstart import ColdStart
from serving.hardware import Cloud
from serving.models import CATALOG
from serving.placement import Placement, PoolOption, candidates
from serving.tiers import TIERS, Tier
from stacks import pools
from stacks.naming import source_uri
from stacks.schema import GpuPoolSpec, ModelSpec, RegionSpec, StackSpec, TimeSlicing


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

    @property
    def cost_per_hour_at_min(self) -> float:
        return round(self.placement.cost_per_replica_hour * self.min_replicas, 4)


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


def plan_models(spec: StackSpec) -> list[ModelRegionPlan]:
    """Cheapest fitting placement per model and region; replicas from the spec or one per zone.

    `stacks.checks` has already proven a placement exists for every model and region.
    """
    plans: list[ModelRegionPlan] = []
    for model in spec.models:
        card = CATALOG[model.catalog]
        tier = tier_of(spec, model)
        for region in spec.regions:
            if model.regions is not None and region.region not in model.regions:
                continue
            options = model_options(spec, model, region)
            best = candidates(card, options, model.allowed_quantization, model.tensor_parallel,
                              model.max_model_len)[0]
            zones = next(o.zones for o in options if o.pool == best.pool)
            if model.replicas is not None:
                low, high, source = model.replicas.min, model.replicas.max, "spec"
            else:
                # One replica per zone the pool spans keeps the model up through a zone loss.
                low = zones
                high = max(low, best.max_replicas)
                source = "one per zone; max what the pool holds"
            pool = next(p for p in region.gpu_pools if p.name == best.pool)
            weights_gb = card.weights_for(best.quantization) or card.weights_gb
            nvme_gb = pools.shape_of(region.cloud, pool).local_nvme_gb
            plans.append(ModelRegionPlan(
                model=model.name, catalog=card.id, region=region.region, cloud=region.cloud,
                tier=tier, peak_qps=model.peak_qps, placement=best, min_replicas=low,
                max_replicas=high, replicas_source=source,
                cold_start=coldstart.budget(Cloud(region.cloud), weights_gb,
                                            nvme_cache=nvme_gb >= weights_gb),
                source_uri=model.source_uri or source_uri(spec, region, model.name),
            ))
    return plans


__all__ = ["ModelRegionPlan", "model_options", "plan_models", "tier_of"]
