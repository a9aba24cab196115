"""Packing MIG instances onto GPUs: every layout used is one `serving.mig.placement` accepts.

The valid layouts of a GPU are enumerated once (every profile-count vector within the
single-profile maxima, kept when `mig.placement` finds start slices for it), so the packer checks
a candidate GPU by set membership instead of a placement search per try.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from serving import mig
from serving._quiet import quiet_stdout
from serving.hardware import GPUS, GpuModel

Counts = tuple[int, ...]  # instances per profile, in the GPU's mig_profiles order


@cache
def valid_layouts(gpu: GpuModel) -> frozenset[Counts]:
    """Every non-empty profile-count vector that can be placed on one GPU."""
    spec = GPUS[gpu]
    names = [p.name for p in spec.mig_profiles]
    maxima = [mig.MEMORY_SLICES // p.memory_slices for p in spec.mig_profiles]
    found = set()
    for counts in itertools.product(*(range(m + 1) for m in maxima)):
        if any(counts) and mig.placement(spec, dict(zip(names, counts, strict=True))) is not None:
            found.add(counts)
    return frozenset(found)


def profile_index(gpu: GpuModel, name: str) -> int:
    return [p.name for p in GPUS[gpu].mig_profiles].index(name)


@cache
def maximal_layouts(gpu: GpuModel) -> tuple[Counts, ...]:
    """Valid layouts no further instance can be added to."""
    valid = valid_layouts(gpu)
    size = len(GPUS[gpu].mig_profiles)

    def grown(c: Counts, i: int) -> Counts:
        return tuple(n + (j == i) for j, n in enumerate(c))

    return tuple(sorted(c for c in valid if not any(grown(c, i) in valid for i in range(size))))


def floor_gpus(gpu: GpuModel, demand: Counts) -> int:
    """GPUs no packing can go below: 7 compute and 8 memory slices a GPU."""
    profiles = GPUS[gpu].mig_profiles
    compute = sum(n * p.compute_slices for n, p in zip(demand, profiles, strict=True))
    memory = sum(n * p.memory_slices for n, p in zip(demand, profiles, strict=True))
    return math.ceil(max(compute / mig.COMPUTE_SLICES, memory / mig.MEMORY_SLICES))


def pack(gpu: GpuModel, demand: Counts, exact: bool = True) -> list[Counts]:
    """The fewest GPUs for `demand`, one valid layout per GPU; GPUs mix profiles freely, which is
    where mixed layouts beat `all-<profile>` ones. First-fit decreasing first; when it uses more
    GPUs than `floor_gpus` and `exact` is set, a covering ILP over the maximal layouts tries to do
    better (callers that round to nodes skip it when the floor would not save a node)."""
    first = _first_fit(gpu, demand)
    if not exact or len(first) <= floor_gpus(gpu, demand):
        return first
    better = _cover(gpu, demand)
    return better if better is not None and len(better) < len(first) else first


def _cover(gpu: GpuModel, demand: Counts) -> list[Counts] | None:
    """Minimum number of maximal layouts covering `demand`, trimmed to it (a subset of a placeable
    layout is placeable), or None if the solver gives no answer."""
    layouts = maximal_layouts(gpu)
    matrix = np.array(layouts, dtype=float).T  # profiles x layouts
    with quiet_stdout():
        res = milp(np.ones(len(layouts)), integrality=np.ones(len(layouts)),
                   constraints=LinearConstraint(matrix, np.array(demand, dtype=float), np.inf),
                   bounds=Bounds(0, np.inf), options={"time_limit": 1.0})
    if res.x is None:
        return None
    left = list(demand)
    result: list[Counts] = []
    for layout, times in zip(layouts, np.round(res.x).astype(int), strict=True):
        for _ in range(times):
            take = tuple(min(n, r) for n, r in zip(layout, left, strict=True))
            left = [r - t for r, t in zip(left, take, strict=True)]
            if any(take):
                result.append(take)
    return result if not any(left) else None


def _first_fit(gpu: GpuModel, demand: Counts) -> list[Counts]:
    """Instances largest first (compute, then memory), each onto the first GPU whose layout
    stays valid with it."""
    valid = valid_layouts(gpu)
    profiles = GPUS[gpu].mig_profiles
    order = sorted(range(len(profiles)),
                   key=lambda i: (-profiles[i].compute_slices, -profiles[i].memory_slices))
    gpus: list[list[int]] = []
    for i in order:
        for _ in range(demand[i]):
            for layout in gpus:
                layout[i] += 1
                if tuple(layout) in valid:
                    break
                layout[i] -= 1
            else:
                fresh = [0] * len(profiles)
                fresh[i] = 1
                gpus.append(fresh)
    return [tuple(layout) for layout in gpus]


# GPUs charged per instance of a profile a layout lacks: far beyond any pool, so a search prices
# it out, and in proportion, so each move that drops a missing profile is a visible gain.
UNPLACEABLE = 1_000


def copies(layout: Counts, demand: Counts) -> int:
    """GPUs of one `layout` that hold `demand`; instances of profiles the layout lacks count
    UNPLACEABLE GPUs each (no number of such GPUs holds them)."""
    need, missing = 0, 0
    for have, want in zip(layout, demand, strict=True):
        if want:
            if not have:
                missing += want
            else:
                need = max(need, math.ceil(want / have))
    return need + missing * UNPLACEABLE


@cache
def single_profile_layouts(gpu: GpuModel) -> tuple[Counts, ...]:
    """`all-<profile>`: each profile as many times as fits one GPU (GKE and AKS partition a pool so)."""
    valid = valid_layouts(gpu)
    size = len(GPUS[gpu].mig_profiles)
    found = []
    for i in range(size):
        n = max((c[i] for c in valid if sum(c) == c[i]), default=0)
        if n:
            found.append(tuple(n if j == i else 0 for j in range(size)))
    return tuple(found)


@cache
def uniform_layout(gpu: GpuModel, demand: Counts, single_profile: bool) -> Counts:
    """The one layout every GPU of a pool carries that holds `demand` on the fewest GPUs.

    Ties go to the fewest instances beyond the demand (spare instances are capacity nobody
    requests), then to the layout order, for a stable answer. Candidates are the maximal layouts:
    a smaller one never needs fewer GPUs."""
    candidates = single_profile_layouts(gpu) if single_profile else maximal_layouts(gpu)

    def key(c: Counts) -> tuple[int, int, Counts]:
        n = copies(c, demand)
        return (n, n * sum(c), c)
    return min(candidates, key=key)


def layout_name(gpu: GpuModel, counts: Counts) -> str:
    """A stable key for a layout: its profile counts, e.g. `2x1g.10gb+1x2g.20gb+1x3g.40gb`, or the
    mig-parted named layout when one matches."""
    spec = GPUS[gpu]
    as_dict = {p.name: n for p, n in zip(spec.mig_profiles, counts, strict=True) if n}
    for name, layout in spec.mig_layouts.items():
        if layout == as_dict:
            return name
    return "+".join(f"{n}x{p}" for p, n in as_dict.items())


def as_profiles(gpu: GpuModel, counts: Counts) -> dict[str, int]:
    return {p.name: n for p, n in zip(GPUS[gpu].mig_profiles, counts, strict=True) if n}


__all__ = ["UNPLACEABLE", "Counts", "as_profiles", "copies", "floor_gpus", "layout_name", "maximal_layouts",
           "pack", "profile_index", "single_profile_layouts", "uniform_layout", "valid_layouts"]
