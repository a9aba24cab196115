"""Place every model's replicas on GPU slices of a region's pools at the lowest GPU cost per hour.

Per model the planner picks one option (pool, slice kind, quantization; see `serving._options`),
then packs each pool per zone (every zone of a pool gets the same nodes, because every model
spreads its replicas evenly over its pool's zones):

- whole GPUs and TP groups: TP degrees divide the GPUs per node, so they pack nodes exactly;
- time-sliced shares: GPUs of one width n hold n replicas of any models;
- MIG instances: first-fit decreasing onto GPUs whose layout stays valid (`serving._migpack`),
  so GPUs carry mixed layouts where those pack better;
- whole GPUs and MIG GPUs may share a node: mig-parted configs are per device, and a device with
  `mig-enabled: false` is advertised as `nvidia.com/gpu` under the mixed strategy. Time-slicing
  replicates every `nvidia.com/gpu` of a node and CPX partitions a whole node's GPUs, so those
  modes get nodes of their own, each rounding up to whole nodes.

Choosing the options: the LP relaxation of `serving._lp` (exact MILP for small catalogs), rounded
to each model's largest share, then a local search that moves one model at a time to another of
its options while whole-node cost falls. `lower_bound` is the relaxation's optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from serving import _migpack
from serving._lp import LpOption, LpPool, solve
from serving._options import ModelDemand, Option, PoolSpec, Rejections, options_for
from serving._search import PoolLoad, improve
from serving.capacity import RegionReplicas, ReplicaCapacity
from serving.coldstart import ColdStart
from serving.models import Quantization
from serving.profiles import SliceKind
from serving.slices import SharingMode

# The planner starts from the exact MILP (binary choices, whole nodes) up to this many models, with
# a 1 s limit (HiGHS returns its best incumbent); larger catalogs start from LP rounding, whose
# rounding loss shrinks as the catalog grows.
EXACT_MODELS = 200
# The lower bound solves the MILP up to this many models (its proven dual bound if time runs out).
EXACT_BOUND_MODELS = 1000


class PlanError(ValueError):
    """A model cannot be placed: the message names it and what would fix it; `model` is its name
    when one model is the cause, so a stack check can point at it."""

    def __init__(self, message: str, model: str | None = None) -> None:
        super().__init__(message)
        self.model = model


@dataclass(frozen=True)
class ModelPlacement:
    model: str
    pool: str
    slice: SliceKind
    quantization: Quantization
    capacity: ReplicaCapacity
    replicas: RegionReplicas
    cold_start: ColdStart
    cost_per_hour: float  # the model's GPU share at max replicas, fractional
    cost_per_replica_hour: float  # one replica's GPU share

    @property
    def cold_start_s(self) -> float:
        return self.cold_start.total_s

    @property
    def quantized(self) -> bool:
        return self.quantization is not Quantization.NONE

    @property
    def note(self) -> str:
        if self.quantized:
            return f"uses the {self.quantization} variant: cheaper than native weights for this tier"
        return ""


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one pool (per zone) configured alike."""

    sharing: SharingMode
    nodes_per_zone: int
    time_slice_replicas: int = 1
    whole_gpus_per_zone: int = 0  # GPUs without MIG (whole or TP groups); in a MIG group too
    mig_layouts: tuple[dict[str, int], ...] = ()  # one per MIG-enabled GPU of the group, one zone
    partitions_per_gpu: int = 1


@dataclass(frozen=True)
class PoolPlan:
    pool: str
    zones: int
    nodes_per_zone: int  # at peak: every model at its max replicas
    groups: tuple[NodeGroup, ...]
    cost_per_hour: float
    floor_nodes_per_zone: int = 0  # every model at its min replicas: the autoscaler's floor

    @property
    def nodes(self) -> int:
        return self.nodes_per_zone * self.zones


@dataclass(frozen=True)
class PackingPlan:
    models: tuple[ModelPlacement, ...]
    pools: tuple[PoolPlan, ...]
    cost_per_hour: float
    method: str


