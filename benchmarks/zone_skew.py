"""How far the plan's zones' ready replicas drift from even, what a drift term in the zone branch
would do about it, and a zone lost at the worst drift.

The zone branch asks for the fewest replicas R whose survivors of the fullest zone carry the
load, R - ceil(R / Z) of them (serving/zone_branch.py), which holds while the zones are even.
Topology spread evens the zones' pods as they are placed, but not their ready replicas at every
moment: the ReplicaSet scales in by node and age, not by zone (controller_utils.go
ActivePodsWithRanks; the simulator's `_deletion_rank`), and a scale-up's replicas become ready at
different times. So the fullest zone can hold more than ceil(ready / Z) ready replicas, and a loss
then leaves fewer survivors than the branch sized, and the lost zone takes more of the fleet (its
requests in flight, and those routed to its replicas before the picker drops them).

For each trace and model of the prod plan, as benchmarks/autoscaling.py replays them, this runs
three fleets with every zone up: the plan's; the plan's with a drift term in its query (`drift-term`:
at least S plus the fullest zone's serving pods, read off a PodMonitor that writes each target's
node zone); and the plan's with a controller that keeps each pod's
`controller.kubernetes.io/pod-deletion-cost` at minus its zone's pods, so a scale-in takes the
fullest zone's first (`zone-deletion-cost`). Neither variant is emitted. Every 5 s sample gives
the fullest zone's ready replicas against the even share ceil(ready / Z) (the share of the run
with a zone above it, the most above it), and whether the ready replicas outside the fullest zone
are fewer than the survivors S the branch reads then (`survivors_short_share`: a scale-up still
starting counts too); and the run's GPU-hours. Each fleet then loses its fullest zone at its most
skewed moment a whole zone-loss window can follow (ties: the most requests in flight), and the
variants also at the plan's, and the checklist's zone-loss item is judged there. A run without
skew says so and loses nothing. Where the plan fails at its worst moment, its zone loss is also
swept every 60 s over the same run (`dense_sweep`), to tell a rare moment from a failing run.

Writes benchmarks/results/zone_skew.json (with `--seed N`, another draw of the rate scaling:
zone_skew_seedN.json beside it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402
import lost_pods  # noqa: E402
import predictive  # noqa: E402

from serving.simulator import SimResult, Simulation  # noqa: E402
from serving.simulator.promql import evaluate  # noqa: E402
from stacks.simulation import Deployment  # noqa: E402
from stacks.slo_check import figures, last_whole_window_start  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "zone_skew.json"
AFTER_SAMPLE_S = 0.001
CASES: tuple[tuple[str, str, float | None], ...] = tuple(
    (trace, model, None) for trace in ("conv", "code")
    for model in ("llama-70b", "llama-8b", "qwen-vl", "llama-3b"))


def skew(result: SimResult, zones: int, latest_s: float) -> dict[str, Any]:
    """The fullest zone's ready replicas above the even share ceil(ready / zones), per sample:
    the share of samples above it, the most above it, and the sample a zone loss should hit (the
    most above it at or before `latest_s`, ties to the most requests in flight; None without any)."""
    t = np.asarray(result.series["t"])
    ready = np.asarray(result.series["ready"])
    excess = np.asarray(result.series["fullest_ready"]) - np.ceil(ready / zones)
    load = np.asarray(result.series["running"]) + np.asarray(result.series["waiting"])
    fits = t <= latest_s
    worst = float(excess[fits].max()) if fits.any() else 0.0
    at = None
    if worst > 0:
        picks = np.flatnonzero(fits & (excess == worst))
        pick = int(picks[np.argmax(load[picks])])
        at = float(t[pick])
    return {"samples": len(t), "skewed_share": round(float((excess > 0).mean()), 4) if len(t) else 0.0,
            "most_above_even": int(excess.max()) if len(t) else 0, "worst_at_s": at,
            "worst_in_window": int(worst)}


def survivors_short(result: SimResult, survivors: list[float]) -> float:
    """The share of samples whose ready replicas outside the fullest zone are fewer than the
    survivors the branch read at that sample (`survivors`, one a sample; NaN: none read)."""
    outside = np.asarray(result.series["ready"]) - np.asarray(result.series["fullest_ready"])
    wanted = np.asarray(survivors, dtype=float)
    if not len(wanted):
        return 0.0
    return round(float(np.mean(np.nan_to_num(wanted, nan=0.0) > outside)), 4)


def replay(dep: Deployment, trace: Any) -> tuple[SimResult, list[float]]:
    """The plan's run under `dep`'s query with every zone up, and at each sample the survivors
    S its zone branch reads (the 5-minute fit's share, rounded up), off the run's Prometheus."""
    fleet = bench._start_fleet(dep, trace, "plan")
    sim = Simulation(trace, dep.sim_config(fleet=fleet), "least-loaded", bench._policy("plan", dep, trace))
    result = sim.run()
    expr = f"ceil({predictive.variant_survivors(dep, f'predict-{predictive.PREDICT_WINDOW}')})"
    survivors = []
    for t in result.series["t"]:
        got = evaluate(expr, sim.store, float(t))
        survivors.append(next(iter(got.values())) if isinstance(got, dict) and got else float("nan"))
    return result, survivors


def _zone_cost(dep: Deployment) -> Deployment:
    return replace(dep, fleet=replace(dep.fleet, deletion_cost_by_zone=True))


# The plan; the same with the drift term the plan leaves out; the plan with a controller keeping
# each pod's deletion cost at minus its zone's pods (neither emitted).
VARIANTS: dict[str, Callable[[Deployment], Deployment]] = {
    "plan": lambda dep: dep,
    "drift-term": lambda dep: predictive.variant_deployment(dep, predictive.DRIFT),
    "zone-deletion-cost": _zone_cost,
}
_LOSS_KEYS = ("zone", "at_s", "status", "bad", "failed_in_flight", "requests", "bad_share", "error_budget")


def _loss_at(dep: Deployment, trace: Any, at_s: float) -> dict[str, Any]:
    loss = bench.zone_loss_at(dep, trace, "plan", at_s)
    return {k: loss[k] for k in _LOSS_KEYS}


def _loss(dep: Deployment, trace: Any, sample_s: float | None) -> dict[str, Any] | None:
    # Just after the sample: at one instant the simulator takes a zone failure before the
    # autoscaler's decision and samples after it, so a loss at the sample's own instant would meet
    # the fleet before a scale-in that the sample already shows.
    return None if sample_s is None else _loss_at(dep, trace, sample_s + AFTER_SAMPLE_S)


# Where the plan's worst moment fails: a sweep this dense over the same run tells a rare moment
# from a run that fails at many (the published sweep loses a zone every 300 s).
DENSE_SWEEP_S = 60.0


def dense_sweep(dep: Deployment, trace: Any) -> dict[str, Any]:
    """The plan's zone loss every DENSE_SWEEP_S with a whole window left: how many moments fail,
    and the worst."""
    moments = bench.zone_loss_moments(trace, bench.zone_loss_window_s(dep), DENSE_SWEEP_S)
    losses = [_loss_at(dep, trace, t) for t in moments]
    return {"every_s": DENSE_SWEEP_S, "moments": len(losses),
            "failed": sum(1 for r in losses if r["status"] != "PASS"),
            "worst": max(losses, key=lambda r: r["bad_share"]) if losses else None}


def _fleet_at(result: SimResult, survivors: list[float], t: float) -> dict[str, Any]:
    """The ready replicas the sample at `t` saw, its fullest and emptiest zone's, and the S the
    branch read then: the fleet a zone lost just after it meets."""
    k = int(np.flatnonzero(np.asarray(result.series["t"]) == t)[0])
    return {"ready": int(result.series["ready"][k]), "fullest_ready": int(result.series["fullest_ready"][k]),
            "emptiest_ready": int(result.series["emptiest_ready"][k]), "survivors_wanted": survivors[k]}


def case(plan: Any, base: Any, model: str, at: float | None, seed: int = 0) -> dict[str, Any]:
    dep, trace, _ = lost_pods.setup(plan, base, model, at, seed)
    latest = last_whole_window_start(trace.arrival_s, bench.zone_loss_window_s(dep))
    rows: dict[str, dict[str, Any]] = {}
    for name, make in VARIANTS.items():
        run = make(dep)
        result, survivors = replay(run, trace)
        found = skew(result, len(run.fleet.zones), latest - AFTER_SAMPLE_S)
        figs = figures(result, run)
        at_worst = {} if found["worst_at_s"] is None else {
            "at_worst": _fleet_at(result, survivors, found["worst_at_s"])}
        rows[name] = {**found, **at_worst, "survivors_short_share": survivors_short(result, survivors),
                      "gpu_hours": figs["gpu_hours"], "node_gpu_hours": figs["node_gpu_hours"],
                      "zone_loss_at_worst": _loss(run, trace, found["worst_at_s"])}
        plans_worst = rows["plan"]["worst_at_s"]
        if name != "plan":  # and where the plan's worst drift was, for a like-for-like reading
            rows[name]["zone_loss_at_plans_worst"] = (
                rows[name]["zone_loss_at_worst"] if plans_worst == found["worst_at_s"]
                else _loss(run, trace, plans_worst))
            if plans_worst is not None:
                rows[name]["at_plans_worst"] = _fleet_at(result, survivors, plans_worst)
    worst = rows["plan"]["zone_loss_at_worst"]
    if worst is not None and worst["status"] != "PASS":
        rows["plan"]["dense_sweep"] = dense_sweep(dep, trace)
    mp = dep.plan
    return {"model": model, "at_s": rows["plan"]["worst_at_s"],
            "replicas_bounds": [mp.min_replicas, mp.max_replicas], "zones": len(dep.fleet.zones),
            **rows["plan"], "drift_term": rows["drift-term"],
            "zone_deletion_cost": rows["zone-deletion-cost"]}


def _lost(loss: dict[str, Any] | None) -> str:
    return ("none" if loss is None else f"at {loss['at_s']:.0f} s {loss['bad_share']:.2%} of "
            f"{loss['requests']} {loss['status']} (budget {loss['error_budget']:.2%})")


def _describe(row: dict[str, Any]) -> str:
    parts = []
    for name, got in (("plan", row), ("drift", row["drift_term"]), ("zone cost", row["zone_deletion_cost"])):
        also = f"; at the plan's worst {_lost(got['zone_loss_at_plans_worst'])}" if name != "plan" else ""
        if "dense_sweep" in got:
            d = got["dense_sweep"]
            also += (f"; every {d['every_s']:g} s: {d['failed']} of {d['moments']} moments fail, the worst "
                     f"{_lost(d['worst'])}")
        parts.append(f"{name}: above even {got['skewed_share']:.1%} (+{got['most_above_even']}), "
                     f"short of S {got['survivors_short_share']:.1%}, {got['gpu_hours']:.2f} GPU-h; "
                     f"lost at its worst {_lost(got['zone_loss_at_worst'])}{also}")
    return ":\n  " + "\n  ".join(parts)


def main(argv: list[str] | None = None) -> int:
    return lost_pods.run_cases(argv, __doc__.splitlines()[0], OUT, CASES, case, _describe)


if __name__ == "__main__":
    raise SystemExit(main())
