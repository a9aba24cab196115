"""The replicas-overdue page (serving/slo_rules.py `overdue_rule`): a predictor pod not Ready for
longer than any cold start takes, and not being deleted. Checked by Prometheus's own rule engine (promtool)
at hand-computed minutes, by the simulated PromQL against promtool's answers, in a simulated zone
outage as Karpenter lives it (no node for the replacement), and in the rules every stack emits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from serving.kube_names import predictor_name
from serving.simulator import (
    EngineConfig,
    FleetConfig,
    Simulation,
    StaticPolicy,
    StepTime,
    Targets,
    Trace,
    ZoneFailure,
)
from serving.simulator.config import ColdStartSpec, Failover
from serving.simulator.prometheus import pod_name
from serving.simulator.promql import Store, evaluate
from serving.simulator.sim import SimConfig
from serving.slo_rules import (
    OVERDUE_ALERT,
    REFUSED_ALERT,
    UNWATCHED_ALERT,
    overdue_expr,
    overdue_rule,
    replica_failure_rule,
    watch_rule,
)
from stacks.slo_alerts import first_fired_s
from tests import promtool
from tests.conftest import plan_of, record_of
from tests.test_promql_sets import _store, _unnamed
from tests.test_promql_subquery import _labels, _seconds

NS = "rtip-models"
LABELS = {"model": "m", "tier": "interactive"}
# Ten minutes a pod may take here (a stack's come from its cold start: below).
OVERDUE_S = 600


def _pod(name: str, created: str, ready: str | None = None, deleted: str | None = None,
         failed: str | None = None) -> dict[str, str]:
    """One pod's series as kube-state-metrics exports them, one sample a minute (promtool's
    notation; `time()` is seconds from 0, so a creation at minute 5 is valued 300), with the
    scrape's `instance` beside the exporter's labels, and `failed` its Failed phase series."""
    sel = f'namespace="{NS}",pod="{name}",uid="u-{name}",instance="10.2.0.7:8080"'
    out = {f"kube_pod_created{{{sel}}}": created}
    if ready is not None:
        out[f'kube_pod_status_ready{{{sel},condition="true"}}'] = ready
    if deleted is not None:
        out[f"kube_pod_deletion_timestamp{{{sel}}}"] = deleted
    if failed is not None:
        out[f'kube_pod_status_phase{{{sel},phase="Failed"}}'] = failed
    return out


# A replacement created at minute 5 that never gets a node (no Ready condition at all): older than
# ten minutes from minute 16 (300 < 960 - 600), so pending then and firing at 18.
PENDING = _pod("m-predictor-7d9f8-bvc24", "_x5 300x40")
# A pod serving since minute 3 whose engine then stays down from minute 20 (the startup probe keeps
# restarting it): its last Ready sample (minute 19) leaves the ten-minute window at minute 29 (a
# range holds (t - 10m, t]), so it is pending then and firing at 31.
STUCK = _pod("m-predictor-7d9f8-dfg45", "0x45", ready="0x2 1x16 0x26", failed="0x45")
QUIET = {
    # Created at 0, Ready from minute 3: a cold start within the window.
    **_pod("m-predictor-7d9f8-ghj56", "0x45", ready="0x2 1x42"),
    # Down from minute 20 to 26 (a restart within a cold start), then Ready again.
    **_pod("m-predictor-7d9f8-jkl78", "0x45", ready="1x19 0x6 1x19"),
    # Not Ready from minute 20, but being deleted from then (drained or evicted).
    **_pod("m-predictor-7d9f8-mnp98", "0x45", ready="1x19 0x25", deleted="_x20 1200x24"),
    # Evicted by its kubelet at minute 20 (node pressure): Failed, not Ready and not being
    # deleted, kept until the pod garbage collector's threshold; its ReplicaSet replaced it.
    **_pod("m-predictor-7d9f8-vwx27", "0x45", ready="0x2 1x16 0x26", failed="0x19 1x25"),
    # Another model's pod, never Ready.
    **_pod("other-predictor-7d9f8-pqr42", "0x45"),
}


def _rule() -> dict:
    return overdue_rule("m", NS, "m-predictor", OVERDUE_S, LABELS)


def test_the_page_fires_when_promtool_says_and_only_then(tmp_path: Path) -> None:
    def firing(pod: str) -> list[dict]:
        # One alert a pod, by namespace and pod alone: not the exporter's uid nor its scrape's
        # instance, which change when kube-state-metrics moves.
        return [{"exp_labels": {"severity": "page", **LABELS, "namespace": NS, "pod": pod},
                 "exp_annotations": _rule()["annotations"]}]

    def case(series: dict[str, str], expected: list[tuple[str, list]]) -> dict:
        return {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "alert_rule_test": [{"eval_time": t, "alertname": OVERDUE_ALERT, "exp_alerts": fired}
                                    for t, fired in expected]}
    pending, stuck = firing("m-predictor-7d9f8-bvc24"), firing("m-predictor-7d9f8-dfg45")
    tests = [case({**PENDING, **QUIET}, [("15m", []), ("17m", []), ("18m", pending), ("44m", pending)]),
             case({**STUCK, **QUIET}, [("28m", []), ("30m", []), ("31m", stuck), ("44m", stuck)]),
             case(QUIET, [(t, []) for t in ("12m", "20m", "27m", "33m", "44m")])]
    done = promtool.run_rule_tests([{"name": "m", "rules": [_rule()]}], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "zones_down" in _rule()["annotations"]["description"]


def test_the_simulated_promql_reads_it_as_prometheus_does(tmp_path: Path) -> None:
    expr = overdue_expr(NS, "m-predictor", OVERDUE_S)
    times = ["10m", "16m", "20m", "30m", "38m"]
    for series in ({**PENDING, **QUIET}, {**STUCK, **QUIET}):
        want = promtool.evaluate(series, [(expr, t) for t in times], tmp_path, interval="1m")
        store = _store(series, step_s=60.0)
        for at, named in zip(times, want, strict=True):
            got = evaluate(expr, store, _seconds(at))
            assert isinstance(got, dict)
            expected = {_unnamed(k): v for k, v in named.items()}
            assert {_labels(k): v for k, v in got.items()} == expected, (series, at)
    assert evaluate(expr, _store(PENDING, step_s=60.0), _seconds("20m")) != {}  # not vacuous


STEP = StepTime(0.03, 0.0001, 0.012, 0.0004)


def _outage_run(new_nodes: bool) -> Simulation:
    """Three replicas, one a zone on one-slot nodes, under a request every 10 s; zone a lost at
    600 s, the API marking its pod NotReady 50 s later and deleting it 90 s later, and the
    replacement needing a new node that (as Karpenter during a zone outage) may not come."""
    trace = Trace(np.arange(0.0, 1500.0, 10.0), [200] * 150, [20] * 150)
    fleet = FleetConfig(zones=("a", "b", "c"), initial_replicas=3, initial_nodes=3,
                        cold_start=ColdStartSpec(full_s=60.0, warm_s=30.0, node_ready_s=30.0),
                        failover=Failover(route_s=1.0, not_ready_s=50.0, evict_s=90.0,
                                          new_nodes_while_down=new_nodes))
    cfg = SimConfig(engine=EngineConfig(step=STEP, kv_blocks=2_000), fleet=fleet, targets=Targets(1.0, 0.1),
                    zone_failures=(ZoneFailure("a", 600.0),), model_name="m", namespace=NS, end_s=1500.0)
    sim = Simulation(trace, cfg, "least-loaded", StaticPolicy(3))
    sim.run()
    return sim


def _outage(new_nodes: bool) -> float | None:
    """When does a 300 s overdue page fire in `_outage_run`?"""
    sim = _outage_run(new_nodes)
    return first_fired_s(sim.store, overdue_expr(NS, predictor_name("m"), 300), 120.0, 1500.0)


def test_a_pod_lost_ready_reads_ready_until_the_api_marks_it() -> None:
    """kube-state-metrics reads the pod object, whose Ready condition only the node lifecycle
    controller changes for a lost node: the lost pod (zone a's, the first) reads Ready on the
    scrapes at 600-645 s and not Ready from 660 s (NotReady at 600 + 50 s), until it is gone."""
    sim = _outage_run(new_nodes=False)
    (lost,) = [r for r in sim.fleet.replicas if r.zone == "a" and r.created_s == 0.0]
    selector = f'{{namespace="{NS}",pod="{pod_name("m", lost.rid)}",condition="true"}}'
    read = {t: evaluate(f"kube_pod_status_ready{selector}", sim.store, t) for t in (645.0, 660.0)}
    assert [list(v.values()) for v in read.values()] == [[1.0], [0.0]]


def test_a_replacement_that_finds_no_node_pages_and_one_that_serves_does_not() -> None:
    # By hand: the lost pod is evicted at 690 s (being deleted: it never counts) and its
    # replacement created then; with no node it has no Ready condition, and it is older than
    # 300 s once 690 < t - 300, from the evaluation at 1,020 s (every 30 s), so it fires at 1,140 s.
    assert _outage(new_nodes=False) == 1140.0
    # A new node in zone b or c: the replacement serves at 750 s, inside every window.
    assert _outage(new_nodes=True) is None


def test_every_model_s_rule_pages_for_its_own_replicas_after_its_cold_start() -> None:
    """Each emitted rule selects the pods of the Deployment its model's ScaledObject scales, over
    a window of the model's cold start with a new node: provisioning and node init, then 1.5x the
    image pull, weights and engine start (the startup probe's allowance)."""
    plan = plan_of("prod")
    resources = [r for r in record_of("prod").resources
                 if r.inputs.get("kind") in ("ScaledObject", "PrometheusRule")]
    scaled = [r for r in resources if r.inputs["kind"] == "ScaledObject"]
    assert len(scaled) == len(plan.models)
    for r in scaled:
        so = r.inputs
        name, ns = so["metadata"]["name"], so["metadata"]["namespace"]
        target = so["spec"]["scaleTargetRef"]["name"]
        # The rule beside it: same cluster (provider), namespace and model.
        rules = [a for o in resources if o.provider == r.provider and o.inputs["kind"] == "PrometheusRule"
                 and o.inputs["metadata"]["namespace"] == ns for g in o.inputs["spec"]["groups"]
                 if g["name"] == f"{name}-latency-slo" for a in g["rules"]]
        (page,) = [a for a in rules if a.get("alert") == OVERDUE_ALERT]
        (refused,) = [a for a in rules if a.get("alert") == REFUSED_ALERT]
        assert f'deployment="{target}"' in refused["expr"]
        cold = next(m.cold_start for m in plan.models if m.model == name)  # the same in every region
        window = cold.node_provisioning_s + cold.node_init_s + 1.5 * (
            cold.image_pull_s + cold.weights_load_s + cold.engine_start_s)
        w = int(np.ceil(window))
        chars = "[bcdfghjklmnpqrstvwxz2456789]+"  # apimachinery util/rand's alphanums
        assert f'pod=~"{target}-{chars}(-{chars})?",condition="true"}}[{w}s]' in page["expr"]
        assert f"< time() - {w} " in page["expr"] and page["labels"]["severity"] == "page"


def test_kube_state_metrics_gone_pages_after_ten_minutes(tmp_path: Path) -> None:
    """Without kube-state-metrics no overdue page can fire, so the absence of its pod series in
    the models' namespace pages, once for the cluster: two models' pods exported to minute 20,
    then nothing (the exporter gone): absent from 20, firing at 30 (ABSENT_FOR), one alert, and
    still firing 7 hours on (no history condition to run out while the exporter stays gone); an
    exporter that never exported pages at 10 minutes; a restart that is back within 6 minutes
    pages no one; nor does one model's pods going while another's are still exported (its
    metrics' own absence is another page's)."""
    rule = watch_rule(NS, {"name": "w", "namespace": NS})
    (page,) = rule["spec"]["groups"][0]["rules"]
    assert page["alert"] == UNWATCHED_ALERT
    # absent() keeps the selector's equality matchers as labels: the namespace, and no model.
    firing = [{"exp_labels": {"severity": "page", "namespace": NS}, "exp_annotations": page["annotations"]}]

    def case(values: dict[str, str], expected: list[tuple[str, list]]) -> dict:
        return {"interval": "1m",
                "input_series": [{"series": f'kube_pod_created{{namespace="{NS}",pod="{pod}",uid="u-{pod}"}}',
                                  "values": v} for pod, v in values.items()],
                "alert_rule_test": [{"eval_time": t, "alertname": UNWATCHED_ALERT, "exp_alerts": fired}
                                    for t, fired in expected]}
    both = ("m-predictor-7d9f8-bvc24", "n-predictor-5c6b7-xz2k4")
    tests = [case(dict.fromkeys(both, "0x19 stale"),
                  [("19m", []), ("29m", []), ("30m", firing), ("40m", firing), ("7h30m", firing)]),
             {"interval": "1m", "input_series": [],
              "alert_rule_test": [{"eval_time": t, "alertname": UNWATCHED_ALERT, "exp_alerts": fired}
                                  for t, fired in (("9m", []), ("10m", firing), ("8h", firing))]},
             case(dict.fromkeys(both, "0x19 stale _x5 0x20"), [(t, []) for t in ("25m", "30m", "40m")]),
             case({both[0]: "0x19 stale", both[1]: "0x40"}, [(t, []) for t in ("30m", "40m")])]
    done = promtool.run_rule_tests([{"name": "w", "rules": [page]}], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_one_rule_a_cluster_watches_the_models_pods() -> None:
    """prod: one watch rule on each cluster that serves models, in the models' namespace, applied
    after that cluster's InferenceServices, and no model's own rule repeats it."""
    from rtip.deploycheck.graph import cluster_of
    from serving.deployments import WATCH_RULE

    record = record_of("prod")
    rules = [r for r in record.resources if r.inputs.get("kind") == "PrometheusRule"]
    watches = [r for r in rules if r.inputs["metadata"]["name"] == WATCH_RULE]
    serving = {cluster_of(record, r).urn for r in record.resources
               if r.inputs.get("kind") == "InferenceService"}
    assert sorted(cluster_of(record, w).urn for w in watches) == sorted(serving)
    assert all(w.inputs["metadata"]["namespace"] == NS for w in watches)
    # Applied after every model of its cluster (it has no history condition to wait with).
    for w in watches:
        isvcs = {r.urn for r in record.resources if r.inputs.get("kind") == "InferenceService"
                 and cluster_of(record, r).urn == cluster_of(record, w).urn}
        assert isvcs and isvcs <= set(w.dependencies), w.name
    named = [a.get("alert") for r in rules if r not in watches
             for g in r.inputs["spec"]["groups"] for a in g["rules"]]
    assert UNWATCHED_ALERT not in named and named.count(OVERDUE_ALERT) >= len(serving)


def test_pods_that_cannot_be_created_page_after_five_minutes(tmp_path: Path) -> None:
    """The Deployment's ReplicaFailure condition (kube-state-metrics: one series per status, the
    true one valued 1): refused from minute 10 on, the page is pending from 10 and fires at 15; a
    refusal of 3 minutes (KServe's webhook restarting) pages no one, nor another Deployment's."""
    rule = replica_failure_rule("m", NS, "m-predictor", LABELS)

    def condition(deployment: str) -> str:
        return (f'kube_deployment_status_condition{{namespace="{NS}",deployment="{deployment}",'
                f'reason="unknown",condition="ReplicaFailure",status="true"}}')
    firing = [{"exp_labels": {"severity": "page", **LABELS, "namespace": NS, "deployment": "m-predictor",
                              "reason": "unknown", "condition": "ReplicaFailure", "status": "true"},
               "exp_annotations": rule["annotations"]}]

    def case(deployment: str, values: str, expected: list[tuple[str, list]]) -> dict:
        return {"interval": "1m", "input_series": [{"series": condition(deployment), "values": values}],
                "alert_rule_test": [{"eval_time": t, "alertname": REFUSED_ALERT, "exp_alerts": fired}
                                    for t, fired in expected]}
    tests = [case("m-predictor", "_x10 1x30", [("14m", []), ("15m", firing), ("40m", firing)]),
             case("m-predictor", "_x10 1x2 stale", [(t, []) for t in ("13m", "15m", "20m")]),
             case("other-predictor", "_x10 1x30", [(t, []) for t in ("15m", "40m")])]
    done = promtool.run_rule_tests([{"name": "m", "rules": [rule]}], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_series_of_a_page_is_pending_on_its_own_clock() -> None:
    """As Prometheus's rule manager keeps `activeAt` per label set: pod a is down to 60 s, pod b
    from 90 s; held 120 s, evaluated every 30 s, the page fires at 210 s (b pending from 90 s),
    not at 150 s as one clock started by a would have it."""
    store = Store()
    for t in range(0, 301, 15):
        store.add(float(t), "x", (("pod", "a"),), 0.0 if t <= 60 else 1.0)
        store.add(float(t), "x", (("pod", "b"),), 0.0 if t >= 90 else 1.0)
    assert first_fired_s(store, "x == 0", 120.0, 300.0) == 210.0
