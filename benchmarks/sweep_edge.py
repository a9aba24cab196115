"""What fails the zone-loss sweep's last moments: requests killed in flight, or requests served
late? The sweep (benchmarks/autoscaling.py) loses a zone every 300 s; a moment less than a cold
start before the trace ends would be judged on the requests that arrive before the end, its
window cut short, which is why the sweep now takes only moments with a whole window left. This
measured that reason: it reruns the plan's zone loss at 2,700, 3,000 and 3,300 s of the conversation
trace for one model on several draws of the rate scaling (seed 0 is the autoscaling benchmark's)
and reports, per moment, the requests judged, the bad ones and how many of those were in flight on
the lost zone when it went (a number set by the load at that instant, not by the window).
Writes benchmarks/results/sweep_edge.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.simulator import load_azure_2023  # noqa: E402
from stacks.simulation import deployment, select  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "sweep_edge.json"
MOMENTS_S = (2700.0, 3000.0, 3300.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--model", default="llama-70b")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    config = load(args.stack)
    base = load_azure_2023(bench.TRACES["conv"])
    plan, _ = bench.plan_for(config.platform, config.source, base, "conv")
    (mp,) = select(plan, args.model)
    dep = deployment(plan, mp)
    rows = []
    print(f"{'seed':>4} {'at_s':>6} {'status':>6} {'bad':>4} {'in flight':>9} {'judged':>7} {'share':>7}")
    for seed in (int(s) for s in args.seeds.split(",")):
        trace = base.rate_scaled_to_peak(mp.peak_qps, seed=seed)
        trace = trace.window(0.0, 3600.0) if trace.duration_s > 3600.0 else trace
        for moment in MOMENTS_S:
            got = bench.zone_loss_at(dep, trace, "plan", float(trace.arrival_s[0]) + moment)
            row = {"seed": seed, **{k: got[k] for k in ("at_s", "status", "bad", "failed_in_flight",
                                                        "requests", "bad_share", "error_budget")}}
            rows.append(row)
            print(f"{seed:>4} {row['at_s']:>6.0f} {row['status']:>6} {row['bad']:>4} "
                  f"{row['failed_in_flight']:>9} {row['requests']:>7} {row['bad_share']:>7.2%}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"stack": args.stack, "model": args.model, "trace": "conv",
                                    "cold_start_s": mp.cold_start.total_s,
                                    # What each moment is judged over: the eviction and a cold start.
                                    "window_s": round(bench.zone_loss_window_s(dep), 1),
                                    "run_s": round(time.perf_counter() - started, 1), "rows": rows},
                                   indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
