"""Bridge from a pool's spec to the catalogs: its machine shape, GPU, slices and labels."""

from __future__ import annotations

from dataclasses import dataclass

from serving import mig
from serving.hardware import Cloud, GpuModel, GpuSpec, MachineShape, Vendor, machine
from stacks.schema import AmdPartitioning, GpuPoolSpec, MigSharing, PlannedSharing, TimeSlicing

# Clouds that partition MIG GPUs themselves, with one profile per node pool (FACTS.md section 4:
# GKE `gpu_partition_size`, AKS `gpu_instance_profile`).
SINGLE_PROFILE_CLOUDS = {Cloud.GCP: "GKE (gpu_partition_size)", Cloud.AZURE: "AKS (gpu_instance_profile)"}


def selectable_mig_profiles(cloud: Cloud, gpu: GpuSpec) -> tuple[str, ...] | None:
    """The MIG profiles a pool on `cloud` can be partitioned with; None: every profile.

    AKS `gpuInstanceProfile` names only the compute size (MIG1g..MIG7g) and gets the smallest
    memory profile of that size (1g.10gb, not 1g.20gb, on an 80 GB GPU)."""
    if cloud is not Cloud.AZURE:
        return None
    smallest = {p.compute_slices: min(q.memory_slices for q in gpu.mig_profiles
                                      if q.compute_slices == p.compute_slices) for p in gpu.mig_profiles}
    return tuple(p.name for p in gpu.mig_profiles if p.memory_slices == smallest[p.compute_slices])


def shape_of(cloud: str, pool: GpuPoolSpec) -> MachineShape:
    shape = machine(Cloud(cloud), pool.machine_type)
    if shape is None:  # checks.py rejects this before any caller gets here
        raise KeyError(f"unknown machine type {pool.machine_type} for {cloud}")
    return shape


def mig_layout(gpu: GpuSpec, pool: GpuPoolSpec) -> dict[str, int]:
    assert isinstance(pool.sharing, MigSharing)
    return mig.resolve(gpu, pool.sharing.layout, pool.sharing.profiles)


def sharing_label(pool: GpuPoolSpec) -> str:
    """The pool's sharing in one word, as nodes are labelled and the plan prints it."""
    s = pool.sharing
    if isinstance(s, MigSharing):
        return f"mig:{s.layout}" if s.layout else "mig:" + "+".join(
            f"{n}x{p}" for p, n in sorted(s.profiles.items()) if n  # type: ignore[union-attr]
        )
    if isinstance(s, TimeSlicing):
        return f"time_slice:{s.replicas}"
    if isinstance(s, AmdPartitioning):
        return f"partition:{s.profile}"
    if isinstance(s, PlannedSharing):
        return "auto"  # only in the stack as written; stacks.layout.resolve chooses
    return "whole"


@dataclass(frozen=True)
class SharingView:
    """A stack pool as serving.gpu_config.PoolSharing: what its device plugin will advertise."""

    name: str
    gpu: GpuModel
    vendor: Vendor
    sharing: str


def sharing_view(cloud: str, pool: GpuPoolSpec) -> SharingView:
    gpu = shape_of(cloud, pool).gpu_spec
    return SharingView(pool.name, gpu.model, gpu.vendor, sharing_label(pool))


__all__ = ["SINGLE_PROFILE_CLOUDS", "SharingView", "mig_layout", "selectable_mig_profiles", "shape_of",
           "sharing_label", "sharing_view"]
