"""Karpenter bodies for one EKS GPU pool: its EC2NodeClass, NodePool and (MIG) NodeOverlay.

Pure functions over plain values; components/aws/karpenter.py applies them after the
karpenter-crd release. Fields are those of the CRDs the pinned karpenter-crd 1.14.1 chart
installs (../shared/charts/karpenter-crd/1.14.1/crds/), checked in tests/test_karpenter.py.

Design (README "Node autoscaling"): the pool's managed node group holds the plan's floor; this
NodePool adds nodes above it, up to the pool's `max_nodes`, with the same instance type, zones,
capacity type, labels and taints, and removes a node only once no model pod runs on it.
Upstream docs relied on (aws/karpenter-provider-aws, website/content/en/v1.14/concepts/):
- nodepools.md: `limits` cap the resources of all nodes the NodePool launched (`nodes` their
  count, `nvidia.com/gpu` as EC2 reports the instance type's GPUs); requirements
  on `node.kubernetes.io/instance-type`, `topology.kubernetes.io/zone`,
  `karpenter.sh/capacity-type` (values `on-demand`, `spot`).
- disruption.md: `WhenEmpty` removes a node only when it runs nothing but daemonsets, so
  consolidation never drains a node that serves a model; `consolidateAfter` is how long a node
  must stay empty first; a budget of `nodes: "1"` lets drift replace one node at a time, with the
  replacement launched before the old one drains.
- nodeclasses.md: `alias: al2023@latest` picks the AL2023 AMI variant the instance type needs
  (the NVIDIA one for GPU instances); `instanceStorePolicy: RAID0` makes nodeadm assemble the
  instance-store NVMe into one array (the same /mnt/k8s-disks/0 the node groups mount);
  `role` makes Karpenter manage the instance profile.
- nodeoverlays.md (alpha, feature gate `nodeOverlay`): `capacity` adds extended resources to
  Karpenter's view of an instance type. EC2 reports whole GPUs only, so without an overlay no
  instance type offers `nvidia.com/mig-<profile>` and Karpenter would never add a node for a
  pod that asks for a MIG slice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODEOVERLAY_API = "karpenter.sh/v1alpha1"
NODECLASS_GROUP = "karpenter.k8s.aws"

# The label Karpenter puts on every node it launches, naming the NodePool (nodepools.md).
NODEPOOL_LABEL = "karpenter.sh/nodepool"
# Tag the network and the cluster security group carry so EC2NodeClasses can select them.
DISCOVERY_TAG = "karpenter.sh/discovery"
# AL2023 at the newest release; on a GPU instance type Karpenter resolves the NVIDIA variant.
AMI_ALIAS = "al2023@latest"
# Karpenter's default lifetime, stated: a node is replaced (gracefully, under the PDBs) after
# 30 days so AMI fixes reach long-lived nodes too.
EXPIRE_AFTER = "720h"
CAPACITY_TYPE = {"on_demand": "on-demand", "spot": "spot"}


@dataclass(frozen=True)
class KarpenterPool:
    """What one GPU pool's Karpenter objects are made of (the pool's facts as plain values)."""

    name: str
    machine_type: str
    zones: tuple[str, ...]
    capacity_type: str  # on_demand | spot
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect) in Kubernetes spelling
    gpu_resource: str  # nvidia.com/gpu | amd.com/gpu: what EC2 reports for the instance type
    gpus_per_node: int
    vcpus: int
    memory_gib: int
    floor_nodes: int  # held by the pool's managed node group
    max_nodes: int
    nvme: bool  # the instance type has instance-store NVMe
    # Extended resources one node advertises that EC2 does not know (MIG slices), per node.
    extra_capacity: Mapping[str, int] = field(default_factory=dict)
    # Zones of an outage, already taken out of `zones` (stacks/schema.py AwsRegion.zones_down).
    zones_down: tuple[str, ...] = ()

    @property
    def headroom_nodes(self) -> int:
        """Nodes Karpenter may add above the floor."""
        return max(self.max_nodes - self.floor_nodes, 0)


def limits(pool: KarpenterPool) -> dict[str, str]:
    """The NodePool's ceiling: `headroom_nodes` nodes of the pool's instance type, so floor plus
    Karpenter's nodes never pass `max_nodes`."""
    n = pool.headroom_nodes
    return {"nodes": str(n), "cpu": str(pool.vcpus * n), "memory": f"{pool.memory_gib * n}Gi",
            pool.gpu_resource: str(pool.gpus_per_node * n)}


