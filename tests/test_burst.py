"""The growth table is the Azure conversation trace's, and sets the headroom where it is larger."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from serving.burst import DATA, TRAFFIC, growth_within
from serving.capacity import region_replicas
from serving.simulator import load_azure_2023
from serving.tiers import TIERS, Tier
from tests.conftest import SHARED

CONV = SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv"
CODE = SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_code.csv"


def _rises(minutes: int, trace=CONV) -> float:
    """Recomputed by a second method: every pair of minutes at most `minutes` apart."""
    arrivals = load_azure_2023(trace).arrival_s
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


def test_code_traffic_takes_the_code_traces_table() -> None:
    raw = json.loads(TRAFFIC["code"].read_text())
    table = dict(zip(raw["windows_min"], raw["growth"], strict=True))
    for minutes in (1, 3, 10, 30):
        assert abs(table[minutes] - _rises(minutes, CODE)) < 1e-4, minutes
    # The code trace rises from an empty minute to its busiest within one minute.
    assert _rises(1, CODE) == 1.0 and growth_within(700, "code") == 1.0
    assert growth_within(700) < 0.5  # the conversation trace, the default


def test_code_traffic_puts_the_peak_under_the_floor_with_a_zone_lost() -> None:
    standard = TIERS[Tier.STANDARD]
    # Peak 10 req/s at 1 req/s a replica over three zones, a 700 s cold start. Code traffic can
    # grow by the whole peak within it: max = ceil(10 x 2 / 2) x 3 = 30; min holds the headroom
    # alone, 10 replicas, spread so a zone lost keeps them: ceil(10 / 2) x 3 = 15.
    r = region_replicas(10, 1.0, 3, standard, 700, traffic="code")
    assert r.headroom == 1.0 and "code" in r.headroom_source
    assert (r.min_replicas, r.max_replicas) == (15, 30)
    conv = region_replicas(10, 1.0, 3, standard, 700)
    assert conv.headroom == growth_within(700) and conv.min_replicas < r.min_replicas


def test_a_stack_states_its_traffic_and_the_plan_sizes_for_it() -> None:
    import copy

    from rtip.stackfile import load
    from stacks.plan import load_plan

    config = load("dev")
    raw = copy.deepcopy(config.platform)
    raw["models"][0]["traffic"] = "code"
    for region in raw["regions"]:  # twice the peak at max: dev's pools are sized for chat traffic
        for pool in region.get("gpu_pools", []):
            pool["max_nodes"] *= 4
    name = raw["models"][0]["name"]
    code_plan = load_plan(raw, config.source)
    code = next(m for m in code_plan.models if m.model == name)
    conv = next(m for m in load_plan(config.platform, config.source).models if m.model == name)
    assert conv.headroom < 1.0 <= code.headroom
    # The floor holds the whole peak with a zone lost: ceil(peak / rate) over Z - 1 zones, x Z.
    zones = len(code_plan.region(code.region).pool(code.pool).zones)
    needed = math.ceil(code.peak_qps * min(code.headroom, 1.0) / code.capacity.qps)
    assert code.min_replicas == max(zones, math.ceil(needed / (zones - 1)) * zones)
    assert code.min_replicas >= conv.min_replicas
    assert "(code traffic)" in code.replicas_source and "(conversation traffic)" in conv.replicas_source


def test_the_stack_schema_offers_exactly_the_shipped_growth_tables() -> None:
    from typing import get_args

    from stacks.schema import ModelSpec

    offered = get_args(ModelSpec.model_fields["traffic"].annotation)
    assert set(offered) == set(TRAFFIC) and all(path.exists() for path in TRAFFIC.values())


def _dev_with(**model: object):
    import copy

    from rtip.stackfile import load
    from stacks.plan import load_plan

    config = load("dev")
    raw = copy.deepcopy(config.platform)
    raw["models"][0].update(model)
    for region in raw["regions"]:  # room for up to twice the peak at max
        for pool in region.get("gpu_pools", []):
            pool["max_nodes"] *= 4
    name = raw["models"][0]["name"]
    return next(m for m in load_plan(raw, config.source).models if m.model == name)


def test_a_stated_growth_rate_sets_the_headroom_over_the_cold_start() -> None:
    """5 % of peak a minute over the plan's own cold start, worked by hand; max holds the peak
    plus it with a zone lost: ceil(ceil(peak (1 + h) / rate) / (Z - 1)) x Z."""
    stated = _dev_with(growth_per_minute=0.05)
    by_hand = max(stated.tier_spec.burst_headroom, min(0.05 * stated.cold_start.total_s / 60, 1.0))
    assert stated.headroom == pytest.approx(by_hand)
    # Neither the cap nor the tier's own headroom decides this case: the stated growth does.
    assert stated.tier_spec.burst_headroom < 0.05 * stated.cold_start.total_s / 60 < 1.0
    zones = 3
    high = math.ceil(stated.peak_qps * (1 + by_hand) / stated.capacity.qps - 1e-9)
    assert stated.max_replicas == math.ceil(high / (zones - 1)) * zones
    assert "(growth 0.05 of peak a minute)" in stated.replicas_source


def test_the_whole_peak_within_a_minute_is_the_code_trace() -> None:
    """A second method, at the cap: the code trace rises from nothing to its busiest minute
    within one minute (its growth table's first row), so stating 1.0 of peak a minute must plan
    exactly as `traffic: code` does (both capped at the whole peak over a longer cold start).
    Below the cap the first test's hand calculation stands alone."""
    assert growth_within(60, "code") == 1.0
    stated, code = _dev_with(growth_per_minute=1.0), _dev_with(traffic="code")
    assert stated.cold_start.total_s > 60
    assert (stated.headroom, stated.min_replicas, stated.max_replicas) == (
        code.headroom, code.min_replicas, code.max_replicas) == (1.0, code.min_replicas, code.max_replicas)


@pytest.mark.parametrize(("model", "path", "words"), [
    ({"growth_per_minute": 0.1, "traffic": "code"}, "models[0].growth_per_minute",
     "states the traffic's growth, and so does `traffic: code`; keep one of the two"),
    ({"growth_per_minute": 1.5}, "models[0].growth_per_minute", "must be at most 1 (got 1.5)"),
    ({"growth_per_minute": 0}, "models[0].growth_per_minute", "must be more than 0 (got 0)"),
])
def test_a_bad_growth_statement_is_named(tmp_path, capsys, model: dict, path: str, words: str) -> None:
    import copy

    from tests.conftest import stack_doc, write_stack
    from tests.test_bad_input import plan_fails

    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    platform["models"][0].update(model)
    err = plan_fails(capsys, write_stack(tmp_path, platform))
    assert f"rtip:platform.{path}:" in err and words in err


def test_the_code_traces_sharpest_ten_seconds_are_the_readmes() -> None:
    """The README and serving/autoscaling.py say the code trace's sharpest burst runs ten seconds
    at 3.4x its busiest minute's rate at 855-865 s. Read here from the CSV with the standard
    library alone (not the simulator's loader): the busiest 10 s and 60 s windows, each starting
    at an arrival."""
    import csv
    from datetime import datetime

    with CODE.open(newline="") as f:
        rows = csv.DictReader(f)
        stamps = sorted(datetime.fromisoformat(row["TIMESTAMP"][:26]).timestamp() for row in rows)
    t = [s - stamps[0] for s in stamps]

    def busiest(width: float) -> tuple[int, float]:
        best, at, j = 0, 0.0, 0
        for i, start in enumerate(t):
            while j < len(t) and t[j] < start + width:
                j += 1
            if j - i > best:
                best, at = j - i, start
        return best, at

    (n10, at10), (n60, _) = busiest(10.0), busiest(60.0)
    assert 855.0 <= at10 < 856.0
    assert round((n10 / 10) / (n60 / 60), 1) == 3.4
