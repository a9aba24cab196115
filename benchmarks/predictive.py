"""Does a predictive growth term earn its keep? The plan's zone branch holds survivors for the load
a cold start ahead, a 5-minute fit capped at the stack's stated growth (rate x (1 + h)), the term
this benchmark chose on three draws. This replays both Azure
traces, as `benchmarks/autoscaling.py` plans and scales them, through the plan's ScaledObject with
that branch's growth term replaced:

- stated: the stack's stated growth (rate x (1 + h), h from the stated growth), as the plan
  emitted it until the 5-minute fit passed every item on three draws;
- predict-W: the load Prometheus's `predict_linear` expects one cold start ahead, fitted to the
  completion rate over the last W (a subquery at the 15 s polling step), held between the rate
  now and the stated growth, the stated growth when the fit is empty:
  `serving.zone_branch.predicted_load`, for W of 5 (the plan as emitted), 10 and 20 minutes
  (shorter follows a ramp sooner, longer is less noisy). The prediction may only lower the
  provision: the stack's stated growth is the most it promises to hold, and an uncapped fit
  overshoots whenever its window holds a fresh start (every counter at 0: a new rollout, a
  Prometheus without history), as each replay's own start did (an uncapped 12-minute projection
  of the first minute's climb put the 8B at its ceiling of 34 replicas within 45 s, where the
  stated growth held 20-23);
- none: no growth term (the load now; the zone surplus alone).

Every variant keeps the plan's in-flight branch, bounds, behavior and the ceiling (stated peak and
burst headroom). Each run is judged on the checklist as the autoscaling benchmark judges the plan:
the SLO over the run, the tail at the busiest minute, a zone lost as it begins and every 300 s
while a whole cold start is left (`autoscaling.passes_checklist`). Runs whose plan cannot scale
(min = max) are skipped: every variant is the same fleet.
`--scale-down plan,300,120` runs each variant at each HPA scale-down stabilisation window too
(`plan`: the model's own, its warm start, `serving.scale_down.scale_down_window_s`; a variant at
another window is named `<variant>@<W>s`): a shorter window gives replicas back sooner after a
busy minute, 300 s is the HPA's default.
Prints one row per run and, per model and trace, the cheapest variant that passes all four;
writes benchmarks/results/predictive.json. One hour per trace and one draw of the rate scaling per
run (`--seed` picks another): differences of a few per cent are within what another draw moves.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import sys
import time
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402
from replay import checklist_cells, judged, replays, with_query, worker_pool, write_results  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.autoscaling import (  # noqa: E402
    POLLING_INTERVAL_S,
    ZONE_TARGET_LABEL,
    completion_rate,
    fullest_zone,
    in_flight_sum,
    with_lost_pods,
)
from serving.persistence import PERSIST_S, persistent  # noqa: E402
from serving.simulator import Trace  # noqa: E402
from serving.simulator.prometheus import NODE_ZONE_META  # noqa: E402
from serving.zone_branch import PREDICT_WINDOW, predicted_load, survivor_share, zone_query  # noqa: E402
from stacks.naming import MODELS_NAMESPACE  # noqa: E402
from stacks.simulation import Deployment  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "predictive.json"
WINDOWS = ("5m", "10m", "20m")
VARIANTS = ("stated", *(f"predict-{w}" for w in WINDOWS), "none")
# The plan's fit with the zone branch's drift term (S plus the fullest zone's serving pods, which
# the plan leaves out), read off a PodMonitor that writes each target's node zone
# (benchmarks/zone_skew.py).
DRIFT = f"drift-{PREDICT_WINDOW}"


def variant_load(dep: Deployment, variant: str) -> tuple[str, float] | None:
    """The load the zone branch reads under `variant` and what one survivor carries of it a
    req/s ((1 + h) / q for stated, whose growth is the factor; 1 / q where the growth is in the
    load); None without a zone branch."""
    a = dep.plan.autoscaling
    if a.survivor_qps is None or a.ceiling_qps is None:
        return None
    rate = completion_rate(a.selector)
    if variant == "stated":
        return rate, (1 + a.headroom) / a.survivor_qps
    if variant == "none":
        return rate, 1 / a.survivor_qps
    if variant.startswith(("predict-", "drift-")):
        window = variant.partition("-")[2]
        return (predicted_load(rate, a.headroom, dep.fleet.cold_start.full_s, POLLING_INTERVAL_S, window),
                1 / a.survivor_qps)
    raise ValueError(variant)


def variant_survivors(dep: Deployment, variant: str) -> str:
    """The survivors' worth of the load under `variant`, before the branch rounds it up (the
    plan's zone branch must have it)."""
    a = dep.plan.autoscaling
    load_ = variant_load(dep, variant)
    if load_ is None or a.ceiling_qps is None or a.survivor_qps is None:
        raise ValueError(f"{a.model} has no zone branch")
    return survivor_share(load_[0], load_[1], a.ceiling_qps / a.survivor_qps)