def build_options(demands: list[ModelDemand], pools: list[PoolSpec]) -> list[list[Option]]:
    """Every model's options; raises PlanError for a model that has none."""
    names = [d.name for d in demands]
    if len(set(names)) != len(names):
        raise PlanError("model names must be unique within a region")
    result = []
    for i, demand in enumerate(demands):
        why = Rejections()
        opts = [o for o in options_for(i, demand, pools, why)
                if o.pool.max_nodes_per_zone >= 1]
        if not opts:
            raise PlanError(_no_option_message(demand, pools, why), demand.name)
        result.append(opts)
    return result


def _no_option_message(demand: ModelDemand, pools: list[PoolSpec], why: Rejections) -> str:
    allowed = [p.name for p in pools if demand.pool in (None, p.name)]
    if why.too_many:
        return (f"model {demand.name}: pools {allowed} cannot serve its peak within tier "
                f"{demand.tier.tier}: {why.too_many[0]}; raise max_nodes, add a faster GPU, allow a "
                f"quantized variant or loosen the tier")
    if why.too_slow:
        return (f"model {demand.name}: no slice of pools {allowed} meets tier {demand.tier.tier}; "
                f"closest: {min(why.too_slow)[1]}")
    largest = max((p.gpu.memory_gb * p.gpus_per_node for p in pools), default=0)
    # The last misfit: once the closed form's screen passes, it is vLLM's start-up check
    # (serving.measured.starts) with its figures.
    detail = f"; {why.no_fit[-1]}" if why.no_fit else ""
    return (f"model {demand.name} ({demand.card.id}, {demand.card.weights_gb:.0f} GB) fits no slice "
            f"of pools {allowed} (largest node {largest:.0f} GB): add a pool with bigger or more GPUs "
            f"per node, allow a quantized variant, or lower max_model_len{detail}")


def _lp_inputs(options: list[list[Option]], pools: list[PoolSpec]) -> tuple[list[Option], list[LpOption],
                                                                            list[LpPool]]:
    index = {p.name: i for i, p in enumerate(pools)}
    flat = [o for opts in options for o in opts]
    lp_opts = [LpOption(o.model, index[o.pool.name], o.gpu_units, *map(float, o.mig_slices)) for o in flat]
    lp_pools = [LpPool(p.gpu_price * p.zones, p.shape.price_per_hour * p.zones, p.gpus_per_node,
                       p.max_nodes_per_zone * p.gpus_per_node) for p in pools]
    return flat, lp_opts, lp_pools


def lower_bound(demands: list[ModelDemand], pools: list[PoolSpec],
                options: list[list[Option]] | None = None, exact: bool | None = None) -> tuple[float, str]:
    """A cost per hour no packing of these demands can beat, and how it was proven."""
    options = options or build_options(demands, pools)
    exact = len(demands) <= EXACT_BOUND_MODELS if exact is None else exact
    _, lp_opts, lp_pools = _lp_inputs(options, pools)
    res = solve(lp_opts, lp_pools, len(demands), exact=exact, time_limit_s=30.0)
    kind = "MILP (nodes and choices integral, MIG slices relaxed)" if exact else "LP relaxation"
    return res.cost, kind if res.proven or not exact else kind + ", dual bound at time limit"


