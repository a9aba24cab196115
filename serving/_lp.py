"""The packing problem as a linear program (HiGHS through scipy), relaxed where a bound needs it.

Variables: y[o] = share of its model's demand option o serves (binary in the exact model), then per
pool G[p] = GPUs per zone, M[p] = MIG-mode GPUs per zone and, in the exact model, N[p] = nodes per
zone. Every option's replicas per zone use either whole-GPU units (whole GPUs x TP, 1/n of a GPU
per time-sliced share, 1/8 per CPX partition) or MIG compute and memory slices.

It is a relaxation of the planner's problem in two ways, which is what makes it a lower bound:
MIG geometry is reduced to "at most 7 compute and 8 memory slices per GPU" (every valid layout
satisfies both), and GPUs of different sharing modes may share a node. The LP also relaxes the
one-option-per-model choice and whole nodes; `exact=True` keeps both integral.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from serving._quiet import quiet_stdout


@dataclass(frozen=True)
class LpOption:
    model: int
    pool: int
    gpu_units: float  # whole-GPU units per zone (0 for MIG options)
    compute_slices: float  # MIG compute slices per zone
    memory_slices: float  # MIG memory slices per zone


@dataclass(frozen=True)
class LpPool:
    gpu_cost: float  # $/h of one GPU per zone, times the pool's zones
    node_cost: float  # $/h of one node per zone, times the pool's zones
    gpus_per_node: int
    max_gpus_per_zone: int


@dataclass(frozen=True)
class LpResult:
    cost: float  # optimum, or for a MILP stopped early its proven dual bound
    shares: np.ndarray  # y per option
    proven: bool  # whether `cost` is the proven optimum (always so for the LP)


def solve(options: list[LpOption], pools: list[LpPool], models: int, exact: bool = False,
          time_limit_s: float = 10.0) -> LpResult:
    n_opt, n_pool = len(options), len(pools)
    per_pool = 3 if exact else 2  # G, M (and N)
    n_var = n_opt + per_pool * n_pool
    g_idx = [n_opt + per_pool * p for p in range(n_pool)]
    m_idx = [i + 1 for i in g_idx]
    cost = np.zeros(n_var)
    for p, pool in enumerate(pools):
        if exact:
            cost[g_idx[p] + 2] = pool.node_cost
        else:
            cost[g_idx[p]] = pool.gpu_cost
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def put(r: int, c: int, v: float) -> None:
        rows.append(r)
        cols.append(c)
        vals.append(v)

    # Rows 0..models-1: one option per model. Then per pool: GPUs, MIG compute, MIG memory
    # (and nodes in the exact model).
    base = models
    pool_rows = 4 if exact else 3
    for o, opt in enumerate(options):
        put(opt.model, o, 1.0)
        r = base + pool_rows * opt.pool
        if opt.gpu_units:
            put(r, o, opt.gpu_units)
        if opt.compute_slices:
            put(r + 1, o, opt.compute_slices / 7)
        if opt.memory_slices:
            put(r + 2, o, opt.memory_slices / 8)
    for p, pool in enumerate(pools):
        r = base + pool_rows * p
        put(r, m_idx[p], 1.0)  # GPUs >= whole-GPU units + MIG GPUs
        put(r, g_idx[p], -1.0)
        put(r + 1, m_idx[p], -1.0)  # MIG GPUs >= compute slices / 7
        put(r + 2, m_idx[p], -1.0)  # MIG GPUs >= memory slices / 8
        if exact:
            put(r + 3, g_idx[p], 1.0)  # GPUs <= gpus_per_node x nodes
            put(r + 3, g_idx[p] + 2, -float(pool.gpus_per_node))
    n_rows = base + pool_rows * n_pool
    matrix = coo_array((vals, (rows, cols)), shape=(n_rows, n_var)).tocsr()
    lower = np.concatenate([np.ones(models), np.full(n_rows - models, -np.inf)])
    upper = np.concatenate([np.ones(models), np.zeros(n_rows - models)])
    hi = np.full(n_var, np.inf)
    hi[:n_opt] = 1.0
    for p, pool in enumerate(pools):
        hi[g_idx[p]] = pool.max_gpus_per_zone
        if exact:
            hi[g_idx[p] + 2] = -(-pool.max_gpus_per_zone // pool.gpus_per_node)
    integrality = np.zeros(n_var)
    if exact:
        integrality[:n_opt] = 1
        integrality[[g + 2 for g in g_idx]] = 1
    with quiet_stdout():
        res = milp(cost, constraints=LinearConstraint(matrix, lower, upper),
                   bounds=Bounds(np.zeros(n_var), hi), integrality=integrality,
                   options={"time_limit": time_limit_s, "presolve": True})
    if res.x is None:
        raise ValueError(f"packing LP has no solution: {res.message}")
    proven = res.status == 0
    bound = res.fun if proven or not exact else getattr(res, "mip_dual_bound", res.fun)
    return LpResult(cost=float(bound), shares=np.asarray(res.x[:n_opt]), proven=proven)


__all__ = ["LpOption", "LpPool", "LpResult", "solve"]
