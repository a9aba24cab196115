"""What the autoscaling query's lost-pod term buys, what it costs, and what it leans on.

The plan's query counts a pod of the model whose scrapes time out and that is not being deleted
as one more replica wanted (serving/autoscaling.py `lost_pods`): a pod on a lost node counts for
its ReplicaSet until its eviction (90 s after the loss), so without the term nothing replaces it
sooner. For each case (a
trace, a model of the prod plan as benchmarks/autoscaling.py builds it, and the moment the fullest
zone is lost: the busiest minute, or a moment the sweep failed at) this runs the checklist's
zone-loss item:

- with the plan's query, and with the same query minus the term (its floor kept): the window's
  bad share, the first replacement's decision after the loss, the run's slice and node GPU-hours
  (the term's extra replicas, which the HPA holds for its scale-down window once the eviction
  frees the lost pods, cost GPU time);
- with the plan's query while the HPA's metric reads fail for the first 30 s and 55 s after the
  loss (`metric_outages`): a Prometheus, KEDA operator or metrics-server replica lost with the
  zone stays a Service endpoint until NotReady, about 55 s, so reads fail until then (one in two,
  with two replicas; every one in the worst case);
- with new nodes launched in the zones up while the zone is down, and without (Karpenter on EKS
  pins every new node to the lost zone: stacks/simulation.py), each judged over the zone-loss
  window and over the rest of the run after it (an outage outlasts the window).

Every run also says when the model's replicas-overdue page would have fired after the loss
(`overdue_paged_after_s`, None if never: serving/slo_rules.py `overdue_rule`).

Writes benchmarks/results/lost_pods.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.simulator import FULLEST, Failover, KedaAutoscaler, Simulation, ZoneFailure, load_azure_2023  # noqa: E402
from stacks.simulation import Deployment, deployment, select  # noqa: E402
from stacks.slo_alerts import overdue_page  # noqa: E402
from stacks.slo_check import busiest_minute, checklist, figures, last_whole_window_start  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "lost_pods.json"
# (trace, model, moment in s or None for the busiest minute with a whole window after it)
CASES: tuple[tuple[str, str, float | None], ...] = (
    ("code", "qwen-vl", 600.0), ("code", "llama-8b", 600.0),
    ("conv", "llama-70b", None), ("conv", "llama-8b", None), ("conv", "qwen-vl", None),
    ("conv", "llama-3b", None), ("code", "llama-70b", None),
)
BLIND_S = (30.0, 55.0)
_LOST_TERM = re.compile(r" \+ [\d.e+-]+ \* \(count\(.*\) or vector\(0\)\)$")


def without_lost_term(query: str) -> str:
    """The plan's query with its lost-pod term removed and its floor kept."""
    stripped, n = _LOST_TERM.subn("", query)
    if n != 1:
        raise ValueError(f"no lost-pod term at the end of {query!r}")
    return stripped


def _run(dep: Deployment, trace: Any, at: float, query: str, blind_s: float = 0.0,
         new_nodes: bool | None = None, failover: Failover | None = None,
         judged: Failover | None = None, max_replicas: int | None = None,
         page: bool = False) -> dict[str, Any]:
    """The zone-loss item of the plan's run with the fullest zone lost at `at`, under `query`,
    with the HPA's reads failing for `blind_s` after the loss, and with the fleet's failover
    (its node launches while the zone is down, or all of it) replaced where given. The item
    judges the window of `judged` when given (runs compared over one window: a later eviction
    lengthens the window, and good requests after the recovery then dilute its share), and the
    ScaledObject's maxReplicaCount is `max_replicas` when given. `held_at_loss` is the
    Deployment's replicas as the zone went; with `page`, `overdue_paged_after_s` is when the
    replicas-overdue page fires after the loss (its evaluation costs about as much as the run)."""
    fleet = bench._start_fleet(dep, trace, "plan")
    if failover is not None:
        fleet = replace(fleet, failover=failover)
    if new_nodes is not None:
        fleet = replace(fleet, failover=replace(fleet.failover, new_nodes_while_down=new_nodes))
    spec = copy.deepcopy(dep.scaled_object)
    spec["triggers"][0]["metadata"]["query"] = query
    if max_replicas is not None:
        spec["maxReplicaCount"] = max_replicas
    auto = KedaAutoscaler(spec)
    held = bench.warm_replicas(dep, trace)
    auto.warm(held)
    failure = ZoneFailure(FULLEST, at)
    cfg = dep.sim_config((failure,), fleet=fleet)
    if blind_s:
        cfg = replace(cfg, metric_outages=((at, at + blind_s),))
    sim = Simulation(trace, cfg, "least-loaded", auto)
    result = sim.run()
    paged = overdue_page(sim.store, dep.plan, cfg.namespace, result.end_s)["first_fired_s"] if page else None
    moved = replace(dep, fleet=fleet if judged is None else replace(fleet, failover=judged))
    item = checklist(result, moved, trace, failure)[3]
    figs = figures(result, moved)
    decided = sorted(s.decided_s for s in result.starts if s.decided_s >= at)
    ready = sorted(s.ready_s for s in result.starts if s.decided_s >= at)
    after = result.arrival_s >= at + bench.zone_loss_window_s(moved)
    bad_after = int((after & ~result.attained()).sum())
    held = next((to for t, _, to in reversed(result.scale_events) if t < at), held)
    return {"status": item.status, "bad": item.figures["bad"], "bad_share": item.figures["bad_share"],
            "after_window": {"requests": int(after.sum()), "bad": bad_after,
                             "bad_share": round(bad_after / after.sum(), 6) if after.any() else None},
            "error_budget": item.figures["error_budget"],
            "first_replacement_after_s": round(decided[0] - at, 1) if decided else None,
            # When the first two replacements could serve (the VL model's code moment needs two).
            "replacements_ready_after_s": [round(r - at, 1) for r in ready[:2]],
            "held_at_loss": held,
            **({"overdue_paged_after_s": None if paged is None else round(paged - at, 1)} if page else {}),
            "gpu_hours": figs["gpu_hours"], "node_gpu_hours": figs["node_gpu_hours"]}


