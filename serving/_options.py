"""Every way one model could run in one pool, with the replicas each way needs.

An option is (pool, slice kind, quantization) plus the capacity planner's answer for it. Options
that cannot hold the weights and a full context, or miss the tier at batch 1, are dropped with
their reason kept, so a model with no option gets an error that says which fix applies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from serving import coldstart
from serving.capacity import (
    DoesNotFit,
    RegionReplicas,
    ReplicaCapacity,
    TierUnmeetable,
    region_replicas,
    slice_capacity,
)
from serving.coldstart import ColdStart
from serving.hardware import GpuSpec, MachineShape, Vendor
from serving.models import ModelCard, Quantization, quantizations
from serving.profiles import SliceKind
from serving.slices import SharingMode
from serving.tiers import TierSpec

TENSOR_PARALLEL = (1, 2, 4, 8)
ALL_SHARING = (SharingMode.WHOLE, SharingMode.MIG, SharingMode.TIME_SLICE, SharingMode.PARTITION)


@dataclass(frozen=True)
class PoolSpec:
    """A GPU pool the planner may fill: its machine shape and bounds. `max_nodes` counts every
    zone; nodes are planned per zone, identically in each, so `max_nodes // zones` bound one zone."""

    name: str
    shape: MachineShape
    max_nodes: int
    zones: int = 3
    sharing: tuple[SharingMode, ...] = ALL_SHARING
    time_slice_replicas: tuple[int, ...] = (2, 4)
    # MIG on a real node pool: every node of a pool is labelled alike, so every GPU of the pool
    # carries one layout. `mig_layout` fixes it (profile counts in the GPU's profile order);
    # `uniform_mig` lets the planner choose it; neither (the default) lets every GPU carry its own,
    # the packing bound of the benchmarks. `single_mig_profile`: the cloud partitions a pool with
    # one profile (GKE, AKS).
    mig_layout: tuple[int, ...] | None = None
    uniform_mig: bool = False
    single_mig_profile: bool = False
    partitions: int | None = None  # AMD partitions per GPU; None: the GPU's most
    mig_profiles: tuple[str, ...] | None = None  # the profiles the cloud can give the pool; None: all

    @property
    def gpu(self) -> GpuSpec:
        return self.shape.gpu_spec

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpu_count

    @property
    def gpu_price(self) -> float:
        return self.shape.price_per_hour / self.shape.gpu_count

    @property
    def max_nodes_per_zone(self) -> int:
        return self.max_nodes // self.zones


@dataclass(frozen=True)
class ModelDemand:
    """One model in one region, as the stack states it. Token defaults are the Azure 2023
    conversation trace means (as stacks.schema.TokenMix)."""

    name: str
    card: ModelCard
    tier: TierSpec
    peak_qps: float
    input_tokens: int = 1155
    output_tokens: int = 211
    allowed_quantization: tuple[Quantization, ...] = ()
    context_tokens: int | None = None
    pool: str | None = None  # pin to one pool
    tensor_parallel: int | None = None  # pin the TP degree of whole-GPU options
    growth_per_s: float | None = None  # stated growth; None: `traffic`'s (capacity.region_replicas)
    traffic: str = "conversation"  # whose growth table sets the headroom (serving.burst.TRAFFIC)
    replicas: tuple[int, int] | None = None  # (min, max) stated in the stack: overrides the sizing
    # The fewest replicas the model runs as in the region (its pools' fewest zones, or a smaller
    # stated minimum): the simulator sizes a replica as one of that many behind least-loaded
    # routing, which carries more than one replica alone (serving.replica_sim).
    fleet: int = 1
    # Simulated capacities by (slice label, quantization) (serving.measured); None: the simulator
    # found the option unservable. They replace the closed form's answer for those options.
    measured: Mapping[tuple[str, str], ReplicaCapacity | None] = field(
        default_factory=dict, hash=False, compare=False)
    measured_only: bool = False  # offer only measured options (the planner's last round)


@dataclass(frozen=True)
class Option:
    model: int  # index into the demands
    pool: PoolSpec
    kind: SliceKind
    quantization: Quantization
    capacity: ReplicaCapacity
    replicas: RegionReplicas
    cold_start: ColdStart

    @property
    def per_zone(self) -> int:
        return self.replicas.per_zone_max

    @property
    def gpu_units(self) -> float:
        """Whole-GPU units one zone's replicas take (0 for MIG)."""
        k = self.kind
        if k.mode is SharingMode.MIG:
            return 0.0
        return self.per_zone * k.tensor_parallel / k.shares

    @property
    def mig_slices(self) -> tuple[int, int]:
        if self.kind.mode is not SharingMode.MIG:
            return (0, 0)
        p = self.kind.spec.mig_profile(self.kind.mig_profile or "")
        assert p is not None
        return (self.per_zone * p.compute_slices, self.per_zone * p.memory_slices)

    @property
    def fractional_cost(self) -> float:
        """$/h if GPUs could be split exactly: what the LP charges this option."""
        compute, memory = self.mig_slices
        gpus = self.gpu_units + max(compute / 7, memory / 8)
        return gpus * self.pool.gpu_price * self.pool.zones


