"""Per region, the packing planner decides what the stack file leaves open.

Every model of a region becomes a demand (serving._options.ModelDemand), every GPU pool a
PoolSpec: a pool with a stated sharing keeps it (a MIG layout is fixed, a time-slice width is the
only one), a planned pool (`sharing: {mode: auto}`, the default) lets the planner choose. A real
node pool labels all its nodes alike, so a pool runs one sharing mode and its MIG GPUs carry one
layout (one profile on GKE and AKS): where the planner's cheapest packing uses two modes in one
planned pool, each mode is tried alone and the cheapest feasible packing is kept.

`resolve` turns the stack into the one the cluster components build: every planned pool gets the
chosen sharing, and `min_nodes` rises to what the models' minimum replicas need.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from serving import _migpack
from serving._options import ALL_SHARING, ModelDemand, PoolSpec
from serving.hardware import Cloud
from serving.models import CATALOG
from serving.packing import ModelPlacement, PackingPlan, PlanError, plan
from serving.slices import SharingMode
from serving.tiers import TIERS, Tier
from stacks import pools
from stacks.schema import (
    AmdPartitioning,
    GpuPoolSpec,
    MigSharing,
    ModelSpec,
    PlannedSharing,
    RegionSpec,
    StackSpec,
    TimeSlicing,
    WholeGpu,
)

Variant = tuple[SharingMode, int]  # a sharing mode and its width (time-slice replicas, partitions)
ConcreteSharing = WholeGpu | MigSharing | TimeSlicing | AmdPartitioning


@dataclass(frozen=True)
class PoolDecision:
    pool: str
    sharing: ConcreteSharing
    planned: bool  # the planner chose the sharing (the stack said auto)
    nodes_at_peak: int  # every model of the pool at its max replicas
    nodes_at_floor: int  # every model at its min replicas
    min_nodes: int  # the autoscaler's floor: the stated min_nodes or the floor, whichever is more
    cost_per_hour_at_peak: float


@dataclass(frozen=True)
class RegionLayout:
    region: str
    demands: tuple[ModelDemand, ...]
    packing: PackingPlan
    pools: tuple[PoolDecision, ...]

    def placement(self, model: str) -> ModelPlacement:
        return next(m for m in self.packing.models if m.model == model)


def tier_of(spec: StackSpec, model: ModelSpec) -> Tier:
    return Tier(model.tier or spec.default_tier)


def models_in(spec: StackSpec, region: RegionSpec) -> list[ModelSpec]:
    return [m for m in spec.models if m.regions is None or region.region in m.regions]


def demand_of(spec: StackSpec, model: ModelSpec) -> ModelDemand:
    return ModelDemand(
        name=model.name, card=CATALOG[model.catalog], tier=TIERS[tier_of(spec, model)],
        peak_qps=model.peak_qps, input_tokens=model.tokens.input_tokens,
        output_tokens=model.tokens.output_tokens,
        allowed_quantization=tuple(model.allowed_quantization),
        context_tokens=model.max_model_len, pool=model.pool, tensor_parallel=model.tensor_parallel,
        replicas=(model.replicas.min, model.replicas.max) if model.replicas else None,
    )


def pool_spec(cloud: Cloud, pool: GpuPoolSpec, region_zones: int) -> PoolSpec:
    """What the planner may do with one pool of the stack."""
    shape = pools.shape_of(cloud, pool)
    base = PoolSpec(pool.name, shape, pool.max_nodes, len(pool.zones) if pool.zones else region_zones,
                    single_mig_profile=cloud in pools.SINGLE_PROFILE_CLOUDS,
                    mig_profiles=pools.selectable_mig_profiles(cloud, shape.gpu_spec))
    s = pool.sharing
    if isinstance(s, PlannedSharing):
        allowed = tuple(m for m in ALL_SHARING if s.allow is None or str(m) in s.allow)
        return replace(base, sharing=allowed, uniform_mig=True)
    if isinstance(s, MigSharing):
        counts = tuple(pools.mig_layout(shape.gpu_spec, pool).get(p.name, 0)
                       for p in shape.gpu_spec.mig_profiles)
        return replace(base, sharing=(SharingMode.MIG,), mig_layout=counts)
    if isinstance(s, TimeSlicing):
        return replace(base, sharing=(SharingMode.TIME_SLICE,), time_slice_replicas=(s.replicas,))
    if isinstance(s, AmdPartitioning):
        part = shape.gpu_spec.amd_partition(s.profile)
        assert part is not None  # stacks.checks rejects unknown profiles first
        return replace(base, sharing=(SharingMode.PARTITION,), partitions=part.partitions_per_gpu)
    return replace(base, sharing=(SharingMode.WHOLE,))


def _variant(m: ModelPlacement) -> Variant:
    k = m.slice
    return (k.mode, k.shares if k.mode in (SharingMode.TIME_SLICE, SharingMode.PARTITION) else 0)


def _restrict(pool: PoolSpec, variant: Variant) -> PoolSpec:
    mode, width = variant
    if mode is SharingMode.TIME_SLICE:
        return replace(pool, sharing=(mode,), time_slice_replicas=(width,))
    if mode is SharingMode.PARTITION:
        return replace(pool, sharing=(mode,), partitions=width)
    return replace(pool, sharing=(mode,))


def _one_mode_per_pool(demands: list[ModelDemand], specs: list[PoolSpec]) -> PackingPlan:
    """The planner's packing with every pool running one sharing mode.

    Branches only on pools the packing gave two modes; each branch fixes one of them, so the
    search ends after at most (modes used) ^ (pools mixing them) packings, a handful in practice."""
    result = plan(demands, specs)
    for i, pool in enumerate(specs):
        used = sorted({_variant(m) for m in result.models if m.pool == pool.name})
        if len(used) <= 1:
            continue
        best: PackingPlan | None = None
        failure: PlanError | None = None
        for variant in used:
            trial = [*specs[:i], _restrict(pool, variant), *specs[i + 1:]]
            try:
                got = _one_mode_per_pool(demands, trial)
            except PlanError as err:
                failure = failure or err
                continue
            if best is None or got.cost_per_hour < best.cost_per_hour - 1e-9:
                best = got
        if best is None:
            assert failure is not None
            raise failure
        return best
    return result


def _decide(cloud: Cloud, pool: GpuPoolSpec, spec: PoolSpec, packing: PackingPlan) -> PoolDecision:
    planned = isinstance(pool.sharing, PlannedSharing)
    placed = [m for m in packing.models if m.pool == pool.name]
    pool_plan = next((p for p in packing.pools if p.pool == pool.name), None)
    sharing: ConcreteSharing = WholeGpu() if planned else pool.sharing  # type: ignore[assignment]
    if planned and placed:
        mode, width = _variant(placed[0])
        if mode is SharingMode.MIG:
            assert pool_plan is not None and pool_plan.groups[0].mig_layouts
            gpu = spec.gpu
            counts = tuple(pool_plan.groups[0].mig_layouts[0].get(p.name, 0) for p in gpu.mig_profiles)
            name = _migpack.layout_name(gpu.model, counts)
            sharing = (MigSharing(mode="mig", layout=name) if name in gpu.mig_layouts
                       else MigSharing(mode="mig", profiles=_migpack.as_profiles(gpu.model, counts)))
        elif mode is SharingMode.TIME_SLICE:
            sharing = TimeSlicing(mode="time_slice", replicas=width)
        elif mode is SharingMode.PARTITION:
            profile = next(p.name for p in spec.gpu.amd_partitions if p.partitions_per_gpu == width)
            sharing = AmdPartitioning(mode="partition", profile=profile)  # type: ignore[arg-type]
    peak = pool_plan.nodes if pool_plan else 0
    floor = pool_plan.floor_nodes_per_zone * pool_plan.zones if pool_plan else 0
    return PoolDecision(
        pool=pool.name, sharing=sharing, planned=planned, nodes_at_peak=peak, nodes_at_floor=floor,
        min_nodes=min(pool.max_nodes, max(pool.min_nodes, floor)),
        cost_per_hour_at_peak=pool_plan.cost_per_hour if pool_plan else 0.0,
    )


# Validation, the program and the report all ask for the same regions; specs are frozen, so the
# answer is kept per (region, its models, default tier).
_LAYOUTS: dict[tuple[str, str, str], RegionLayout | PlanError] = {}
_LAYOUTS_KEPT = 256


def plan_region(spec: StackSpec, region: RegionSpec) -> RegionLayout:
    """The region's packing and pool decisions; raises PlanError (naming the model where one is
    the cause) when its models cannot be served within their tiers by its pools."""
    models = models_in(spec, region)
    key = (region.model_dump_json(), "[" + ",".join(m.model_dump_json() for m in models) + "]",
           spec.default_tier)
    if key not in _LAYOUTS:
        if len(_LAYOUTS) >= _LAYOUTS_KEPT:
            _LAYOUTS.clear()
        try:
            _LAYOUTS[key] = _plan_region(spec, region, models)
        except PlanError as err:
            _LAYOUTS[key] = err
    found = _LAYOUTS[key]
    if isinstance(found, PlanError):
        raise found
    return found


def _plan_region(spec: StackSpec, region: RegionSpec, models: list[ModelSpec]) -> RegionLayout:
    cloud = Cloud(region.cloud)
    specs = [pool_spec(cloud, p, len(region.zones)) for p in region.gpu_pools]
    demands = [demand_of(spec, m) for m in models]
    if not demands:
        packing = PackingPlan((), (), 0.0, "no models")
    elif not specs:
        raise PlanError(f"{region.region} has no GPU pools for models "
                        f"{', '.join(d.name for d in demands)}: add a gpu_pools entry", demands[0].name)
    else:
        packing = _one_mode_per_pool(demands, specs)
    decisions = tuple(_decide(cloud, p, s, packing) for p, s in zip(region.gpu_pools, specs, strict=True))
    return RegionLayout(region.region, tuple(demands), packing, decisions)


def resolve(spec: StackSpec) -> StackSpec:
    """The stack with every planned pool's sharing chosen and every pool's `min_nodes` raised to
    its planned floor: what the cluster components build."""
    regions = []
    for region in spec.regions:
        layout = plan_region(spec, region)
        decided = {d.pool: d for d in layout.pools}
        regions.append(region.model_copy(update={"gpu_pools": [
            p.model_copy(update={"sharing": decided[p.name].sharing, "min_nodes": decided[p.name].min_nodes})
            for p in region.gpu_pools
        ]}))
    return spec.model_copy(update={"regions": regions})


__all__ = ["PoolDecision", "RegionLayout", "demand_of", "models_in", "plan_region", "pool_spec", "resolve",
           "tier_of"]