def consolidate_after_s(cold_start_s: float) -> int:
    """How long a node must stay empty before Karpenter removes it: at least the cold start of
    a replica on a new node (whole minutes), so a dip shorter than it costs to come back keeps
    its node."""
    return 60 * max(1, math.ceil(cold_start_s / 60))


def consolidate_after(cold_start_s: float) -> str:
    """`consolidate_after_s` as the NodePool's `disruption.consolidateAfter` duration."""
    return f"{consolidate_after_s(cold_start_s) // 60}m"


def ec2_node_class(pool: KarpenterPool, cluster: str, node_role: str,
                   root_volume_gib: int) -> dict[str, object]:
    spec: dict[str, object] = {
        "role": node_role,
        "amiSelectorTerms": [{"alias": AMI_ALIAS}],
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster}}],
        # IMDSv2 only and one hop: pods use EKS Pod Identity, never the node's credentials.
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                            "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        "blockDeviceMappings": [{
            "deviceName": "/dev/xvda", "rootVolume": True,
            "ebs": {"volumeSize": f"{root_volume_gib}Gi", "volumeType": "gp3",
                    "encrypted": True, "deleteOnTermination": True},
        }],
        "tags": {"rtip/pool": pool.name},
    }
    if pool.nvme:
        spec["instanceStorePolicy"] = "RAID0"
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass",
            "metadata": {"name": pool.name}, "spec": spec}


def node_pool(pool: KarpenterPool, cold_start_s: float) -> dict[str, object]:
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [pool.machine_type]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(pool.zones)},
        {"key": "karpenter.sh/capacity-type", "operator": "In",
         "values": [CAPACITY_TYPE[pool.capacity_type]]},
    ]
    return {
        "apiVersion": NODEPOOL_API, "kind": "NodePool", "metadata": {"name": pool.name},
        "spec": {
            "template": {
                "metadata": {"labels": dict(pool.labels)},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass",
                                     "name": pool.name},
                    "requirements": requirements,
                    "taints": [{"key": k, "value": v, "effect": e} for k, v, e in pool.taints],
                    "expireAfter": EXPIRE_AFTER,
                },
            },
            "limits": limits(pool),
            "disruption": {"consolidationPolicy": "WhenEmpty",
                           "consolidateAfter": consolidate_after(cold_start_s),
                           "budgets": budgets(pool)},
        },
    }


def budgets(pool: KarpenterPool) -> list[dict[str, object]]:
    """One node disrupted at a time; none for drift while a zone is listed down. A node whose
    zone left the NodePool's requirement is drifted (karpenter v1.14.1
    nodeclaim/disruption/drift.go areRequirementsDrifted), and Karpenter would replace and
    terminate the lost zone's nodes one by one: the ones a partial outage still serves with, and
    the ones the zone would come back with."""
    held = [{"nodes": "0", "reasons": ["Drifted"]}] if pool.zones_down else []
    return [*held, {"nodes": "1"}]


def node_overlay(pool: KarpenterPool) -> dict[str, object] | None:
    """The MIG slices a node of the pool advertises, for Karpenter's scheduling simulation;
    None when EC2's own GPU count already names what the pool's pods request."""
    if not pool.extra_capacity:
        return None
    return {
        "apiVersion": NODEOVERLAY_API, "kind": "NodeOverlay", "metadata": {"name": pool.name},
        "spec": {
            "requirements": [{"key": NODEPOOL_LABEL, "operator": "In", "values": [pool.name]}],
            "capacity": {k: str(v) for k, v in sorted(pool.extra_capacity.items())},
        },
    }


__all__ = ["AMI_ALIAS", "CAPACITY_TYPE", "DISCOVERY_TAG", "EXPIRE_AFTER", "NODECLASS_API",
           "NODEOVERLAY_API", "NODEPOOL_API", "NODEPOOL_LABEL", "KarpenterPool", "budgets",
           "consolidate_after", "consolidate_after_s", "ec2_node_class", "limits", "node_overlay",
           "node_pool"]
