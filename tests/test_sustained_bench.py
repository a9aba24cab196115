"""benchmarks/sustained_peak.py: the hour it replays is the top of a daily cycle, at the peak rate
throughout, with the conversation trace's lengths; a policy passes only when every item does."""

from __future__ import annotations

import math

import numpy as np

from serving.simulator import Trace
from tests.test_benchmarks import _load


def test_the_peak_hour_holds_the_peak_rate_for_the_whole_hour() -> None:
    bench = _load("sustained_peak")
    rng = np.random.default_rng(1)
    lengths = Trace(np.arange(2000.0), rng.integers(100, 2000, 2000), rng.integers(10, 400, 2000))
    hour = bench.peak_hour(lengths)
    assert 0.0 <= hour.arrival_s[0] and hour.arrival_s[-1] < 3600.0
    # By hand: the rate is min + (peak - min)(1 - cos(2 pi t / day)) / 2, whose mean over the 30
    # minutes either side of the peak is peak - (peak - min)(1 - sin(x) / x) / 2 with
    # x = 2 pi 1800 / 86400: 10 - 6.667 x 0.002853 / 2 = 9.9905 req/s; Poisson's spread over an
    # hour is sqrt(36,000) / 3600 = 0.053 req/s.
    x = 2 * math.pi * 1800 / 86400
    mean = 10.0 - (10.0 - 10.0 / 3) * (1 - math.sin(x) / x) / 2
    assert abs(len(hour) / 3600.0 - mean) < 4 * math.sqrt(mean * 3600) / 3600
    tens = np.histogram(hour.arrival_s, bins=6, range=(0.0, 3600.0))[0] / 600.0
    assert np.all(np.abs(tens - mean) < 4 * math.sqrt(mean * 600) / 600)  # no 10 minutes off the peak
    assert set(np.unique(hour.prompt_tokens)) <= set(lengths.prompt_tokens.tolist())


def test_a_policy_passes_only_when_every_item_does() -> None:
    bench = _load("autoscaling")
    good = {"meets_slo": True, "tail_at_peak": {"status": "PASS"}, "zone_loss": {"status": "PASS"},
            "zone_loss_any_moment": {"status": "PASS"}}
    assert bench.passes_checklist(good)
    for key, bad in (("meets_slo", False), ("tail_at_peak", {"status": "FAIL"}),
                     ("zone_loss", {"status": "FAIL"}), ("zone_loss_any_moment", {"status": "FAIL"})):
        assert not bench.passes_checklist({**good, key: bad})


def test_the_sweep_edge_counts_in_flight_kills_among_the_bad(tmp_path) -> None:
    """benchmarks/sweep_edge.py on dev's 1B: three moments a draw, and every bad request count
    holds the requests killed in flight (a subset of the bad ones, by the checklist's definition)."""
    import json

    bench = _load("sweep_edge")
    out = tmp_path / "edge.json"
    assert bench.main(["--stack", "dev", "--model", "llama-1b", "--seeds", "0", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["at_s"] - rows[0]["at_s"] for r in rows] == [0.0, 300.0, 600.0]
    assert all(0 <= r["failed_in_flight"] <= r["bad"] <= r["requests"] for r in rows)
    # The later a moment, the fewer requests its cut window holds.
    assert rows[0]["requests"] > rows[1]["requests"] > rows[2]["requests"]


def test_beyond_the_peak_the_hour_reaches_the_tiers_burst_headroom_above_it() -> None:
    """--beyond-peak: dev's llama-1b is batch tier, whose burst headroom is 10 % (serving/tiers.py,
    read by hand), so the hour's busiest minute carries 1.1 x its stated peak, within a request."""
    from tests.test_benchmarks import _deployment

    bench = _load("sustained_peak")
    mp, _ = _deployment("dev", "llama-1b")
    assert mp.tier == "batch"
    rng = np.random.default_rng(2)
    lengths = Trace(np.arange(2000.0), rng.integers(100, 2000, 2000), rng.integers(10, 400, 2000))
    hour = bench.peak_hour(lengths)
    stated, one = bench.hour_for(mp, hour, False)
    beyond, over = bench.hour_for(mp, hour, True)
    assert (one, over) == (1.0, 1.1)
    assert abs(stated.peak_qps(60.0) - mp.peak_qps) <= 1 / 60 + 1e-9
    assert abs(beyond.peak_qps(60.0) - 1.1 * mp.peak_qps) <= 1 / 60 + 1e-9
