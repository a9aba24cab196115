"""Autoscaling parameters: KEDA trigger, its target from the replica's capacity, HPA behavior,
bounds."""

from __future__ import annotations

import math
from dataclasses import replace

import jsonschema
import pytest
import yaml

from serving.autoscaling import RUNNING, SUCCESS, WAITING, autoscaling, in_flight_target
from serving.capacity import region_replicas, replica_capacity
from serving.hardware import GpuModel
from serving.models import CATALOG, Quantization
from serving.profiles import SliceKind, profile
from serving.simulator.prometheus import Store
from serving.simulator.promql import evaluate
from serving.tiers import TIERS, Tier
from tests.conftest import SHARED

CRD = SHARED / "crds" / "keda" / "keda.sh_scaledobjects.yaml"
LLAMA_8B = CATALOG["llama-3.1-8b-instruct"]
PROF = profile(LLAMA_8B, SliceKind(GpuModel.H100_80GB), Quantization.FP8)
COLD_S = 752.0  # how far ahead the zone branch predicts (a cold start)
WARM_S = 203.5  # how long a replica given back takes to return (a warm start)


def _scaling(tier: Tier, peak: float = 30.0, cold_s: float = 900.0, zones: int = 3):
    spec = TIERS[tier]
    cap = replica_capacity(LLAMA_8B, PROF, spec, 1155, 211)
    reps = region_replicas(peak, cap.qps, zones, spec, cold_s)
    scaling = autoscaling("chat", "chat", "models", cap, PROF, reps, 1155, 211, peak, COLD_S,
                          warm_start_s=WARM_S)
    return scaling, cap, reps


def test_trigger_is_the_models_requests_in_flight() -> None:
    """The query, run by the simulated Prometheus, adds running and waiting over this model's
    pods only: 210 + 60 + 150 + 0 = 420, not the other model's or namespace's; below the floor's
    worth (2 replicas x the threshold) it reads that. (One zone: no zone-loss branch; the next
    test covers it.) Read at 15 s: the branches are read at the steps of a subquery aligned to
    multiples of 15 s (serving/persistence.py), so at 12 s the newest step is 0 s, before the
    scrape at 10 s, and the query is empty."""
    scaling, _, _ = _scaling(Tier.STANDARD, zones=1)
    assert scaling.min_replicas == 2 and 2 * scaling.threshold < 420
    for scale, want in ((1.0, 420.0), (0.1, 2 * scaling.threshold)):
        store = Store()
        rows = [("chat", "models", "p1", 210, 60), ("chat", "models", "p2", 150, 0),
                ("other", "models", "p3", 400, 90), ("chat", "elsewhere", "p4", 300, 300)]
        for model, ns, pod, running, waiting in rows:
            labels = (("model_name", model), ("namespace", ns), ("pod", pod))
            store.add(10.0, RUNNING, labels, running * scale)
            store.add(10.0, WAITING, labels, waiting * scale)
        assert evaluate(scaling.query, store, 15.0) == {(): pytest.approx(want)}
        assert evaluate(scaling.query, store, 12.0) == {}


