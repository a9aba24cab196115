"""The replicas-overdue page (serving/slo_rules.py `overdue_rule`): replicas the HPA has wanted for
longer than any cold start, still not serving. Checked by Prometheus's own rule engine (promtool)
at hand-computed minutes, by the simulated PromQL against promtool's answers, in a simulated zone
outage as Karpenter lives it (no node for the replacement), and in the rules every stack emits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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
from serving.simulator.prometheus import predictor_deployment
from serving.simulator.promql import evaluate
from serving.simulator.sim import SimConfig
from serving.slo_rules import OVERDUE_ALERT, overdue_expr, overdue_rule, prometheus_rule
from serving.tiers import TIERS
from stacks.slo_alerts import first_fired_s
from tests import promtool
from tests.conftest import plan_of, record_of
from tests.test_promql_sets import _store, _unnamed
from tests.test_promql_subquery import _labels, _seconds

NS = "rtip-models"
LABELS = {"model": "m", "tier": "interactive"}
# Ten minutes a replica may take here (a stack's come from its cold start: below).
OVERDUE_S = 600.0


def _series(desired: str, available: str, updated: str = "3x40", spec: str = "3x40") -> dict[str, str]:
    """Model m's HPA and Deployment as kube-state-metrics exports them, one sample a minute, with
    another model's Deployment beside them, short throughout."""
    dep = f'namespace="{NS}",deployment="m-predictor"'
    return {
        f'kube_horizontalpodautoscaler_status_desired_replicas{{namespace="{NS}",'
        f'horizontalpodautoscaler="keda-hpa-m"}}': desired,
        f"kube_deployment_status_replicas_available{{{dep}}}": available,
        f"kube_deployment_status_replicas_updated{{{dep}}}": updated,
        f"kube_deployment_spec_replicas{{{dep}}}": spec,
        f'kube_deployment_status_replicas_available{{namespace="{NS}",deployment="other-predictor"}}': "0x40",
    }


# A replica lost at minute 11 and never back: from minute 20 no sample of the last ten minutes
# (minutes 11-20) had 3 available, so the page holds from 20 and fires at 22.
LOST = _series("3x40", "3x10 2x30")
# The replacement serves at minute 18, within the ten minutes: nothing.
REPLACED = _series("3x40", "3x10 2x7 3x22")
# Growth: the HPA asks for a fourth replica at 11 and a fifth at 21, each served 8 minutes later.
# Whatever it wanted throughout any ten minutes was served within them: nothing.
GROWING = _series("3x10 4x10 5x19", "3x18 4x10 5x11")
# A rollout (KServe: maxUnavailable 25 %) that runs short for 20 minutes: left out.
ROLLOUT = _series("3x40", "3x10 2x20 3x9", updated="3x10 2x20 3x9")


def _rule() -> dict:
    return overdue_rule("m", NS, "m-predictor", OVERDUE_S, LABELS)


