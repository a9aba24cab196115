"""SLO tiers: p99 latency targets, availability and error budget.

Latency targets are anchored on the MLPerf Inference p99 limits (mlcommons/inference
`loadgen/mlperf.conf`, FACTS.md section 7): Llama-3.1-8B interactive 500 ms TTFT / 30 ms TPOT,
Llama-3.1-8B server 2000 / 100 ms, Llama-3.1-405B server 6000 / 175 ms. Thresholds sit on vLLM's
TTFT histogram bucket boundaries (0.5, 2.5, 5 s ...) where they can, so burn-rate rules measure
exactly the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

BUDGET_WINDOW_DAYS = 30


class Tier(StrEnum):
    INTERACTIVE = "interactive"
    STANDARD = "standard"
    BATCH = "batch"


@dataclass(frozen=True)
class TierSpec:
    tier: Tier
    ttft_p99_ms: float
    tpot_p99_ms: float
    availability: float
    # Time-slicing shares SMs between processes with no isolation, which widens the tail; MIG
    # partitions are hardware-isolated and allowed in every tier.
    allows_time_slicing: bool
    # Fraction of capacity held above peak for bursts the autoscaler has not caught up with yet.
    burst_headroom: float
    anchor: str

    @property
    def error_budget(self) -> float:
        return round(1.0 - self.availability, 10)

    @property
    def error_budget_minutes(self) -> float:
        return self.error_budget * BUDGET_WINDOW_DAYS * 24 * 60


TIERS: dict[Tier, TierSpec] = {
    Tier.INTERACTIVE: TierSpec(
        Tier.INTERACTIVE, 500, 30, 0.999, False, 0.30,
        "MLPerf Llama-3.1-8B interactive: TTFT 500 ms, TPOT 30 ms",
    ),
    Tier.STANDARD: TierSpec(
        Tier.STANDARD, 2000, 100, 0.995, True, 0.20,
        "MLPerf Llama-3.1-8B server: TTFT 2000 ms, TPOT 100 ms",
    ),
    Tier.BATCH: TierSpec(
        Tier.BATCH, 6000, 175, 0.99, True, 0.10,
        "MLPerf Llama-3.1-405B server: TTFT 6000 ms, TPOT 175 ms",
    ),
}


__all__ = ["BUDGET_WINDOW_DAYS", "TIERS", "Tier", "TierSpec"]
