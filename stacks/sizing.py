"""Size one model in one region from its SLO tier: the placement with the lowest GPU cost at peak.

For every feasible placement (serving.placement) the latency-limited capacity of one replica
(serving.capacity on the calibrated profile of its slice) gives the replicas that serve peak QPS
within the tier, with autoscale-lag headroom and any one zone lost; the cheapest placement whose
pool can hold that many wins. Pool layouts still come from the stack file: the packing planner
(serving.packing) that also chooses layouts and node counts is not wired in yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from serving.hardware import Cloud, MachineShape
from serving.models import ModelCard
from serving.placement import Placement
from serving.profiles import SliceKind
from serving.tiers import TierSpec


class SizingError(ValueError):
    """No placement serves the model's peak within its tier; the message says what would."""


@dataclass(frozen=True)
class Sized:
    placement: Placement
    capacity: ReplicaCapacity
    replicas: RegionReplicas
    cold_start: ColdStart

    @property
    def cost_per_hour_at_peak(self) -> float:
        return round(self.placement.cost_per_replica_hour * self.replicas.max_replicas, 4)


def size(card: ModelCard, tier: TierSpec, peak_qps: float, input_tokens: int, output_tokens: int,
         context_tokens: int | None, placements: Sequence[Placement],
         shapes: dict[str, MachineShape], zones: dict[str, int], cloud: Cloud) -> Sized:
    best: Sized | None = None
    reasons: list[str] = []
    for p in placements:
        shape = shapes[p.pool]
        kind = SliceKind(gpu=shape.gpu, mode=p.slice.mode, tensor_parallel=p.tensor_parallel,
                         mig_profile=p.slice.mig_profile, shares=p.slice.shares)
        cap = slice_capacity(card, kind, p.quantization, tier, input_tokens, output_tokens,
                             context_tokens)
        if isinstance(cap, (TierUnmeetable, DoesNotFit)):
            reasons.append(str(cap))
            continue
        weights = card.weights_for(p.quantization) or card.weights_gb
        cold = coldstart.budget(cloud, weights, nvme_cache=shape.local_nvme_gb >= weights)
        reps = region_replicas(peak_qps, cap.qps, zones[p.pool], tier, cold.total_s)
        if reps.max_replicas > p.max_replicas:
            reasons.append(f"pool {p.pool!r} ({p.slice.resource}, TP {p.tensor_parallel}) holds "
                           f"{p.max_replicas} replicas but peak needs {reps.max_replicas} at "
                           f"{cap.qps:.2f} QPS each")
            continue
        sized = Sized(p, cap, reps, cold)
        if best is None or sized.cost_per_hour_at_peak < best.cost_per_hour_at_peak:
            best = sized
    if best is None:
        raise SizingError("; ".join(dict.fromkeys(reasons)) or "no placement fits")
    return best


__all__ = ["Sized", "SizingError", "size"]