def _realise(demands: list[ModelDemand], choice: list[Option], pools: list[PoolSpec],
             method: str) -> PackingPlan:
    loads = {p.name: PoolLoad(p) for p in pools}
    for opt in choice:
        loads[opt.pool.name].add(opt)
    over = [f"{n} ({load.nodes()} nodes per zone > max {load.pool.max_nodes_per_zone})"
            for n, load in loads.items() if load.nodes() > load.pool.max_nodes_per_zone]
    if over:
        raise PlanError(f"peak traffic needs more nodes than pools allow: {', '.join(over)}; raise "
                        f"max_nodes, add a pool, or loosen the tier of the largest models")
    placements = tuple(
        ModelPlacement(d.name, o.pool.name, o.kind, o.quantization, o.capacity,
                       o.replicas, o.cold_start, round(o.fractional_cost, 4),
                       round(o.fractional_cost / max(1, o.per_zone * o.pool.zones), 4))
        for d, o in zip(demands, choice, strict=True))
    floor = {p.name: PoolLoad(p) for p in pools}
    for opt in choice:
        at_min = replace(opt.replicas, per_zone_max=math.ceil(opt.replicas.min_replicas / opt.pool.zones))
        floor[opt.pool.name].add(replace(opt, replicas=at_min))
    plans = []
    for pool in pools:
        load = loads[pool.name]
        nodes = load.nodes()
        if nodes == 0:
            continue
        plans.append(PoolPlan(pool.name, pool.zones, nodes, _groups(load),
                              round(nodes * pool.zones * pool.shape.price_per_hour, 4),
                              floor[pool.name].nodes()))
    total = round(sum(p.cost_per_hour for p in plans), 4)
    return PackingPlan(placements, tuple(plans), total, method)


def _groups(load: PoolLoad) -> tuple[NodeGroup, ...]:
    pool, g = load.pool, load.pool.gpus_per_node
    groups = []
    layouts = load.mig_gpus()
    if layouts:
        # MIG nodes also carry the whole GPUs (as `mig-enabled: false` devices); GPUs left over
        # on the last node get one full-size instance, a valid layout any MIG request can use.
        nodes = math.ceil((len(layouts) + load.whole) / g)
        spare = [0] * len(pool.gpu.mig_profiles)
        spare[-1] = 1
        # A pool with one layout carries it on every GPU, the spare ones too.
        fill = load.uniform_layout() or tuple(spare)
        padded = layouts + [fill] * (nodes * g - len(layouts) - load.whole)
        groups.append(NodeGroup(SharingMode.MIG, nodes, whole_gpus_per_zone=load.whole,
                                mig_layouts=tuple(_migpack.as_profiles(pool.gpu.model, c) for c in padded)))
    elif load.whole:
        groups.append(NodeGroup(SharingMode.WHOLE, math.ceil(load.whole / g),
                                whole_gpus_per_zone=load.whole))
    for (mode, shares), n in sorted(load.shared.items()):
        if n:
            nodes = math.ceil(math.ceil(n / shares) / g)
            if mode is SharingMode.TIME_SLICE:
                groups.append(NodeGroup(mode, nodes, time_slice_replicas=shares))
            else:
                groups.append(NodeGroup(mode, nodes, partitions_per_gpu=shares))
    return tuple(groups)


def _start(flat: list[Option], shares: object, models: int) -> list[Option]:
    """Each model's option with the largest share in a (relaxed) solution."""
    choice: list[Option | None] = [None] * models
    best = [-1.0] * models
    for opt, y in zip(flat, shares, strict=True):  # type: ignore[call-overload]
        if y > best[opt.model]:
            choice[opt.model], best[opt.model] = opt, float(y)
    return [c for c in choice if c is not None]


