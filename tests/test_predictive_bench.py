"""benchmarks/predictive.py: the variants' queries are the plan's with only the growth term
changed, Prometheus accepts them, and they ask for the replicas a hand calculation gives."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from serving.autoscaling import (
    POLLING_INTERVAL_S,
    RUNNING,
    SUCCESS,
    WAITING,
    completion_rate,
    in_flight_sum,
    with_lost_pods,
)
from serving.persistence import persistent
from serving.simulator.promql import Store, evaluate
from serving.zone_branch import zone_query
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


def test_the_5_minute_fit_is_the_plans_query_and_the_others_change_only_the_growth() -> None:
    """Built from its load, the 5-minute fit is the plan's query (its window PREDICT_WINDOW, its
    horizon the plan's cold start); every variant keeps the plan's tail (the rounding to whole
    survivors and replicas, the in-flight branch, the floor and the lost-pod term) and its cap
    at the stated ceiling, in survivors; stated reads the rate x (1 + h) a survivor's worth."""
    from serving.zone_branch import PREDICT_WINDOW

    bench = _load("predictive")
    mp, dep = _deployment("prod", "llama-70b")
    a = mp.autoscaling
    plan_query = a.query
    # The cap, in survivors, is written rounded up to 3 decimals: never under the stated ceiling.
    found = re.search(r", ([0-9.]+)\)\) \* 3 / 2 \* " + re.escape(f"{a.threshold:g}, scalar("), plan_query)
    assert found is not None
    exact = a.ceiling_qps / a.survivor_qps
    assert exact <= float(found.group(1)) < exact + 0.001
    tail = plan_query[found.start():]
    assert tail.endswith(f" + {a.threshold:g} * ({a.lost})") and "up{" in a.lost
    assert f"[{PREDICT_WINDOW}:15s], {mp.cold_start.total_s:g})" in plan_query
    fit = bench.variant_load(dep, f"predict-{PREDICT_WINDOW}")
    assert fit is not None and fit[1] == pytest.approx(1 / a.survivor_qps)
    rebuilt = zone_query(in_flight_sum(a.selector), fit[0], fit[1], a.ceiling_qps / a.survivor_qps, 3,
                         a.threshold)
    held = persistent(rebuilt, POLLING_INTERVAL_S)
    assert with_lost_pods(held, a.threshold, a.lost, a.min_replicas) == plan_query
    assert bench.variant_query(dep, f"predict-{PREDICT_WINDOW}") == plan_query
    stated = bench.variant_load(dep, "stated")
    assert stated is not None and stated[1] == pytest.approx((1 + a.headroom) / a.survivor_qps)
    for variant in bench.VARIANTS:
        q = bench.variant_query(dep, variant)
        assert q.startswith("clamp_min(min_over_time((clamp_min(ceil(clamp_max(") and q.endswith(tail)
        per = stated[1] if variant == "stated" else 1 / a.survivor_qps
        assert q.removesuffix(tail).endswith(f" * {round(per, 4):g}")
        assert ("predict_linear(" in q) == variant.startswith("predict-")
    # The drift variant: the plan's query with the drift term, S plus the fullest zone's serving
    # pods, beside the even spread's S Z / (Z - 1), and a PodMonitor that writes the zone.
    drift = bench.variant_deployment(dep, bench.DRIFT)
    survivors = plan_query[len("clamp_min(min_over_time((clamp_min("):plan_query.index(" * 3 / 2 * ")]
    fullest = ('max(count by (zone) (count by (namespace, pod, zone) '
               '(up{namespace="rtip-models",rtip_dev_model="llama-70b",zone!=""} == 1)))')
    assert drift.scaled_object["triggers"][0]["metadata"]["query"] == plan_query.replace(
        f"{survivors} * 3 / 2 * ",
        f"clamp_min({survivors} * 3 / 2, scalar({survivors} + ({fullest} or vector(0)))) * ", 1)
    assert drift.sim_config().zone_label == "zone" and dep.sim_config().zone_label is None


