"""What the GPU operators must be told about a cluster's pools: MIG layouts, time-slicing, partitions.

Pure: it reads a pool's GPU, typed sharing (serving.sharing) and node labels (the same ones the
cloud puts on the nodes), so the key a node is labelled with and the key the operator's config
carries come from one place and cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from serving.hardware import AmdPartition, GpuModel, Vendor
from serving.sharing import Mig, Partition, Sharing, TimeSlice

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
AMD_PROFILE_LABEL = "dcm.amd.com/gpu-config-profile"
# The MIG manager applies this to nodes with no layout label: whole-GPU pools on MIG-capable GPUs
# must keep MIG off, so the entry exists in every MIG config the toolkit writes.
MIG_DISABLED = "all-disabled"
# The device plugin's entry for nodes that carry no `nvidia.com/device-plugin.config` label.
DEVICE_PLUGIN_DEFAULT = "default"


class MigStrategy(StrEnum):
    SINGLE = "single"
    MIXED = "mixed"


class PoolSharing(Protocol):
    """What decides the slices a pool's device plugin advertises: its GPU and its sharing."""

    @property
    def name(self) -> str: ...
    @property
    def gpu(self) -> GpuModel: ...
    @property
    def vendor(self) -> Vendor: ...
    @property
    def sharing(self) -> Sharing: ...


