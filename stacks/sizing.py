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
from functools import lru_cache

from serving import coldstart
from serving.capacity import (
    DoesNotFit,
    RegionReplicas,
    ReplicaCapacity,
    TierUnmeetable,
    region_replicas,
    replica_capacity,
)
from serving.coldstart import ColdStart
from serving.hardware import Cloud, MachineShape
from serving.models import CATALOG, ModelCard, Quantization
from serving.placement import Placement
from serving.profiles import SliceKind, profile
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


@lru_cache(maxsize=8192)
def _capacity(card_id: str, kind: SliceKind, quantization: Quantization, tier: TierSpec,
              input_tokens: int, output_tokens: int, context_tokens: int | None) -> ReplicaCapacity:
    # Pure in its arguments; a stack asks for the same (model, slice) in many regions and pools.
    card = CATALOG[card_id]
    return replica_capacity(card, profile(card, kind, quantization), tier, input_tokens,
                            output_tokens, context_tokens)


def size(card: ModelCard, tier: TierSpec, peak_qps: float, input_tokens: int, output_tokens: int,
         context_tokens: int | None, placements: Sequence[Placement],
         shapes: dict[str, MachineShape], zones: dict[str, int], cloud: Cloud) -> Sized:
    best: Sized | None = None
    reasons: list[str] = []
    for p in placements:
        shape = shapes[p.pool]
        kind = SliceKind(gpu=shape.gpu, mode=p.slice.mode, tensor_parallel=p.tensor_parallel,
                         mig_profile=p.slice.mig_profile, shares=p.slice.shares)
        try:
            cap = _capacity(card.id, kind, p.quantization, tier, input_tokens, output_tokens,
                            context_tokens)
        except (TierUnmeetable, DoesNotFit) as err:
            reasons.append(str(err))
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
