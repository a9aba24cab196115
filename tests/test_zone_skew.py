"""benchmarks/zone_skew.py's reading of the sampled series: hand-built samples, hand-counted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.test_benchmarks import _load


def _skew() -> Any:
    return _load("zone_skew").skew


SERIES = {"t": [0.0, 5.0, 10.0, 15.0, 20.0], "ready": [6, 6, 5, 5, 7], "fullest_ready": [2, 3, 2, 3, 3],
          "running": [10, 12, 10, 11, 10], "waiting": [0, 1, 0, 0, 0]}


def test_the_fullest_zone_above_its_even_share_and_the_moment_to_lose_it() -> None:
    """Ready 6, 6, 5, 5, 7 over three zones: even shares 2, 2, 2, 2, 3. The fullest zone held 2, 3,
    2, 3, 3: above it at 5 s and 15 s (two of five samples), by one at most. Of the two, the loss
    goes where more requests are in flight: 13 at 5 s against 11 at 15 s."""
    found = _skew()(SimpleNamespace(series=SERIES), 3, 20.0)
    assert found == {"samples": 5, "skewed_share": 0.4, "most_above_even": 1, "worst_at_s": 5.0,
                     "worst_in_window": 1}


def test_only_a_moment_a_whole_window_can_follow_is_lost() -> None:
    """The last moment with a whole window after it counts (15 s, inclusive); past it none is lost,
    though the share and the most above even still read the whole run."""
    skew = _skew()
    busier_later = {**SERIES, "running": [10, 10, 10, 12, 10], "waiting": [0, 0, 0, 0, 0]}
    assert skew(SimpleNamespace(series=busier_later), 3, 15.0)["worst_at_s"] == 15.0
    assert skew(SimpleNamespace(series=busier_later), 3, 14.9)["worst_at_s"] == 5.0
    early = skew(SimpleNamespace(series=SERIES), 3, 4.0)
    assert early["worst_at_s"] is None and early["worst_in_window"] == 0
    assert early["skewed_share"] == 0.4 and early["most_above_even"] == 1


def test_the_zone_loss_benchmarks_replay_the_draw_their_seed_names() -> None:
    """`--seed` of benchmarks/lost_pods.py, failover.py and zone_skew.py: each case replays that
    draw of the rate scaling (drawn here through `trace_for` on its own; seed 0's differs), and a
    later draw is written beside the first, never over it."""
    import numpy as np

    from serving.simulator import poisson
    from stacks.simulation import select, trace_for
    from tests.conftest import plan_of

    lost_pods = _load("lost_pods")
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-3b")
    base = poisson(mp.peak_qps / 3, 240.0, (1155, 211), seed=8)
    drawn = {seed: lost_pods.setup(plan, base, "llama-3b", 60.0, seed)[1].arrival_s for seed in (0, 1)}
    for seed, arrivals in drawn.items():
        assert np.array_equal(arrivals, trace_for(mp, base, seed=seed).arrival_s)
    assert len(drawn[0]) != len(drawn[1])
    out = lost_pods.OUT
    assert lost_pods.seeded(out, 0) == out
    assert lost_pods.seeded(out, 2) == out.with_name("lost_pods_seed2.json")


def test_the_zone_is_lost_just_after_the_most_skewed_sample_a_whole_window_follows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`case` wiring: the run's samples go to `skew` with the last whole-window start (less the
    step after the sample), and the zone loss is judged just after the sample `skew` picked (the
    simulator takes a failure before the autoscaler's decision at one instant and samples after it)."""
    import numpy as np

    from serving.simulator import poisson
    from stacks.simulation import select
    from stacks.slo_check import last_whole_window_start
    from tests.conftest import plan_of

    module = _load("zone_skew")
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-3b")
    base = poisson(mp.peak_qps, 1500.0, (1155, 211), seed=6)
    t = np.arange(0.0, 1500.0, 5.0)
    ready = np.full(len(t), 6.0)
    fullest = np.where(t == 400.0, 3.0, 2.0)  # one sample a replica above the even 2/2/2
    series = {"t": t, "ready": ready, "fullest_ready": fullest, "emptiest_ready": 4.0 - fullest,
              "running": ready, "waiting": 0 * t}
    replayed: list[str] = []
    fleets: list[Any] = []

    def replay(dep: Any, trace: Any) -> tuple[Any, list[float]]:
        replayed.append(dep.scaled_object["triggers"][0]["metadata"]["query"])
        fleets.append(dep.fleet)
        return SimpleNamespace(series=series), [4.0] * len(t)
    monkeypatch.setattr(module, "replay", replay)
    monkeypatch.setattr(module, "figures", lambda result, dep: {"gpu_hours": 1.0, "node_gpu_hours": 2.0})
    lost: list[float] = []

    def zone_loss_at(dep: Any, trace: Any, policy: str, at: float) -> dict[str, Any]:
        lost.append(at)
        return {"zone": "z", "at_s": at, "status": "PASS", "bad": 0, "failed_in_flight": 0, "requests": 1,
                "bad_share": 0.0, "error_budget": 0.01}
    monkeypatch.setattr(module.bench, "zone_loss_at", zone_loss_at)
    row = module.case(plan, base, "llama-3b", None)
    dep, trace, _ = module.lost_pods.setup(plan, base, "llama-3b", None)
    latest = last_whole_window_start(trace.arrival_s, module.bench.zone_loss_window_s(dep))
    assert latest > 400.0  # the skewed sample has a whole window after it
    # Three fleets are replayed: the plan's, the drift term's, the plan's with zone deletion costs;
    # each is lost at its own worst sample, which here is the plan's too (400 s), so each once.
    assert row["worst_at_s"] == 400.0 and lost == [400.0 + module.AFTER_SAMPLE_S] * 3
    assert row["skewed_share"] == round(1 / len(t), 4) and row["most_above_even"] == 1
    assert replayed[0] == replayed[2] == dep.scaled_object["triggers"][0]["metadata"]["query"]
    assert "by (zone)" not in replayed[0] and "by (zone)" in replayed[1]
    assert [f.deletion_cost_by_zone for f in fleets] == [False, False, True]
    for variant in ("drift_term", "zone_deletion_cost"):
        assert row[variant]["zone_loss_at_plans_worst"]["at_s"] == 400.0 + module.AFTER_SAMPLE_S
    assert row["at_worst"] == {"ready": 6, "fullest_ready": 3, "emptiest_ready": 1, "survivors_wanted": 4.0}
    assert row["zone_deletion_cost"]["at_plans_worst"] == row["at_worst"]
    # Outside the fullest zone 4 ready (3 at 400 s) against S = 4: short at one sample.
    assert row["survivors_short_share"] == row["drift_term"]["survivors_short_share"] == round(1 / len(t), 4)


def test_survivors_short_counts_the_samples_whose_other_zones_hold_fewer_than_s() -> None:
    """Ready 6, 6, 5, 5, 7 with the fullest zone at 2, 3, 2, 3, 3: outside it 4, 3, 3, 2, 4.
    Against S = 3, 4, 3, 3, NaN (no read): short at 5 s (3 < 4) and 15 s (2 < 3), two of five."""
    short = _load("zone_skew").survivors_short
    assert short(SimpleNamespace(series=SERIES), [3.0, 4.0, 3.0, 3.0, float("nan")]) == 0.4
    assert short(SimpleNamespace(series=SERIES), [2.0] * 5) == 0.0


def test_a_failing_worst_moment_is_swept_every_60_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the plan's loss at its worst moment fails, `case` loses a zone at every moment of a
    60 s sweep of the same run and counts the failures; the worst is the largest bad share."""
    import numpy as np

    from serving.simulator import poisson
    from stacks.simulation import select
    from tests.conftest import plan_of

    module = _load("zone_skew")
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-3b")
    base = poisson(mp.peak_qps, 1500.0, (1155, 211), seed=6)
    dep, trace, _ = module.lost_pods.setup(plan, base, "llama-3b", None)
    moments = module.bench.zone_loss_moments(trace, module.bench.zone_loss_window_s(dep), 60.0)
    assert len(moments) > 4
    failing = set(moments[::2])  # every other moment of the sweep fails, by 3 of 100 requests
    t = np.arange(0.0, 1500.0, 5.0)
    series = {"t": t, "ready": np.full(len(t), 6.0), "fullest_ready": np.where(t == 400.0, 3.0, 2.0),
              "emptiest_ready": np.where(t == 400.0, 1.0, 2.0), "running": np.full(len(t), 6.0),
              "waiting": 0 * t}
    monkeypatch.setattr(module, "replay", lambda dep, trace: (SimpleNamespace(series=series), [1.0] * len(t)))
    monkeypatch.setattr(module, "figures", lambda result, dep: {"gpu_hours": 1.0, "node_gpu_hours": 2.0})
    lost: list[float] = []

    def zone_loss_at(dep: Any, trace: Any, policy: str, at: float) -> dict[str, Any]:
        lost.append(at)
        bad = 3 if at in failing else 2 if at == 400.0 + module.AFTER_SAMPLE_S else 0
        return {"zone": "z", "at_s": at, "status": "FAIL" if bad else "PASS", "bad": bad,
                "failed_in_flight": 1, "requests": 100, "bad_share": bad / 100, "error_budget": 0.01}
    monkeypatch.setattr(module.bench, "zone_loss_at", zone_loss_at)
    row = module.case(plan, base, "llama-3b", None)
    assert row["zone_loss_at_worst"]["status"] == "FAIL" and lost[-len(moments):] == moments
    sweep = row["dense_sweep"]
    assert (sweep["every_s"], sweep["moments"], sweep["failed"]) == (60.0, len(moments), len(failing))
    assert sweep["worst"]["bad_share"] == 0.03 and sweep["worst"]["at_s"] == moments[0]
    assert "dense_sweep" not in row["drift_term"]  # the plan's alone


def test_a_variant_whose_worst_moment_differs_is_also_lost_at_the_plans(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The zone-deletion-cost fleet skews at 500 s where the plan and the drift term skew at 400 s:
    it is lost at both, its fleet read at the plan's 400 s off its own samples (even there)."""
    import numpy as np

    from serving.simulator import poisson
    from stacks.simulation import select
    from tests.conftest import plan_of

    module = _load("zone_skew")
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-3b")
    base = poisson(mp.peak_qps, 1500.0, (1155, 211), seed=6)
    t = np.arange(0.0, 1500.0, 5.0)

    def series(skewed_at: float) -> dict[str, Any]:
        fullest = np.where(t == skewed_at, 3.0, 2.0)
        return {"t": t, "ready": np.full(len(t), 6.0), "fullest_ready": fullest,
                "emptiest_ready": 4.0 - fullest, "running": np.full(len(t), 6.0), "waiting": 0 * t}
    monkeypatch.setattr(module, "replay", lambda dep, trace: (SimpleNamespace(
        series=series(500.0 if dep.fleet.deletion_cost_by_zone else 400.0)), [1.0] * len(t)))
    monkeypatch.setattr(module, "figures", lambda result, dep: {"gpu_hours": 1.0, "node_gpu_hours": 2.0})
    lost: list[tuple[bool, float]] = []

    def zone_loss_at(dep: Any, trace: Any, policy: str, at: float) -> dict[str, Any]:
        lost.append((dep.fleet.deletion_cost_by_zone, at))
        return {"zone": "z", "at_s": at, "status": "PASS", "bad": 0, "failed_in_flight": 0, "requests": 1,
                "bad_share": 0.0, "error_budget": 0.01}
    monkeypatch.setattr(module.bench, "zone_loss_at", zone_loss_at)
    row = module.case(plan, base, "llama-3b", None)
    after = module.AFTER_SAMPLE_S
    assert sorted(at for costed, at in lost if costed) == [400.0 + after, 500.0 + after]
    cost = row["zone_deletion_cost"]
    assert cost["zone_loss_at_worst"]["at_s"] == 500.0 + after
    assert cost["zone_loss_at_plans_worst"]["at_s"] == 400.0 + after
    assert cost["at_plans_worst"] == {"ready": 6, "fullest_ready": 2, "emptiest_ready": 2,
                                      "survivors_wanted": 1.0}
