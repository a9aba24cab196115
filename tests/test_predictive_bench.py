"""benchmarks/predictive.py: the variants' queries are the plan's with only the growth term
changed, Prometheus accepts them, and they ask for the replicas a hand calculation gives."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from serving.autoscaling import RUNNING, SUCCESS, WAITING
from serving.simulator.promql import Store, evaluate
from tests import promtool
from tests.test_benchmarks import _deployment, _load


def _store(dep, rate_at, until_s: float, in_flight: float = 1.0) -> Store:
    """Three pods' completion counters growing at rate_at(t) / 3 each, scraped every 15 s from 0,
    and `in_flight` running requests a pod (small: the zone branch decides)."""
    store = Store()
    a = dep.plan.autoscaling
    served = a.query.split('model_name="')[1].split('"')[0]
    done = 0.0
    for i in range(int(until_s // 15) + 1):
        t = 15.0 * i
        for pod in "abc":
            labels = (("model_name", served), ("namespace", "rtip-models"), ("pod", pod))
            store.add(t, SUCCESS, labels, done / 3)
            store.add(t, RUNNING, labels, in_flight)
            store.add(t, WAITING, labels, 0.0)
        done += 15.0 * rate_at(t + 7.5)  # the midpoint rule: exact for a linear rate
    return store


def test_the_stated_variant_is_the_plans_query_and_the_others_change_only_the_growth() -> None:
    bench = _load("predictive")
    mp, dep = _deployment("prod", "llama-70b")
    assert bench.variant_query(dep, "stated") == mp.autoscaling.query
    for variant in bench.VARIANTS[1:]:
        q = bench.variant_query(dep, variant)
        assert q != mp.autoscaling.query and f"{mp.autoscaling.threshold:g}, scalar(" in q
        assert ("predict_linear(" in q) == variant.startswith("predict-")


def test_prometheus_accepts_every_variant(tmp_path: Path) -> None:
    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    rules = [{"record": f"rtip:variant_{i}", "expr": bench.variant_query(dep, v)}
             for i, v in enumerate(bench.VARIANTS)]
    done = promtool.check_rules([{"name": "variants", "rules": rules}], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_variants_ask_for_the_replicas_a_hand_calculation_gives() -> None:
    """A completion rate ramping from 6 req/s by 1/500 req/s a second. At t = 1,500 s the 1-minute
    rate reads the samples at 1,455-1,500 s (the window is left-open), so it is the mean rate over
    that span, the rate at its midpoint 22.5 s back: 6 + 1,477.5 / 500 = 8.955. Every 1-minute
    rate in the last 20 minutes lags the same 22.5 s (none reaches the counters' first minute), so
    the line through them is the rate itself shifted, and one cold start C ahead it predicts
    8.955 + C / 500. The branch is load x k + T with k = T / zone rate (T (1 + h) / zone rate
    for stated, whose load x (1 + h) is held at the ceiling)."""
    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    a = dep.plan.autoscaling
    cold = dep.fleet.cold_start.full_s
    t = 1500.0
    store = _store(dep, lambda s: 6.0 + s / 500.0, t)
    now = 6.0 + 1477.5 / 500.0
    ahead = now + cold / 500.0
    k = round(a.threshold / a.zone_rate_qps, 4)

    def load_seen(variant: str, on: Store = store, k: float = k) -> float:
        (value,) = evaluate(bench.variant_query(dep, variant), on, t).values()  # type: ignore[union-attr]
        return (value - a.threshold) / k

    assert load_seen("none") == pytest.approx(now, rel=1e-9)
    assert load_seen("predict-10m") == pytest.approx(ahead, rel=1e-9)
    assert load_seen("predict-20m") == pytest.approx(ahead, rel=1e-9)
    stated = min(now * (1 + a.headroom), a.ceiling_qps)
    assert load_seen("stated", k=round(a.threshold * (1 + a.headroom) / a.zone_rate_qps, 4)) == \
        pytest.approx(stated / (1 + a.headroom), rel=1e-9)
    # Replicas asked for, 1 + load / zone rate rounded up: the 70B's 1.68 req/s a survivor,
    # cold start 752 s and headroom 0.396 give 7, 8 and 9.
    assert [1 + math.ceil(x / a.zone_rate_qps) for x in (now, ahead, stated)] == [7, 8, 9]
    # A flat rate predicts itself: the prediction adds nothing, where the stated growth would.
    flat = _store(dep, lambda s: 8.0, t)
    assert load_seen("predict-5m", flat) == pytest.approx(8.0, rel=1e-9)
