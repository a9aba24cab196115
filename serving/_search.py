"""Improving a packing by moving models between their options, costed in whole nodes.

`PoolLoad` is what one zone of a pool holds, kept incrementally so a move costs O(pool) to
evaluate. `improve` alternates two moves until neither helps:
- single moves: one model to the option that lowers whole-node cost most;
- node drops: try to empty one node per zone of a pool by moving its smallest models out (or to a
  smaller slice of the same pool), kept only if the total falls. Single moves stall on node
  rounding, where no one model frees a whole node; node drops cross that plateau.
"""

from __future__ import annotations

import math
from collections import defaultdict

from serving import _migpack
from serving._options import Option, PoolSpec
from serving.hardware import GpuModel
from serving.slices import SharingMode

_OVERFULL_PENALTY = 1e6  # $/h per node beyond a pool's max: steers the search back into bounds


class PoolLoad:
    """What one zone of a pool holds, kept incrementally so a move costs O(pool) to evaluate."""

    def __init__(self, pool: PoolSpec) -> None:
        self.pool = pool
        self.whole = 0
        self.shared: dict[tuple[SharingMode, int], int] = defaultdict(int)
        self.mig = [0] * len(pool.gpu.mig_profiles)

    def add(self, opt: Option, sign: int = 1) -> None:
        k, n = opt.kind, opt.per_zone * sign
        if k.mode is SharingMode.WHOLE:
            self.whole += n * k.tensor_parallel
        elif k.mode is SharingMode.MIG:
            self.mig[_migpack.profile_index(k.gpu, k.mig_profile or "")] += n
        else:
            self.shared[(k.mode, k.shares)] += n

    def uniform_layout(self) -> _migpack.Counts | None:
        """The layout every MIG GPU of this pool carries, where the pool has one."""
        if self.pool.mig_layout is not None:
            return self.pool.mig_layout
        if self.pool.uniform_mig and any(self.mig):
            return _migpack.uniform_layout(self.pool.gpu.model, tuple(self.mig),
                                           self.pool.single_mig_profile)
        return None

    def mig_gpus(self) -> list[_migpack.Counts]:
        if not any(self.mig):
            return []
        gpu, demand, g = self.pool.gpu.model, tuple(self.mig), self.pool.gpus_per_node
        layout = self.uniform_layout()
        if layout is not None:
            return [layout] * self.mig_gpu_count()
        first = _pack_cached(gpu, demand, exact=False)
        floor = _migpack.floor_gpus(gpu, demand)
        # The exact packer only pays off when reaching the floor would save a node.
        if math.ceil((self.whole + len(first)) / g) > math.ceil((self.whole + floor) / g):
            return _pack_cached(gpu, demand, exact=True)
        return first

    def mig_gpu_count(self) -> int:
        """MIG GPUs per zone; a uniform layout that cannot hold the demand counts as
        `_migpack.UNPLACEABLE` GPUs, which prices the move out of any search."""
        layout = self.uniform_layout()
        if layout is not None:
            return _migpack.copies(layout, tuple(self.mig)) if any(self.mig) else 0
        return len(self.mig_gpus())

    def gpus(self) -> int:
        """GPUs per zone before rounding to nodes."""
        shared = sum(math.ceil(n / shares) for (_, shares), n in self.shared.items())
        return self.whole + self.mig_gpu_count() + shared

    def nodes(self) -> int:
        g = self.pool.gpus_per_node
        total = math.ceil((self.whole + self.mig_gpu_count()) / g)
        total += sum(math.ceil(math.ceil(n / shares) / g) for (_, shares), n in self.shared.items())
        return total

    def cost(self) -> float:
        nodes = self.nodes()
        over = max(0, nodes - self.pool.max_nodes_per_zone)
        return self.pool.zones * (nodes * self.pool.shape.price_per_hour + over * _OVERFULL_PENALTY)


# Memo of MIG packings: the search asks for the same demand vectors many times.
PACKS: dict[tuple[GpuModel, _migpack.Counts, bool], list[_migpack.Counts]] = {}


def _pack_cached(gpu: GpuModel, demand: _migpack.Counts, exact: bool) -> list[_migpack.Counts]:
    key = (gpu, demand, exact)
    if key not in PACKS:
        PACKS[key] = _migpack.pack(gpu, demand, exact)
    return PACKS[key]


def _total(loads: dict[str, PoolLoad]) -> float:
    return sum(load.cost() for load in loads.values())


def _move(choice: list[Option], loads: dict[str, PoolLoad], m: int, to: Option) -> None:
    loads[choice[m].pool.name].add(choice[m], -1)
    loads[to.pool.name].add(to)
    choice[m] = to


def _drop_node(choice: list[Option], options: list[list[Option]], loads: dict[str, PoolLoad],
               pool: str) -> bool:
    """Try to run `pool` on one node fewer per zone; keep the result only if it costs less."""
    load = loads[pool]
    target = load.nodes() - 1
    if target < 0:
        return False
    before, saved = _total(loads), list(choice)
    movable = sorted((m for m, o in enumerate(choice) if o.pool.name == pool),
                     key=lambda m: choice[m].gpu_units + sum(choice[m].mig_slices))
    for m in movable:
        if load.nodes() <= target:
            break
        current, gpus_before = choice[m], load.gpus()
        best, best_key = None, (0.0, math.inf)
        for alt in options[m]:
            if alt is current:
                continue
            _move(choice, loads, m, alt)
            # Free GPUs of this pool first, then pay least for it anywhere else.
            key = (float(load.gpus() - gpus_before), _total(loads))
            _move(choice, loads, m, current)
            if key[0] < 0 and key < best_key:
                best, best_key = alt, key
        if best is not None:
            _move(choice, loads, m, best)
    if load.nodes() <= target and _total(loads) < before - 1e-9:
        return True
    for m, opt in enumerate(saved):
        if choice[m] is not opt:
            _move(choice, loads, m, opt)
    return False


def improve(choice: list[Option], options: list[list[Option]], loads: dict[str, PoolLoad],
            rounds: int = 4) -> None:
    """Single moves, then node drops on every pool, until a round changes nothing."""
    for _ in range(rounds):
        _single_moves(choice, options, loads)
        dropped = False
        for name in loads:
            while _drop_node(choice, options, loads, name):
                dropped = True
        if not dropped:
            return


def _single_moves(choice: list[Option], options: list[list[Option]], loads: dict[str, PoolLoad],
                  passes: int = 3) -> None:
    """Move one model at a time to the option that lowers whole-node cost most, until no move helps."""
    for _ in range(passes):
        improved = False
        for m, opts in enumerate(options):
            current = choice[m]
            src = loads[current.pool.name]
            best, best_delta = current, -1e-9
            for alt in opts:
                if alt is current:
                    continue
                dst = loads[alt.pool.name]
                touched = [src] if dst is src else [src, dst]
                before = sum(load.cost() for load in touched)
                src.add(current, -1)
                dst.add(alt)
                delta = sum(load.cost() for load in touched) - before
                dst.add(alt, -1)
                src.add(current)
                if delta < best_delta:
                    best, best_delta = alt, delta
            if best is not current:
                src.add(current, -1)
                loads[best.pool.name].add(best)
                choice[m] = best
                improved = True
        if not improved:
            return


