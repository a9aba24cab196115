"""`benchmarks/burst_floor.py`: fixed fleets from the floor up until every minute holds."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from serving.simulator import Trace, poisson
from tests.test_benchmarks import _deployment, _load


def _trace(burst_qps: float) -> Trace:
    """Two minutes at 1 req/s of the Azure conversation trace's mean lengths, and, from 70 s,
    ten seconds at `burst_qps` more: a burst inside the second clock minute only."""
    base = poisson(1.0, 120.0, (1155, 211), seed=5)
    if not burst_qps:
        return base
    burst = poisson(burst_qps, 10.0, (1155, 211), seed=6)
    arrival = np.concatenate([base.arrival_s, burst.arrival_s + 70.0])
    order = np.argsort(arrival, kind="stable")
    return Trace(arrival[order], np.concatenate([base.prompt_tokens, burst.prompt_tokens])[order],
                 np.concatenate([base.output_tokens, burst.output_tokens])[order])


def test_the_sweep_stops_at_the_first_fleet_that_holds_every_minute() -> None:
    bench = _load("burst_floor")
    mp, dep = _deployment("prod", "llama-8b")
    small = replace(dep, plan=replace(mp, min_replicas=2, max_replicas=8))
    # Without the burst two replicas at 1 req/s (under half their sized rate each) hold both minutes.
    (only,) = bench.sweep(small, _trace(0.0))
    assert only["replicas"] == 2 and only["worst_minute"]["minutes_over"] == 0
    tried = bench.sweep(small, _trace(12.0))
    sizes = [row["replicas"] for row in tried]
    assert sizes == list(range(2, 2 + len(sizes))) and 2 < len(sizes) <= 7
    *broken, held = tried
    assert held["worst_minute"]["minutes_over"] == 0
    # Every smaller fleet breaks the tier in the burst's minute (60-120 s) and nowhere else.
    assert all(row["worst_minute"]["minutes_over"] == 1 and row["worst_minute"]["t_s"] == 60.0
               for row in broken)
    assert [row["gpu_hours"] for row in tried] == sorted(row["gpu_hours"] for row in tried)
