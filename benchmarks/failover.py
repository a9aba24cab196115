"""What the endpoint picker's staleness filter and the predictors' 30 s toleration buy in a zone loss.

A lost zone's pods keep their place in the endpoint picker until it learns they are gone, and in
their ReplicaSet until they are evicted (serving/failover.py has the timeline and its upstream
sources). The plan configures both: the picker drops an endpoint whose metrics are a poll timeout
(1 s) old, and the predictors tolerate an unreachable node for 30 s instead of Kubernetes' 300 s.
For each case (a trace, a model of the prod plan as benchmarks/autoscaling.py builds it, the
moment the fullest zone is lost), this runs the checklist's zone-loss item with the failover as
emitted and with each of these undone:

- `as-emitted`: `serving.failover.predictor_failover()`;
- `no-filter`: the inferencepool chart's default profile, no filter: the picker keeps choosing a
  lost pod until the API marks it NotReady (56 s), and each request sent there fails;
- `filter-2s`: the filter at twice the poll timeout;
- `toleration-300s`: the default toleration (eviction at 360 s), what a stack without the
  toleration would emit;
- `instant`: the lost pods gone and replaced at once (the simulator's first, idealised model);
- `blind-55s` and `blind-55s-toleration-300s`: the emitted failover and the default toleration
  with every HPA read failing for 55 s after the loss (a Prometheus, KEDA operator or metrics
  server replica lost with the zone stays an endpoint until NotReady): the lost-pod term acts
  late, and the eviction is the other way a lost pod is replaced;
- `at-max` and `at-max-toleration-300s`: both with the ScaledObject's max cut, for the whole run,
  to the replicas the emitted run held as the zone went, so the term can add nothing and only the
  eviction replaces the lost pods (the run before the loss can differ where the fleet held more
  earlier: the 8B's code run, 7.02 against 7.64 GPU-hours).

- `picker-handover` and `picker-stuck`: the model's endpoint-picker leader lost with the zone
  (serving/failover.py): every request fails until the standby is a Ready endpoint (21.4 s), the
  best case, or until the gateway's connections to the dead leader die (924.6 s), as they do
  with the pinned AI Gateway.

Every variant is judged over the plan's zone-loss window (its eviction plus a cold start): a
variant's own window would be longer with a later eviction, and the good requests after the
recovery would dilute its share.

Writes benchmarks/results/failover.json.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import lost_pods  # noqa: E402

from serving._model_pod import UNREACHABLE_TAINT  # noqa: E402
from serving._model_pod import tolerations as pod_tolerations  # noqa: E402
from serving.failover import (  # noqa: E402
    PICKER_HANDOVER_S,
    PLUGINS_FILE,
    STUCK_CONNECTION_S,
    failover,
    picker_config,
    picker_values,
    predictor_failover,
)
from serving.simulator import Failover  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "failover.json"
# (trace, model, moment in s into the trace or None for the busiest minute with a whole window after it)
CASES: tuple[tuple[str, str, float | None], ...] = (
    ("conv", "llama-70b", None), ("conv", "llama-8b", None), ("conv", "qwen-vl", None),
    ("conv", "llama-3b", None), ("code", "llama-70b", None), ("code", "qwen-vl", 600.0),
    ("code", "llama-8b", 600.0),
)
VARIANTS = ("as-emitted", "no-filter", "filter-2s", "toleration-300s", "instant", "blind-55s",
            "blind-55s-toleration-300s", "at-max", "at-max-toleration-300s", "picker-handover",
            "picker-stuck")
BLIND_S = 55.0


def _values_with_threshold(threshold: str) -> dict[str, object]:
    """The picker's values with the staleness filter's threshold set to `threshold`."""
    config = picker_config()
    for plugin in config["plugins"]:  # type: ignore[attr-defined]
        if "metricsStalenessThreshold" in plugin.get("parameters", {}):
            plugin["parameters"]["metricsStalenessThreshold"] = threshold
    return {"pluginsConfigFile": PLUGINS_FILE,
            "pluginsCustomConfig": {PLUGINS_FILE: yaml.safe_dump(config, sort_keys=False)}}


def variant(name: str, emitted: Failover) -> Failover:
    """The failover a variant runs, kept at the plan's node launches."""
    tolerations = pod_tolerations(())
    for setting in ("blind-55s", "at-max"):  # what a variant does to the HPA, not the failover
        name = "as-emitted" if name == setting else name.removeprefix(f"{setting}-")
    if name == "as-emitted":
        made = predictor_failover()
    elif name == "no-filter":
        made = failover({}, tolerations)
    elif name == "filter-2s":
        made = failover(_values_with_threshold("2s"), tolerations)
    elif name == "toleration-300s":
        # Without its own toleration the admission plugin's default applies.
        made = failover(picker_values(), [t for t in tolerations if t.get("key") != UNREACHABLE_TAINT])
    elif name == "instant":
        made = Failover()
    elif name in ("picker-handover", "picker-stuck"):
        stall = PICKER_HANDOVER_S if name == "picker-handover" else STUCK_CONNECTION_S
        made = replace(predictor_failover(), picker_stall_s=stall)
    else:
        raise ValueError(name)
    return replace(made, new_nodes_while_down=emitted.new_nodes_while_down,
                   zones_out_of_pools=emitted.zones_out_of_pools)


def case(plan: Any, base: Any, model: str, at: float | None, seed: int = 0) -> dict[str, Any]:
    dep, trace, at = lost_pods.setup(plan, base, model, at, seed)
    query = dep.scaled_object["triggers"][0]["metadata"]["query"]
    emitted, planned = dep.fleet.failover, predictor_failover()
    if (emitted.route_s, emitted.evict_s) != (planned.route_s, planned.evict_s):
        raise SystemExit(f"{model}: the deployment's failover {emitted} is not the emitted one")
    runs: dict[str, Any] = {}
    for name in VARIANTS:
        made = variant(name, emitted)
        blind = BLIND_S if name.startswith("blind-") else 0.0
        cut = runs["as-emitted"]["held_at_loss"] if name.startswith("at-max") else None
        run = lost_pods._run(dep, trace, at, query, blind_s=blind, failover=made, judged=emitted,
                             max_replicas=cut)
        runs[name] = {"route_s": made.route_s, "evict_s": made.evict_s, **run}
    return {"model": model, "at_s": round(at, 1),
            "replicas_bounds": [dep.plan.min_replicas, dep.plan.max_replicas], "runs": runs}


def _describe(row: dict[str, Any]) -> str:
    runs = "; ".join(f"{k} {v['bad_share']:.2%} {v['status']}" for k, v in row["runs"].items())
    return f" (budget {row['runs']['as-emitted']['error_budget']:.2%}): {runs}"


def main(argv: list[str] | None = None) -> int:
    return lost_pods.run_cases(argv, __doc__.splitlines()[0], OUT, CASES, case, _describe,
                               {"variants": list(VARIANTS)})


if __name__ == "__main__":
    raise SystemExit(main())