def test_prometheus_accepts_every_variant(tmp_path: Path) -> None:
    """promtool parses every variant's query, the drift term's too, and the PodMonitor the drift
    variant is scraped by validates against the prometheus-operator CRD."""
    from tests.test_crds import check

    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    rules = [{"record": f"rtip:variant_{i}", "expr": bench.variant_query(dep, v)}
             for i, v in enumerate((*bench.VARIANTS, bench.DRIFT))]
    done = promtool.check_rules([{"name": "variants", "rules": rules}], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spec = bench.variant_deployment(dep, bench.DRIFT).monitor
    assert spec["attachMetadata"] == {"node": True} and spec != dep.monitor
    check({"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
           "metadata": {"name": "llama-70b", "namespace": "rtip-models"}, "spec": spec})


def _replicas(metric: float, threshold: float) -> int:
    from serving.simulator.policies import average_value_replicas
    return average_value_replicas(metric, threshold, 1)  # from one replica: no tolerance band


def _value(query: str, store: Store, t: float) -> float:
    (value,) = evaluate(query, store, t).values()  # type: ignore[union-attr]
    return value


def test_variants_ask_for_the_replicas_a_hand_calculation_gives() -> None:
    """A completion rate ramping from 6 req/s by 1/500 req/s a second. At t = 1,500 s the 1-minute
    rate reads the samples at 1,455-1,500 s (the window is left-open), so it is the mean rate over
    that span, the rate at its midpoint 22.5 s back: 6 + 1,477.5 / 500 = 8.955. Every 1-minute
    rate in the last 20 minutes lags the same 22.5 s (none reaches the counters' first minute), so
    the line through them is the rate itself shifted, and one cold start C ahead it predicts
    8.955 + C / 500, under the stated growth's 8.955 (1 + h). The branch reads the load over a
    survivor's rate q (stated: the load x (1 + h)), rounds it up to whole survivors S and asks for
    ceil(3 S / 2) replicas."""
    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    a = dep.plan.autoscaling
    cold = dep.fleet.cold_start.full_s
    t = 1500.0
    store = _store(dep, lambda s: 6.0 + s / 500.0, t)
    now = 6.0 + 1477.5 / 500.0
    ahead = now + cold / 500.0
    assert now < ahead < now * (1 + a.headroom)  # the prediction sits inside its bounds here

    def load_seen(variant: str, on: Store = store) -> float:
        return _value(bench.variant_survivors(dep, variant), on, t) * a.survivor_qps

    # (the factors are written with 4 decimals: 0.397 for 1 / 2.519, within 2e-4)
    assert load_seen("none") == pytest.approx(now, rel=3e-4)
    assert load_seen("predict-10m") == pytest.approx(ahead, rel=3e-4)
    assert load_seen("predict-20m") == pytest.approx(ahead, rel=3e-4)
    assert load_seen("stated") == pytest.approx(min(now * (1 + a.headroom), a.ceiling_qps), rel=3e-4)
    # What the HPA asks for on each metric. By hand with the 70B's 2.519 req/s a replica, cold
    # start 752 s and headroom 0.396: 8.955 / 2.519 = 3.56, 10.459 / 2.519 = 4.15 and
    # 12.505 / 2.519 = 4.96 survivors, so 4, 5 and 5, and 6, 8 and 8 replicas (2 + 2 + 2 leave 4;
    # 3 + 3 + 2 leave 5, where 7 leave 4).
    assert [_replicas(_value(bench.variant_query(dep, v), store, t), a.threshold)
            for v in ("none", "predict-10m", "stated")] == [6, 8, 8]
    # A flat rate predicts itself: the prediction adds nothing, where the stated growth would.
    flat = _store(dep, lambda s: 8.0, t)
    assert load_seen("predict-5m", flat) == pytest.approx(8.0, rel=3e-4)


def test_a_prediction_is_held_at_the_stated_growth_and_the_ceiling() -> None:
    """A steep ramp (1/60 req/s a second from 1 req/s) at t = 600 s: the 1-minute rate is
    1 + 577.5 / 60 = 10.625 and the fit predicts far above 10.625 (1 + h), so the predictive
    variant asks for exactly what the stated growth asks for, 10.625 x 1.3964 = 14.837, which is
    above the 14.4 req/s ceiling: both hold at the ceiling."""
    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    a = dep.plan.autoscaling
    t = 600.0
    store = _store(dep, lambda s: 1.0 + s / 60.0, t)
    now = 1.0 + 577.5 / 60.0
    assert now * (1 + a.headroom) > a.ceiling_qps
    # The cap is written with 3 decimals, in survivors.
    seen = _value(bench.variant_survivors(dep, "predict-5m"), store, t) * a.survivor_qps
    assert seen == pytest.approx(a.ceiling_qps, rel=1e-3)
    # The fewest replicas whose survivors of the fullest zone, R - ceil(R / 3), carry the ceiling.
    fewest = next(r for r in range(1, 100) if (r - math.ceil(r / 3)) * a.survivor_qps >= a.ceiling_qps)
    assert _replicas(_value(bench.variant_query(dep, "predict-5m"), store, t), a.threshold) == \
        _replicas(_value(a.query, store, t), a.threshold) == fewest
    # Below the ceiling, the stated growth is the prediction's cap: halve the ramp's level.
    low = _store(dep, lambda s: (1.0 + s / 60.0) / 2, t)
    seen = _value(bench.variant_survivors(dep, "predict-20m"), low, t) * a.survivor_qps
    assert seen == pytest.approx(now / 2 * (1 + a.headroom), rel=3e-4)


def test_without_history_the_fit_falls_back_to_the_stated_growth() -> None:
    """30 s after the counters start (a fresh rollout, a new Prometheus) the 1-minute rate has
    its first values but the 5-minute subquery holds one point, so `predict_linear` is empty;
    without the `or` the whole zone branch, and the trigger, would be empty. The plan's query
    reads the stated growth then, as the stated variant does, and once the fit has history at a
    flat rate it reads the rate itself, less than the stated growth."""
    bench = _load("predictive")
    _, dep = _deployment("prod", "llama-70b")
    a = dep.plan.autoscaling
    fresh = _store(dep, lambda s: 8.0, 30.0)
    plan_share = _value(bench.variant_survivors(dep, "predict-5m"), fresh, 30.0)
    stated_share = _value(bench.variant_survivors(dep, "stated"), fresh, 30.0)
    assert plan_share == pytest.approx(stated_share, rel=3e-4)
    # (the first rate reads half the 8 req/s: Prometheus extrapolates a counter that started at
    # 0 no further back than its zero)
    rate = _value(completion_rate(a.selector), fresh, 30.0)
    assert 0 < rate < 8.0 and plan_share * a.survivor_qps == pytest.approx(rate * (1 + a.headroom), rel=3e-4)
    assert _value(a.query, fresh, 30.0) == _value(bench.variant_query(dep, "stated"), fresh, 30.0)
    later = _store(dep, lambda s: 8.0, 600.0)
    assert _value(bench.variant_survivors(dep, "predict-5m"), later, 600.0) * a.survivor_qps == \
        pytest.approx(8.0, rel=3e-4)


def test_a_scale_down_variant_changes_only_the_window_the_hpa_reads() -> None:
    """`--scale-down 90`: the simulated HPA of that run holds scale-in recommendations for 90 s
    (its behavior read from the ScaledObject as KEDA hands it over); the query, the rest of the
    behavior and the plan's own object are unchanged."""
    from serving.simulator.hpa import Behavior

    bench = _load("predictive")
    mp, dep = _deployment("prod", "llama-8b")
    shorter = bench.with_scale_down(dep, 90)

    def behavior(d) -> dict:
        return d.scaled_object["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]

    assert Behavior.from_spec(behavior(shorter)).scale_down.stabilization_s == 90.0
    # The plan's own window is the model's warm start in whole seconds up, and None keeps it.
    planned = Behavior.from_spec(behavior(dep)).scale_down.stabilization_s
    assert planned == math.ceil(mp.cold_start.warm_node_s) == bench.plan_window_s(dep)
    assert bench.with_scale_down(dep, None) is dep
    assert {**behavior(shorter), "scaleDown": None} == {**behavior(dep), "scaleDown": None}
    assert shorter.scaled_object["triggers"] == dep.scaled_object["triggers"]


def test_scale_down_windows_parse_and_pick_the_output_file() -> None:
    """`--scale-down`: `plan` must be there (rows are judged on it), each window once; the plan's
    own window alone writes predictive.json (the first draw) or predictive_seed<N>.json, any
    other window a scale_down_seed<N>.json, so a window study never overwrites the predictive one."""
    bench = _load("predictive")
    assert bench.parse_windows("plan") == [None]
    assert bench.parse_windows("plan,300,120,300,plan") == [None, 300, 120]
    for bad in ("300", "plan,-5", "plan,1.5", ""):
        with pytest.raises(ValueError, match="--scale-down"):
            bench.parse_windows(bad)
    results = Path(bench.OUT).parent
    assert bench.out_path([None], 0) == results / "predictive.json"
    assert bench.out_path([None], 2) == results / "predictive_seed2.json"
    assert bench.out_path([None, 300], 0) == results / "scale_down_seed0.json"


def test_the_verdict_credits_a_prediction_only_at_the_plans_window() -> None:
    """The cheapest passing run may be any window; a predictive variant counts as cheaper than
    the stated growth only at the plan's own window and by more than a pod's seconds: here
    predict-5m@120s is cheapest but is not credited to the prediction, predict-10m fails, and
    predict-5m at the plan's window saves 10 %."""
    bench = _load("predictive")

    def row(variant: str, gpu_h: float, passes: bool, plan_window: bool = True) -> dict:
        return {"model": "m", "trace": "conv", "variant": variant, "gpu_hours": gpu_h,
                "passes_checklist": passes, "plan_window": plan_window}

    rows = [row("stated", 10.0, True), row("predict-5m", 9.0, True),
            row("predict-5m@120s", 8.0, True, plan_window=False), row("predict-10m", 7.0, False)]
    v = bench.verdict(rows)
    assert (v["cheapest_passing"], v["cheapest_passing_gpu_hours"]) == ("predict-5m@120s", 8.0)
    assert v["predictive_cheaper_and_passing"] == ["predict-5m"]
    within = 10.0 * (1 - bench.bench.SAME_FLEET / 2)
    same = bench.verdict([row("stated", 10.0, True), row("predict-5m", within, True)])
    assert same["predictive_cheaper_and_passing"] == []  # the same fleet a pod's seconds apart
