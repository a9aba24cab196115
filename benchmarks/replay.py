"""What the plan-replaying benchmarks share: each prod model's first region on each Azure trace,
planned and scaled as `benchmarks/autoscaling.py` replays it, and a worker per usable core."""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import autoscaling as bench  # noqa: E402

from serving.simulator import Trace, load_azure_2023  # noqa: E402
from stacks.model_plan import ModelRegionPlan  # noqa: E402
from stacks.simulation import Deployment, deployment, select, trace_for  # noqa: E402


def replays(config: Any, names: list[str], seed: int = 0, window_s: float = 3600.0,
            ) -> Iterator[tuple[str, ModelRegionPlan, Deployment, Trace]]:
    """(trace name, model plan, deployment, its trace) for every model of `config`'s stack on each
    trace of `names`: the stack planned for that trace (`autoscaling.plan_for`), the trace scaled
    by rate to the model's peak (draw `seed`) and cut to `window_s`."""
    for name in names:
        base = load_azure_2023(bench.TRACES[name])
        plan, _ = bench.plan_for(config.platform, config.source, base, name)
        for mp in select(plan, None):
            trace = trace_for(mp, base, seed=seed)
            yield name, mp, deployment(plan, mp), (trace.window(0.0, window_s) if trace.duration_s > window_s
                                                   else trace)


def worker_pool() -> ProcessPoolExecutor:
    """A process per usable core, forked so the workers start with the modules loaded."""
    return ProcessPoolExecutor(max_workers=len(os.sched_getaffinity(0)),
                               mp_context=multiprocessing.get_context("fork"))


def with_query(dep: Deployment, query: str) -> Deployment:
    """`dep` with its ScaledObject's trigger query replaced by `query`."""
    scaled = copy.deepcopy(dep.scaled_object)
    scaled["triggers"][0]["metadata"]["query"] = query
    return replace(dep, scaled_object=scaled)


def judged(dep: Deployment, trace: Trace, pool: Executor | None) -> dict[str, Any]:
    """The plan's ScaledObject in `dep` replayed over `trace` and judged on the whole checklist as
    the autoscaling benchmark judges the plan: its figures, the zone lost at the busiest minute,
    the sweep, and whether all pass."""
    got = bench.run(dep, trace, "plan")
    at_peak = bench.zone_loss_at_peak(dep, trace, "plan")
    sweep = bench.zone_loss_sweep(dep, trace, "plan", pool)
    return {"gpu_hours": got["gpu_hours"], "node_gpu_hours": got["node_gpu_hours"],
            "replicas": got["replicas"], "time_to_scale": got["time_to_scale"],
            "attainment": got["attainment"], "meets_slo": got["meets_slo"],
            "tail_at_peak": got["tail_at_peak"]["status"],  # type: ignore[index]
            "zone_loss_at_peak": {k: at_peak[k] for k in ("status", "bad_share", "error_budget")},
            "zone_loss_any_moment": {k: sweep[k] for k in ("status", "passed", "moments", "worst")},
            "passes_checklist": bench.passes_checklist({**got, "zone_loss": at_peak,
                                                        "zone_loss_any_moment": sweep})}


def checklist_cells(row: dict[str, Any]) -> str:
    """A judged replay's checklist as printed columns: SLO, tail at peak, the zone lost at the
    busiest minute (status, share) and the sweep (status, moments passed)."""
    z, s = row["zone_loss_at_peak"], row["zone_loss_any_moment"]
    return (f"{row['meets_slo']!s:>5} {row['tail_at_peak']:>5} {z['status']:>5} {z['bad_share']:>8.2%} "
            f"{s['status']:>5} {s['passed']}/{s['moments']}")


def write_results(out: Path, doc: dict[str, Any], started: float) -> dict[str, Any]:
    """`doc` with the run's seconds since `started` (time.monotonic), written to `out` as JSON."""
    doc = {**doc, "seconds": round(time.monotonic() - started)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


__all__ = ["checklist_cells", "judged", "replays", "with_query", "worker_pool", "write_results"]