def setup(plan: Any, base: Any, model: str, at: float | None,
          seed: int = 0) -> tuple[Deployment, Any, float]:
    """The model's deployment, its hour of `base` as benchmarks/autoscaling.py replays it (the
    rate scaling's draw `seed`), and the moment of the loss: `at` seconds into the trace, or None
    for the busiest minute that a whole zone-loss window can follow."""
    (mp,) = select(plan, model)
    dep = deployment(plan, mp)
    trace = bench.trace_for(mp, base, seed=seed)
    trace = trace.window(0.0, 3600.0) if trace.duration_s > 3600.0 else trace
    if at is None:
        latest = last_whole_window_start(trace.arrival_s, bench.zone_loss_window_s(dep))
        return dep, trace, busiest_minute(trace.arrival_s, latest)[0]
    return dep, trace, float(trace.arrival_s[0]) + at


def case(plan: Any, base: Any, model: str, at: float | None, seed: int = 0) -> dict[str, Any]:
    dep, trace, at = setup(plan, base, model, at, seed)
    mp = dep.plan
    query = dep.scaled_object["triggers"][0]["metadata"]["query"]
    return {"model": model, "at_s": round(at, 1), "replicas_bounds": [mp.min_replicas, mp.max_replicas],
            "with_term": _run(dep, trace, at, query),
            "without_term": _run(dep, trace, at, without_lost_term(query)),
            "blind": {f"{b:g}s": _run(dep, trace, at, query, b) for b in BLIND_S},
            "new_nodes_while_down": {str(n).lower(): _run(dep, trace, at, query, new_nodes=n, page=True)
                                     for n in (True, False)}}


def each_case(stack: str, cases: Iterable[tuple[str, str, float | None]],
              ) -> Iterator[tuple[str, Any, Any, str, float | None]]:
    """(trace name, plan, trace, model, moment) for each of `cases`, the stack planned once a trace
    as benchmarks/autoscaling.py plans it."""
    config = load(stack)
    for tname in ("conv", "code"):
        base = load_azure_2023(bench.TRACES[tname])
        plan, _ = bench.plan_for(config.platform, config.source, base, tname)
        for trace_name, model, at in cases:
            if trace_name == tname:
                yield tname, plan, base, model, at


def seeded(out: Path, seed: int) -> Path:
    """Where draw `seed` of a benchmark writing to `out` goes: `out` itself for the first draw."""
    return out.with_name(f"{out.stem}_seed{seed}{out.suffix}") if seed else out


def run_cases(argv: list[str] | None, description: str, out: Path,
              cases: Iterable[tuple[str, str, float | None]],
              case_fn: Callable[[Any, Any, str, float | None, int], dict[str, Any]],
              describe: Callable[[dict[str, Any]], str], extra: dict[str, Any] | None = None) -> int:
    """The command line of a benchmark over zone-loss cases (this one's and benchmarks/failover.py):
    each case's row from `case_fn`, a line of `describe` for it, all rows (and `extra`) to `--out`
    (with `--seed N`, another draw of the rate scaling, beside it as `<name>_seedN.json`)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0, help="the rate scaling's draw (default 0)")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = seeded(out, args.seed)
    started = time.perf_counter()
    rows = []
    for tname, plan, base, model, at in each_case(args.stack, cases):
        row = {"trace": tname, **case_fn(plan, base, model, at, args.seed)}
        rows.append(row)
        shown = "-" if row["at_s"] is None else f"{row['at_s']:.0f}"
        print(f"{tname:4} {model:10} lost at {shown:>6} s{describe(row)}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"stack": args.stack, "seed": args.seed,
                                    "run_s": round(time.perf_counter() - started, 1),
                                    **(extra or {}), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _describe(row: dict[str, Any]) -> str:
    w, wo = row["with_term"], row["without_term"]
    blind = ", ".join(f"blind {k}: {v['bad_share']:.2%} {v['status']}" for k, v in row["blind"].items())
    nodes = "; ".join(f"new nodes {k}: {v['bad_share']:.2%} {v['status']}, after the window "
                      f"{v['after_window']['bad_share']}, overdue page +{v['overdue_paged_after_s']} s"
                      for k, v in row["new_nodes_while_down"].items())
    return (f": with the term {w['bad_share']:.2%} {w['status']} (first replacement "
            f"+{w['first_replacement_after_s']} s, {w['gpu_hours']:.2f} GPU-h), without "
            f"{wo['bad_share']:.2%} {wo['status']} (+{wo['first_replacement_after_s']} s, "
            f"{wo['gpu_hours']:.2f} GPU-h); {blind}; {nodes}")


def main(argv: list[str] | None = None) -> int:
    return run_cases(argv, __doc__.splitlines()[0], OUT, CASES, case, _describe)


if __name__ == "__main__":
    raise SystemExit(main())
