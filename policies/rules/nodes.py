"""GPU and system nodes: IMDSv2 with one hop on every EKS node group, GPU pools tainted, no
public IPs on EKS nodes."""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules.base import Config, Props, StackResource, get, of_types
from serving.hardware import MACHINES, Cloud

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
GKE_POOL = "gcp:container/nodePool:NodePool"
AKS_POOL = "azure-native:containerservice:AgentPool"
GPU_TAINTS = {"nvidia.com/gpu", "amd.com/gpu"}


def imds_v2_one_hop(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    """Every EKS node group runs from a launch template that requires IMDSv2 tokens with a hop
    limit of 1, so pods cannot reach the node role's credentials."""
    templates = {get(r.props, "id"): r for r in resources if r.type == LAUNCH_TEMPLATE}
    for group in (r for r in resources if r.type == NODE_GROUP):
        lt_id = get(group.props, "launchTemplate", "id")
        template = templates.get(lt_id)
        if template is None:
            yield group.urn, "the node group has no launch template, so IMDS stays at the AMI default"
            continue
        meta = get(template.props, "metadataOptions", default={})
        if meta.get("httpTokens") != "required" or meta.get("httpPutResponseHopLimit") != 1:
            yield group.urn, ("its launch template allows IMDSv1 or more than one hop "
                              f"(httpTokens={meta.get('httpTokens')}, "
                              f"hop limit={meta.get('httpPutResponseHopLimit')})")


def no_public_eks_node_ips(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    subnets = {get(r.props, "id"): r for r in resources if r.type == SUBNET}
    for group in (r for r in resources if r.type == NODE_GROUP):
        for sid in get(group.props, "subnetIds", default=[]):
            subnet = subnets.get(sid)
            if subnet is not None and get(subnet.props, "mapPublicIpOnLaunch", default=False):
                yield group.urn, f"node group subnet {sid} gives instances public IP addresses"


def _is_gpu(cloud: Cloud, machine: str | None) -> bool:
    return machine is not None and machine in MACHINES[cloud]


@of_types({NODE_GROUP, GKE_POOL, AKS_POOL})
def gpu_pools_tainted(type_: str, props: Props, config: Config) -> Iterator[str]:
    if type_ == NODE_GROUP:
        gpu = any(_is_gpu(Cloud.AWS, m) for m in get(props, "instanceTypes", default=[]))
        keys = {t.get("key") for t in get(props, "taints", default=[]) if t.get("effect") == "NO_SCHEDULE"}
    elif type_ == GKE_POOL:
        gpu = bool(get(props, "nodeConfig", "guestAccelerators", default=[]))
        keys = {t.get("key") for t in get(props, "nodeConfig", "taints", default=[])
                if t.get("effect") == "NO_SCHEDULE"}
    else:
        gpu = _is_gpu(Cloud.AZURE, get(props, "vmSize"))
        keys = {t.split("=")[0].split(":")[0] for t in get(props, "nodeTaints", default=[])
                if t.endswith(":NoSchedule")}
    if gpu and not keys & GPU_TAINTS:
        yield "a GPU node pool without a NoSchedule GPU taint lets any pod take the GPU nodes"


__all__ = ["gpu_pools_tainted", "imds_v2_one_hop", "no_public_eks_node_ips"]