def variant_query(dep: Deployment, variant: str, persist_s: int = PERSIST_S) -> str:
    """The plan's trigger query with the zone branch's growth term as `variant` has it, its load
    branches held over `persist_s` (serving/persistence.py; the plan's own by default)."""
    a = dep.plan.autoscaling
    load_ = variant_load(dep, variant)
    if load_ is None or a.ceiling_qps is None or a.survivor_qps is None:
        if persist_s != PERSIST_S:
            raise ValueError(f"{a.model} has no zone branch to rebuild with another persistence window")
        return a.query
    # The branch asks for ceil(S Z / (Z - 1)), S = ceil(load x per survivor); with the drift
    # term, S plus the fullest zone's serving pods where that is more.
    fullest = fullest_zone(dep.plan.model, MODELS_NAMESPACE) if variant.startswith("drift-") else None
    branch = zone_query(in_flight_sum(a.selector), load_[0], load_[1], a.ceiling_qps / a.survivor_qps,
                        a.zones, a.threshold, fullest)
    held = persistent(branch, POLLING_INTERVAL_S, persist_s)
    return with_lost_pods(held, a.threshold, a.lost, a.min_replicas)


def with_node_zone(spec: dict[str, Any]) -> dict[str, Any]:
    """PodMonitor `spec` with what the drift term groups by on every target: the node's metadata
    attached (`attachMetadata.node`: Prometheus's pod discovery then gives each target the node's
    labels, `attachNodeMetadata`) and the node's zone label relabelled into ZONE_TARGET_LABEL."""
    out = copy.deepcopy(spec)
    out["attachMetadata"] = {"node": True}
    for endpoint in out.get("podMetricsEndpoints") or []:
        endpoint.setdefault("relabelings", []).append(
            {"action": "replace", "sourceLabels": [NODE_ZONE_META], "targetLabel": ZONE_TARGET_LABEL})
    return out


def variant_deployment(dep: Deployment, variant: str) -> Deployment:
    """`dep` under `variant`'s query; for the drift term, scraped by a PodMonitor that writes it."""
    dep = with_query(dep, variant_query(dep, variant))
    return replace(dep, pod_monitor=with_node_zone(dep.monitor)) if variant.startswith("drift-") else dep


def plan_window_s(dep: Deployment) -> int:
    """The scale-down stabilisation window the plan emitted for `dep`'s model."""
    return int(dep.scaled_object["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"])


def with_scale_down(dep: Deployment, window_s: int | None) -> Deployment:
    """`dep` with the HPA's scale-down window at `window_s` (None: the plan's own)."""
    if window_s is None:
        return dep
    scaled = copy.deepcopy(dep.scaled_object)
    scaled["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"] = window_s
    return replace(dep, scaled_object=scaled)


