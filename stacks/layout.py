"""Per region, the packing planner decides what the stack file leaves open.

Every model of a region becomes a demand (serving._options.ModelDemand), every GPU pool a
PoolSpec: a pool with a stated sharing keeps it (a MIG layout is fixed, a time-slice width is the
only one), a planned pool (`sharing: {mode: auto}`, the default) lets the planner choose. A real
node pool labels all its nodes alike, so a pool runs one sharing mode and its MIG GPUs carry one
layout (one profile on GKE and AKS): where the planner's cheapest packing uses two modes in one
planned pool, each mode is tried alone and the cheapest feasible packing is kept.

Each pool's decision says what was planned and what was stated: its concrete sharing (typed,
serving.sharing), whether the planner chose it, the nodes at the models' floor and at peak, and
the autoscaler's floor (`min_nodes` raised to what the minimum replicas need). The spec is never
rewritten; stacks.plan carries the decisions down to the components.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from serving._options import ALL_SHARING, ModelDemand, PoolSpec
from serving.capacity import ReplicaCapacity
from serving.hardware import Cloud, MachineShape
from serving.measured import Sizing, measure
from serving.models import CATALOG
from serving.packing import ModelPlacement, PackingPlan, PlanError, plan
from serving.sharing import Mig, Partition, Sharing, TimeSlice, Whole, mig_sharing
from serving.slices import SharingMode
from serving.tiers import TierSpec
from stacks import pools
from stacks.schema import GpuPoolSpec, ModelSpec, PlannedSharing, RegionSpec, StackSpec
from stacks.tiers import tier_of

Variant = tuple[SharingMode, int]  # a sharing mode and its width (time-slice replicas, partitions)


@dataclass(frozen=True)
class PoolDecision:
    pool: str
    shape: MachineShape
    sharing: Sharing
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


def models_in(spec: StackSpec, region: RegionSpec) -> list[ModelSpec]:
    return [m for m in spec.models if m.regions is None or region.region in m.regions]


def demand_of(spec: StackSpec, model: ModelSpec, tiers: Mapping[str, TierSpec],
              fleet: int = 1) -> ModelDemand:
    """`fleet`: the fewest replicas the model can run as in the region (its min replicas are at
    least its pool's zones, serving.capacity.region_replicas), or the stated minimum if lower."""
    if model.replicas:
        fleet = min(fleet, max(1, model.replicas.min))
    return ModelDemand(
        name=model.name, card=CATALOG[model.catalog], tier=tiers[tier_of(spec, model)],
        peak_qps=model.peak_qps, input_tokens=model.tokens.input_tokens,
        output_tokens=model.tokens.output_tokens,
        allowed_quantization=tuple(model.allowed_quantization),
        context_tokens=model.max_model_len, pool=model.pool, tensor_parallel=model.tensor_parallel,
        replicas=(model.replicas.min, model.replicas.max) if model.replicas else None,
        fleet=fleet, traffic=model.traffic,
        growth_per_s=None if model.growth_per_minute is None else model.growth_per_minute / 60,
    )


def pool_spec(cloud: Cloud, pool: GpuPoolSpec, region_zones: int) -> PoolSpec:
    """What the planner may do with one pool of the stack."""
    shape = pools.shape_of(cloud, pool)
    base = PoolSpec(pool.name, shape, pool.max_nodes, len(pool.zones) if pool.zones else region_zones,
                    single_mig_profile=cloud in pools.SINGLE_PROFILE_CLOUDS,
                    mig_profiles=pools.selectable_mig_profiles(cloud, shape.gpu_spec))
    if isinstance(pool.sharing, PlannedSharing):
        allow = pool.sharing.allow
        allowed = tuple(m for m in ALL_SHARING if allow is None or str(m) in allow)
        return replace(base, sharing=allowed, uniform_mig=True)
    s = pools.stated_sharing(shape.gpu_spec, pool)
    if isinstance(s, Mig):
        counts = tuple(s.profiles.get(p.name, 0) for p in shape.gpu_spec.mig_profiles)
        return replace(base, sharing=(SharingMode.MIG,), mig_layout=counts)
    if isinstance(s, TimeSlice):
        return replace(base, sharing=(SharingMode.TIME_SLICE,), time_slice_replicas=(s.replicas,))
    if isinstance(s, Partition):
        return replace(base, sharing=(SharingMode.PARTITION,), partitions=s.partition.partitions_per_gpu)
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


# Rounds of (pack, then simulate the placements not yet measured) before the last round, which
# may choose only measured options. Two suffice on the shipped stacks (tests/test_measured.py).
MEASURE_ROUNDS = 3


def _measured_packing(demands: list[ModelDemand], specs: list[PoolSpec], sizing: Sizing,
                      ) -> tuple[PackingPlan, list[ModelDemand]]:
    """The packing whose every placement is sized by the simulator (serving.measured).

    The closed form screens all options; the placements a packing keeps are then measured and the
    region packed again with those answers, until a packing keeps only measured placements. A
    measured option can lose its place to one the closed form overrates, so the last round offers
    only measured options: the result never rests on the closed form."""
    measured: dict[str, dict[tuple[str, str], ReplicaCapacity | None]] = {d.name: {} for d in demands}
    by_name = {d.name: d for d in demands}
    for round_ in range(MEASURE_ROUNDS + 1):
        trial = [replace(d, measured=dict(measured[d.name]), measured_only=round_ == MEASURE_ROUNDS)
                 for d in demands]
        packing = _one_mode_per_pool(trial, specs)
        fresh = [m for m in packing.models if (m.slice.label, str(m.quantization)) not in measured[m.model]]
        if not fresh:
            return packing, trial
        for m in fresh:
            measured[m.model][(m.slice.label, str(m.quantization))] = sizing(
                by_name[m.model], m.slice, m.quantization)
    raise AssertionError("the last round offers measured options only")


def _decide(pool: GpuPoolSpec, spec: PoolSpec, packing: PackingPlan) -> PoolDecision:
    stated = pools.stated_sharing(spec.gpu, pool)
    placed = [m for m in packing.models if m.pool == pool.name]
    pool_plan = next((p for p in packing.pools if p.pool == pool.name), None)
    sharing: Sharing = stated or Whole()
    if stated is None and placed:
        mode, width = _variant(placed[0])
        gpu = spec.gpu
        if mode is SharingMode.MIG:
            assert pool_plan is not None and pool_plan.groups[0].mig_layouts
            sharing = mig_sharing(gpu, dict(pool_plan.groups[0].mig_layouts[0]))
        elif mode is SharingMode.TIME_SLICE:
            sharing = TimeSlice(width)
        elif mode is SharingMode.PARTITION:
            sharing = Partition(next(p for p in gpu.amd_partitions if p.partitions_per_gpu == width))
    peak = pool_plan.nodes if pool_plan else 0
    floor = pool_plan.floor_nodes_per_zone * pool_plan.zones if pool_plan else 0
    return PoolDecision(
        pool=pool.name, shape=spec.shape, sharing=sharing, planned=stated is None,
        nodes_at_peak=peak, nodes_at_floor=floor,
        min_nodes=min(pool.max_nodes, max(pool.min_nodes, floor)),
        cost_per_hour_at_peak=pool_plan.cost_per_hour if pool_plan else 0.0,
    )


def plan_region(spec: StackSpec, region: RegionSpec, tiers: Mapping[str, TierSpec],
                sizing: Sizing = measure) -> RegionLayout:
    """The region's packing and pool decisions; raises PlanError (naming the model where one is
    the cause) when its models cannot be served within their tiers by its pools."""
    cloud = Cloud(region.cloud)
    specs = [pool_spec(cloud, p, len(region.zones)) for p in region.gpu_pools]
    # A model may land on any of the region's pools: size it for the one with the fewest zones.
    fleet = min((s.zones for s in specs), default=1)
    demands = [demand_of(spec, m, tiers, fleet) for m in models_in(spec, region)]
    if not demands:
        packing = PackingPlan((), (), 0.0, "no models")
    elif not specs:
        raise PlanError(f"{region.region} has no GPU pools for models "
                        f"{', '.join(d.name for d in demands)}: add a gpu_pools entry", demands[0].name)
    else:
        packing, demands = _measured_packing(demands, specs, sizing)
    decisions = tuple(_decide(p, s, packing) for p, s in zip(region.gpu_pools, specs, strict=True))
    return RegionLayout(region.region, tuple(demands), packing, decisions)


__all__ = ["PoolDecision", "RegionLayout", "demand_of", "models_in", "plan_region", "pool_spec"]
