"""How a GPU pool's GPUs are shared: one typed value from the plan down to every resource.

A pool runs exactly one of these on all its nodes (a node pool labels all its nodes alike):
- `Whole`: every GPU is one `nvidia.com/gpu` / `amd.com/gpu` (TP groups take several);
- `Mig`: every GPU carries the same MIG layout (profile counts; a named mig-parted layout such as
  `all-balanced` keeps its name, because the MIG manager's config is keyed by it);
- `TimeSlice`: the NVIDIA device plugin advertises every GPU `replicas` times;
- `Partition`: AMD MI300X compute/memory partitioning (`CPX-NPS4` ...) through the Device Config
  Manager.

Label strings, mig-parted config names and cloud fields are made from this value only where a
resource needs them (components/gpu_pools.py, serving/gpu_config.py, the cloud node modules).
"""

from __future__ import annotations

from dataclasses import dataclass

from serving import mig
from serving.hardware import AmdPartition, GpuSpec
from serving.slices import SharingMode


@dataclass(frozen=True)
class Whole:
    @property
    def mode(self) -> SharingMode:
        return SharingMode.WHOLE


@dataclass(frozen=True)
class Mig:
    """Profile counts per GPU, in the GPU's profile order; `layout` names a mig-parted layout."""

    counts: tuple[tuple[str, int], ...]
    layout: str | None = None

    @property
    def mode(self) -> SharingMode:
        return SharingMode.MIG

    @property
    def profiles(self) -> dict[str, int]:
        return {p: n for p, n in self.counts if n}

    @property
    def single_profile(self) -> str | None:
        """The one profile of a single-profile layout (what GKE and AKS can partition with)."""
        used = list(self.profiles)
        return used[0] if len(used) == 1 else None


@dataclass(frozen=True)
class TimeSlice:
    replicas: int

    @property
    def mode(self) -> SharingMode:
        return SharingMode.TIME_SLICE


@dataclass(frozen=True)
class Partition:
    partition: AmdPartition

    @property
    def mode(self) -> SharingMode:
        return SharingMode.PARTITION

    @property
    def profile(self) -> str:
        return self.partition.name


Sharing = Whole | Mig | TimeSlice | Partition


def mig_sharing(gpu: GpuSpec, counts: dict[str, int], layout: str | None = None) -> Mig:
    """A MIG value for `gpu`, checked against NVIDIA's placement rules; a count vector equal to
    a named mig-parted layout takes its name, so the MIG manager's config key is that name."""
    used = {p: n for p, n in counts.items() if n}
    if not mig.is_valid(gpu, used):
        raise ValueError(f"MIG layout {used} does not fit one {gpu.model} ({mig.COMPUTE_SLICES} "
                         f"compute and {mig.MEMORY_SLICES} memory slices, NVIDIA placement rules)")
    if layout is None:
        layout = next((name for name, named in gpu.mig_layouts.items() if named == used), None)
    order = [p.name for p in gpu.mig_profiles]
    return Mig(tuple(sorted(used.items(), key=lambda kv: order.index(kv[0]))), layout)


def describe(sharing: Sharing) -> str:
    """The pool's sharing in one word, as the plan prints it."""
    if isinstance(sharing, Mig):
        return f"mig:{sharing.layout}" if sharing.layout else "mig:" + "+".join(
            f"{n}x{p}" for p, n in sharing.counts)
    if isinstance(sharing, TimeSlice):
        return f"time_slice:{sharing.replicas}"
    if isinstance(sharing, Partition):
        return f"partition:{sharing.profile}"
    return "whole"


__all__ = ["Mig", "Partition", "Sharing", "TimeSlice", "Whole", "describe", "mig_sharing"]
