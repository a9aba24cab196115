"""AKS agent pools: the System-mode profile inside the ManagedCluster and one AgentPool per GPU pool."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import containerservice as aks

from components.contract import PoolFacts
from serving.hardware import Vendor
from serving.sharing import Mig
from stacks.naming import AKS_SYSTEM_POOL, aks_pool_name
from stacks.pools import aks_mig_profile

SYSTEM_POOL = AKS_SYSTEM_POOL

# AKS partitions MIG GPUs itself from the pool's `gpuInstanceProfile`, named by compute slices.
GPU_INSTANCE_PROFILE: dict[int, aks.GPUInstanceProfile] = {
    1: aks.GPUInstanceProfile.MIG1G,
    2: aks.GPUInstanceProfile.MIG2G,
    3: aks.GPUInstanceProfile.MIG3G,
    4: aks.GPUInstanceProfile.MIG4G,
    7: aks.GPUInstanceProfile.MIG7G,
}

# AKS installs the NVIDIA driver on NVIDIA pools; MI300X nodes get theirs from the AMD GPU
# operator, so AKS must leave them bare.
GPU_DRIVER: dict[Vendor, aks.GPUDriver] = {
    Vendor.NVIDIA: aks.GPUDriver.INSTALL,
    Vendor.AMD: aks.GPUDriver.NONE,
}

# An ephemeral OS disk lives in the VM's cache or temporary (resource) disk and must fit in it;
# AKS rejects the pool otherwise. GPU sizes have no OS cache, so the temporary disk decides.
# GiB per VM size, from the "Temp storage (SSD) GiB" column of the Azure size pages: unverified
# here (remembered, not rechecked), so recheck before relying on them. The VM's NVMe disks are
# separate devices and are not counted.
EPHEMERAL_OS_CAPACITY_GIB: dict[str, int] = {
    "Standard_D4ds_v5": 150,
    "Standard_NC24ads_A100_v4": 64,
    "Standard_NC48ads_A100_v4": 128,
    "Standard_NC96ads_A100_v4": 256,
    "Standard_NC40ads_H100_v5": 128,
    "Standard_NC80adis_H100_v5": 256,
    "Standard_ND96isr_H100_v5": 1000,
    "Standard_ND96isr_MI300X_v5": 1000,
}
# Room for the node image plus the ~12 GB compressed vLLM image unpacked; weights live on NVMe.
GPU_OS_DISK_GIB = 128
MIN_OS_DISK_GIB = 64


def os_disk_gib(vm_size: str) -> int:
    """The OS disk size for an ephemeral OS disk on `vm_size`: as much of GPU_OS_DISK_GIB as fits."""
    capacity = EPHEMERAL_OS_CAPACITY_GIB.get(vm_size)
    if capacity is None or capacity < MIN_OS_DISK_GIB:
        raise ValueError(f"{vm_size} has no room known for an ephemeral OS disk of at least "
                         f"{MIN_OS_DISK_GIB} GiB")
    return min(GPU_OS_DISK_GIB, capacity)


def aks_taints(pool: PoolFacts) -> list[str]:
    """AKS spells a taint `key=value:Effect` with the Kubernetes effect names."""
    return [f"{t.key}={t.value}:{t.effect}" for t in pool.taints]


def gpu_instance_profile(pool: PoolFacts) -> aks.GPUInstanceProfile | None:
    if not isinstance(pool.sharing, Mig):
        return None
    profile = aks_mig_profile(pool.shape.gpu_spec, pool.sharing)
    if profile is None:  # stacks.checks and the planner give AKS selectable profiles only
        raise ValueError(f"pool {pool.name}: no single AKS MIG profile")
    return GPU_INSTANCE_PROFILE[profile.compute_slices]


def system_pool_profile(vm_size: str, min_nodes: int, max_nodes: int, zones: list[str],
                        kubernetes_version: str,
                        subnet_id: pulumi.Input[str]) -> aks.ManagedClusterAgentPoolProfileArgs:
    return aks.ManagedClusterAgentPoolProfileArgs(
        name=SYSTEM_POOL,
        mode=aks.AgentPoolMode.SYSTEM,
        vm_size=vm_size,
        availability_zones=list(zones),
        enable_auto_scaling=True,
        min_count=min_nodes,
        max_count=max_nodes,
        count=min_nodes,
        orchestrator_version=kubernetes_version,
        os_type=aks.OSType.LINUX,
        os_sku=aks.OSSKU.UBUNTU,
        vnet_subnet_id=subnet_id,
        node_labels={"rtip.dev/pool": "system"},
        type=aks.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
    )


def gpu_agent_pool(
    name: str,
    cluster: aks.ManagedCluster,
    resource_group_name: pulumi.Input[str],
    pool: PoolFacts,
    kubernetes_version: str,
    subnet_id: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> aks.AgentPool:
    spot = pool.spot
    mig = gpu_instance_profile(pool)
    # Keyword arguments rather than AgentPoolArgs, whose `resource_name` (the cluster) collides
    # with the resource's own first parameter in the 3.29 SDK; the keyword form spells it
    # `resource_name_` and still rejects a misspelled argument. Nested values are typed ...Args.
    return aks.AgentPool(
        name,
        resource_group_name=resource_group_name,
        resource_name_=cluster.name,
        agent_pool_name=aks_pool_name(pool.name),
        mode=aks.AgentPoolMode.USER,
        vm_size=pool.machine_type,
        availability_zones=list(pool.zones),
        enable_auto_scaling=True,
        min_count=pool.min_nodes,
        max_count=pool.max_nodes,
        count=pool.min_nodes,
        orchestrator_version=kubernetes_version,
        os_type=aks.OSType.LINUX,
        os_sku=aks.OSSKU.UBUNTU,
        os_disk_type=aks.OSDiskType.EPHEMERAL,
        os_disk_size_gb=os_disk_gib(pool.machine_type),
        vnet_subnet_id=subnet_id,
        node_labels=dict(pool.labels),
        # AKS adds `kubernetes.azure.com/scalesetpriority=spot:NoSchedule` to spot nodes itself;
        # the pool's facts carry it too (components/gpu_pools.py SPOT_TAINT), so the model pods
        # tolerate it and the declared taints match what the nodes have.
        node_taints=aks_taints(pool),
        gpu_instance_profile=mig,
        gpu_profile=aks.GPUProfileArgs(driver=GPU_DRIVER[pool.vendor]),
        scale_set_priority=aks.ScaleSetPriority.SPOT if spot else aks.ScaleSetPriority.REGULAR,
        # Spot: evicted VMs are deleted (a deallocated GPU VM still holds quota), and -1 pays
        # up to the on-demand price so eviction comes only from capacity, never from price.
        scale_set_eviction_policy=aks.ScaleSetEvictionPolicy.DELETE if spot else None,
        spot_max_price=-1 if spot else None,
        # GPU VMs are scarce: surge one node at a time during upgrades.
        upgrade_settings=aks.AgentPoolUpgradeSettingsArgs(max_surge="1"),
        type=aks.AgentPoolType.VIRTUAL_MACHINE_SCALE_SETS,
        tags=tags,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            # The autoscaler owns the live node count; a re-run must not reset it.
            ignore_changes=["count"],
            # AKS cannot change a pool's MIG profile in place: a new profile is a new pool, so
            # the engine must plan a replacement (the plan shows it) instead of a failing update.
            replace_on_changes=["gpuInstanceProfile"],
        )),
    )


__all__ = ["EPHEMERAL_OS_CAPACITY_GIB", "GPU_DRIVER", "GPU_INSTANCE_PROFILE", "GPU_OS_DISK_GIB",
           "SYSTEM_POOL", "aks_taints", "gpu_agent_pool", "gpu_instance_profile",
           "os_disk_gib", "system_pool_profile"]
