"""How long must load hold before the trigger acts on it? The plan's ScaledObject reads its load
branches (requests in flight and the zone branch) at their lowest over the last minute
(serving/persistence.py). This replays both Azure traces, as `benchmarks/autoscaling.py` plans
and scales them, through that ScaledObject with the window replaced: 15 s (one scrape: the instant
read, the simulator's autoscalers reading on the scrape grid) up to 120 s. Everything else (the
lost-pod term, bounds, behavior) is the plan's.

Each run is judged on the checklist as the autoscaling benchmark judges the plan (the SLO, the
tail at the busiest minute, a zone lost as it begins and every 300 s while a whole zone-loss window
is left: `autoscaling.passes_checklist`), and its slice GPU-hours are set against static
provisioning at the plan's max (the issue's 0.7 x). Runs whose plan cannot scale (min = max) are
skipped. Writes benchmarks/results/persistence.json (`--seed N`: persistence_seedN.json).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402
import lost_pods  # noqa: E402
from predictive import variant_query  # noqa: E402
from replay import checklist_cells, judged, replays, with_query, worker_pool, write_results  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.autoscaling import POLLING_INTERVAL_S  # noqa: E402
from serving.persistence import PERSIST_S  # noqa: E402
from serving.simulator import Trace  # noqa: E402
from serving.zone_branch import PREDICT_WINDOW  # noqa: E402
from stacks.simulation import Deployment  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "persistence.json"
WINDOWS = (15, 30, 45, 60, 90, 120)
EMITTED = f"predict-{PREDICT_WINDOW}"  # the plan's growth term: its query, rebuilt with each window


def run(dep: Deployment, trace: Trace, window_s: int, static_gpu_h: float, pool: Executor) -> dict[str, Any]:
    dep = with_query(dep, variant_query(dep, EMITTED, window_s))
    row = judged(dep, trace, pool)
    return {"model": dep.plan.model, "window_s": window_s, "emitted": window_s == PERSIST_S,
            "over_static_gpu_hours": round(row["gpu_hours"] / static_gpu_h, 3), **row}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--traces", default=",".join(bench.TRACES), help="comma-separated: conv,code")
    ap.add_argument("--windows", default=",".join(map(str, WINDOWS)),
                    help=f"comma-separated seconds, multiples of the {POLLING_INTERVAL_S} s scrape")
    ap.add_argument("--seed", type=int, default=0, help="the rate scaling's draw")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        windows = [int(w) for w in args.windows.split(",") if w]
    except ValueError:
        ap.error(f"--windows: comma-separated whole seconds, got {args.windows!r}")
    if not windows or any(w < POLLING_INTERVAL_S or w % POLLING_INTERVAL_S for w in windows):
        ap.error(f"--windows: multiples of {POLLING_INTERVAL_S} s, got {args.windows!r}")
    names = [t for t in args.traces.split(",") if t]
    if not names or not set(names) <= set(bench.TRACES):
        ap.error(f"--traces: one or more of {', '.join(bench.TRACES)}, got {args.traces!r}")
    out = args.out or lost_pods.seeded(OUT, args.seed)
    config = load(args.stack)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    print(f"{'model':10} {'trace':5} {'window':>6} {'GPU-h':>7} {'÷static':>7} {'SLO':>5} {'tail':>5} "
          f"{'zone@peak':>15} {'sweep':>12}")
    with worker_pool() as pool:
        for name, mp, dep, trace in replays(config, names, args.seed):
            if mp.min_replicas == mp.max_replicas:
                continue
            static = bench.run(dep, trace, "static-peak")["gpu_hours"]
            for w in windows:
                r = {"trace": name, **run(dep, trace, w, static, pool)}  # type: ignore[arg-type]
                rows.append(r)
                print(f"{r['model']:10} {name:5} {w:>5}s {r['gpu_hours']:>7.2f} "
                      f"{r['over_static_gpu_hours']:>7.3f} {checklist_cells(r)}", flush=True)
    doc = write_results(out, {"stack": args.stack, "seed": args.seed, "windows_s": windows,
                              "emitted_s": PERSIST_S, "rows": rows,
                              "passing_every_run": [w for w in windows if all(
                                  r["passes_checklist"] for r in rows if r["window_s"] == w)]}, started)
    print(f"windows passing every run: {doc['passing_every_run']}; wrote {out} in {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
