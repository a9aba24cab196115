"""Cloud-neutral facts of a GPU pool: labels, taints and cache path every cloud applies the same."""

from __future__ import annotations

import pulumi

from components.contract import PoolFacts, Taint, pool_props
from serving.gpu_config import AMD_PROFILE_LABEL, DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL
from serving.hardware import Cloud, Vendor
from serving.sharing import Mig, Partition, TimeSlice
from stacks.plan import PlannedPool

LABEL_PREFIX = "rtip.dev"

# Where each cloud mounts a GPU node's local NVMe for the model cache:
# EKS AL2023 nodeadm `localStorage.strategy: RAID0` assembles the instance-store disks at
# /mnt/k8s-disks/0; GKE `ephemeral_storage_local_ssd_config` backs ephemeral storage under
# /mnt/stateful_partition/kube-ephemeral-ssd. AKS mounts only the VM's temporary (resource) disk,
# at /mnt, and leaves the NVMe drives raw; the toolkit's node-prep DaemonSet
# (serving/nodeprep.py) assembles them into one RAID0 array mounted at /mnt/rtip-nvme.
NVME_PATH: dict[Cloud, str] = {
    Cloud.AWS: "/mnt/k8s-disks/0",
    Cloud.GCP: "/mnt/stateful_partition/kube-ephemeral-ssd",
    Cloud.AZURE: "/mnt/rtip-nvme",
}
# Clouds whose NVMe the toolkit assembles itself (the node-prep DaemonSet's RAID0 step).
ASSEMBLE_NVME: frozenset[Cloud] = frozenset({Cloud.AZURE})

# KServe's node agent DaemonSet selects only nodes with this label (kserve-localmodel-resources
# v0.20.0 files/resources.yaml: `nodeSelector: kserve/localmodel: worker`, kept by the deep merge).
LOCALMODEL_NODE_LABEL = ("kserve/localmodel", "worker")

# Taints a cloud puts on spot nodes itself, which model pods must then tolerate: AKS adds
# `kubernetes.azure.com/scalesetpriority=spot:NoSchedule` to every spot node (AKS docs, "Add a
# spot node pool"); EKS managed node groups and GKE spot pools add none.
SPOT_TAINT: dict[Cloud, Taint] = {
    Cloud.AZURE: Taint("kubernetes.azure.com/scalesetpriority", "spot"),
}

# Every GPU node repels pods that do not ask for its GPUs (FACTS.md section 4).
GPU_TAINT_KEY: dict[Vendor, str] = {Vendor.NVIDIA: "nvidia.com/gpu", Vendor.AMD: "amd.com/gpu"}
# The taint's value per cloud. GKE taints GPU nodes `nvidia.com/gpu=present:NoSchedule` itself
# and rejects a pool that also declares that key and effect with another value ("Found more than
# one taint with key nvidia.com/gpu and effect NO_SCHEDULE", hashicorp/terraform-provider-google
# #7928), so GKE pools declare GKE's own taint: the record then matches the node, and the taint
# holds even where GKE skips it (a GPU pool created while the cluster has no CPU pool,
# terraform-google-modules/terraform-google-kubernetes-engine#703).
GPU_TAINT_VALUE: dict[Cloud, str] = {Cloud.AWS: "true", Cloud.GCP: "present", Cloud.AZURE: "true"}


def config_key(pool: PlannedPool) -> str:
    """The name of the pool's entry in the MIG-manager or device-plugin config: a named mig-parted
    layout keeps its name, anything else is the pool's own entry."""
    if isinstance(pool.sharing, Mig) and pool.sharing.layout:
        return pool.sharing.layout
    return f"rtip-{pool.name}"


def node_labels(pool: PlannedPool) -> dict[str, str]:
    labels = {
        f"{LABEL_PREFIX}/pool": pool.name,
        f"{LABEL_PREFIX}/gpu": str(pool.gpu).lower(),
        f"{LABEL_PREFIX}/sharing": str(pool.sharing.mode),
        f"{LABEL_PREFIX}/capacity-type": pool.capacity_type.replace("_", "-"),
    }
    s = pool.sharing
    # The NVIDIA GPU Operator picks a node's MIG layout and device-plugin config from these labels.
    if isinstance(s, Mig):
        labels[MIG_CONFIG_LABEL] = config_key(pool)
    elif isinstance(s, TimeSlice):
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = config_key(pool)
    elif isinstance(s, Partition):
        labels[AMD_PROFILE_LABEL] = s.profile.lower()
    if pool.shape.local_nvme_gb:
        # Only nodes with a cache disk run KServe's node agent and hold cached models.
        labels[LOCALMODEL_NODE_LABEL[0]] = LOCALMODEL_NODE_LABEL[1]
    return labels


def pool_taints(cloud: Cloud, pool: PlannedPool) -> tuple[Taint, ...]:
    """The GPU taint, and the cloud's own spot taint on a spot pool."""
    taints = [Taint(GPU_TAINT_KEY[pool.vendor], GPU_TAINT_VALUE[cloud])]
    spot = SPOT_TAINT.get(cloud)
    if spot is not None and pool.capacity_type == "spot":
        taints.append(spot)
    return tuple(taints)


def pool_facts(cloud: Cloud, pool: PlannedPool) -> PoolFacts:
    return PoolFacts(
        name=pool.name, shape=pool.shape, sharing=pool.sharing, planned=pool.planned,
        capacity_type=pool.capacity_type, min_nodes=pool.min_nodes, max_nodes=pool.max_nodes,
        zones=pool.zones, labels=node_labels(pool),
        taints=pool_taints(cloud, pool),
        nvme_path=NVME_PATH[cloud] if pool.shape.local_nvme_gb else None,
    )


class GpuPool(pulumi.ComponentResource):
    """Parents a pool's cloud resources and registers its facts (GPU, sharing, labels, taints)."""

    def __init__(self, name: str, pool: PoolFacts, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:k8s:GpuPool", name, pool_props(pool), opts)
        self.register_outputs({})


__all__ = ["ASSEMBLE_NVME", "GPU_TAINT_KEY", "GPU_TAINT_VALUE", "LABEL_PREFIX", "LOCALMODEL_NODE_LABEL",
           "NVME_PATH", "SPOT_TAINT", "GpuPool", "config_key", "node_labels", "pool_facts", "pool_taints"]
