"""How the SLO alerts' error ratio reads a target that falls between two of vLLM's histogram
buckets (serving/slo_rules.py), against the requests that really missed it.

The prod stack's 8B (interactive: TTFT 500 ms, TPOT 30 ms; 30 ms lies between vLLM's 25 and 50 ms
TPOT buckets) at its replica floor behind the least-loaded router, 10 minutes of Poisson arrivals
at f x its sized rate (lengths drawn uniformly, 200-2,000 prompt and 20-400 output tokens; seed 7).
For each factor: the share of finished requests that really missed a target; the emitted rule's
1h ratio as the simulated Prometheus reads it at 585 s (a miss counted past the bucket at or below
each target); and, from the same requests, the two other readings a rule could make: past the
bucket above each target, and interpolated linearly inside the target's bucket (the sum of the
TTFT and TPOT shares, as the rule adds them). Prints one row per factor and writes
benchmarks/results/alert_reading.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtip.stackfile import load  # noqa: E402
from serving.simulator import StaticPolicy, Trace  # noqa: E402
from serving.simulator.metrics import REQUEST_TPOT_BUCKETS, TTFT_BUCKETS  # noqa: E402
from serving.simulator.promql import evaluate  # noqa: E402
from serving.simulator.sim import Simulation  # noqa: E402
from serving.slo_rules import error_ratio  # noqa: E402
from stacks.plan import load_plan  # noqa: E402
from stacks.simulation import deployment, select  # noqa: E402

FACTORS = (1.0, 1.2, 1.3, 1.4, 1.6)
SEED = 7
RUN_S = 600.0
READ_AT_S = 585.0
MODEL = "llama-8b"
OUT = ROOT / "benchmarks" / "results" / "alert_reading.json"


def _share_past(values: np.ndarray, bound: float) -> float:
    return float(np.mean(values > bound + 1e-12)) if len(values) else 0.0


def _interpolated(values: np.ndarray, target: float, buckets: tuple[float, ...]) -> float:
    """The share past `target` a reading of the histogram alone would estimate: the counts at
    the bounds around it, and a straight line between them."""
    below = max(b for b in buckets if b <= target + 1e-12)
    above = min(b for b in buckets if b > target + 1e-12)
    at_below, at_above = _share_past(values, below), _share_past(values, above)
    return at_below + (at_above - at_below) * (target - below) / (above - below)


def reading(stack: str, factor: float) -> dict[str, float]:
    config = load(stack)
    plan = load_plan(config.platform, config.source)
    (mp, *_) = select(plan, MODEL)
    dep, tier = deployment(plan, mp), mp.tier_spec
    rng = np.random.default_rng(SEED)
    rate = factor * mp.capacity.qps * mp.min_replicas
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * RUN_S)))
    trace = Trace(arrivals, rng.integers(200, 2000, len(arrivals)), rng.integers(20, 400, len(arrivals)),
                  source="poisson")
    sim = Simulation(trace, dep.sim_config(), "least-loaded", StaticPolicy(mp.min_replicas))
    result = sim.run()
    rule = evaluate(error_ratio(mp.model, dep.sim_config().namespace, tier, "1h"), sim.store, READ_AT_S)
    done = result.ok
    ttft, tpot = result.ttft_s[done], result.tpot_s[done]
    tpot = tpot[~np.isnan(tpot)]
    t_ttft, t_tpot = tier.ttft_ms / 1000, tier.tpot_ms / 1000
    above_ttft = min(b for b in TTFT_BUCKETS if b > t_ttft + 1e-12)
    above_tpot = min(b for b in REQUEST_TPOT_BUCKETS if b > t_tpot + 1e-12)
    return {
        "factor": factor, "replicas": mp.min_replicas, "requests": int(done.sum()),
        "really_missed": round(float(np.mean(~result.attained()[done])), 4),
        "rule_reads": round(float(next(iter(rule.values()))), 4) if isinstance(rule, dict) else None,
        "bucket_above_reads": round(_share_past(ttft, above_ttft) + _share_past(tpot, above_tpot), 4),
        "interpolated_reads": round(_interpolated(ttft, t_ttft, TTFT_BUCKETS)
                                    + _interpolated(tpot, t_tpot, REQUEST_TPOT_BUCKETS), 4),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = [reading(args.stack, f) for f in FACTORS]
    print(f"{'x sized rate':>12} {'really missed':>14} {'rule reads':>11} {'bucket above':>13} "
          f"{'interpolated':>13}")
    for r in rows:
        print(f"{r['factor']:>12g} {r['really_missed']:>14.2%} {r['rule_reads']:>11.2%} "
              f"{r['bucket_above_reads']:>13.2%} {r['interpolated_reads']:>13.2%}")
    args.out.write_text(json.dumps({"stack": args.stack, "model": MODEL, "seed": SEED, "run_s": RUN_S,
                                    "read_at_s": READ_AT_S, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
