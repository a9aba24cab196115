"""Bridge from a pool's spec to the catalogs: its machine shape, GPU, slices and labels."""

from __future__ import annotations

from serving import mig
from serving.hardware import Cloud, GpuSpec, MachineShape, machine
from serving.placement import PoolOption
from serving.slices import SharingMode, Slice, node_slices
from stacks.schema import AmdPartitioning, GpuPoolSpec, MigSharing, TimeSlicing


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
    return "whole"


def slices(cloud: str, pool: GpuPoolSpec) -> list[Slice]:
    shape = shape_of(cloud, pool)
    s = pool.sharing
    if isinstance(s, MigSharing):
        return node_slices(shape, SharingMode.MIG, mig_layout=mig_layout(shape.gpu_spec, pool))
    if isinstance(s, TimeSlicing):
        return node_slices(shape, SharingMode.TIME_SLICE, time_slice_replicas=s.replicas)
    if isinstance(s, AmdPartitioning):
        part = shape.gpu_spec.amd_partition(s.profile)
        assert part is not None
        return node_slices(shape, SharingMode.PARTITION, partitions_per_gpu=part.partitions_per_gpu)
    return node_slices(shape, SharingMode.WHOLE)


def option(cloud: str, pool: GpuPoolSpec, region_zones: int) -> PoolOption:
    shape = shape_of(cloud, pool)
    return PoolOption(
        pool=pool.name,
        gpus_per_node=shape.gpu_count,
        max_nodes=pool.max_nodes,
        zones=len(pool.zones) if pool.zones else region_zones,
        slices=tuple(slices(cloud, pool)),
        gpu=shape.gpu_spec,
    )


__all__ = ["mig_layout", "option", "shape_of", "sharing_label", "slices"]
