"""What every cluster exposes to the layers above it, whatever its cloud.

Everything that runs on a cluster (add-ons, model deployments, gateway) takes a ClusterFacts and
reaches the cluster only through its Kubernetes provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from serving.hardware import Cloud, GpuModel, Vendor


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str = "NoSchedule"  # Kubernetes spelling; each cloud maps it to its own


@dataclass(frozen=True)
class PoolFacts:
    name: str
    machine_type: str
    gpu: GpuModel
    vendor: Vendor
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    zones: tuple[str, ...]
    sharing: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    # Where the node's local NVMe is mounted for the model cache; None when the shape has none.
    nvme_path: str | None


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
    # The OIDC issuer workload identity federates with (EKS, AKS); GKE uses its workload pool.
    oidc_issuer: pulumi.Output[str] | None = None
    # GKE: `<project>.svc.id.goog`; AKS: the cluster's resource group name. None elsewhere.
    workload_pool: str | None = None
    resource_group: pulumi.Output[str] | None = None

    def pool(self, name: str) -> PoolFacts | None:
        return next((p for p in self.pools if p.name == name), None)


@dataclass(frozen=True)
class RegionStore:
    """A region's copy of the stack's registries: where its cluster pulls images and weights."""

    cloud: Cloud
    region: str
    image_registry: pulumi.Output[str]  # e.g. <acct>.dkr.ecr.<region>.amazonaws.com/rtip
    weights_uri: str  # the bucket root the model pods read: s3://, gs:// or https:// (Blob)
    weights_bucket: pulumi.Output[str]  # the bucket (AWS/GCP) or storage account ID (Azure)
    # AWS: the bucket ARN; GCP: the bucket name; Azure: the container's resource ID.
    weights_scope: pulumi.Output[str]
    weights_key: pulumi.Output[str] | None = None  # the customer key encrypting it (prod)


def public_api_cidrs(api_access_cidrs: Sequence[object]) -> list[str]:
    """Networks the cluster API is opened to from outside its network; empty means a private
    endpoint only. One rule for every cloud: prod never lists any (stacks.checks rejects it)."""
    return [str(c) for c in api_access_cidrs]


def cluster_props(cloud: Cloud, region: str, zones: list[str], kubernetes_version: str) -> dict[str, object]:
    """The plain facts a cluster component registers as its inputs, so a plan can read them."""
    return {
        "cloud": str(cloud),
        "region": region,
        "zones": list(zones),
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
        "sharing": pool.sharing,
        "labels": dict(pool.labels),
        "taints": [f"{t.key}={t.value}:{t.effect}" for t in pool.taints],
        "nvmePath": pool.nvme_path,
    }


__all__ = ["ClusterFacts", "PoolFacts", "RegionStore", "Taint", "cluster_props", "pool_props",
           "public_api_cidrs"]
