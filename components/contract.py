"""What every cluster exposes to the layers above it, whatever its cloud.

Everything that runs on a cluster (add-ons, model deployments, gateway) takes a ClusterFacts and
reaches the cluster only through its Kubernetes provider. What only one cloud needs (an AKS
kubelet identity, a GKE workload pool, an S3 bucket ARN) stays on that cloud's own typed cluster
and store classes (components/<cloud>/), never as optional fields here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from serving.hardware import Cloud, GpuModel, MachineShape, Vendor
from serving.nodescaling import NODE_AUTOSCALER
from serving.sharing import Sharing, describe


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str = "NoSchedule"  # Kubernetes spelling; each cloud maps it to its own


@dataclass(frozen=True)
class PoolFacts:
    """A GPU pool as every cloud builds it: the plan's pool plus its labels, taints, cache path."""

    name: str
    shape: MachineShape
    sharing: Sharing
    planned: bool  # the planner chose the sharing
    capacity_type: str  # on_demand | spot
    min_nodes: int
    max_nodes: int
    zones: tuple[str, ...]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    # Where the node's local NVMe is mounted for the model cache; None when the shape has none.
    nvme_path: str | None

    @property
    def machine_type(self) -> str:
        return self.shape.name

    @property
    def gpu(self) -> GpuModel:
        return self.shape.gpu

    @property
    def vendor(self) -> Vendor:
        return self.shape.gpu_spec.vendor

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpu_count

    @property
    def spot(self) -> bool:
        return self.capacity_type == "spot"


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    cloud: Cloud
    region: str
    zones: tuple[str, ...]
    kubernetes_version: str
    provider: k8s.Provider
    pools: tuple[PoolFacts, ...]
    endpoint: pulumi.Output[str]
    # The cloud's own name or ID for the cluster (EKS name, GKE cluster ID, AKS resource ID).
    native_id: pulumi.Output[str]

    def pool(self, name: str) -> PoolFacts | None:
        return next((p for p in self.pools if p.name == name), None)


@dataclass(frozen=True)
class RegionStore:
    """A region's copy of the stack's registries: where its cluster pulls images and weights.
    Each cloud's store class adds what its identity grants need (components/<cloud>/registries)."""

    cloud: Cloud
    region: str
    image_registry: pulumi.Output[str]  # e.g. <acct>.dkr.ecr.<region>.amazonaws.com/rtip
    weights_uri: str  # the bucket root the model pods read: s3://, gs:// or https:// (Blob)


def public_api_cidrs(api_access_cidrs: list[object]) -> list[str]:
    """Networks the cluster API is opened to from outside its network; empty means a private
    endpoint only. One rule for every cloud: a posture with a private API never lists any
    (stacks.checks rejects it)."""
    return [str(c) for c in api_access_cidrs]


def cluster_props(cloud: Cloud, region: str, zones: list[str], kubernetes_version: str,
                  zones_down: list[str] | None = None) -> dict[str, object]:
    """The plain facts a cluster component registers as its inputs, so a plan can read them;
    `zones_down` only where the region can name them (AWS: Karpenter's NodePools)."""
    return {
        "cloud": str(cloud),
        "region": region,
        "zones": list(zones),
        **({"zonesDown": list(zones_down)} if zones_down is not None else {}),
        "kubernetesVersion": kubernetes_version,
    }


def pool_props(pool: PoolFacts) -> dict[str, object]:
    return {
        "pool": pool.name,
        "machineType": pool.machine_type,
        "gpu": str(pool.gpu),
        "gpusPerNode": pool.gpus_per_node,
        "minNodes": pool.min_nodes,
        "maxNodes": pool.max_nodes,
        "zones": list(pool.zones),
        "sharing": describe(pool.sharing),
        "planned": pool.planned,
        "capacityType": pool.capacity_type,
        "labels": dict(pool.labels),
        "taints": [f"{t.key}={t.value}:{t.effect}" for t in pool.taints],
        "nvmePath": pool.nvme_path,
        # The node autoscaler that adds and removes the pool's nodes on its cloud.
        "autoscaler": NODE_AUTOSCALER[pool.shape.cloud].name,
    }


__all__ = ["ClusterFacts", "PoolFacts", "RegionStore", "Taint", "cluster_props", "pool_props",
           "public_api_cidrs"]
