"""The simulator's HPA, KEDA ScaledObject, baselines and PromQL against hand-computed values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from serving.autoscaling import Autoscaling
from serving.simulator import (
    Clairvoyant,
    ColdStartSpec,
    EngineConfig,
    FleetConfig,
    GpuUtilizationHpa,
    KedaAutoscaler,
    KnativeKpa,
    SimConfig,
    StepTime,
    Targets,
    poisson,
    simulate,
)
from serving.simulator.hpa import Behavior, Hpa, average_value_replicas
from serving.simulator.promql import PromQLError, Store, evaluate

BEHAVIOR = {
    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15},
        {"type": "Pods", "value": 4, "periodSeconds": 15}]},
    "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min", "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 30}]},
}


def test_hpa_follows_its_behavior_policies():
    hpa = Hpa(2, 20, Behavior.from_spec(BEHAVIOR))
    replicas, seen = 2, []
    wanted = [20, 20, 20, 5, 5, 5, 5, 5, 5]
    for i, desired in enumerate(wanted):
        replicas = hpa.reconcile(15.0 * i, replicas, desired)
        seen.append(replicas)
    # t=0: max(2 + 4, 2 x 2) = 6; t=15: the t=0 event is not inside (0, 15], so max(6 + 4, 12) = 12;
    # t=30: 20 (max(16, 24) capped by the desired 20); t=45..75: the 60 s scale-down window still
    # holds a 20; t=90: window (30, 90] holds only 5s, so one pod per 30 s: 19; t=105: the t=90
    # removal is inside (75, 105], so the period started at 20 and 19 is the floor; t=120: 18.
    assert seen == [6, 12, 20, 20, 20, 20, 19, 19, 18]


def test_hpa_defaults_and_bounds():
    hpa = Hpa(1, 10)
    # Default scale-up: max(4 pods, 100 %) per 15 s.
    assert hpa.reconcile(0.0, 1, 50) == 5
    assert hpa.reconcile(15.0, 5, 50) == 10  # capped by max replicas
    # Default scale-down stabilisation is 300 s: the 50s recommended at t=0 and 15 hold.
    assert hpa.reconcile(200.0, 10, 1) == 10
    assert hpa.reconcile(316.0, 10, 1) == 1  # window (16, 316] has only the 1s; 100 % per 15 s
    assert hpa.reconcile(330.0, 12, None) == 10  # above max: max, whatever the metric
    assert hpa.reconcile(345.0, 10, None) == 10  # metric error: unchanged


def test_average_value_tolerance():
    # ratio = metric / (target x replicas); |1 - ratio| <= 0.1 keeps the count.
    assert average_value_replicas(10.5, 5, 2) == 2
    assert average_value_replicas(11.5, 5, 2) == 3
    assert average_value_replicas(0.0, 5, 4) == 0


def _spec(min_r: int, max_r: int, threshold: int, fallback: int,
          behavior: dict[str, object]) -> dict[str, object]:
    auto = Autoscaling(model="m", query='sum(vllm:num_requests_waiting{namespace="default",model_name="m"})',
                       threshold=threshold, polling_interval_s=15, cooldown_s=300, min_replicas=min_r,
                       max_replicas=max_r, fallback_replicas=fallback, behavior=behavior)
    return auto.scaled_object_spec("m-predictor", "http://prometheus:9090")


STEP = StepTime(0.02, 0.0001, 0.015, 0.0004)


def _cfg(replicas: int, **kw: object) -> SimConfig:
    fleet = FleetConfig(zones=("a", "b"), initial_replicas=replicas, slots_per_node=1,
                        cold_start=ColdStartSpec(full_s=120.0, warm_s=30.0, node_ready_s=60.0))
    return SimConfig(engine=EngineConfig(step=STEP, kv_blocks=20_000, max_num_seqs=8), fleet=fleet,
                     targets=Targets(2.0, 0.1), model_name="m", **kw)  # type: ignore[arg-type]


def test_keda_fallback_after_failure_threshold():
    """Light load, metric 0; Prometheus cannot answer in [100, 400). KEDA 2.20 counts a failed
    read of its own poll and of the HPA's metric request on one counter (both every 15 s here):
    the sync at 105 s counts 2, the one at 120 s 4, which exceeds failureThreshold 3 (KEDA:
    failures > threshold), so a `static` fallback hands the HPA 6 replicas' worth at 120 s."""
    spec = _spec(2, 10, 5, 6, BEHAVIOR)
    spec["fallback"]["behavior"] = "static"  # type: ignore[index]
    auto = KedaAutoscaler(spec)
    trace = poisson(0.5, 300, (200, 20), seed=3)
    res = simulate(trace, _cfg(2, metric_outages=((100.0, 400.0),), end_s=300.0), autoscaler=auto)
    ups = [e for e in res.scale_events if e[2] > e[1]]
    assert ups[0] == (120.0, 2, 6)
    assert all(metric is None for t, metric, _ in auto.history if 100 <= t < 120)


