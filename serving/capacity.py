"""Latency-limited capacity of one replica, and replicas per region from peak traffic.

Model of one replica (kept simple on purpose; every piece is a knob a measurement can replace):

- The replica decodes up to `batch` sequences at once (vLLM continuous batching). Requests beyond
  that wait for a slot: an M/M/c queue with c = batch servers and service time
  S = prefill(mean prompt) + output_tokens x TPOT. Its mean queue length uses Sakasegawa's
  approximation Lq = rho^sqrt(2(c+1)) / (1 - rho); the wait of a request that waits is exponential
  with rate c(1 - rho)/S, which gives the p99 wait in closed form.
- p99 TTFT = prefill of a p99-length prompt + p99 queueing wait. The p99 prompt is
  `prompt_factor(percentile)` x the mean prompt (capped at the context limit); p99 for the
  built-in tiers, the tier's own percentile for a stack-defined one.
- p99 TPOT = TPOT(batch) / (1 - u), u = arrival rate x prefill(mean prompt): the share of time the
  engine spends on other requests' prefills, which stall every running sequence's next token.
- The batch is the largest one whose p99 TPOT meets the tier and whose KV cache fits the slice;
  the latency-limited rate is the largest arrival rate at which p99 TTFT still meets the tier.
  That is the throughput the planner sizes by, never the saturated peak (FACTS.md section 7: NIM
  70B TTFT 689 ms at 25 concurrent, 7,996 ms at 100).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

from serving.burst import growth_within
from serving.models import ModelCard, Quantization
from serving.profiles import Profile, SliceKind, profile
from serving.slices import GPU_MEMORY_UTILIZATION, MIN_CONTEXT_TOKENS
from serving.tiers import TierSpec

# Prompt length at a percentile over the mean prompt, the larger of the two Azure LLM inference
# traces 2023 in ../shared/traces (conversation, code), rounded; p99: conversation 4,142 / 1,155 =
# 3.59, code 7,436 / 2,048 = 3.63. Between rows the factor is interpolated linearly.
PROMPT_FACTORS: tuple[tuple[float, float], ...] = (
    (50.0, 0.88), (75.0, 1.34), (90.0, 2.53), (95.0, 3.57), (99.0, 3.6), (99.9, 5.35))
# vLLM's default --max-num-seqs: the engine never batches more sequences than this.
MAX_BATCH = 256
# Above this prefill share the decode stalls dominate and the linear model stops being credible.
MAX_PREFILL_SHARE = 0.8


def prompt_factor(percentile: float) -> float:
    """The prompt length at `percentile` over the mean prompt length (PROMPT_FACTORS)."""
    points = PROMPT_FACTORS
    if not points[0][0] <= percentile <= points[-1][0]:
        raise ValueError(f"percentile {percentile} is outside {points[0][0]}..{points[-1][0]}")
    for (p0, f0), (p1, f1) in itertools.pairwise(points):
        if p0 <= percentile <= p1:
            return f0 + (f1 - f0) * (percentile - p0) / (p1 - p0)
    return points[-1][1]


class TierUnmeetable(ValueError):
    """The slice cannot meet the tier even for one request at a time."""

    def __init__(self, message: str, miss: float) -> None:
        super().__init__(message)
        self.miss = miss  # worst of (latency / target) over TTFT and TPOT at batch 1: > 1


class DoesNotFit(ValueError):
    """The model's weights plus one full-context sequence exceed the slice's memory."""


@dataclass(frozen=True)
class ReplicaCapacity:
    model: str
    slice: str
    batch: int  # concurrent sequences at the latency-limited point
    qps: float  # latency-limited requests per second of one replica
    output_tokens_per_s: float
    ttft_tail_s: float  # at the tier's percentile
    tpot_tail_s: float
    memory_needed_gb: float  # weights + KV cache for `batch` sequences (and one full context)
    # "closed form" (this module's screening model) or "simulated" (serving.measured: the
    # simulator's latency-limited rate, which sizes every placement the planner keeps).
    source: str = "closed form"
    closed_form_qps: float | None = None  # the screening model's answer, kept beside a simulated one
    # Simulated (rate, in flight) points at or below `qps`, `qps` last
    # (serving.replica_sim.SimulatedCapacity.curve); empty where the closed form sized it.
    in_flight_curve: tuple[tuple[float, float], ...] = ()

    @property
    def in_flight(self) -> float | None:
        """Simulated mean running + waiting requests at `qps`; None for the closed form."""
        return self.in_flight_curve[-1][1] if self.in_flight_curve else None


def kv_token_capacity(card: ModelCard, weights_gb: float, memory_gb: float) -> int:
    """KV-cache tokens the slice holds beside the weights, under vLLM's memory utilisation cap."""
    free = memory_gb * GPU_MEMORY_UTILIZATION - weights_gb
    return max(0, int(free * 1e9 / card.kv_bytes_per_token))


