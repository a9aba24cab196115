"""Karpenter on one EKS cluster: the node autoscaler above each GPU pool's floor.

Per cluster: the role Karpenter's nodes run as (with an EC2_LINUX access entry so they can join),
the controller's role through EKS Pod Identity with the policies of components/aws/karpenter_iam.py,
the interruption queue and the EventBridge rules that feed it, and the pinned charts
karpenter-crd then karpenter (serving/charts.py) with the controller on the system nodes. Per GPU
pool, under its GpuPool component: an EC2NodeClass, a NodePool and, for MIG pools, a NodeOverlay
(bodies from serving/karpenter.py), applied after the CRD release.

Installation follows the project's v1.14 getting-started guide (aws/karpenter-provider-aws,
website/content/en/v1.14/getting-started/getting-started-with-karpenter/: cloudformation.yaml,
scripts/step02-create-cluster.sh for the Pod Identity association of `kube-system/karpenter`,
scripts/step08-apply-helm-chart.sh for `settings.clusterName`, `settings.interruptionQueue` and
the controller's 1 CPU / 1 GiB).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons_helm import helm_release, resources
from components.aws.karpenter_iam import (
    INTERRUPTION_RULES,
    QUEUE_RETENTION_S,
    controller_policies,
    queue_policy,
)
from components.aws.nodes import GPU_ROOT_VOLUME_GIB
from components.aws.roles import grant_pull_through, pod_role, service_trust
from components.contract import PoolFacts
from components.gpu_pools import GpuPool
from serving import gpu_config as gc
from serving import karpenter as kp
from serving.charts import ChartKey
from serving.hardware import Vendor
from serving.posture import Posture

MANAGED_POLICY = "arn:aws:iam::aws:policy/"
# The template's KarpenterNodeRole policies (ECR pull-only, not read-only), less
# AmazonEKS_CNI_Policy: aws-node takes the CNI's permissions through Pod Identity on every node
# (components/aws/cluster.py), and a pull through a cache rule may fill it (components/aws/roles.py).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly",
                 "AmazonSSMManagedInstanceCore")
# The guide installs into kube-system; the chart names its service account after the release.
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
GPU_RESOURCE: dict[Vendor, str] = {Vendor.NVIDIA: "nvidia.com/gpu", Vendor.AMD: "amd.com/gpu"}
SYSTEM_SELECTOR = {"rtip.dev/pool": "system"}


def mig_capacity(pool: PoolFacts, pools: Sequence[PoolFacts]) -> dict[str, int]:
    """The MIG slices one node of `pool` advertises under the cluster's MIG strategy, where they
    are not the `nvidia.com/gpu` EC2 already reports (the mixed strategy's own resource names)."""
    sharing = pool.sharing
    if not isinstance(sharing, gc.Mig):
        return {}
    found: dict[str, int] = {}
    for profile, count in sharing.profiles.items():
        name = gc.resource_name(False, pools, pool, profile)
        if name != GPU_RESOURCE[pool.vendor]:
            found[name] = found.get(name, 0) + count * pool.gpus_per_node
    return found


def karpenter_pool(pool: PoolFacts, pools: Sequence[PoolFacts],
                   zones_down: Sequence[str] = ()) -> kp.KarpenterPool:
    """`pool` as Karpenter sees it; `zones_down` (the region's, an outage's) leave its NodePool."""
    return kp.KarpenterPool(
        name=pool.name, machine_type=pool.machine_type,
        zones=tuple(z for z in pool.zones if z not in zones_down),
        capacity_type=pool.capacity_type, labels=pool.labels,
        taints=tuple((t.key, t.value, t.effect) for t in pool.taints),
        gpu_resource=GPU_RESOURCE[pool.vendor], gpus_per_node=pool.gpus_per_node,
        vcpus=pool.shape.vcpus, memory_gib=pool.shape.memory_gib, floor_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes, nvme=pool.nvme_path is not None,
        extra_capacity=mig_capacity(pool, pools),
        zones_down=tuple(z for z in zones_down if z in pool.zones))


def controller_values(cluster: str, queue_name: pulumi.Input[str], env: Posture,
                      node_overlay: bool) -> dict[str, object]:
    """Values of the karpenter chart; every key is in its 1.14.1 values.yaml."""
    return {
        "settings": {"clusterName": cluster, "interruptionQueue": queue_name,
                     "featureGates": {"nodeOverlay": node_overlay}},
        "replicas": env.controller_replicas,
        # On the system node group: never on a node Karpenter itself manages (the chart's own
        # affinity keeps it off `karpenter.sh/nodepool` nodes too).
        "nodeSelector": SYSTEM_SELECTOR,
        "controller": {"resources": resources("1", "1Gi", "1", "1Gi")},
    }


class Karpenter(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: str, region: str, eks: aws.eks.Cluster,
                 k8s_provider: k8s.Provider, pools: Sequence[tuple[PoolFacts, GpuPool]],
                 cold_start_s: Mapping[str, float], env: Posture, after: Sequence[pulumi.Resource],
                 provider: pulumi.ProviderResource, image_prefix: str, zones_down: Sequence[str] = (),
                 opts: pulumi.ResourceOptions | None = None) -> None:
        """`zones_down`: zones of an outage, taken out of every NodePool (stacks/schema.py
        AwsRegion.zones_down: Karpenter would pin new nodes there)."""
        super().__init__("rtip:aws:Karpenter", name, {
            "cluster": cluster, "namespace": NAMESPACE, "replicas": env.controller_replicas,
            "pools": [p.name for p, _ in pools], "zonesDown": list(zones_down)}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        node_role = aws.iam.Role(f"{name}-node", aws.iam.RoleArgs(
            assume_role_policy=service_trust("ec2.amazonaws.com")), opts=child)
        node_policies: list[pulumi.Resource] = [aws.iam.RolePolicyAttachment(
            f"{name}-node-{p.lower()}", aws.iam.RolePolicyAttachmentArgs(
                role=node_role.name, policy_arn=MANAGED_POLICY + p), opts=child) for p in NODE_POLICIES]
        node_policies.append(grant_pull_through(f"{name}-node-pull-through", node_role, eks,
                                                image_prefix, child))
        # With API authentication, nodes join only through an access entry of type EC2_LINUX.
        entry = aws.eks.AccessEntry(f"{name}-node", aws.eks.AccessEntryArgs(
            cluster_name=eks.name, principal_arn=node_role.arn, type="EC2_LINUX"), opts=child)
        queue = aws.sqs.Queue(f"{name}-interruption", aws.sqs.QueueArgs(
            name=f"{cluster}-karpenter", message_retention_seconds=QUEUE_RETENTION_S,
            sqs_managed_sse_enabled=True), opts=child)
        rules = []
        for rule_name, pattern in INTERRUPTION_RULES.items():
            rule = aws.cloudwatch.EventRule(f"{name}-{rule_name}", aws.cloudwatch.EventRuleArgs(
                description=f"Karpenter interruption events for {cluster}",
                event_pattern=json.dumps(pattern)), opts=child)
            aws.cloudwatch.EventTarget(f"{name}-{rule_name}", aws.cloudwatch.EventTargetArgs(
                rule=rule.name, arn=queue.arn, target_id="KarpenterInterruptionQueueTarget"), opts=child)
            rules.append(rule)
        send = aws.sqs.QueuePolicy(f"{name}-interruption", aws.sqs.QueuePolicyArgs(
            queue_url=queue.id, policy=pulumi.Output.all(queue.arn, *(r.arn for r in rules)).apply(
                lambda a: queue_policy(a[0], list(a[1:])))), opts=child)
        role = pod_role(f"{name}-controller", eks, [(NAMESPACE, SERVICE_ACCOUNT)], child)
        docs = pulumi.Output.all(eks.arn, node_role.arn, queue.arn).apply(
            lambda a: controller_policies(cluster, region, a[0].split(":")[4], a[1], a[2],
                                          partition=a[0].split(":")[1]))
        grants = [aws.iam.RolePolicy(f"{name}-{group}", aws.iam.RolePolicyArgs(
            role=role.id, policy=docs.apply(lambda d, g=group: json.dumps(d[g]))), opts=child)
            for group in ("node-lifecycle", "iam-integration", "eks-integration", "interruption",
                          "resource-discovery")]
        identity = aws.eks.PodIdentityAssociation(f"{name}-controller", aws.eks.PodIdentityAssociationArgs(
            cluster_name=eks.name, namespace=NAMESPACE, service_account=SERVICE_ACCOUNT,
            role_arn=role.arn), opts=child)
        crd = helm_release(f"{name}-crd", ChartKey.KARPENTER_CRD, NAMESPACE, {}, self, k8s_provider,
                           list(after))
        # A pool whose floor is its ceiling (min = max) needs nothing from Karpenter.
        specs = [(spec, group) for spec, group in (
            (karpenter_pool(p, [q for q, _ in pools], zones_down), group) for p, group in pools)
            if spec.headroom_nodes]
        helm_release(f"{name}-controller", ChartKey.KARPENTER, NAMESPACE,
                     controller_values(cluster, queue.name, env, any(s.extra_capacity for s, _ in specs)),
                     self, k8s_provider, [crd, identity, send, *grants, *after])
        for spec, group in specs:
            on_pool = pulumi.ResourceOptions(parent=group, provider=k8s_provider)
            base = f"{cluster}-{spec.name}"
            node_class = _apply(f"{base}-nodeclass", node_role.name.apply(
                lambda r, s=spec: kp.ec2_node_class(s, cluster, r, GPU_ROOT_VOLUME_GIB)["spec"]),
                kp.ec2_node_class(spec, cluster, "", GPU_ROOT_VOLUME_GIB), on_pool,
                [crd, entry, *node_policies])
            body = kp.node_pool(spec, cold_start_s[spec.name])
            _apply(f"{base}-nodepool", body["spec"], body, on_pool, [crd, node_class])
            overlay = kp.node_overlay(spec)
            if overlay is not None:
                _apply(f"{base}-nodeoverlay", overlay["spec"], overlay, on_pool, [crd])
        self.node_role = node_role
        self.register_outputs({"queue": queue.name})


def _apply(name: str, spec: pulumi.Input[object], body: Mapping[str, object],
           opts: pulumi.ResourceOptions, after: list[pulumi.Resource]) -> pulumi.Resource:
    """`body`'s kind and name with `spec` (the body's own, or one that waits on an Output)."""
    return k8s.apiextensions.CustomResource(
        name, api_version=str(body["apiVersion"]), kind=str(body["kind"]), metadata=body["metadata"],
        spec=spec, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)))


__all__ = ["GPU_RESOURCE", "NAMESPACE", "NODE_POLICIES", "SERVICE_ACCOUNT", "Karpenter",
           "controller_values", "karpenter_pool", "mig_capacity"]
