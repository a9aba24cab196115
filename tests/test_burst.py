"""The growth table is the Azure conversation trace's, and sets the headroom where it is larger."""

from __future__ import annotations

import json

import numpy as np
import pytest

from serving.burst import DATA, growth_within
from serving.capacity import region_replicas
from serving.simulator import load_azure_2023
from serving.tiers import TIERS, Tier
from tests.conftest import SHARED

CONV = SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv"


def _rises(minutes: int) -> float:
    """Recomputed by a second method: every pair of minutes at most `minutes` apart."""
    arrivals = load_azure_2023(CONV).arrival_s
    counts = np.bincount((arrivals // 60).astype(int))
    best = 0
    for i in range(len(counts)):
        for j in range(i + 1, min(len(counts), i + minutes + 1)):
            best = max(best, counts[j] - counts[i])
    return best / counts.max()


def test_table_is_the_traces_largest_rise() -> None:
    raw = json.loads(DATA.read_text())
    table = dict(zip(raw["windows_min"], raw["growth"], strict=True))
    for minutes in (1, 3, 10, 30):
        assert abs(table[minutes] - _rises(minutes)) < 1e-4, minutes
    assert list(raw["growth"]) == sorted(raw["growth"])  # within at most a window: never falls


def test_growth_within_interpolates_the_table() -> None:
    raw = json.loads(DATA.read_text())
    table = dict(zip(raw["windows_min"], raw["growth"], strict=True))
    assert growth_within(180) == table[3]
    assert growth_within(150) == pytest.approx((table[2] + table[3]) / 2)
    assert growth_within(30) == table[1] / 2
    assert growth_within(10_000) == table[30]


def test_the_larger_of_tier_and_trace_is_held() -> None:
    batch, interactive = TIERS[Tier.BATCH], TIERS[Tier.INTERACTIVE]
    # Batch holds 10 %; the trace grows more within 200 s: the trace's figure is held.
    r = region_replicas(10, 1.0, 3, batch, 200)
    assert r.headroom == growth_within(200) > batch.burst_headroom and "trace" in r.headroom_source
    # Within 20 s the trace grows less than interactive's 30 %: the tier's figure is held.
    r = region_replicas(10, 1.0, 3, interactive, 20)
    assert r.headroom == interactive.burst_headroom and "burst_headroom" in r.headroom_source