def _tail_wait_s(rate: float, servers: int, service_s: float, tail: float) -> float:
    rho = rate * service_s / servers
    if rho >= 1:
        return math.inf
    queue = rho ** math.sqrt(2 * (servers + 1)) / (1 - rho)
    tail_rate = servers * (1 - rho) / service_s
    p_wait = min(1.0, queue / rate * tail_rate)
    return math.log(p_wait / tail) / tail_rate if p_wait > tail else 0.0


def replica_capacity(
    card: ModelCard,
    prof: Profile,
    tier: TierSpec,
    input_tokens: int,
    output_tokens: int,
    context_tokens: int | None = None,
) -> ReplicaCapacity:
    """The latency-limited operating point of one replica of `card` with profile `prof`.

    Raises DoesNotFit when the weights and one `context_tokens` sequence exceed the slice, and
    TierUnmeetable when even batch 1 at no load misses the tier's TTFT or TPOT.
    """
    weights = card.variant_weights_gb(prof.quantization)
    context = context_tokens or MIN_CONTEXT_TOKENS
    kv_tokens = kv_token_capacity(card, weights, prof.slice.memory_gb)
    where = f"{card.id} ({prof.quantization}) on {prof.slice.label}"
    if kv_tokens < context:
        raise DoesNotFit(
            f"{where}: {weights:.1f} GB weights + a {context}-token KV cache exceed "
            f"{prof.slice.memory_gb:.0f} GB x {GPU_MEMORY_UTILIZATION}; use a bigger slice, more "
            f"tensor parallelism, a quantized variant or a shorter max_model_len")
    ttft_s, tpot_s = tier.ttft_s, tier.tpot_s
    p99_prompt = min(prompt_factor(tier.percentile) * input_tokens, card.context_max)
    first_prefill = prof.prefill_s(p99_prompt)
    if first_prefill > ttft_s or prof.tpot_s(1) > tpot_s:
        raise TierUnmeetable(
            f"{where} misses tier {tier.tier} at batch 1 (prefill of a {p99_prompt:.0f}-token "
            f"prompt {first_prefill * 1000:.0f} ms vs TTFT {tier.ttft_ms:.0f} ms, TPOT "
            f"{prof.tpot_s(1) * 1000:.1f} ms vs {tier.tpot_ms:.0f} ms); use a faster GPU or a "
            f"whole GPU instead of a slice, more tensor parallelism, or a looser tier",
            max(first_prefill / ttft_s, prof.tpot_s(1) / tpot_s))
    batch_by_memory = min(MAX_BATCH, kv_tokens // (input_tokens + output_tokens))
    mean_prefill = prof.prefill_s(input_tokens)

    def point(rate: float) -> tuple[int, float, float] | None:
        """(batch, p99 TTFT, p99 TPOT) at arrival `rate`, or None if the tier is missed."""
        share = rate * mean_prefill
        if share >= MAX_PREFILL_SHARE:
            return None
        budget = tpot_s * (1 - share)
        if prof.tpot_per_seq_s > 0:
            batch = int((budget - prof.tpot_fixed_s) / prof.tpot_per_seq_s)
        else:
            batch = MAX_BATCH
        batch = min(batch, batch_by_memory)
        if batch < 1:
            return None
        tpot = prof.tpot_s(batch) / (1 - share)
        service = mean_prefill + output_tokens * tpot
        ttft = first_prefill + _tail_wait_s(rate, batch, service, tier.tail)
        return (batch, ttft, tpot) if ttft <= ttft_s else None

    low, high = 0.0, max(1, batch_by_memory) / (mean_prefill + output_tokens * prof.tpot_s(1))
    for _ in range(48):  # bisection to ~1e-14 of the range: feasibility falls with the rate
        mid = (low + high) / 2
        low, high = (mid, high) if point(mid) else (low, mid)
    best = point(low) if low > 0 else None
    if best is None:
        raise TierUnmeetable(
            f"{where} meets tier {tier.tier} only with no traffic: the p99 prompt's prefill "
            f"leaves no TTFT slack for queueing; use a faster GPU, more tensor parallelism or a "
            f"looser tier", 1.0)
    batch, ttft, tpot = best
    kv_needed = max(context, batch * (input_tokens + output_tokens)) * card.kv_bytes_per_token / 1e9
    return ReplicaCapacity(
        model=card.id, slice=prof.slice.label, batch=batch, qps=low,
        output_tokens_per_s=low * output_tokens, ttft_tail_s=ttft, tpot_tail_s=tpot,
        memory_needed_gb=weights + kv_needed,
    )


@cache
def slice_capacity(card: ModelCard, kind: SliceKind, quantization: Quantization, tier: TierSpec,
                   input_tokens: int, output_tokens: int, context_tokens: int | None,
                   ) -> ReplicaCapacity | DoesNotFit | TierUnmeetable:
    """`replica_capacity` on the calibrated profile of `kind`, memoised: stacks and catalogs ask
    for the same (model, slice, tier, token mix) far more often than they differ. A rejection is
    returned, not raised, so the cache holds failures too."""
    try:
        return replica_capacity(card, profile(card, kind, quantization), tier, input_tokens,
                                output_tokens, context_tokens)
    except (DoesNotFit, TierUnmeetable) as err:
        return err


@dataclass(frozen=True)
class RegionReplicas:
    needed_at_peak: int  # replicas that serve peak with every zone up, before headroom
    min_replicas: int
    max_replicas: int
    per_zone_max: int
    zones: int
    headroom: float  # fraction of peak held for autoscale lag
    headroom_source: str
    survives_zone_loss: bool  # False only in a one-zone region, where no spread can help

    def capacity_qps(self, replica_qps: float, zones_lost: int = 0) -> float:
        """What `max_replicas` serve with the `zones_lost` fullest zones gone (a zone holds at
        most `per_zone_max` of them)."""
        return max(0, self.max_replicas - zones_lost * self.per_zone_max) * replica_qps


def _spread(replicas: int, zones: int) -> int:
    """The fewest replicas over `zones` that keep `replicas` running with any one zone lost.

    The zone spread (maxSkew 1, serving/_model_pod.py) puts at most ceil(R / Z) of R in a zone,
    so the worst loss leaves R - ceil(R / Z) = floor(R (Z - 1) / Z); the fewest R leaving
    `replicas` is ceil(replicas Z / (Z - 1)), as the autoscaling query's zone branch asks
    (serving/zone_branch.py). Not a multiple of Z: 3 survivors need 5 (2/2/1), not 6."""
    if zones <= 1:
        return replicas
    return -(-replicas * zones // (zones - 1))


def lost_zone_room(floor: int, zones: int) -> int:
    """Replicas above the floor that the autoscaling query's lost-pod term needs to act.

    The term counts a lost zone's pods as wanted so that their replacements start as soon as
    their scrapes fail, not at their eviction 90 s later (serving/autoscaling.py `lost_pods`;
    benchmarks/lost_pods.py). The HPA never sets more than maxReplicas, so a fleet whose floor is
    its ceiling (a peak within one replica a zone) replaced nothing until the eviction: the 8B's
    code-trace plan (3 replicas at min = max) lost 2.2 % of a zone-loss window against a 1.1 %
    budget that way; with the room the planner sizes it 6 to 12 and it loses 0.29 %, 1.49 %
    without the term (benchmarks/results/autoscaling.json, lost_pods.json). At the floor a zone
    holds ceil(floor / zones) pods; a region of one zone has nothing to fail over to.
    """
    return math.ceil(floor / zones) if zones > 1 else 0


def region_replicas(
    peak_qps: float,
    replica_qps: float,
    zones: int,
    tier: TierSpec,
    cold_start_s: float,
    growth_per_s: float | None = None,
    traffic: str = "conversation",
) -> RegionReplicas:
    """Min and max replicas of a model in one region.

    Headroom for autoscale lag: traffic that grows at `growth_per_s` (fraction of peak per second)
    for one cold start (`serving.coldstart.budget(...).total_s`) before the new replica serves, at
    most the whole peak. Without a stated growth rate, how much the Azure trace named by `traffic`
    (conversation or code) grows within one cold start (serving.burst). Either way the tier's
    `burst_headroom` when that is larger.
    max: peak x (1 + headroom), spread so any one zone can be lost, and at least min plus one
    zone's share of min (`lost_zone_room`).
    min: the headroom alone (what must already run while a scale-up from idle cold-starts),
    spread the same way, and never below one replica per zone. The fewest survivors alone
    would allow two over three zones (one of 1/1/0 survives), but measured that fails: with a
    floor of two the code trace's 8B and 3B plans moved to two or three larger replicas (23.7
    and 12.7 req/s each), and a zone lost at the busiest minute left one or two to carry the
    trace's sub-minute bursts, 9.1 % of the window lost against a 1.1 % budget for the 8B,
    while no conversation plan got cheaper: the VL model's zone branch holds three anyway
    (README, "The replica floor").
    """
    if replica_qps <= 0:
        raise ValueError("replica_qps must be positive")
    if growth_per_s is None:
        grown = growth_within(cold_start_s, traffic)
        why = f"Azure {traffic} trace: traffic grows {grown:.0%} of peak"
    else:
        # Traffic cannot rise by more than the whole stated peak (from nothing to its busiest);
        # beyond that the stack is out of spec, as with the traces' tables (serving.burst).
        grown = min(growth_per_s * cold_start_s, 1.0)
        why = f"stated growth {growth_per_s * 60:.3g} of peak a minute: {grown:.0%} of peak"
    if grown > tier.burst_headroom:
        headroom = grown
        source = f"{why} within a {cold_start_s:.0f} s cold start (above tier {tier.tier}'s burst_headroom)"
    else:
        headroom, source = tier.burst_headroom, f"tier {tier.tier} burst_headroom"
    needed = math.ceil(peak_qps / replica_qps - 1e-9)
    # At least one replica a zone, the ceiling too: the fewest survivors can leave a zone empty.
    high = max(zones, _spread(math.ceil(peak_qps * (1 + headroom) / replica_qps - 1e-9), zones))
    low = min(high, max(zones, _spread(math.ceil(peak_qps * min(headroom, 1.0) / replica_qps), zones)))
    high = max(high, low + lost_zone_room(low, zones))
    return RegionReplicas(
        needed_at_peak=needed, min_replicas=low, max_replicas=high,
        per_zone_max=math.ceil(high / max(zones, 1)), zones=zones, headroom=headroom,
        headroom_source=source, survives_zone_loss=zones > 1,
    )


__all__ = [
    "MAX_BATCH",
    "PROMPT_FACTORS",
    "DoesNotFit",
    "RegionReplicas",
    "ReplicaCapacity",
    "TierUnmeetable",
    "kv_token_capacity",
    "lost_zone_room",
    "prompt_factor",
    "region_replicas",
    "replica_capacity",
    "slice_capacity",
]