class PoolLike(PoolSharing, Protocol):
    """The parts of components.contract.PoolFacts this module reads (serving imports no Pulumi)."""

    @property
    def gpus_per_node(self) -> int: ...
    @property
    def labels(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class NvidiaConfig:
    """One cluster's NVIDIA operator inputs: keys are the node-label values the pools carry."""

    mig_layouts: dict[str, dict[str, int]] = field(default_factory=dict)
    time_slicing: dict[str, int] = field(default_factory=dict)
    mig_strategy: MigStrategy | None = None  # None: no pool uses MIG


def nvidia_config(pools: Iterable[PoolLike]) -> NvidiaConfig:
    """MIG layouts per `nvidia.com/mig.config` key, replicas per device-plugin key, MIG strategy.

    `single` advertises every MIG slice as `nvidia.com/gpu`, which is only unambiguous when the
    cluster's NVIDIA GPUs are all cut into one and the same profile. Anything else (a mixed layout,
    two profiles across pools, MIG beside whole or time-sliced GPUs) needs `mixed`, which names the
    slice in the resource (`nvidia.com/mig-3g.40gb`) so a pod cannot land on the wrong one.
    """
    nvidia = [p for p in pools if p.vendor is Vendor.NVIDIA]
    layouts: dict[str, dict[str, int]] = {}
    replicas: dict[str, int] = {}
    for pool in nvidia:
        if isinstance(pool.sharing, Mig):
            key = pool.labels[MIG_CONFIG_LABEL]
            layout = pool.sharing.profiles
            if layouts.get(key, layout) != layout:
                raise ValueError(f"pool {pool.name}: MIG config key {key!r} already names "
                                 f"{layouts[key]}, not {layout}")
            layouts[key] = layout
        if isinstance(pool.sharing, TimeSlice):
            replicas[pool.labels[DEVICE_PLUGIN_CONFIG_LABEL]] = pool.sharing.replicas
    return NvidiaConfig(layouts, replicas, mig_strategy(nvidia))


def mig_strategy(pools: Iterable[PoolSharing]) -> MigStrategy | None:
    """The device plugin's MIG strategy for a cluster with these pools (see nvidia_config);
    None when no NVIDIA pool uses MIG."""
    nvidia = [p for p in pools if p.vendor is Vendor.NVIDIA]
    layouts = [p.sharing.profiles for p in nvidia if isinstance(p.sharing, Mig)]
    if not layouts:
        return None
    profiles = {p for layout in layouts for p in layout}
    only_mig = len(layouts) == len(nvidia)
    return MigStrategy.SINGLE if len(profiles) == 1 and only_mig else MigStrategy.MIXED


def mig_resource_name(strategy: MigStrategy, profile: str) -> str:
    """The extended resource a pod requests for one `profile` slice under `strategy`."""
    return "nvidia.com/gpu" if strategy is MigStrategy.SINGLE else f"nvidia.com/mig-{profile}"


def resource_name(on_gke: bool, pools: Iterable[PoolSharing], pool: PoolSharing,
                  mig_profile: str | None = None) -> str:
    """The extended resource a pod asks for to get one slice of `pool` (one MIG `mig_profile`).

    GKE's own device plugin advertises MIG partitions and time-shared GPUs as `nvidia.com/gpu`;
    elsewhere the GPU Operator's MIG strategy for the cluster's pools decides. AMD partitions are
    named per mode (the DeviceConfig's `mixed` naming), whole AMD GPUs are `amd.com/gpu`.
    """
    s = pool.sharing
    if pool.vendor is Vendor.AMD:
        if isinstance(s, Partition) and s.partition.compute_mode != "SPX":
            return "amd.com/" + s.profile.lower().replace("-", "_")
        return "amd.com/gpu"
    if not isinstance(s, Mig):
        return "nvidia.com/gpu"
    if mig_profile is None or mig_profile not in s.profiles:
        raise ValueError(f"pool {pool.name}: MIG profile {mig_profile!r} is not in its layout "
                         f"{s.profiles}")
    if on_gke:
        return "nvidia.com/gpu"
    strategy = mig_strategy(pools)
    assert strategy is not None  # `pool` itself uses MIG
    return mig_resource_name(strategy, mig_profile)


def mig_parted_config(layouts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The MIG manager's config file (mig-parted `version: v1`), one entry per layout key."""
    configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for key, counts in sorted(layouts.items()):
        configs[key] = [{"devices": "all", "mig-enabled": True,
                         "mig-devices": {p: n for p, n in sorted(counts.items()) if n}}]
    return {"version": "v1", "mig-configs": configs}


def device_plugin_configs(replicas: Mapping[str, int], strategy: MigStrategy | None) -> dict[str, Any]:
    """One device-plugin config file per key: time-slicing where asked, plain otherwise.

    Each file repeats the cluster's MIG strategy, because a config file replaces the operator's
    flags for the nodes that select it.
    """
    flags = {"migStrategy": str(strategy) if strategy else "none"}
    files: dict[str, Any] = {DEVICE_PLUGIN_DEFAULT: {"version": "v1", "flags": flags}}
    for key, n in sorted(replicas.items()):
        files[key] = {"version": "v1", "flags": flags, "sharing": {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": n}]}}}
    return files


def amd_partitions(pools: Iterable[PoolLike]) -> dict[str, tuple[AmdPartition, int]]:
    """Device Config Manager profiles by `dcm.amd.com/gpu-config-profile` value: (mode, GPUs).

    SPX-NPS1 is the GPU's power-on mode, so only pools asking for CPX get a profile.
    """
    profiles: dict[str, tuple[AmdPartition, int]] = {}
    for pool in pools:
        if pool.vendor is not Vendor.AMD or not isinstance(pool.sharing, Partition):
            continue
        partition = pool.sharing.partition
        if partition.compute_mode == "SPX":
            continue
        profiles[pool.labels[AMD_PROFILE_LABEL]] = (partition, pool.gpus_per_node)
    return profiles


def dcm_config(profiles: Mapping[str, tuple[AmdPartition, int]]) -> dict[str, Any]:
    """The Device Config Manager's `config.json`: every GPU of a node in the profile's mode."""
    def entry(compute: str, memory: str, gpus: int) -> dict[str, Any]:
        return {"skippedGPUs": {"ids": []}, "profiles": [
            {"computePartition": compute, "memoryPartition": memory, "numGPUsAssigned": gpus}]}

    gpus = max((n for _, n in profiles.values()), default=8)
    # `spx-nps1` lets an operator return a node to whole GPUs by relabelling it.
    out = {"spx-nps1": entry("SPX", "NPS1", gpus)}
    for key, (part, n) in sorted(profiles.items()):
        out[key] = entry(part.compute_mode, part.memory_mode, n)
    return {"gpu-config-profiles": out}


def dcm_config_json(profiles: Mapping[str, tuple[AmdPartition, int]]) -> str:
    return json.dumps(dcm_config(profiles), indent=2, sort_keys=True)


__all__ = [
    "AMD_PROFILE_LABEL",
    "DEVICE_PLUGIN_CONFIG_LABEL",
    "DEVICE_PLUGIN_DEFAULT",
    "MIG_CONFIG_LABEL",
    "MIG_DISABLED",
    "MigStrategy",
    "NvidiaConfig",
    "PoolLike",
    "PoolSharing",
    "amd_partitions",
    "dcm_config",
    "dcm_config_json",
    "device_plugin_configs",
    "mig_parted_config",
    "mig_resource_name",
    "mig_strategy",
    "nvidia_config",
    "resource_name",
]