@pytest.mark.parametrize(("behavior", "want"), [("currentReplicas", 4), ("currentReplicasIfHigher", 6),
                                                ("currentReplicasIfLower", 4)])
def test_keda_fallback_behaviors_hand_the_hpa_what_keda_computes(behavior: str, want: int) -> None:
    """fallback.replicas 6, four replicas running, the metric lost: currentReplicas holds 4, IfHigher
    takes the larger (6), IfLower the smaller (4) (KEDA 2.20 fallback.go doFallback)."""
    spec = _spec(2, 10, 5, 6, BEHAVIOR)
    spec["fallback"]["behavior"] = behavior  # type: ignore[index]
    auto = KedaAutoscaler(spec)
    trace = poisson(0.5, 300, (200, 20), seed=3)
    auto.warm(4)
    res = simulate(trace, _cfg(4, metric_outages=((0.0, 400.0),), end_s=300.0), autoscaler=auto)
    fell_back = [metric for _, metric, _ in auto.history if metric is not None]
    assert fell_back and set(fell_back) == {want * 5.0}  # threshold 5
    assert max((e[2] for e in res.scale_events), default=4) == max(want, 4)
    with pytest.raises(ValueError, match=r"fallback\.behavior"):
        KedaAutoscaler({**spec, "fallback": {**spec["fallback"], "behavior": "peak"}})  # type: ignore[dict-item]


def test_keda_scales_on_the_waiting_queue_and_respects_the_scale_up_policies():
    spec = _spec(1, 8, 2, 8, BEHAVIOR)
    auto = KedaAutoscaler(spec)
    trace = poisson(12.0, 400, (400, 120), seed=5)  # well beyond one replica of batch 8
    res = simulate(trace, _cfg(1, end_s=600.0), autoscaler=auto)
    ups = [e for e in res.scale_events if e[2] > e[1]]
    assert ups, "an overloaded deployment must scale up"
    for _, before, after in ups:
        # BEHAVIOR's scale-up limit per 15 s: max(+4 pods, +100 %) from the period's start.
        assert after <= max(before + 4, 2 * before)
    assert max(e[2] for e in res.scale_events) <= 8
    # Every started replica waited a cold start (120 s new node) or a warm start (30 s).
    for s in res.starts:
        if s.decided_s > 0:
            assert s.time_to_ready_s in (pytest.approx(120.0), pytest.approx(30.0))
    # Metric read by KEDA is the summed waiting queue the simulated Prometheus scraped.
    assert any(metric and metric > 0 for _, metric, _ in auto.history)


def test_keda_spec_errors_are_clear():
    spec = _spec(2, 10, 5, 6, BEHAVIOR)
    spec["triggers"][0]["metadata"]["threshold"] = "lots"  # type: ignore[index]
    with pytest.raises(ValueError, match="threshold"):
        KedaAutoscaler(spec)
    with pytest.raises(ValueError, match="minReplicaCount 0"):
        KedaAutoscaler({**_spec(2, 10, 5, 6, BEHAVIOR), "minReplicaCount": 0})


@dataclass
class FakeView:
    store: Store = field(default_factory=Store)
    spec_replicas: int = 2
    status_replicas: int = 2
    ready_replicas: int = 2
    loads: list[int] = field(default_factory=list)
    utils: list[float] = field(default_factory=list)

    def metrics_available(self, now: float) -> bool:
        return True

    def ready_loads(self) -> list[int]:
        return self.loads

    def ready_gpu_utilization(self, now: float, window_s: float) -> list[float]:
        return self.utils


