"""GPU cost per hour of packing generated model catalogs: two baselines and the planner against a
lower bound, plus the planner's wall-clock time.

Catalogs of 10, 100 and 500 models are drawn (seeded) from the model catalog with random tiers,
peak QPS log-uniform in [0.1, 20] req/s, the Azure 2023 conversation or code token mix, and a
random subset of quantized variants allowed (70B models nearly always allow FP8, as a stack would
to fit them). Pools are a mixed AWS region: 1-GPU L4 and L40S nodes, 8-GPU A100 and H100 nodes,
three zones each. Memo caches are cleared before each timed planner run, so the time includes
every capacity computation.

The planner runs twice: with a MIG layout per GPU (the packing bound of what MIG allows) and
with one layout for every GPU of a pool (`uniform_mig`), which is what a real node pool can carry
and what the stack path (stacks.layout) plans: every node of a pool gets the same labels.

Prints one row per catalog and writes benchmarks/results/packing.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serving import _search, capacity, packing  # noqa: E402
from serving.hardware import MACHINES, Cloud  # noqa: E402
from serving.models import CATALOG, Quantization  # noqa: E402
from serving.packing import ModelDemand, PoolSpec  # noqa: E402
from serving.tiers import TIERS, Tier  # noqa: E402

# Means of the Azure LLM inference traces 2023 (../shared/traces/SOURCES.md).
TOKEN_MIXES = ((1155, 211), (2048, 28))
TIER_WEIGHTS = {Tier.INTERACTIVE: 0.3, Tier.STANDARD: 0.5, Tier.BATCH: 0.2}


def catalog(size: int, seed: int, region: list[PoolSpec]) -> list[ModelDemand]:
    """Random demands; one the pools cannot serve in its drawn tier gets the next looser tier,
    as the planner's error tells a stack author to do (70B interactive with 7k-token p99 prompts
    misses 500 ms TTFT on every GPU here)."""
    rng = random.Random(seed)
    cards = list(CATALOG.values())
    tiers = list(TIER_WEIGHTS)
    demands = []
    for i in range(size):
        card = rng.choice(cards)
        allowed = [q for q in (Quantization.FP8, Quantization.INT8, Quantization.INT4) if rng.random() < 0.5]
        if card.params_b > 30 and rng.random() < 0.9 and Quantization.FP8 not in allowed:
            allowed.append(Quantization.FP8)
        tokens_in, tokens_out = rng.choice(TOKEN_MIXES)
        tier = rng.choices(tiers, weights=list(TIER_WEIGHTS.values()))[0]
        demand = ModelDemand(
            name=f"m{i:03d}", card=card, tier=TIERS[tier],
            peak_qps=round(10 ** rng.uniform(-1, 1.3), 2),
            input_tokens=tokens_in, output_tokens=tokens_out, allowed_quantization=tuple(allowed))
        for looser in tiers[tiers.index(tier):]:
            demand = replace(demand, tier=TIERS[looser])
            try:
                packing.build_options([demand], region)
                break
            except packing.PlanError:
                continue
        demands.append(demand)
    return demands


def pools(size: int) -> list[PoolSpec]:
    aws = MACHINES[Cloud.AWS]
    # Bounds generous enough that every generated catalog fits: the benchmark measures cost.
    return [
        PoolSpec("l4", aws["g6.xlarge"], max_nodes=60 * size),
        PoolSpec("l40s", aws["g6e.xlarge"], max_nodes=60 * size),
        PoolSpec("a100", aws["p4de.24xlarge"], max_nodes=6 * size),
        PoolSpec("h100", aws["p5.48xlarge"], max_nodes=6 * size),
    ]


def run(size: int, seed: int) -> dict[str, object]:
    region = pools(size)
    demands = catalog(size, seed, region)
    capacity.slice_capacity.cache_clear()
    _search.PACKS.clear()
    start = time.perf_counter()
    planned = packing.plan(demands, region)
    seconds = time.perf_counter() - start
    uniform = [replace(p, uniform_mig=True) for p in region]
    start = time.perf_counter()
    per_pool = packing.plan(demands, uniform)
    uniform_seconds = time.perf_counter() - start
    bound, bound_kind = packing.lower_bound(demands, region)
    naive = packing.one_model_per_gpu(demands, region)
    ffd = packing.first_fit_decreasing(demands, region)
    row: dict[str, object] = {
        "models": size,
        "lower_bound_per_hour": round(bound, 2),
        "lower_bound": bound_kind,
        "one_model_per_gpu_per_hour": naive.cost_per_hour,
        "first_fit_decreasing_per_hour": ffd.cost_per_hour,
        "planner_per_hour": planned.cost_per_hour,
        "planner_method": planned.method,
        "ratio_one_model_per_gpu": round(naive.cost_per_hour / bound, 4),
        "ratio_first_fit_decreasing": round(ffd.cost_per_hour / bound, 4),
        "ratio_planner": round(planned.cost_per_hour / bound, 4),
        "planning_s": round(seconds, 3),
        "planner_one_layout_per_pool_per_hour": per_pool.cost_per_hour,
        "ratio_planner_one_layout_per_pool": round(per_pool.cost_per_hour / bound, 4),
        "planning_one_layout_per_pool_s": round(uniform_seconds, 3),
        "quantized_models": sum(m.quantized for m in planned.models),
        "shared_slices": sum(m.slice.mode.value != "whole" for m in planned.models),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "packing.json")
    args = parser.parse_args()
    rows = [run(size, args.seed + size) for size in args.sizes]
    header = (f"{'models':>6} {'bound $/h':>11} {'1/GPU':>7} {'FFD':>7} {'planner':>7} {'plan s':>7} "
              f"{'1 layout/pool':>13} {'plan s':>7}  bound")
    print(header)
    for r in rows:
        print(f"{r['models']:>6} {r['lower_bound_per_hour']:>11.2f} {r['ratio_one_model_per_gpu']:>7.3f} "
              f"{r['ratio_first_fit_decreasing']:>7.3f} {r['ratio_planner']:>7.3f} {r['planning_s']:>7.3f} "
              f"{r['ratio_planner_one_layout_per_pool']:>13.3f} {r['planning_one_layout_per_pool_s']:>7.3f}"
              f"  {r['lower_bound']}")
    result = {
        "machine": {"python": platform.python_version(), "cpu_count": __import__("os").cpu_count(),
                    "platform": platform.platform()},
        "targets": {"planner_ratio_max": 1.05, "planning_s_max_at_500": 2.0},
        "seed": args.seed,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
