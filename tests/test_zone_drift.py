"""The zone branch's drift term, which the plan leaves out and benchmarks/zone_skew.py measures
(serving/zone_branch.py `zone_query` with serving/autoscaling.py `fullest_zone`): it asks for S
survivors plus the fullest zone's serving pods where that is more than the even spread's
ceil(S Z / (Z - 1)), by Prometheus's own engine (promtool 3.5) and the simulator's alike, against
a hand count of the pods; and the simulator labels each target with its node's zone where the
PodMonitor has Prometheus do so."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serving.autoscaling import fullest_zone
from serving.simulator import StaticPolicy, Trace
from serving.simulator.promql import evaluate
from serving.simulator.sim import Simulation
from serving.zone_branch import PREDICT_WINDOW, zone_query
from stacks.simulation import deployment, select
from tests import promtool
from tests.conftest import plan_of
from tests.test_benchmarks import _load
from tests.test_promql_sets import _store, _unnamed
from tests.test_promql_subquery import _labels, _seconds


def _pods(prefix: str, zone: str, count: int, notation: str = "1x40", model: str = "x") -> dict[str, str]:
    return {f'up{{namespace="m",pod="{prefix}{i}",rtip_dev_model="{model}",zone="{zone}"}}': notation
            for i in range(1, count + 1)}


# Model x's 18 pods sit at 7/7/4 over zones a/b/c, scraped every 15 s. p7 (zone a) is scaled in
# after 150 s (refuses its scrape on SIGTERM, then its target goes); q7 (zone b) is lost after
# 300 s (its scrapes time out: `up` 0). r5 (zone c) is loading its model throughout (refused).
# s1 serves model y in zone a.
SERIES = {
    **_pods("p", "a", 6), 'up{namespace="m",pod="p7",rtip_dev_model="x",zone="a"}': "1x10 0x1 stale",
    **_pods("q", "b", 6), 'up{namespace="m",pod="q7",rtip_dev_model="x",zone="b"}': "1x20 0x20",
    **_pods("r", "c", 4), 'up{namespace="m",pod="r5",rtip_dev_model="x",zone="c"}': "0x40",
    **_pods("s", "a", 1, model="y"),
    # u1 serves x from a target without the zone label (a PodMonitor that does not write it):
    # left out, not one zone of its own.
    'up{namespace="m",pod="u1",rtip_dev_model="x"}': "1x40",
}
TIMES = ["1m", "3m", "6m"]
SURVIVORS, ZONES, TARGET = 12, 3, 2.0  # S from a load of 11.5 at 1 req/s a survivor


def _query(model: str) -> str:
    return zone_query("vector(1)", "vector(11.5)", 1.0, 100.0, ZONES, TARGET, fullest_zone(model, "m"))


def test_the_fullest_zone_and_the_branch_agree_with_prometheus_and_a_hand_count(tmp_path: Path) -> None:
    queries = [fullest_zone("x", "m"), _query("x"), _query("none")]
    pairs = [(q, t) for q in queries for t in TIMES]
    want = promtool.evaluate(SERIES, pairs, tmp_path, interval="15s")
    store = _store(SERIES)
    got = {}
    for (query, at), named in zip(pairs, want, strict=True):
        answer = evaluate(query, store, _seconds(at))
        assert isinstance(answer, dict)
        assert {_labels(k): v for k, v in answer.items()} == pytest.approx(
            {_unnamed(k): v for k, v in named.items()}), (query, at)
        got[query, at] = answer.get((), None)
    # By hand, serving pods a zone: 7/7/4 at 1 min; 6/7/4 at 3 min (p7 gone); 6/6/4 at 6 min (q7
    # lost); r5 (loading), y's s1 and the unzoned u1 never count.
    assert [got[queries[0], t] for t in TIMES] == [7, 7, 6]
    even = -(-SURVIVORS * ZONES // (ZONES - 1))  # ceil(12 x 3 / 2) = 18
    asked = [max(even, SURVIVORS + fullest) for fullest in (7, 7, 6)]
    assert asked == [19, 19, 18]
    # The HPA divides by the target: the replicas each read asks for.
    assert [got[queries[1], t] / TARGET for t in TIMES] == asked
    # A model with no serving pod (every one loading, or none yet) falls back to the even spread.
    assert [got[queries[2], t] / TARGET for t in TIMES] == [even] * 3


def test_the_simulator_writes_each_targets_node_zone_where_the_pod_monitor_relabels_it() -> None:
    """The plan's PodMonitor writes no zone, so the simulated Prometheus writes none on any series;
    the drift variant's relabels the node's zone into `zone` (benchmarks/predictive.py
    `with_node_zone`), and then the simulated `up` carries each replica's zone: counted by it,
    the serving pods a zone are the fleet's own ready replicas a zone."""
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-8b")
    dep = deployment(plan, mp)
    assert dep.sim_config().zone_label is None
    cfg = _load("predictive").variant_deployment(dep, f"drift-{PREDICT_WINDOW}").sim_config()
    assert cfg.zone_label == "zone" and len(cfg.fleet.zones) == 3
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(1.0, 400))
    trace = Trace(arrivals, rng.integers(200, 800, 400), rng.integers(20, 100, 400), source="poisson")
    sim = Simulation(trace, replace(cfg, end_s=900.0), "least-loaded", StaticPolicy(mp.min_replicas))
    sim.run()
    by_zone = sim.fleet.ready_by_zone()
    assert sum(by_zone.values()) == mp.min_replicas
    at = 885.0  # a scrape instant, every replica long since ready
    target = f'up{{namespace="{cfg.namespace}",rtip_dev_model="{mp.model}"}}'
    counted = evaluate(f"count by (zone) ({target} == 1)", sim.store, at)
    assert counted == {(("zone", z),): float(n) for z, n in by_zone.items()}
    assert evaluate(fullest_zone(mp.model, cfg.namespace), sim.store, at) == {(): max(by_zone.values())}


def test_the_zone_label_is_read_only_where_every_endpoint_relabels_the_attached_node_zone() -> None:
    """`monitor_zone_label`: Prometheus gives a target its node's labels only with
    `attachMetadata.node`, and keeps one only through a relabelling; a relabelling that rewrites
    the value (another regex or replacement) or a later endpoint without it writes no whole zone."""
    from serving.simulator.prometheus import monitor_zone_label

    meta = "__meta_kubernetes_node_label_topology_kubernetes_io_zone"  # the name sanitised by hand
    keep = {"sourceLabels": [meta], "targetLabel": "az"}

    def spec(attach: object, *relabelings: list[dict[str, Any]]) -> dict[str, Any]:
        return {"attachMetadata": {"node": attach},
                "podMetricsEndpoints": [{"port": "http", "relabelings": r} for r in relabelings]}

    assert monitor_zone_label(spec(True, [keep])) == "az"
    assert monitor_zone_label(spec(True, [{**keep, "action": "Replace", "replacement": "${1}"}])) == "az"
    assert monitor_zone_label(spec(False, [keep])) is None
    assert monitor_zone_label({"podMetricsEndpoints": [{"relabelings": [keep]}]}) is None
    assert monitor_zone_label(spec(True, [{**keep, "regex": "(.*)-[a-z]"}])) is None
    assert monitor_zone_label(spec(True, [{**keep, "action": "labelmap"}])) is None
    assert monitor_zone_label(spec(True, [keep], [])) is None  # the second endpoint writes none
    assert monitor_zone_label(spec(True)) is None