def run(dep: Deployment, trace: Trace, variant: str, pool: Executor | None,
        scale_down_s: int | None = None) -> dict[str, Any]:
    """One replay of `variant` at scale-down window `scale_down_s` (None: the plan's), judged."""
    planned = plan_window_s(dep)
    dep = with_scale_down(variant_deployment(dep, variant), scale_down_s)
    query = dep.scaled_object["triggers"][0]["metadata"]["query"]
    name = variant if scale_down_s is None else f"{variant}@{scale_down_s}s"
    return {"model": dep.plan.model, "variant": name,
            "scale_down_s": planned if scale_down_s is None else scale_down_s,
            "plan_window": scale_down_s is None, "query": query, **judged(dep, trace, pool)}


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cheapest variant passing the whole checklist, and the predictive ones that pass it on
    fewer GPU-hours than stated."""
    passing = [r for r in rows if r["passes_checklist"]]
    stated = next(r for r in rows if r["variant"] == "stated")
    best = min(passing, key=lambda r: r["gpu_hours"]) if passing else None
    # Within SAME_FLEET of stated is the same fleet a pod's seconds apart, not a saving; and only
    # at the plan's window, or a shorter window's saving would be credited to the prediction.
    cheaper = [r["variant"] for r in passing if r["variant"].startswith("predict-")
               and r["plan_window"]
               and r["gpu_hours"] < stated["gpu_hours"] * (1 - bench.SAME_FLEET)]
    return {"model": rows[0]["model"], "trace": rows[0]["trace"], "stated_gpu_hours": stated["gpu_hours"],
            "stated_passes": stated["passes_checklist"],
            "cheapest_passing": best["variant"] if best else None,
            "cheapest_passing_gpu_hours": best["gpu_hours"] if best else None,
            "predictive_cheaper_and_passing": cheaper}


def parse_windows(text: str) -> list[int | None]:
    """`--scale-down`'s windows, each once: whole seconds, or None for `plan` (the model's own),
    which must be among them (rows are judged on it)."""
    tokens = [w for w in text.split(",") if w]
    if "plan" not in tokens or not all(w == "plan" or w.isdigit() for w in tokens):
        raise ValueError(f"--scale-down {text!r}: comma-separated whole seconds and plan, which must "
                         "be there (rows are judged on it)")
    return list(dict.fromkeys(None if w == "plan" else int(w) for w in tokens))


def out_path(windows: list[int | None], seed: int) -> Path:
    """Where a run writes by default: another draw or a window study must not overwrite the first
    draw's results."""
    stem = "predictive" if windows == [None] else "scale_down"
    return OUT if stem == "predictive" and seed == 0 else OUT.with_name(f"{stem}_seed{seed}.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--window", type=float, default=3600.0, help="seconds of each scaled trace replayed")
    ap.add_argument("--traces", default=",".join(bench.TRACES), help="comma-separated: conv,code")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, stated first")
    ap.add_argument("--seed", type=int, default=0,
                    help="the rate scaling's draw (which requests a thinned or replicated bin keeps)")
    ap.add_argument("--scale-down", default="plan",
                    help="comma-separated scale-down stabilisation windows to run each variant at: "
                         "seconds, or plan (the model's own, its warm start)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"default {OUT.name}; predictive_seed<N>.json for another draw, "
                         "scale_down_seed<N>.json with other windows")
    args = ap.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    if not variants or variants[0] != "stated" or not set(variants) <= {*VARIANTS, DRIFT}:
        ap.error(f"--variants: stated first, then any of {', '.join((*VARIANTS[1:], DRIFT))}")
    try:
        windows = parse_windows(args.scale_down)
    except ValueError as e:
        ap.error(str(e))
    args.out = args.out or out_path(windows, args.seed)
    config = load(args.stack)
    models = [m for m in args.models.split(",") if m]
    rows: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    started = time.monotonic()
    print(f"{'model':10} {'trace':5} {'variant':12} {'GPU-h':>7} {'rep mean/max':>13} {'SLO':>5} "
          f"{'tail':>5} {'zone@peak':>15} {'sweep':>12}")
    with worker_pool() as pool:
        for name, mp, dep, trace in replays(config, args.traces.split(","), args.seed, args.window):
            if (models and mp.model not in models) or mp.min_replicas == mp.max_replicas:
                continue
            these = []
            # A window equal to the model's own is its `plan` run, not a second one.
            own = list(dict.fromkeys(None if w == plan_window_s(dep) else w for w in windows))
            for variant, window in itertools.product(variants, own):
                r = {"trace": name, **run(dep, trace, variant, pool, window)}
                these.append(r)
                print(f"{r['model']:10} {name:5} {r['variant']:12} {r['gpu_hours']:>7.2f} "
                      f"{r['replicas']['mean']:>8.1f}/{r['replicas']['max']:<4} {checklist_cells(r)}",
                      flush=True)
            rows.extend(these)
            verdicts.append(verdict(these))
    doc = write_results(args.out, {"stack": args.stack, "window_s": args.window, "seed": args.seed,
                                   "variants": variants,
                                   "scale_down_s": ["plan" if w is None else str(w) for w in windows],
                                   "rows": rows, "verdicts": verdicts}, started)
    for v in verdicts:
        print(f"{v['model']:10} {v['trace']:5} stated {v['stated_gpu_hours']:.2f} GPU-h "
              f"({'passes' if v['stated_passes'] else 'FAILS'}); cheapest passing: {v['cheapest_passing']} "
              f"{v['cheapest_passing_gpu_hours']}; predictive and cheaper: "
              f"{', '.join(v['predictive_cheaper_and_passing']) or '-'}")
    print(f"wrote {args.out} in {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
