"""MIG geometry: whether a set of MIG instances can coexist on one GPU.

A layout is valid when every instance can be placed at one of its allowed memory-slice starts
without two instances sharing a memory slice, and the compute slices add up to at most 7. The
placement is searched, not inferred from slice counts, so the start positions it reports are the
ones the MIG manager would use, and a GPU with tighter placement rules needs only a new table.
"""

from __future__ import annotations

from collections.abc import Mapping

from serving.hardware import GpuSpec, MigProfile

COMPUTE_SLICES = 7
MEMORY_SLICES = 8


def expand(layout: Mapping[str, int]) -> list[str]:
    """Profile counts -> one name per instance, largest first (the order placement tries)."""
    names = [name for name, count in layout.items() for _ in range(count)]
    return sorted(names, key=lambda n: (-int(n.split("g.")[0]), n))


def placement(gpu: GpuSpec, layout: Mapping[str, int]) -> dict[int, str] | None:
    """A start slice for every instance of `layout`, or None if the layout cannot be placed.

    Unknown profile names and negative counts make the layout invalid (None).
    """
    if any(count < 0 for count in layout.values()):
        return None
    profiles: list[MigProfile] = []
    for name in expand(layout):
        profile = gpu.mig_profile(name)
        if profile is None:
            return None
        profiles.append(profile)
    if sum(p.compute_slices for p in profiles) > COMPUTE_SLICES:
        return None
    used = [False] * MEMORY_SLICES
    starts: dict[int, str] = {}

    def place(i: int) -> bool:
        if i == len(profiles):
            return True
        profile = profiles[i]
        for start in profile.starts:
            span = range(start, start + profile.memory_slices)
            if span.stop > MEMORY_SLICES or any(used[s] for s in span):
                continue
            for s in span:
                used[s] = True
            starts[start] = profile.name
            if place(i + 1):
                return True
            del starts[start]
            for s in span:
                used[s] = False
        return False

    return dict(sorted(starts.items())) if place(0) else None


def is_valid(gpu: GpuSpec, layout: Mapping[str, int]) -> bool:
    return bool(layout) and sum(layout.values()) > 0 and placement(gpu, layout) is not None


def resolve(gpu: GpuSpec, layout_name: str | None, profiles: Mapping[str, int] | None) -> dict[str, int]:
    """The profile counts of a named layout, or the explicit counts given."""
    if layout_name is not None:
        return dict(gpu.mig_layouts[layout_name])
    return {k: v for k, v in (profiles or {}).items() if v}


__all__ = ["COMPUTE_SLICES", "MEMORY_SLICES", "expand", "is_valid", "placement", "resolve"]
