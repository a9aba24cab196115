"""The plan's capacity claims against the simulator: for every placement (model x region) of the
shipped stacks, one replica as the plan deploys it (stacks/simulation.py) under Poisson arrivals
at the plan's `capacity.qps`, every request with the model's token mix (the stack's mean input
and output tokens, fixed), for --duration seconds (default 900). Compares the simulated tail (at
the tier's percentile) with the plan's `ttft_tail_s` / `tpot_tail_s` and the tier's targets.

Prints one row per placement and writes benchmarks/results/capacity_check.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtip.stackfile import load  # noqa: E402
from serving.simulator import StaticPolicy, poisson, simulate  # noqa: E402
from stacks.model_plan import ModelRegionPlan  # noqa: E402
from stacks.plan import Plan, load_plan  # noqa: E402
from stacks.simulation import deployment  # noqa: E402

STACKS = ("dev", "staging", "prod")
OUT = ROOT / "benchmarks" / "results" / "capacity_check.json"


def check(plan: Plan, mp: ModelRegionPlan, duration_s: float, seed: int = 0) -> dict[str, object]:
    dep = deployment(plan, mp)
    fleet = replace(dep.fleet, zones=dep.fleet.zones[:1], initial_replicas=1, initial_nodes=1)
    model = next(m for m in plan.spec.models if m.name == mp.model)
    mix = (model.tokens.input_tokens, model.tokens.output_tokens)
    trace = poisson(mp.capacity.qps, duration_s, mix, seed=seed)
    result = simulate(trace, dep.sim_config(fleet=fleet), "least-loaded", StaticPolicy(1))
    q = mp.tier_spec.percentile
    ttft, tpot = result.percentile("ttft", q), result.percentile("tpot", q)
    return {
        "model": mp.model, "region": mp.region, "slice": mp.slice.label, "quantization": str(mp.quantization),
        "tier": mp.tier, "percentile": q, "tokens": list(mix), "qps": round(mp.capacity.qps, 4),
        "requests": result.requests,
        "claimed_ttft_s": round(mp.capacity.ttft_tail_s, 4), "simulated_ttft_s": round(ttft, 4),
        "claimed_tpot_s": round(mp.capacity.tpot_tail_s, 4), "simulated_tpot_s": round(tpot, 4),
        "target_ttft_s": mp.tier_spec.ttft_ms / 1000, "target_tpot_s": mp.tier_spec.tpot_ms / 1000,
        "meets_tier": bool(ttft <= mp.tier_spec.ttft_ms / 1000 and tpot <= mp.tier_spec.tpot_ms / 1000),
        "attainment": round(result.attainment, 4),
        "claimed_batch": mp.capacity.batch,
        "simulated_mean_running": round(float(result.series["running"].mean()), 2),
    }


HEADER = (f"{'stack':8} {'model':10} {'region':12} {'slice':22} {'qps':>7} {'TTFT claim/sim':>16} "
          f"{'TPOT claim/sim':>16} {'targets':>12} {'meets':>5}")


def _line(stack: str, r: dict[str, object]) -> str:
    return (f"{stack:8} {r['model']:10} {r['region']:12} {r['slice']:22} {r['qps']:>7.3f} "
            f"{r['claimed_ttft_s']:>7.3f}/{r['simulated_ttft_s']:<8.3f} "
            f"{r['claimed_tpot_s']:>7.3f}/{r['simulated_tpot_s']:<8.3f} "
            f"{r['target_ttft_s']:>5g}/{r['target_tpot_s']:<6g} {'yes' if r['meets_tier'] else 'NO':>5}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=900.0, help="seconds of Poisson arrivals per placement")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    print(HEADER)
    for stack in STACKS:
        config = load(stack)
        plan = load_plan(config.platform, config.source)
        for mp in plan.models:
            row = {"stack": stack, **check(plan, mp, args.duration)}
            rows.append(row)
            print(_line(stack, row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"duration_s": args.duration, "arrivals": "poisson at capacity.qps",
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
