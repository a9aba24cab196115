"""The fewest replicas a fixed fleet needs to hold every clock minute of a trace within the tier.

The checklist's tail item judges the busiest minute by arrivals; a sharper burst inside a quieter
minute can break the tier there (the code trace's 855-866 s: 558 of the 8B's requests in 11 s).
For each prod model on a trace, scaled and planned as `benchmarks/autoscaling.py` replays it,
this holds fixed fleets from the plan's floor upwards, no autoscaler, and reports each one's
worst clock minute (`stacks/slo_check.worst_minute`), stopping at the first fleet under which
no minute breaks the tier (or at the plan's max). What it prices: holding the floor at that
size instead of the plan's.

    .venv/bin/python benchmarks/burst_floor.py [--traces code] [--seed N] [--models a,b]

writes benchmarks/results/burst_floor.json (burst_floor_seed<N>.json for another draw).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402
import lost_pods  # noqa: E402
from replay import replays, write_results  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.simulator import StaticPolicy, Trace, simulate  # noqa: E402
from stacks.simulation import Deployment  # noqa: E402
from stacks.slo_check import figures  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "burst_floor.json"


def fixed(dep: Deployment, trace: Trace, replicas: int) -> dict[str, Any]:
    """`replicas` held all the way through `trace`: GPU-hours, attainment and the worst minute."""
    fleet = bench.fleet_with(dep.fleet, replicas)
    result = simulate(trace, dep.sim_config(fleet=fleet), "least-loaded", StaticPolicy(replicas))
    f = figures(result, replace(dep, fleet=fleet))
    return {"replicas": replicas, "gpu_hours": f["gpu_hours"], "attainment": f["attainment"],
            "worst_minute": f["worst_minute"]}


def sweep(dep: Deployment, trace: Trace) -> list[dict[str, Any]]:
    """Fixed fleets from the plan's floor up to its max, until one holds every minute."""
    out = []
    for n in range(dep.plan.min_replicas, dep.plan.max_replicas + 1):
        out.append(fixed(dep, trace, n))
        if out[-1]["worst_minute"]["minutes_over"] == 0:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--traces", default="code", help="comma-separated: conv,code")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--seed", type=int, default=0, help="the rate scaling's draw")
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT.name}")
    args = ap.parse_args(argv)
    names = [t for t in args.traces.split(",") if t]
    if not names or not set(names) <= set(bench.TRACES):
        ap.error(f"--traces: one or more of {', '.join(bench.TRACES)}, got {args.traces!r}")
    out = args.out or lost_pods.seeded(OUT, args.seed)
    models = {m for m in args.models.split(",") if m}
    started = time.monotonic()
    rows = []
    for name, mp, dep, trace in replays(load(args.stack), names, args.seed):
        if models and mp.model not in models:
            continue
        tried = sweep(dep, trace)
        floor, held = tried[0], tried[-1]
        holds = held["worst_minute"]["minutes_over"] == 0
        rows.append({"model": mp.model, "trace": name, "floor": mp.min_replicas, "max": mp.max_replicas,
                     "targets": {"ttft_s": dep.targets.ttft_s, "tpot_s": dep.targets.tpot_s},
                     "fleets": tried, "holds_every_minute_at": held["replicas"] if holds else None,
                     "extra_gpu_hours_share": (round(held["gpu_hours"] / floor["gpu_hours"] - 1, 4)
                                               if holds else None)})
        w = floor["worst_minute"]
        print(f"{mp.model:10} {name:5} floor {mp.min_replicas:>3}: {w['minutes_over']} of {w['minutes']} "
              f"minutes over (worst from {w['t_s']:.0f} s: TTFT {w['ttft_p99_s']} s, "
              f"TPOT {w['tpot_p99_s']} s); "
              + (f"every minute held at {held['replicas']} ({held['gpu_hours']:.2f} against "
                 f"{floor['gpu_hours']:.2f} GPU-h)" if holds else f"not held up to max {mp.max_replicas}"),
              flush=True)
    doc = write_results(out, {"stack": args.stack, "seed": args.seed, "traces": names, "rows": rows}, started)
    print(f"wrote {out} in {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