@dataclass
class Rejections:
    no_fit: list[str] = field(default_factory=list)
    too_slow: list[tuple[float, str]] = field(default_factory=list)  # (miss ratio, message)
    too_many: list[str] = field(default_factory=list)


def kinds(pool: PoolSpec, demand: ModelDemand) -> list[SliceKind]:
    """Slice kinds the pool's GPU supports and the model's tier and pins allow."""
    gpu = pool.gpu
    found: list[SliceKind] = []
    if SharingMode.WHOLE in pool.sharing:
        tps = [demand.tensor_parallel] if demand.tensor_parallel else TENSOR_PARALLEL
        found += [SliceKind(gpu.model, SharingMode.WHOLE, tp) for tp in tps if tp <= pool.gpus_per_node]
    if demand.tensor_parallel not in (None, 1):
        return found
    if SharingMode.MIG in pool.sharing and gpu.mig_capable:
        layout = pool.mig_layout or (1,) * len(gpu.mig_profiles)
        found += [SliceKind(gpu.model, SharingMode.MIG, mig_profile=p.name)
                  for p, n in zip(gpu.mig_profiles, layout, strict=True)
                  if n and (pool.mig_profiles is None or p.name in pool.mig_profiles)]
    sharing_ok = demand.tier.allows_time_slicing
    # A MIG-capable GPU is time-sliced only where the stack says so: MIG isolates at the same cost.
    stated = pool.sharing == (SharingMode.TIME_SLICE,)
    if sharing_ok and SharingMode.TIME_SLICE in pool.sharing and (stated or not gpu.mig_capable) \
            and gpu.vendor is Vendor.NVIDIA:
        found += [SliceKind(gpu.model, SharingMode.TIME_SLICE, shares=n) for n in pool.time_slice_replicas]
    if SharingMode.PARTITION in pool.sharing and gpu.amd_partitions:
        # CPX partitions are hardware-isolated compute dies, so every tier may use them.
        parts = pool.partitions or max(p.partitions_per_gpu for p in gpu.amd_partitions)
        found.append(SliceKind(gpu.model, SharingMode.PARTITION, shares=parts))
    return found


def options_for(index: int, demand: ModelDemand, pools: list[PoolSpec], why: Rejections) -> list[Option]:
    """The non-dominated options of one model: per pool and resource (whole GPUs, one time-slice
    width, one MIG profile, CPX), only the variant needing the fewest units, native weights on ties."""
    best: dict[tuple[str, str], Option] = {}
    for pool in pools:
        if demand.pool not in (None, pool.name):
            continue
        for kind in kinds(pool, demand):
            for q in quantizations(demand.card, demand.allowed_quantization, pool.gpu):
                key = (kind.label, str(q))
                got: ReplicaCapacity | DoesNotFit | TierUnmeetable | None
                if key in demand.measured:
                    got = demand.measured[key]
                    if got is None:
                        why.too_slow.append((1.0, f"{kind.label} ({q}): the simulator finds "
                                                  f"{demand.tier.tier} unservable even at a trickle"))
                        continue
                elif demand.measured_only:
                    continue
                else:
                    got = slice_capacity(demand.card, kind, q, demand.tier, demand.input_tokens,
                                         demand.output_tokens, demand.context_tokens)
                if isinstance(got, DoesNotFit):
                    why.no_fit.append(str(got))
                    continue
                if isinstance(got, TierUnmeetable):
                    why.too_slow.append((got.miss, str(got)))
                    continue
                weights = demand.card.variant_weights_gb(q)
                cold = coldstart.budget(pool.shape.cloud, weights,
                                        nvme_cache=pool.shape.local_nvme_gb >= weights)
                reps = region_replicas(demand.peak_qps, got.qps, pool.zones, demand.tier,
                                       cold.total_s, demand.growth_per_s, demand.traffic)
                if demand.replicas is not None:
                    low, high = demand.replicas
                    reps = replace(reps, min_replicas=low, max_replicas=high,
                                   per_zone_max=math.ceil(high / pool.zones))
                opt = Option(index, pool, kind, q, got, reps, cold)
                compute, memory = opt.mig_slices
                gpus = opt.gpu_units + max(compute / 7, memory / 8)
                if gpus > pool.max_nodes_per_zone * pool.gpus_per_node:
                    why.too_many.append(
                        f"{kind.label} ({q}) serves {got.qps:.3g} req/s a replica, so peak "
                        f"{demand.peak_qps:g} req/s needs {gpus:.0f} GPUs a zone in pool {pool.name}, "
                        f"which holds {pool.max_nodes_per_zone * pool.gpus_per_node}")
                    continue
                resource = kind.mig_profile or f"{kind.mode}/{kind.shares}"
                key = (pool.name, resource)
                held = best.get(key)
                if held is None or _units(opt) < _units(held):
                    best[key] = opt
    return list(best.values())


def _units(opt: Option) -> float:
    compute, memory = opt.mig_slices
    return opt.gpu_units + compute + memory


__all__ = ["ALL_SHARING", "ModelDemand", "Option", "PoolSpec", "Rejections", "kinds", "options_for"]
