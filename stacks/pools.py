"""Bridge from a pool's spec to the catalogs: its machine shape and its stated sharing, typed."""

from __future__ import annotations

from serving import mig
from serving.hardware import Cloud, GpuSpec, MachineShape, MigProfile, machine
from serving.sharing import Mig, Partition, Sharing, TimeSlice, Whole, mig_sharing
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


def aks_mig_profile(gpu: GpuSpec, sharing: Mig) -> MigProfile | None:
    """The one MIG profile of an AKS pool, or None when the layout is not a single profile AKS
    `gpuInstanceProfile` can select (it names only the compute size and gets the smallest memory
    profile of that size, so a double-memory 1g profile has no AKS spelling)."""
    used = sharing.single_profile
    if used is None or used not in (selectable_mig_profiles(Cloud.AZURE, gpu) or ()):
        return None
    return gpu.mig_profile(used)


def shape_of(cloud: str, pool: GpuPoolSpec) -> MachineShape:
    shape = machine(Cloud(cloud), pool.machine_type)
    if shape is None:  # stacks.checks rejects this before any caller gets here
        raise KeyError(f"unknown machine type {pool.machine_type} for {cloud}")
    return shape


def stated_sharing(gpu: GpuSpec, pool: GpuPoolSpec) -> Sharing | None:
    """The sharing the stack states for the pool, typed; None when the planner chooses it."""
    s = pool.sharing
    if isinstance(s, PlannedSharing):
        return None
    if isinstance(s, MigSharing):
        return mig_sharing(gpu, mig.resolve(gpu, s.layout, s.profiles), s.layout)
    if isinstance(s, TimeSlicing):
        return TimeSlice(s.replicas)
    if isinstance(s, AmdPartitioning):
        partition = gpu.amd_partition(s.profile)
        assert partition is not None  # stacks.checks rejects a profile the GPU lacks
        return Partition(partition)
    return Whole()


__all__ = ["SINGLE_PROFILE_CLOUDS", "aks_mig_profile", "selectable_mig_profiles", "shape_of",
           "stated_sharing"]