def test_zone_branch_keeps_enough_replicas_to_lose_a_zone() -> None:
    """q = 2 req/s, curve (1, 10), (2, 40), 25 % headroom, three zones, a ceiling of 8 req/s.
    By hand: the headroom branch's target is 28 in flight (1.6 req/s on the curve); the zone
    branch, whatever the in-flight count, asks for the fewest replicas whose survivors of the
    worst zone carry the load a cold start ahead at 2 req/s each, up to the ceiling. A flat rate
    predicts itself: 3 req/s needs 2 survivors, and 3 replicas (1, 1, 1) leave 2; 6 req/s needs 3,
    and 5 replicas (2, 2, 1) leave 3; 12 req/s is held at the ceiling of 8, 4 survivors, 6
    replicas (2, 2, 2). A steep ramp predicts more than the stated growth, so it is held there:
    the 1-minute rate x 1.25."""
    _, cap, reps = _scaling(Tier.STANDARD)
    measured = replace(cap, qps=2.0, in_flight_curve=((1.0, 10.0), (2.0, 40.0)))
    zoned = autoscaling("chat", "chat", "models", measured, PROF, replace(reps, headroom=0.25, zones=3),
                        1155, 211, 8.0, COLD_S, warm_start_s=WARM_S)
    assert zoned.threshold == 28.0 and zoned.min_replicas == 3  # the floor: one a zone

    def survivors(r: int) -> int:
        return r - math.ceil(r / 3)

    def store_of(in_flight: float, count_at) -> Store:
        store = Store()
        for pod, share in (("p1", 0.25), ("p2", 0.75)):
            labels = (("model_name", "chat"), ("namespace", "models"), ("pod", pod))
            store.add(600.0, RUNNING, labels, in_flight * share)
            store.add(600.0, WAITING, labels, 0)
            for t in range(0, 601, 15):
                store.add(float(t), SUCCESS, labels, 5.0 + share * count_at(t))
        return store

    # (in flight, completions a second over two pods, replicas wanted; idle, the query reads
    # the floor's worth, 3 x 28)
    for in_flight, rate, replicas in ((14, 3.0, 3), (100, 3.0, 4), (300, 3.0, 11), (14, 6.0, 5),
                                      (14, 12.0, 6), (300, 12.0, 11), (0, 0.0, 3)):
        (value,) = evaluate(zoned.query, store_of(in_flight, lambda t, r=rate: r * t), 600.0).values()
        # desired = ceil(value / 28) = max(ceil(in flight / 28), zone branch, 3)
        assert math.ceil(value / zoned.threshold - 1e-9) == replicas
        load = min(rate, 8.0)
        # The survivors of the worst zone (ceil(R / 3) lost) at 2 req/s each carry the load.
        assert survivors(replicas) * 2.0 >= load
        if in_flight < 28 * replicas - 28 and replicas > 3:  # the zone branch decides: the fewest
            assert survivors(replicas - 1) * 2.0 < load
    # A ramp from 1 to 5 req/s over the 10 minutes (count = t + t^2 / 300): the 1-minute rate at
    # 600 s is the mean over 555-600 s, 1 + 2 x 577.5 / 300 = 4.85, and the fit a 752 s cold
    # start ahead far above 4.85 x 1.25 = 6.06: held there, 4 survivors, 6 replicas.
    ramp = store_of(14, lambda t: t + t * t / 300.0)
    (value,) = evaluate(zoned.query, ramp, 600.0).values()
    assert math.ceil(value / zoned.threshold - 1e-9) == 6 == zoned.zone_replicas(4.85)
    # One zone: nothing to survive, the plain sum.
    single = autoscaling("chat", "chat", "models", measured, PROF, replace(reps, headroom=0.25, zones=1),
                         1155, 211, 8.0, COLD_S, warm_start_s=WARM_S)
    assert "clamp_max" not in single.query and "request_success_total" not in single.query
    assert single.zone_replicas(12.0) is None


