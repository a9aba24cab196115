"""SLO tiers: latency targets at a percentile, availability and error budget.

The built-in tiers are anchored on the MLPerf Inference p99 limits (mlcommons/inference
`loadgen/mlperf.conf`, FACTS.md section 7): Llama-3.1-8B interactive 500 ms TTFT / 30 ms TPOT,
Llama-3.1-8B server 2000 / 100 ms, Llama-3.1-405B server 6000 / 175 ms. Thresholds sit on vLLM's
TTFT histogram bucket boundaries (0.5, 2.5, 5 s ...) where they can, so burn-rate rules measure
exactly the target. A stack may add tiers or override these (`tiers:` in the stack file); the
plan carries the resolved table, and everything that sizes, scales or alerts reads it from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

BUDGET_WINDOW_DAYS = 30
# The percentiles a latency target may be set at: below the median a target says nothing about
# the tail; above 99.9 a 30-day window holds too few requests per model to measure it.
MIN_PERCENTILE, MAX_PERCENTILE = 50.0, 99.9


class Tier(StrEnum):
    """The built-in tier names; a stack's own tiers are plain names beside them."""

    INTERACTIVE = "interactive"
    STANDARD = "standard"
    BATCH = "batch"


@dataclass(frozen=True)
class TierSpec:
    tier: str
    ttft_ms: float  # time to first token at `percentile`
    tpot_ms: float  # time per output token at `percentile`
    availability: float
    # Time-slicing shares SMs between processes with no isolation, which widens the tail; MIG
    # partitions are hardware-isolated and allowed in every tier.
    allows_time_slicing: bool
    # Fraction of capacity held above peak for bursts the autoscaler has not caught up with yet.
    burst_headroom: float
    anchor: str
    percentile: float = 99.0

    @property
    def ttft_s(self) -> float:
        return self.ttft_ms / 1000

    @property
    def tpot_s(self) -> float:
        return self.tpot_ms / 1000

    @property
    def tail(self) -> float:
        """The share of requests allowed past the targets (0.01 at p99)."""
        return round(1.0 - self.percentile / 100.0, 10)

    @property
    def error_budget(self) -> float:
        return round(1.0 - self.availability, 10)

    @property
    def error_budget_minutes(self) -> float:
        return self.error_budget * BUDGET_WINDOW_DAYS * 24 * 60


TIERS: dict[str, TierSpec] = {
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


__all__ = ["BUDGET_WINDOW_DAYS", "MAX_PERCENTILE", "MIN_PERCENTILE", "TIERS", "Tier", "TierSpec"]