def test_knative_kpa_panics_on_a_burst():
    kpa = KnativeKpa(min_replicas=1, max_replicas=50, target_concurrency=10)
    view = FakeView(loads=[7, 7])
    for t in range(0, 60, 2):
        assert kpa.decide(float(t), view) == 2  # 14 in flight / (10 x 70 %) = 2 pods
    view.loads = [30, 30]
    # Panic window (54, 60] holds 14, 14, 60: mean 29.33 -> ceil(29.33 / 7) = 5 pods, 5 / 2 >= 200 %.
    assert kpa.decide(60.0, view) == 5
    view.spec_replicas = 5
    view.loads = [0, 0]
    # Still panicking (less than 60 s since): never scale down.
    assert kpa.decide(62.0, view) == 5


def test_gpu_utilization_hpa_counts_unready_pods_as_idle_on_scale_up():
    hpa = GpuUtilizationHpa(min_replicas=1, max_replicas=10, target_utilization=0.7)
    view = FakeView(utils=[0.9, 0.9])
    assert hpa.decide(0.0, view) == 3  # ratio 0.9 / 0.7 = 1.286 -> ceil(2 x 1.286)
    hpa2 = GpuUtilizationHpa(min_replicas=1, max_replicas=10, target_utilization=0.7)
    view2 = FakeView(utils=[0.9, 0.9], status_replicas=3, spec_replicas=3)
    # With the unready pod at 0 %: 1.8 / (3 x 0.7) = 0.857 < 1, the direction flips: keep 3.
    assert hpa2.decide(0.0, view2) == 3


def test_clairvoyant_holds_the_busiest_coming_minute_a_cold_start_early():
    # 1 req/s over [0, 60), then 5 req/s over [300, 360); a replica carries 1 req/s; 120 s lead.
    arrivals = np.concatenate([np.arange(60) + 0.5, 300 + (np.arange(300) + 0.5) / 5])
    oracle = Clairvoyant(1, 10, arrivals, replica_qps=1.0, lead_s=120.0)
    view = FakeView()
    assert oracle.decide(0.0, view) == 1     # windows from 0..120 s: the busiest is [0, 60) at 1/s
    # At 165 s the latest window in reach is [285, 345): 45 s of 5/s = 225 requests, 3.75/s.
    assert oracle.decide(165.0, view) == 4
    assert oracle.decide(180.0, view) == 5   # [300, 360) is now within the lead: 5/s
    assert oracle.decide(300.0, view) == 5
    assert oracle.decide(420.0, view) == 1   # nothing ahead: the floor
    # Three zones: the survivors of one lost zone (2/3 of the fleet) must carry it.
    zoned = Clairvoyant(1, 10, arrivals, replica_qps=1.0, lead_s=120.0, zones=3)
    assert zoned.decide(0.0, view) == 2      # ceil(1 x 3/2)
    assert zoned.decide(180.0, view) == 8    # ceil(5 x 3/2)
    assert Clairvoyant(1, 6, arrivals, replica_qps=1.0, lead_s=120.0, zones=3).decide(180.0, view) == 6
    with pytest.raises(ValueError, match="replica_qps"):
        Clairvoyant(1, 10, arrivals, replica_qps=0.0, lead_s=120.0)


def _store() -> Store:
    s = Store()
    for i in range(9):
        t = 15.0 * i
        for pod, per_step in (("p0", 2.0), ("p1", 4.0)):
            labels = (("pod", pod),)
            s.add(t, "vllm:num_requests_waiting", labels, per_step)
            s.add(t, "req_total", labels, per_step * i)
            for le, frac in (("0.1", 0.5), ("0.5", 0.9), ("+Inf", 1.0)):
                s.add(t, "lat_bucket", (*labels, ("le", le)), 100.0 * i * frac)
    return s


