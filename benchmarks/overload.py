"""How much overload a zone's survivors carry within the error budget: for every prod model's
first-region placement as the autoscaling benchmark plans it (both Azure traces' token mixes),
the survivors of a zone lost from the replica floor (min - ceil(min / Z) replicas, behind the
least-loaded router) under Poisson arrivals at f x the placement's sized rate for the zone-loss
window (until the replacements can be ready: the lost pods' eviction and a cold start,
stacks.slo_check.zone_loss_window_s), request lengths with the Azure conversation trace's spread around
the trace's means (as the sizing draws them). Reports, per factor, the share of requests that miss
either target, and the highest factor of the grid whose share is within the checklist's error
budget (1 - percentile/100 x availability, stacks.slo_check.zone_loss_budget).

The question it answers: is the sized rate (the tier's percentile under steady load, less a 7 %
margin) a conservative figure that a fleet can exceed for that window while a zone is replaced,
so that the zone surplus could be sized against the error budget instead? Prints one row per
placement and writes benchmarks/results/overload.json (`--seed`: another draw of the requests).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402

from rtip.stackfile import load  # noqa: E402
from serving.replica_sim import SEED, WARMUP_FRACTION, fleet_run, requests_like  # noqa: E402
from serving.simulator import load_azure_2023  # noqa: E402
from stacks.simulation import Deployment, deployment, select  # noqa: E402
from stacks.slo_check import zone_loss_budget, zone_loss_window_s  # noqa: E402

FACTORS = (1.0, 1.1, 1.2, 1.4, 1.6)
OUT = ROOT / "benchmarks" / "results" / "overload.json"


def survivors(dep: Deployment) -> int:
    zones = len(dep.fleet.zones)
    floor = dep.plan.min_replicas
    return max(1, floor - math.ceil(floor / zones)) if zones > 1 else floor


def miss_share(dep: Deployment, replicas: int, rate: float, seconds: float, mix: tuple[int, int],
               seed: int = SEED) -> float:
    """Share of requests past either target, `replicas` replicas at `rate` each for `seconds`
    after a warm-up, requests drawn as the sizing draws them (serving.replica_sim)."""
    n = max(200, int(rate * replicas * seconds / (1 - WARMUP_FRACTION)))
    prompts, outputs, gaps = requests_like(n, mix[0], mix[1], dep.engine.max_model_len,
                                           np.random.default_rng(seed))
    result = fleet_run(dep.engine, dep.targets, rate, replicas, prompts, outputs, gaps)
    judged = result.arrival_s >= np.cumsum(gaps / (rate * replicas))[int(n * WARMUP_FRACTION)]
    return float(1.0 - result.attained()[judged].mean())


def row(dep: Deployment, trace_name: str, mix: tuple[int, int], seed: int = SEED) -> dict[str, object]:
    mp = dep.plan
    budget = zone_loss_budget(dep)
    window = zone_loss_window_s(dep)
    s = survivors(dep)
    shares = {f: round(miss_share(dep, s, mp.capacity.qps * f, window, mix, seed), 4) for f in FACTORS}
    within = [f for f in FACTORS if shares[f] <= budget]
    return {"model": mp.model, "trace": trace_name, "tier": mp.tier, "slice": mp.slice.label,
            "sized_qps": round(mp.capacity.qps, 3), "survivors": s, "window_s": round(window),
            "error_budget": round(budget, 5), "miss_share": {f"{f:g}": v for f, v in shares.items()},
            "highest_factor_within_budget": max(within) if within else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--seed", type=int, default=SEED, help="the request draw (the sizing's by default)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: results/overload.json, or overload_seed<N>.json for another draw")
    args = ap.parse_args(argv)
    if args.out is None:  # another draw never overwrites the sizing's
        args.out = OUT if args.seed == SEED else OUT.with_name(f"overload_seed{args.seed}.json")
    started = time.perf_counter()
    config = load(args.stack)
    out = []
    print(f"{'model':10} {'trace':5} {'qps':>7} {'surv':>4} {'budget':>7}  "
          + " ".join(f"{f:>6g}x" for f in FACTORS) + "  highest")
    for name, path in bench.TRACES.items():
        trace = load_azure_2023(path)
        mix = (round(float(trace.prompt_tokens.mean())), round(float(trace.output_tokens.mean())))
        plan, _ = bench.plan_for(config.platform, config.source, trace, name)
        for mp in select(plan, None):
            r = row(deployment(plan, mp), name, mix, args.seed)
            out.append(r)
            shares = r["miss_share"]
            print(f"{r['model']:10} {name:5} {r['sized_qps']:>7.3f} {r['survivors']:>4} "
                  f"{r['error_budget']:>7.2%}  " + " ".join(f"{v:>7.2%}" for v in shares.values())  # type: ignore[attr-defined]
                  + f"  {r['highest_factor_within_budget']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"stack": args.stack, "seed": args.seed, "factors": FACTORS,
                                    "run_s": round(time.perf_counter() - started, 1), "rows": out},
                                   indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