def test_the_page_fires_when_promtool_says_and_only_then(tmp_path: Path) -> None:
    firing = [{"exp_labels": {"severity": "page", **LABELS, "namespace": NS,
                              "horizontalpodautoscaler": "keda-hpa-m"},
               "exp_annotations": _rule()["annotations"]}]

    def case(series: dict[str, str], expected: list[tuple[str, list]]) -> dict:
        return {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "alert_rule_test": [{"eval_time": t, "alertname": OVERDUE_ALERT, "exp_alerts": fired}
                                    for t, fired in expected]}
    quiet = [(t, []) for t in ("12m", "20m", "21m", "30m", "39m")]
    tests = [case(LOST, [("19m", []), ("21m", []), ("22m", firing), ("39m", firing)]),
             case(REPLACED, quiet), case(GROWING, quiet), case(ROLLOUT, quiet)]
    done = promtool.run_rule_tests([{"name": "m", "rules": [_rule()]}], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "zones_down" in _rule()["annotations"]["description"]


def test_the_simulated_promql_reads_it_as_prometheus_does(tmp_path: Path) -> None:
    expr = overdue_expr("m", NS, "m-predictor", OVERDUE_S)
    times = ["10m", "19m", "20m", "25m", "38m"]
    for series in (LOST, REPLACED, GROWING, ROLLOUT):
        want = promtool.evaluate(series, [(expr, t) for t in times], tmp_path, interval="1m")
        store = _store(series, step_s=60.0)
        for at, named in zip(times, want, strict=True):
            got = evaluate(expr, store, _seconds(at))
            assert isinstance(got, dict)
            expected = {_unnamed(k): v for k, v in named.items()}
            assert {_labels(k): v for k, v in got.items()} == expected, (series, at)
    assert evaluate(expr, _store(LOST, step_s=60.0), _seconds("20m")) != {}  # not vacuous


STEP = StepTime(0.03, 0.0001, 0.012, 0.0004)


def _outage(new_nodes: bool) -> float | None:
    """Three replicas, one a zone on one-slot nodes, under a request every 10 s; zone a lost at
    600 s, its pod deleted 90 s later, and the replacement needing a new node that (as Karpenter
    during a zone outage) may not come. When does a 300 s overdue page fire?"""
    trace = Trace(np.arange(0.0, 1500.0, 10.0), [200] * 150, [20] * 150)
    fleet = FleetConfig(zones=("a", "b", "c"), initial_replicas=3, initial_nodes=3,
                        cold_start=ColdStartSpec(full_s=60.0, warm_s=30.0, node_ready_s=30.0),
                        failover=Failover(route_s=1.0, not_ready_s=50.0, evict_s=90.0,
                                          new_nodes_while_down=new_nodes))
    cfg = SimConfig(engine=EngineConfig(step=STEP, kv_blocks=2_000), fleet=fleet, targets=Targets(1.0, 0.1),
                    zone_failures=(ZoneFailure("a", 600.0),), model_name="m", namespace=NS, end_s=1500.0)
    sim = Simulation(trace, cfg, "least-loaded", StaticPolicy(3))
    sim.run()
    return first_fired_s(sim.store, overdue_expr("m", NS, predictor_deployment("m"), 300.0), 120.0, 1500.0)


def test_a_replacement_that_finds_no_node_pages_and_one_that_serves_does_not() -> None:
    # By hand: the last scrape with 3 available is at 585 s (the scrape at 600 s follows the
    # loss); from the evaluation at 900 s (every 30 s) the 300 s window holds none, so the page is
    # pending from 900 s and fires at 1,020 s.
    assert _outage(new_nodes=False) == 1020.0
    # A new node in zone b or c: the replacement serves at 750 s, inside every window.
    assert _outage(new_nodes=True) is None


def test_every_model_s_rule_pages_for_its_own_replicas_after_its_cold_start() -> None:
    """Each emitted rule names the HPA KEDA makes for the model's ScaledObject and the Deployment
    its ScaledObject scales, over a window of one loss with its zone and the model's cold start
    with a new node: 90 s to the lost pod's eviction (a 50 s grace, 5 s for the monitor to see it
    and 5 more to taint, then the predictors' 30 s toleration), provisioning and node init, then
    1.5x the image pull, weights and engine start (the startup probe's allowance)."""
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
        cold = next(m.cold_start for m in plan.models if m.model == name)  # the same in every region
        window = 90 + cold.node_provisioning_s + cold.node_init_s + 1.5 * (
            cold.image_pull_s + cold.weights_load_s + cold.engine_start_s)
        assert f'horizontalpodautoscaler="keda-hpa-{name}"}}[{int(np.ceil(window))}s]' in page["expr"]
        assert f'deployment="{target}"' in page["expr"] and page["labels"]["severity"] == "page"


def test_a_rule_without_the_deployment_has_no_page() -> None:
    rule = prometheus_rule("m", NS, TIERS["interactive"], {"name": "m-slo", "namespace": NS})
    assert OVERDUE_ALERT not in {a.get("alert") for g in rule["spec"]["groups"] for a in g["rules"]}


@pytest.mark.parametrize("overdue_s", [300.0, 923.4])
def test_the_window_is_whole_seconds_at_least_the_overdue_time(overdue_s: float) -> None:
    assert f"[{int(np.ceil(overdue_s))}s]" in overdue_expr("m", NS, "m-predictor", overdue_s)