def test_promql_forms_an_autoscaling_query_needs():
    s, t = _store(), 120.0
    assert evaluate("sum(vllm:num_requests_waiting)", s, t) == {(): 6.0}
    assert evaluate('max(vllm:num_requests_waiting{pod=~"p.*"})', s, t) == {(): 4.0}
    assert evaluate('avg(vllm:num_requests_waiting{pod!="p1"})', s, t) == {(): 2.0}
    # rate over 1m at t=120: samples at 75..120 (4, 45 s apart 3 gaps), increase 3 x 4 = 12 for p1,
    # extrapolated by the 15 s gap to the window start: 12 x 60 / 45 = 16 -> 16 / 60 per second.
    assert evaluate('rate(req_total{pod="p1"}[1m])', s, t) == {(("pod", "p1"),): pytest.approx(16 / 60)}
    # Buckets grow 50, 90, 100 per step: rank 0.95 x 100 = 95 falls in (0.5, +Inf] -> 0.5;
    # rank 0.7 x 100 = 70 falls in (0.1, 0.5]: 0.1 + 0.4 x (70 - 50) / 40 = 0.3.
    q = "histogram_quantile({q}, sum by (le) (rate(lat_bucket[1m])))"
    assert evaluate(q.format(q=0.95), s, t) == {(): pytest.approx(0.5)}
    assert evaluate(q.format(q=0.7), s, t) == {(): pytest.approx(0.3)}
    assert evaluate("clamp_min(sum(vllm:num_requests_waiting) / 4 - 2, 0) * 2 + 1", s, t) == {(): 1.0}
    assert evaluate("clamp_max(sum(vllm:num_requests_waiting), 5)", s, t) == {(): 5.0}
    assert evaluate("sum(vllm:num_requests_waiting) / sum(req_total)", s, t) == {(): pytest.approx(6 / 48)}
    assert evaluate("sum(nothing)", s, t) == {}
    # Durations of several digits: the whole run of 8 samples, 105 s apart, extrapolated to the
    # 120 s window (the gap to its start is under 1.1 x 15 s): 7 x 4 x 120 / 105 / 120 s -> 4 / 15.
    assert evaluate('rate(req_total{pod="p1"}[120s])', s, t) == {(("pod", "p1"),): pytest.approx(4 / 15)}
    ten = 'rate(req_total{pod="p1"}[10m])'
    assert evaluate(ten, s, t) == evaluate(ten.replace("10m", "600s"), s, t)
    assert evaluate("-(2 + 3) * 2", s, t) == -10.0


def test_promql_staleness_and_errors():
    s = _store()
    s.mark_stale(121.0, "pod", "p0")
    assert evaluate("sum(vllm:num_requests_waiting)", s, 122.0) == {(): 4.0}
    assert evaluate("sum(vllm:num_requests_waiting)", s, 120.0 + 301.0) == {}  # beyond the 5 min lookback
    for bad in ("sum(", "rate(req_total)", "foo{pod=p0}", "histogram_quantile(0.9)", "x[5q]"):
        with pytest.raises(PromQLError):
            evaluate(bad, s, 120.0)
    assert issubclass(PromQLError, ValueError)
    # No samples in the window: no series, so no quantile.
    assert evaluate("histogram_quantile(0.5, sum by (le) (rate(lat_bucket[1m])))", s, 10_000.0) == {}
    # All-zero rates: NaN, as Prometheus returns.
    flat = Store()
    for t in (0.0, 15.0, 30.0):
        for le in ("0.1", "+Inf"):
            flat.add(t, "lat_bucket", (("le", le),), 5.0)
    assert math.isnan(evaluate("histogram_quantile(0.5, sum by (le) (rate(lat_bucket[1m])))", flat, 30.0)[()])


def test_a_warm_started_autoscaler_holds_its_fleet_through_the_scale_down_window():
    # An idle metric asks for the floor (utilisation 0 -> 0 pods -> min 2).
    idle = FakeView(spec_replicas=6, status_replicas=6, ready_replicas=6, utils=[0.0] * 6)
    fresh = GpuUtilizationHpa(min_replicas=2, max_replicas=10)
    assert fresh.decide(0.0, idle) == 2  # a fresh HPA's window holds only this recommendation
    warm = GpuUtilizationHpa(min_replicas=2, max_replicas=10)
    warm.warm(6)
    assert warm.decide(15.0, idle) == 6  # 6 recorded at 0 s is inside the 300 s window
    assert warm.decide(300.0, idle) == 2  # at 300 s it has left it: the default 100 % a period
    # The KPA: 29 samples (2 s apart inside the 60 s stable window) of 6 pods x 10 x 70 % in
    # flight, then the first decision's own sample, of nothing: mean 42 x 29 / 30 = 40.6 ->
    # ceil(40.6 / 7) = 6 pods; fresh, the stable mean is 0 and only the rate limit (half the
    # ready pods) stops it: 3. At 30 pods the idle sample costs one: ceil(210 x 29 / 30 / 7) = 29.
    view = FakeView(spec_replicas=6, status_replicas=6, ready_replicas=6, loads=[0] * 6)
    kpa = KnativeKpa(min_replicas=1, max_replicas=50, target_concurrency=10)
    kpa.warm(6)
    assert kpa.decide(0.0, view) == 6
    assert KnativeKpa(min_replicas=1, max_replicas=50, target_concurrency=10).decide(0.0, view) == 3
    assert len(kpa._samples) == 30  # the window's 30 samples, none older than it
    wide = FakeView(spec_replicas=30, status_replicas=30, ready_replicas=30, loads=[0] * 30)
    big = KnativeKpa(min_replicas=1, max_replicas=50, target_concurrency=10)
    big.warm(30)
    assert big.decide(0.0, wide) == 29