def test_a_pod_whose_scrapes_time_out_adds_one_replica_until_it_is_deleted() -> None:
    """Pods scraped every 15 s, their targets labelled with their model (the PodMonitor's
    podTargetLabels): p1 serves throughout (700 running, 200 waiting); p2 served until its node
    went after the 90 s scrape: from 105 s its scrapes time out (`up` 0 after 10 s, its series
    marked stale), and it is evicted at 190 s (a deletion timestamp from the 195 s scrape of
    kube-state-metrics on; still a target); p3 is loading its model (refused at once); p4 was
    scaled in at 60 s (its target gone, every series stale); p5 served until 90 s and from 105 s
    refuses its scrapes at once (stopping on SIGTERM, deleted, still a target); p6 was loading
    when its node went after the 90 s scrape (timeouts, never served); p7, another model's, times
    out too. One zone, so the query is the in-flight sum plus the lost term: at 120 s, 900 in
    flight (the stale numbers no longer count) plus a threshold each for p2 and p6; once p2's
    deletion shows, p6 alone, also while kube-state-metrics is away (restarting: no sample from
    240 s, its series stale there)."""
    scaling, _, _ = _scaling(Tier.STANDARD, zones=1)
    store = Store()
    ns = "models"
    for t in range(0, 301, 15):
        for pod in ("p1", "p2", "p3", "p4", "p5", "p6", "p7"):
            target = (("namespace", ns), ("pod", pod), ("rtip_dev_model", "other" if pod == "p7" else "chat"))
            served = pod == "p1" or (pod in ("p2", "p5") and t <= 90) or (pod == "p4" and t < 60)
            if pod == "p4" and t >= 60:
                continue
            timed_out = pod in ("p2", "p6", "p7") and t > 90
            store.add(float(t), "up", target, 1.0 if served else 0.0)
            took = 0.05 if served else (10.0 if timed_out else 0.001)
            store.add(float(t), "scrape_duration_seconds", target, took)
            if served:
                labels = (("model_name", "chat"), ("namespace", ns), ("pod", pod))
                store.add(float(t), RUNNING, labels, 700.0 if pod == "p1" else 300.0)
                store.add(float(t), WAITING, labels, 200.0 if pod == "p1" else 100.0)
            deleted = {"p2": 190.0, "p5": 100.0}.get(pod)
            if deleted is not None and deleted <= t < 240:
                store.add(float(t), "kube_pod_deletion_timestamp", (("namespace", ns), ("pod", pod)), deleted)
    for pod in ("p2", "p5"):
        store.mark_stale(105.0, "pod", pod,
                         keep=("up", "scrape_duration_seconds", "kube_pod_deletion_timestamp"))
    store.mark_stale(60.0, "pod", "p4")
    for series in store.series("kube_pod_deletion_timestamp").values():
        series.stale_at = 240.0
    threshold = scaling.threshold
    assert 900.0 > scaling.min_replicas * threshold  # above the floor's worth
    assert evaluate(scaling.query, store, 90.0) == {(): pytest.approx(900.0 + 800.0)}  # all answer
    assert evaluate(scaling.query, store, 120.0) == {(): pytest.approx(900.0 + 2 * threshold)}
    assert evaluate(scaling.query, store, 194.0) == {(): pytest.approx(900.0 + 2 * threshold)}
    assert evaluate(scaling.query, store, 196.0) == {(): pytest.approx(900.0 + threshold)}
    assert evaluate(scaling.query, store, 300.0) == {(): pytest.approx(900.0 + threshold)}
    # Read at the instant instead, the exporter's gap would count p2 again.
    instant = ('count((up{namespace="models",rtip_dev_model="chat"} == 0 and '
               'scrape_duration_seconds >= 9) unless on(namespace, pod) kube_pod_deletion_timestamp)')
    assert evaluate(instant, store, 300.0) == {(): 2.0}
    # Without the timeout the refusing p3 and p5 would count; without the model label, p7 too.
    assert evaluate('count(up{namespace="models",rtip_dev_model="chat"} == 0)', store, 120.0) == {(): 4.0}
    assert evaluate('count(up{namespace="models"} == 0 and scrape_duration_seconds >= 9)', store, 120.0) \
        == {(): 3.0}


def test_a_model_whose_every_scrape_times_out_reads_empty_not_all_lost() -> None:
    """If no scrape of the model answers (a network policy dropping Prometheus's packets, an
    overloaded Prometheus), every pod times out, but the model's vLLM series are gone too: the
    in-flight and rate terms are empty, so the whole query is (an empty vector plus a number is
    empty), and KEDA holds the running replicas on its fallback instead of adding one a pod."""
    for zones in (1, 3):
        scaling, _, _ = _scaling(Tier.STANDARD, zones=zones)
        store = Store()
        for t in range(0, 121, 15):
            for pod in ("p1", "p2", "p3"):
                target = (("namespace", "models"), ("pod", pod), ("rtip_dev_model", "chat"))
                store.add(float(t), "up", target, 0.0)
                store.add(float(t), "scrape_duration_seconds", target, 10.0)
        assert evaluate(scaling.query, store, 120.0) == {}
        assert evaluate(scaling.lost, store, 120.0) == {(): 3.0}  # the term alone would count all three


def test_target_is_in_flight_at_capacity_less_the_headroom() -> None:
    _, cap, _ = _scaling(Tier.STANDARD)
    measured = replace(cap, qps=2.0, in_flight_curve=((1.0, 10.0), (2.0, 40.0)))
    # 25 % headroom: the load is 2.0 / 1.25 = 1.6 req/s, on the curve 10 + 0.6 x (40 - 10) = 28.
    assert in_flight_target(measured, PROF, 1155, 211, 0.25) == 28.0
    # 100 %: 1.0 req/s, a point of the curve; 300 %: 0.5 req/s, on the chord from the origin.
    assert in_flight_target(measured, PROF, 1155, 211, 1.0) == 10.0
    assert in_flight_target(measured, PROF, 1155, 211, 3.0) == 5.0
    # Closed form: Little's law, rate x (prefill of the mean prompt + 211 x tail TPOT).
    little = cap.qps * (PROF.prefill_s(1155) + 211 * cap.tpot_tail_s)
    assert in_flight_target(replace(cap, in_flight_curve=()), PROF, 1155, 211, 0.0) == round(little, 1)
    # More headroom, a lower target: the fleet scales out earlier.
    assert in_flight_target(cap, PROF, 1155, 211, 0.5) < in_flight_target(cap, PROF, 1155, 211, 0.1)


