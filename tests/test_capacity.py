"""Capacity: the latency-limited operating point of a replica and replicas per region."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.capacity import (
    DoesNotFit,
    TierUnmeetable,
    kv_token_capacity,
    region_replicas,
    replica_capacity,
)
from serving.hardware import GpuModel
from serving.models import CATALOG, Quantization
from serving.profiles import SliceKind, profile
from serving.slices import GPU_MEMORY_UTILIZATION
from serving.tiers import TIERS, Tier

LLAMA_8B = CATALOG["llama-3.1-8b-instruct"]
LLAMA_70B = CATALOG["llama-3.3-70b-instruct"]
H100 = SliceKind(GpuModel.H100_80GB)


def test_operating_point_meets_the_tier_at_the_largest_batch() -> None:
    tier = TIERS[Tier.STANDARD]
    prof = profile(LLAMA_8B, H100, Quantization.FP8)
    cap = replica_capacity(LLAMA_8B, prof, tier, 1155, 211)
    assert cap.ttft_tail_s <= tier.ttft_ms / 1000 + 1e-9
    assert cap.tpot_tail_s <= tier.tpot_ms / 1000 + 1e-9
    # One more sequence would break TPOT (or the batch is already at vLLM's cap).
    share = cap.qps * prof.prefill_s(1155)
    assert cap.batch == 256 or prof.tpot_s(cap.batch + 1) / (1 - share) > tier.tpot_ms / 1000
    assert cap.output_tokens_per_s == pytest.approx(cap.qps * 211)
    assert cap.memory_needed_gb <= H100.memory_gb * GPU_MEMORY_UTILIZATION


def test_looser_tiers_serve_more_per_replica() -> None:
    prof = profile(LLAMA_8B, H100, Quantization.FP8)
    rates = [replica_capacity(LLAMA_8B, prof, TIERS[t], 1155, 211).qps
             for t in (Tier.INTERACTIVE, Tier.STANDARD, Tier.BATCH)]
    assert rates == sorted(rates) and rates[0] > 0


def test_latency_limited_rate_is_below_saturation() -> None:
    # Saturated throughput would be batch / service time; the TTFT bound must leave queueing room.
    prof = profile(LLAMA_8B, H100, Quantization.FP8)
    cap = replica_capacity(LLAMA_8B, prof, TIERS[Tier.INTERACTIVE], 1155, 211)
    saturated = cap.batch / (prof.prefill_s(1155) + 211 * cap.tpot_tail_s)
    assert cap.qps < saturated


def test_tier_unmeetable_at_batch_one_names_model_and_fix() -> None:
    prof = profile(LLAMA_70B, SliceKind(GpuModel.A100_80GB, tensor_parallel=2))
    with pytest.raises(TierUnmeetable, match=r"llama-3.3-70b-instruct.*interactive.*looser tier") as err:
        replica_capacity(LLAMA_70B, prof, TIERS[Tier.INTERACTIVE], 1155, 211)
    assert err.value.miss > 1


def test_model_too_big_for_the_slice() -> None:
    prof = profile(LLAMA_70B, SliceKind(GpuModel.L4))
    with pytest.raises(DoesNotFit, match=r"llama-3.3-70b-instruct.*bigger slice"):
        replica_capacity(LLAMA_70B, prof, TIERS[Tier.BATCH], 1155, 211)


def test_kv_capacity_is_what_is_left_beside_the_weights() -> None:
    tokens = kv_token_capacity(LLAMA_8B, 16.07, 80)
    assert tokens == int((80 * GPU_MEMORY_UTILIZATION - 16.07) * 1e9 / LLAMA_8B.kv_bytes_per_token)
    assert kv_token_capacity(LLAMA_8B, 100, 80) == 0


def test_growth_rate_sets_the_headroom() -> None:
    tier = TIERS[Tier.STANDARD]
    default = region_replicas(10, 1.0, 3, tier, 20)  # a cold start too short for the trace to grow
    assert default.headroom == tier.burst_headroom and "burst_headroom" in default.headroom_source
    grown = region_replicas(10, 1.0, 3, tier, 900, growth_per_s=0.001)
    assert grown.headroom == pytest.approx(0.9)
    # 19 survivors of the fullest zone: 29 leaves 29 - ceil(29 / 3) = 19, 28 leaves 18.
    assert grown.max_replicas == 29


def test_zone_surplus_formula() -> None:
    # 10 x 1.1 = 11 survivors: 17 over 3 zones is 6/6/5 and leaves 11; 16 (6/5/5) leaves 10.
    r = region_replicas(10, 1.0, 3, TIERS[Tier.BATCH], 10)
    assert (r.needed_at_peak, r.per_zone_max, r.max_replicas) == (10, 6, 17)
    single = region_replicas(10, 1.0, 1, TIERS[Tier.BATCH], 10)
    assert not single.survives_zone_loss and single.max_replicas == 11


def test_a_floor_that_is_also_the_peak_keeps_a_zone_of_room() -> None:
    """Peak 1 req/s on replicas of 10: one replica carries it, the zone spread makes that one a
    zone (3) for both bounds, and the lost-pod term needs a zone's share of the floor (1) above
    the floor, so max is 4; its fullest zone holds 2, so a zone lost leaves 2 x 10 req/s."""
    r = region_replicas(1, 10.0, 3, TIERS[Tier.BATCH], 10)
    assert (r.min_replicas, r.max_replicas, r.per_zone_max) == (3, 4, 2)
    assert r.capacity_qps(10.0, zones_lost=1) == 20.0
    # Where the spread already leaves that room, max is the spread's: 17 over a floor of 3.
    assert region_replicas(10, 1.0, 3, TIERS[Tier.BATCH], 10).max_replicas == 17
    # One zone: nothing to fail over to, so no room is added.
    assert region_replicas(1, 10.0, 1, TIERS[Tier.BATCH], 10).max_replicas == 1


@given(peak=st.floats(0.01, 5000), rate=st.floats(0.001, 50), zones=st.integers(2, 6),
       tier=st.sampled_from(list(TIERS.values())), cold=st.floats(10, 2000),
       growth=st.one_of(st.none(), st.floats(0, 0.01)))
def test_capacity_covers_peak_with_one_zone_lost(peak, rate, zones, tier, cold, growth) -> None:
    r = region_replicas(peak, rate, zones, tier, cold, growth)
    assert r.capacity_qps(rate, zones_lost=1) >= peak * (1 - 1e-9)
    assert r.capacity_qps(rate) >= peak * (1 + r.headroom) * (1 - 1e-9)
    assert zones <= r.min_replicas <= r.max_replicas
    # The floor's survivors of its fullest zone carry the headroom's share of peak.
    survivors = r.min_replicas - -(-r.min_replicas // zones)
    held = min(peak * min(r.headroom, 1.0), r.capacity_qps(rate, zones_lost=1))
    assert survivors * rate >= held * (1 - 1e-9)
    # Room for the lost-pod term: a zone's share of the floor above it.
    assert r.max_replicas - r.min_replicas >= -(-r.min_replicas // zones)
    assert r.per_zone_max * zones >= r.max_replicas > (r.per_zone_max - 1) * zones


@given(card=st.sampled_from(list(CATALOG.values())),
       gpu=st.sampled_from([GpuModel.L40S, GpuModel.H100_80GB, GpuModel.MI300X]),
       tier=st.sampled_from(list(TIERS.values())), tokens_in=st.integers(64, 8000),
       tokens_out=st.integers(1, 1000))
def test_no_operating_point_exceeds_memory_or_tier(card, gpu, tier, tokens_in, tokens_out) -> None:
    kind = SliceKind(gpu)
    try:
        cap = replica_capacity(card, profile(card, kind), tier, tokens_in, tokens_out)
    except (DoesNotFit, TierUnmeetable):
        return
    assert cap.memory_needed_gb <= kind.memory_gb * GPU_MEMORY_UTILIZATION + 1e-6
    assert cap.ttft_tail_s <= tier.ttft_ms / 1000 + 1e-9
    assert cap.tpot_tail_s <= tier.tpot_ms / 1000 + 1e-9
    assert cap.batch >= 1 and cap.qps > 0


def test_prompt_factors_are_the_traces_quantiles() -> None:
    # The tail prompt the capacity model assumes, recomputed from the Azure 2023 traces: at each
    # tabled percentile the larger of the two traces' quantile / mean, within the table's rounding.
    import csv

    import numpy as np

    from serving.capacity import PROMPT_FACTORS
    from tests.conftest import SHARED

    ratios = []
    for name in ("conv", "code"):
        path = SHARED / "traces" / f"azure2023_AzureLLMInferenceTrace_{name}.csv"
        with path.open(newline="") as fh:
            tokens = np.array([int(r["ContextTokens"]) for r in csv.DictReader(fh)], dtype=float)
        ratios.append({p: float(np.quantile(tokens, p / 100) / tokens.mean()) for p, _ in PROMPT_FACTORS})
    for p, factor in PROMPT_FACTORS:
        assert abs(max(r[p] for r in ratios) - factor) <= 0.035, p