def test_the_autoscaler_reads_at_its_offset_after_each_scrape() -> None:
    """By default the autoscaler reads at each scrape's instant (the freshest data); with an
    offset it reads that long after, every polling interval; an offset of a whole interval is
    refused (it would be the next scrape's instant)."""
    from dataclasses import replace

    import pytest

    from serving.simulator import poisson, simulate
    from tests.test_benchmarks import _deployment

    _, dep = _deployment("prod", "llama-8b")
    trace = poisson(5.0, 100.0, (1155, 211), seed=2)
    interval = float(dep.scaled_object["pollingInterval"])
    for offset in (0.0, 7.5):
        shifted = replace(dep, autoscale_offset_s=offset)
        auto = shifted.autoscaler()
        simulate(trace, shifted.sim_config(end_s=100.0), autoscaler=auto)
        assert [t for t, *_ in auto.history][:3] == [offset, offset + interval, offset + 2 * interval]
    with pytest.raises(ValueError, match="autoscale_offset_s"):
        replace(dep, autoscale_offset_s=interval).sim_config()


def test_the_autoscalers_phase_does_not_end_a_run() -> None:
    """A run without `end_s` ends at the first sample once every request is done; an
    autoscaler's read or a scrape in between is not an end, so the run lasts as long and samples
    as often whatever the autoscaler's or the scrapes' phase. One short request at 5.5 s is done
    well before 7.5 s, where a 7.5 s offset reads or a 7.5 s phase scrapes (which ended the run
    there before a sample alone ended it), and the next sample is at 10 s."""
    from dataclasses import replace

    from serving.simulator import Trace, simulate
    from tests.test_benchmarks import _deployment

    _, dep = _deployment("prod", "llama-8b")
    trace = Trace([5.5], [100], [5])
    ends = []
    for offset, phase in ((0.0, 0.0), (7.5, 0.0), (0.0, 7.5), (3.0, 6.0)):
        shifted = replace(dep, autoscale_offset_s=offset, scrape_phase_s=phase)
        res = simulate(trace, shifted.sim_config(), autoscaler=shifted.autoscaler())
        ends.append((res.end_s, len(res.series["t"])))
    assert all(end == ends[0] for end in ends) and ends[0][0] == 10.0
    assert res.ok.all() and res.e2e_s[0] < 2.0


def test_an_autoscaler_that_asks_the_pods_ignores_the_scrape_offset() -> None:
    """The KPA reads the pods' concurrency itself, so an offset meant for Prometheus's readers
    changes none of its decisions: it decides every 2 s from 0 either way, on the same run."""
    from dataclasses import replace

    import numpy as np

    from serving.simulator import KnativeKpa, poisson, simulate
    from tests.test_benchmarks import _deployment

    _, dep = _deployment("prod", "llama-8b")
    trace = poisson(40.0, 120.0, (1155, 211), seed=3)
    runs = []
    for offset in (0.0, 7.5):
        kpa = KnativeKpa(min_replicas=2, max_replicas=20, target_concurrency=10)
        res = simulate(trace, replace(dep, autoscale_offset_s=offset).sim_config(end_s=120.0),
                       autoscaler=kpa)
        runs.append((res.scale_events, res.ttft_s))
    assert runs[0][0], "the load makes the KPA scale"
    assert runs[0][0] == runs[1][0]
    assert np.array_equal(runs[0][1], runs[1][1], equal_nan=True)