def plan(demands: list[ModelDemand], pools: list[PoolSpec]) -> PackingPlan:
    """The planner: relaxation, rounding, local search, packing.

    Starts from LP rounding and, for catalogs up to EXACT_MODELS, also from the MILP and from
    both baselines; each start is improved by `serving._search.improve` (which only accepts
    cheaper moves) and the cheapest result is kept. Neither relaxation wins on every catalog (the
    MILP's relaxed MIG geometry can mislead it), and the baseline starts make "never worse than a
    baseline" hold by construction for the catalogs where it is affordable.
    """
    options = build_options(demands, pools)
    flat, lp_opts, lp_pools = _lp_inputs(options, pools)
    small = len(demands) <= EXACT_MODELS
    starts: list[tuple[str, list[Option]]] = []
    for label, exact in [("LP rounding", False)] + ([("MILP", True)] if small else []):
        try:
            res = solve(lp_opts, lp_pools, len(demands), exact=exact, time_limit_s=1.0)
        except ValueError as err:
            raise PlanError(f"the models together need more nodes than the pools allow ({err}); "
                            f"raise max_nodes or add a pool") from err
        starts.append((label, _start(flat, res.shares, len(demands))))
    if small:
        # Either baseline may have no answer (a model pinned to a MIG pool has no whole GPU; first
        # fit may run out of room where the relaxations did not): then it is no start.
        for label, baseline in (("one model per GPU", lambda: _one_per_gpu_choice(demands, options)),
                                ("first-fit decreasing", lambda: _ffd_choice(demands, options, pools))):
            try:
                starts.append((label, baseline()))
            except PlanError:
                pass
    best: tuple[float, list[Option], str] | None = None
    for label, chosen in starts:
        loads = {p.name: PoolLoad(p) for p in pools}
        for opt in chosen:
            loads[opt.pool.name].add(opt)
        improve(chosen, options, loads)
        cost = sum(load.cost() for load in loads.values())
        if best is None or cost < best[0] - 1e-9:
            best = (cost, chosen, label)
    assert best is not None
    return _realise(demands, best[1], pools, f"{best[2]} + local search")


def _one_per_gpu_choice(demands: list[ModelDemand], options: list[list[Option]]) -> list[Option]:
    choice = []
    for demand, opts in zip(demands, options, strict=True):
        whole = [o for o in opts if o.kind.mode is SharingMode.WHOLE]
        if not whole:
            raise PlanError(f"model {demand.name}: no whole-GPU option", demand.name)
        # Native weights as KServe would serve them, unless only a quantized variant meets the tier.
        choice.append(min(whole, key=lambda o: (o.quantization is not Quantization.NONE, o.fractional_cost)))
    return choice


def _ffd_choice(demands: list[ModelDemand], options: list[list[Option]],
                pools: list[PoolSpec]) -> list[Option]:
    order = sorted(range(len(demands)), key=lambda i: -demands[i].card.weights_gb)
    pool_rank = {p.name: (p.gpu_price, i) for i, p in enumerate(sorted(pools, key=lambda p: p.gpu_price))}
    loads = {p.name: PoolLoad(p) for p in pools}
    choice: list[Option | None] = [None] * len(demands)
    for i in order:
        ranked = sorted(options[i], key=lambda o: (pool_rank[o.pool.name], o.kind.memory_gb, o.gpu_units))
        for opt in ranked:  # first fit: the first option whose pool still has room
            load = loads[opt.pool.name]
            load.add(opt)
            if load.nodes() <= opt.pool.max_nodes_per_zone:
                choice[i] = opt
                break
            load.add(opt, -1)
        else:
            raise PlanError(f"model {demands[i].name}: no pool has room left (first-fit decreasing)",
                            demands[i].name)
    return [c for c in choice if c is not None]


def one_model_per_gpu(demands: list[ModelDemand], pools: list[PoolSpec]) -> PackingPlan:
    """Baseline: plain KServe, every replica on whole GPUs (native weights where they meet the
    tier), each model on its cheapest such option, nothing shared. Replicas come from the same
    capacity model, so the baselines differ from the planner only in slices and packing."""
    return _realise(demands, _one_per_gpu_choice(demands, build_options(demands, pools)), pools,
                    "one model per GPU")


def first_fit_decreasing(demands: list[ModelDemand], pools: list[PoolSpec]) -> PackingPlan:
    """Baseline: models by weights, largest first, each on the first option in pool order (cheapest
    GPU first) whose slice is the smallest that meets the tier and whose pool still has room."""
    return _realise(demands, _ffd_choice(demands, build_options(demands, pools), pools), pools,
                    "first-fit decreasing")


__all__ = [
    "EXACT_BOUND_MODELS",
    "EXACT_MODELS",
    "ModelDemand",
    "ModelPlacement",
    "NodeGroup",
    "PackingPlan",
    "PlanError",
    "PoolPlan",
    "PoolSpec",
    "first_fit_decreasing",
    "lower_bound",
    "one_model_per_gpu",
    "plan",
]
