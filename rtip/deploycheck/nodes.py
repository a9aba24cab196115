"""The nodes a cluster in a record will have, as the scheduler sees them: one shape per pool.

GPU pools come from the `rtip:k8s:GpuPool` components (labels, taints, machine type) and the
plan's typed sharing (which extended resources each node advertises, and how many); the system
pool from the cluster's system node group / node pool / System agent pool. Allocatable CPU and
memory are the machine's less a kubelet reservation stated here (`reserved_cpu_m`,
`reserved_memory_mi`): GKE's published formula (cloud.google.com/kubernetes-engine/docs/concepts/
plan-node-sizes), applied to every cloud as one rule; EKS and AKS reserve in the same range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rtip.deploycheck.graph import descendants
from rtip.offline import Record, Resource
from serving import gpu_config
from serving.hardware import SYSTEM_MACHINES, Cloud, Vendor, machine
from serving.sharing import Mig, Partition, TimeSlice

EVICTION_MI = 100  # the kubelet's hard eviction threshold, held back from pods as well
# Node labels the kubelet, the cloud or an operator sets (zone, instance type, GPU operator and
# NFD labels): a selector on them is not decided from the record.
AUTO_LABEL_PREFIXES = ("kubernetes.io/", "node.kubernetes.io/", "topology.kubernetes.io/",
                       "beta.kubernetes.io/", "feature.node.kubernetes.io/", "nvidia.com/", "amd.com/",
                       "eks.amazonaws.com/", "cloud.google.com/", "kubernetes.azure.com/",
                       "karpenter.sh/", "karpenter.k8s.aws/")
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # Kubernetes spelling


@dataclass(frozen=True)
class NodeShape:
    pool: str
    machine_type: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, int] = field(default_factory=dict)  # cpu in millicores, memory in Mi


def reserved_cpu_m(cores: int) -> int:
    """6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest."""
    steps = ((1, 60), (1, 10), (2, 5), (10_000, 2.5))
    left, total = cores, 0.0
    for n, per_core in steps:
        take = min(left, n)
        total += take * per_core
        left -= take
    return int(total)


def reserved_memory_mi(gib: int) -> int:
    """25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above
    128 GiB, plus the eviction threshold."""
    steps = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (10**9, 0.02))
    left, total = float(gib), 0.0
    for n, share in steps:
        take = min(left, n)
        total += take * share
        left -= take
    return int(total * 1024) + EVICTION_MI


def _cpu_mem(vcpus: int, memory_gib: int) -> dict[str, int]:
    return {"cpu": vcpus * 1000 - reserved_cpu_m(vcpus),
            "memory": memory_gib * 1024 - reserved_memory_mi(memory_gib)}


def _taint(text: str) -> Taint:
    kv, _, effect = text.rpartition(":")
    key, _, value = kv.partition("=")
    return Taint(key, value, effect)


def _taints(raw: Any) -> tuple[Taint, ...]:
    out = []
    for t in raw or []:
        if isinstance(t, str):
            out.append(_taint(t))
        elif isinstance(t, dict):
            effect = str(t.get("effect", "NoSchedule"))
            out.append(Taint(str(t.get("key")), str(t.get("value") or ""), _EFFECTS.get(effect, effect)))
    return tuple(out)


def gpu_allocatable(cloud: Cloud, pool: Any, pools: tuple[Any, ...]) -> dict[str, int]:
    """The extended resources one node of a planned pool advertises, and how many."""
    gpus, s = pool.shape.gpu_count, pool.sharing
    if isinstance(s, Mig):
        out: dict[str, int] = {}
        for profile, count in s.profiles.items():
            name = gpu_config.resource_name(cloud is Cloud.GCP, pools, pool, profile)
            out[name] = out.get(name, 0) + count * gpus
        return out
    if isinstance(s, TimeSlice):
        return {"nvidia.com/gpu": gpus * s.replicas}
    if isinstance(s, Partition):
        return {gpu_config.resource_name(False, pools, pool): gpus * s.partition.partitions_per_gpu}
    return {"amd.com/gpu" if pool.vendor is Vendor.AMD else "nvidia.com/gpu": gpus}


def cluster_nodes(record: Record, cluster: Resource) -> list[NodeShape]:
    """Every pool of one `rtip:<cloud>:Cluster` component: the system pool first."""
    cloud = Cloud(str(cluster.inputs.get("cloud")))
    below = descendants(record, cluster.urn)
    nodes = [n for n in (_system(cloud, cluster.name, r) for r in below) if n is not None]
    region = next((r for r in (record.plan.regions if record.plan else ()) if r.cluster == cluster.name),
                  None)
    planned = {p.name: p for p in region.pools} if region else {}
    for comp in (r for r in below if r.type == "rtip:k8s:GpuPool"):
        props = comp.inputs
        shape = machine(cloud, str(props.get("machineType")))
        if shape is None:
            continue
        alloc = _cpu_mem(shape.vcpus, shape.memory_gib)
        pool = planned.get(str(props.get("pool")))
        if pool is not None:
            alloc.update(gpu_allocatable(cloud, pool, tuple(planned.values())))
        nodes.append(NodeShape(str(props.get("pool")), shape.name, dict(props.get("labels") or {}),
                               _taints(props.get("taints")), alloc))
    return nodes


def _system(cloud: Cloud, cluster: str, r: Resource) -> NodeShape | None:
    if r.type == "azure-native:containerservice:ManagedCluster":
        profile = next((p for p in r.inputs.get("agentPoolProfiles") or [] if p.get("mode") == "System"),
                       None)
        if profile is None:
            return None
        labels, taints, size = profile.get("nodeLabels"), profile.get("nodeTaints"), profile.get("vmSize")
    elif r.name == f"{cluster}-system" and r.type == "aws:eks/nodeGroup:NodeGroup":
        labels, taints, size = r.inputs.get("labels"), r.inputs.get("taints"), (r.inputs.get("instanceTypes")
                                                                                 or [None])[0]
    elif r.name == f"{cluster}-system" and r.type == "gcp:container/nodePool:NodePool":
        config = r.inputs.get("nodeConfig") or {}
        labels, taints, size = config.get("labels"), config.get("taints"), config.get("machineType")
    else:
        return None
    shape = SYSTEM_MACHINES[cloud].get(str(size))
    alloc = _cpu_mem(shape.vcpus, shape.memory_gib) if shape else {}
    return NodeShape("system", str(size), dict(labels or {}), _taints(taints), alloc)


__all__ = ["AUTO_LABEL_PREFIXES", "NodeShape", "Taint", "cluster_nodes", "gpu_allocatable",
           "reserved_cpu_m", "reserved_memory_mi"]