def test_bounds_fallback_and_behavior_follow_the_replicas_and_cold_start() -> None:
    scaling, _, reps = _scaling(Tier.STANDARD, peak=80, cold_s=1200)
    assert (scaling.min_replicas, scaling.max_replicas) == (reps.min_replicas, reps.max_replicas)
    assert scaling.fallback_replicas == reps.max_replicas  # used only by a `static` fallback
    fallback = scaling.scaled_object_spec("d", "http://p:9090")["fallback"]
    assert fallback == {"failureThreshold": 3, "replicas": reps.max_replicas, "behavior": "currentReplicas"}
    up, down = scaling.behavior["scaleUp"], scaling.behavior["scaleDown"]
    assert up["stabilizationWindowSeconds"] == 0
    assert max(p["value"] for p in up["policies"] if p["type"] == "Pods") >= 4  # HPA default floor
    # The warm start in whole seconds up, whatever the cold start: the target's headroom holds
    # the growth of a 1200 s cold start already, and a replica given back after 204 s surplus has
    # cost what its 203.5 s return does.
    assert down["stabilizationWindowSeconds"] == 204
    # One pod a 15 s sync: the ReplicaSet re-ranks before each deletion (see
    # test_fleet_scale_in_follows_the_replicaset_ranking).
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 15}]


def test_the_emitted_scale_down_removes_one_pod_a_sync() -> None:
    # The HPA's own bookkeeping (serving.simulator.hpa, after upstream getReplicasChangePerPeriod):
    # past the 204 s window, a fall from max to min goes one pod a 15 s sync, never two at once.
    from serving.simulator.hpa import Behavior, Hpa

    scaling, _, reps = _scaling(Tier.STANDARD, peak=80, cold_s=1200)
    hpa = Hpa(reps.min_replicas, reps.max_replicas, Behavior.from_spec(scaling.behavior))
    spec, steps = reps.max_replicas, []
    for i in range(200):
        new = hpa.reconcile(15.0 * i, spec, reps.max_replicas if i == 0 else reps.min_replicas)
        steps.append(spec - new)
        spec = new
    assert reps.max_replicas - reps.min_replicas >= 2 and spec == reps.min_replicas
    assert set(steps) == {0, 1}
    first = steps.index(1)
    assert 15.0 * first == 210  # the window holds the first step back to the first sync past 204 s
    fall = reps.max_replicas - reps.min_replicas
    assert steps[first:first + fall] == [1] * fall


