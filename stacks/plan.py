"""The plan of a whole stack: computed once, right after validation, and passed down.

`plan_stack(spec)` is pure: per region the packing planner's pool decisions (sharing, node floor
and peak) and per model its placement, replicas, autoscaling and cold start. `__main__.py` builds
the platform from it, and the engine hands the same value to the report, the renderer and every
later command, so nothing recomputes it. The spec stays what the user wrote; each planned pool
says whether its sharing and floor were stated or planned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from serving.coldstart import TIMINGS
from serving.hardware import Cloud, GpuModel, MachineShape, Vendor
from serving.measured import Sizing, measure
from serving.packing import PlanError
from serving.posture import Posture, posture
from serving.sharing import Sharing
from serving.tiers import TierSpec
from stacks.checks import Problem
from stacks.layout import PoolDecision, models_in, plan_region
from stacks.loader import SpecError, load_spec
from stacks.model_plan import ModelRegionPlan, model_region_plan
from stacks.naming import cluster_name
from stacks.schema import GpuPoolSpec, RegionSpec, StackSpec
from stacks.secrets import SecretState
from stacks.tiers import resolve_tiers, tier_of


@dataclass(frozen=True)
class PlannedPool:
    """A GPU pool as the clusters build it: the stack's pool with the planner's decisions."""

    name: str
    shape: MachineShape
    sharing: Sharing  # concrete: the stated one, or the planner's choice
    planned: bool  # the stack left the sharing to the planner
    capacity_type: str  # on_demand | spot
    zones: tuple[str, ...]
    stated_min_nodes: int
    min_nodes: int  # the autoscaler's floor: stated, or what min replicas need, whichever is more
    max_nodes: int
    nodes_at_floor: int  # every model of the pool at its min replicas
    nodes_at_peak: int  # every model of the pool at its max replicas
    cost_per_hour_at_peak: float

    @property
    def gpu(self) -> GpuModel:
        return self.shape.gpu

    @property
    def vendor(self) -> Vendor:
        return self.shape.gpu_spec.vendor

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpu_count


@dataclass(frozen=True)
class RegionPlan:
    region: RegionSpec  # as the stack wrote it
    cluster: str
    pools: tuple[PlannedPool, ...]
    models: tuple[ModelRegionPlan, ...]
    packing_method: str

    @property
    def cloud(self) -> Cloud:
        return Cloud(self.region.cloud)

    @property
    def name(self) -> str:
        return self.region.region

    def pool(self, name: str) -> PlannedPool:
        return next(p for p in self.pools if p.name == name)

    def pool_cold_start_s(self, name: str) -> float:
        """The slowest cold start of a replica on a new node of pool `name` (a pool with no
        model: the node alone): how long an empty node is worth keeping (serving.karpenter)."""
        node_only = TIMINGS[self.cloud].node_provisioning_s + TIMINGS[self.cloud].node_init_s
        return max((m.cold_start.total_s for m in self.models if m.pool == name), default=node_only)


@dataclass(frozen=True)
class Plan:
    spec: StackSpec
    posture: Posture
    tiers: Mapping[str, TierSpec]
    regions: tuple[RegionPlan, ...]

    @property
    def models(self) -> tuple[ModelRegionPlan, ...]:
        """Every model in every region it runs in, in the stack's model order."""
        order = {m.name: i for i, m in enumerate(self.spec.models)}
        found = [m for r in self.regions for m in r.models]
        return tuple(sorted(found, key=lambda m: order[m.model]))

    def region(self, name: str) -> RegionPlan:
        return next(r for r in self.regions if r.name == name)

    def regions_of(self, cloud: Cloud) -> tuple[RegionPlan, ...]:
        return tuple(r for r in self.regions if r.cloud is cloud)


class PlanningError(Exception):
    """A valid stack its pools cannot serve; `problems` point into the stack file."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))


def _pool(spec: GpuPoolSpec, region: RegionSpec, decision: PoolDecision) -> PlannedPool:
    return PlannedPool(
        name=spec.name, shape=decision.shape, sharing=decision.sharing, planned=decision.planned,
        capacity_type=spec.capacity_type, zones=tuple(spec.zones or region.zones),
        stated_min_nodes=spec.min_nodes, min_nodes=decision.min_nodes, max_nodes=spec.max_nodes,
        nodes_at_floor=decision.nodes_at_floor, nodes_at_peak=decision.nodes_at_peak,
        cost_per_hour_at_peak=decision.cost_per_hour_at_peak,
    )


def plan_stack(spec: StackSpec, sizing: Sizing = measure) -> Plan:
    """The plan of a validated stack; raises PlanningError naming each model (or region) whose
    tier no usable pool can meet at its peak, with what would fix it. `sizing`: how the kept
    placements are sized (serving.measured; the simulator unless a test asks otherwise)."""
    tiers = resolve_tiers(spec)
    index = {m.name: i for i, m in enumerate(spec.models)}
    problems: list[Problem] = []
    regions: list[RegionPlan] = []
    for j, region in enumerate(spec.regions):
        try:
            layout = plan_region(spec, region, tiers, sizing)
        except PlanError as err:
            at = f"models[{index[err.model]}]" if err.model in index else f"regions[{j}].gpu_pools"
            problems.append(Problem(at, f"in {region.region}: {err}"))
            continue
        decided = {d.pool: d for d in layout.pools}
        pools = tuple(_pool(p, region, decided[p.name]) for p in region.gpu_pools)
        models = tuple(
            model_region_plan(spec, m, region, tiers[tier_of(spec, m)], layout.placement(m.name), pools)
            for m in models_in(spec, region))
        regions.append(RegionPlan(region, cluster_name(spec, region.region), pools, models,
                                  layout.packing.method))
    if problems:
        raise PlanningError(problems)
    return Plan(spec, posture(spec.environment), tiers, tuple(regions))


def load_plan(raw: Any, source: str, secrets: Callable[[str], SecretState] | None = None,
              reveal: Callable[[str], str | None] | None = None) -> Plan:
    """Validate the `rtip:platform` value (and, given `secrets` and `reveal`, the secret config
    values it names: stacks.secrets), then plan it; every problem is a SpecError."""
    spec = load_spec(raw, source, secrets, reveal)
    try:
        return plan_stack(spec)
    except PlanningError as err:
        raise SpecError(source, err.problems) from None


__all__ = ["Plan", "PlannedPool", "PlanningError", "RegionPlan", "load_plan", "plan_stack"]
