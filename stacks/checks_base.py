"""What every check module yields: a problem at a key path of `rtip:platform`, in plain words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. `regions[0].gpu_pools[1].name`, relative to rtip:platform
    message: str


__all__ = ["Problem"]