def test_scaled_object_validates_against_the_keda_crd() -> None:
    scaling, _, _ = _scaling(Tier.INTERACTIVE)
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    body = {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "chat", "namespace": "models"},
        "spec": scaling.scaled_object_spec("chat-predictor", "http://prometheus.monitoring:9090"),
    }
    jsonschema.validate(body, version["schema"]["openAPIV3Schema"])
    trigger = body["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and float(trigger["metadata"]["threshold"]) == scaling.threshold


def test_the_plan_caps_the_zone_branch_at_peak_and_burst_headroom() -> None:
    """Every prod query, run by the simulated Prometheus with a completion rate ten times the
    peak and nothing in flight, asks for the fewest replicas whose survivors of a zone lost carry
    the peak x (1 + tier burst headroom) at q each, from the plan's own figures: past the
    ceiling, more load adds nothing."""
    from stacks.naming import MODELS_NAMESPACE
    from tests.conftest import plan_of

    plan = plan_of("prod")
    checked = 0
    for mp in plan.models:
        zones = len(plan.region(mp.region).pool(mp.pool).zones)
        if zones == 1:
            assert "clamp_max(" not in mp.autoscaling.query
            continue
        store = Store()
        labels = (("model_name", mp.model), ("namespace", MODELS_NAMESPACE), ("pod", "p1"))
        store.add(120.0, RUNNING, labels, 0)
        store.add(120.0, WAITING, labels, 0)
        for t in range(0, 121, 15):
            store.add(float(t), SUCCESS, labels, 10 * mp.peak_qps * t)
        (value,) = evaluate(mp.autoscaling.query, store, 120.0).values()
        ceiling = mp.peak_qps * (1 + mp.tier_spec.burst_headroom)
        survivors = math.ceil(ceiling / mp.capacity.qps)
        # The fewest replicas that leave that many when the fullest zone, ceil(R / Z), is lost.
        wanted = next(r for r in range(1, 1000) if r - math.ceil(r / zones) >= survivors)
        # The query asks for S Z / (Z - 1) replicas' worth; the HPA rounds it up.
        assert value / mp.autoscaling.threshold == pytest.approx(survivors * zones / (zones - 1)), mp.model
        assert math.ceil(value / mp.autoscaling.threshold - 1e-9) == wanted, mp.model
        assert mp.autoscaling.zone_replicas(10 * mp.peak_qps) == wanted
        checked += 1
    assert checked >= 4  # every prod model spans several zones somewhere


def test_a_fleet_prometheus_no_longer_sees_holds_its_replicas() -> None:
    """prod's 8B, warm at 20 replicas, while its pods' metrics stop matching the trigger (they
    carry another model name: a broken PodMonitor or relabelling). Prometheus still answers, with
    nothing. KEDA reads that as 0 unless ignoreNullValues is false (prometheus_scaler.go). With
    the emitted trigger every read fails, and once the count passes failureThreshold 3 (two reads
    a sync since KEDA 2.19: at the 2nd sync, 15 s) the fallback hands the HPA the Deployment's 20
    replicas, so the fleet holds: no scale-in to the floor, no scale-out to max. Under KEDA's
    default the same fleet is scaled in towards its floor once the 204 s window lets go; with a
    `static` fallback it would go to max (36) at 15 s."""
    from serving.simulator import KedaAutoscaler, poisson, simulate
    from tests.test_benchmarks import _deployment

    mp, dep = _deployment("prod", "llama-8b")
    trigger = dep.scaled_object["triggers"][0]["metadata"]
    assert trigger["ignoreNullValues"] == "false"
    assert dep.scaled_object["fallback"]["behavior"] == "currentReplicas"
    trace = poisson(5.0, 900.0, (1155, 211), seed=2)
    fleet = replace(dep.fleet, initial_replicas=20)
    config = replace(dep.sim_config(fleet=fleet, end_s=900.0), model_name="someone-else")

    def run(ignore_null: str, behavior: str) -> tuple[KedaAutoscaler, list[tuple[float, int, int]]]:
        spec = {**dep.scaled_object,
                "fallback": {**dep.scaled_object["fallback"], "behavior": behavior},
                "triggers": [{**dep.scaled_object["triggers"][0],
                              "metadata": {**trigger, "ignoreNullValues": ignore_null}}]}
        auto = KedaAutoscaler(spec)
        auto.warm(20)
        return auto, simulate(trace, config, autoscaler=auto).scale_events

    auto, events = run("false", "currentReplicas")
    assert events == []  # held at 20 for the whole 900 s
    held = [metric for _, metric, _ in auto.history if metric is not None]
    assert held and set(held) == {20 * float(trigger["threshold"])}
    assert all(metric is None for t, metric, _ in auto.history if t < 15.0)
    _, events = run("false", "static")
    assert events and events[0][0] == 15.0 and max(after for *_, after in events) == mp.max_replicas
    auto, events = run("true", "currentReplicas")
    assert all(metric == 0.0 for _, metric, _ in auto.history)
    assert events and all(after < before for _, before, after in events)  # only ever down
    assert events[0][0] == 210.0 and events[-1][2] < 20  # the first sync past the 204 s window


def test_bounds_without_a_zones_share_of_room_are_named_in_the_plans_notes() -> None:
    """Stated bounds of 3 and 3 over three zones leave the lost-pod term no replica to add (the
    HPA sets at most maxReplicas); at the floor a zone holds one pod, so a max of 4 is enough.
    The note reaches the model's component inputs (`model_manifests`); the planner's own bounds
    and stated bounds with that room carry none."""
    _, cap, reps = _scaling(Tier.STANDARD)
    assert reps.zones == 3 and reps.max_replicas - reps.min_replicas >= math.ceil(reps.min_replicas / 3)

    def notes(low: int, high: int, zones: int = 3) -> tuple[str, ...]:
        stated = replace(reps, min_replicas=low, max_replicas=high, zones=zones)
        return autoscaling("chat", "chat", "models", cap, PROF, stated, 1155, 211, 30.0, COLD_S,
                           warm_start_s=WARM_S).notes

    (note,) = notes(3, 3)
    assert "model chat: max 3" in note and "a max of 4 or more" in note
    (note,) = notes(7, 8)  # 7 over three zones: 3 in the fullest, so 10
    assert "a max of 10 or more" in note
    assert notes(3, 4) == () and notes(7, 10) == () and notes(2, 2, zones=1) == ()
    _, _, planned = _scaling(Tier.STANDARD)
    assert autoscaling("chat", "chat", "models", cap, PROF, planned, 1155, 211, 30.0, COLD_S,
                       warm_start_s=WARM_S).notes == ()

