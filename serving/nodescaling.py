"""Which node autoscaler owns the GPU pools on each cloud, and how long it takes to add a node.

One row per cloud (a table, not a branch):
- AWS: Karpenter (components/aws/karpenter.py). Each GPU pool keeps a managed node group fixed at
  the plan's floor, so the floor stands even while the Karpenter controller is down; a Karpenter
  NodePool per pool adds nodes above it up to `max_nodes` and removes them once empty.
- GCP: GKE's cluster autoscaler, switched on per node pool by `autoscaling` (total min/max).
- Azure: the AKS cluster autoscaler, switched on per agent pool by `enable_auto_scaling`.

Node provisioning time (scale-up decision to a node registered with the API server): the only
measurement on file is the 284 s of kaito-project/kaito#2325 (FACTS.md section 7), taken on
AKS. No measurement of Karpenter or of GKE's autoscaler for GPU machines from a source this
project can cite is on file, so every row keeps that figure and says so in `source`; replace a
row's figure when a measurement for its autoscaler is.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.hardware import Cloud


@dataclass(frozen=True)
class NodeAutoscaler:
    name: str  # what the plan shows as the pool's autoscaler
    node_provisioning_s: float  # scale-up decision to a registered node
    source: str  # where `node_provisioning_s` comes from
    # Whether it launches nodes in the zones still up while one of a spread's zones is lost.
    # Karpenter does not: it takes a spread's zones from its NodePools' requirements and the
    # instance types' offerings, not from live nodes, so the lost zone stays a domain holding none
    # of the pods and maxSkew 1 pins every new node there, where none launches (v1.14.1
    # pkg/controllers/provisioning/scheduling/topology.go buildDomainGroups, topologygroup.go
    # nextDomainTopologySpread; kubernetes-sigs/karpenter#3272), until the zone leaves the
    # NodePools (AwsRegion.zones_down). The cluster autoscalers' rows are not verified against
    # their code: they are taken to launch in the zones up.
    launches_while_zone_down: bool = True
    # How long it waits for a pod of a node it removes before it kills it, whatever the pod's
    # grace period; None: it waits for the pod's own (Karpenter, unless a NodePool's
    # `terminationGracePeriod` says less, which the deploy check reads). The cluster autoscaler's
    # `--max-graceful-termination-sec` defaults to 600 (its FAQ); AKS documents its profile's
    # `max-graceful-termination-sec` default as 600; GKE documents a scale-down grace period of
    # up to 10 minutes; kubernetes/kubernetes#94435 shows a 3 h grace cut at 10 min by it.
    pod_grace_limit_s: float | None = 600.0
    # How long a node its pods no longer need stays before it is removed (the GPU time the
    # simulator bills for it); None: Karpenter's `consolidateAfter` as each NodePool is emitted.
    # The cluster autoscaler's `--scale-down-unneeded-time` defaults to 10 min (its FAQ); AKS
    # documents its profile's `scale-down-unneeded-time` default as '10m' (whole minutes only) and
    # the plan states it; GKE exposes no such setting and publishes no figure for its BALANCED
    # profile (the default, which the plan states), so the upstream default stands in there.
    empty_node_s: float | None = 600.0


# GKE's cluster autoscaler profile, which the GCP row's empty_node_s assumes (the GKE API's
# default; OPTIMIZE_UTILIZATION removes unneeded nodes sooner).
GKE_AUTOSCALING_PROFILE = "BALANCED"

_KAITO_S = 284.0
_KAITO = "kaito-project/kaito#2325: 284 s node provisioning measured on AKS"

NODE_AUTOSCALER: dict[Cloud, NodeAutoscaler] = {
    Cloud.AWS: NodeAutoscaler(
        "karpenter", _KAITO_S,
        f"{_KAITO}; no Karpenter GPU figure on file, the AKS one stands in",
        launches_while_zone_down=False, pod_grace_limit_s=None, empty_node_s=None),
    Cloud.GCP: NodeAutoscaler(
        "gke-cluster-autoscaler", _KAITO_S,
        f"{_KAITO}; no GKE GPU figure on file, the AKS one stands in"),
    Cloud.AZURE: NodeAutoscaler("aks-cluster-autoscaler", _KAITO_S, _KAITO),
}


__all__ = ["GKE_AUTOSCALING_PROFILE", "NODE_AUTOSCALER", "NodeAutoscaler"]
