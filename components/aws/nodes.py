"""EKS managed node groups: the system group and one group per GPU pool."""

from __future__ import annotations

import base64
import json

import pulumi
import pulumi_aws as aws

from components.contract import PoolFacts

# EKS AMI families (FACTS.md section 4): AL2023 with the NVIDIA driver and container toolkit.
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# Room for the ~12 GB compressed vLLM image unpacked, plus logs; weights live on the NVMe cache.
GPU_ROOT_VOLUME_GIB = 200
# What a managed node group gives its nodes without a launch template (EKS API reference,
# CreateNodegroup `diskSize`: 20 GiB for Linux); the system pool keeps that size.
SYSTEM_ROOT_VOLUME_GIB = 20
SYSTEM_POOL = "system"

TAINT_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE",
                "PreferNoSchedule": "PREFER_NO_SCHEDULE"}

_BOUNDARY = "//rtip-nodeadm//"


def nodeadm_user_data(raid0: bool) -> str:
    """MIME multi-part user data whose NodeConfig part assembles instance-store NVMe as RAID0.

    EKS merges its own NodeConfig (cluster endpoint, CA) into managed-node-group user data, so
    this part carries only what it adds: nodeadm `spec.instance.localStorage.strategy: RAID0`
    builds one array from every instance-store disk and mounts it at /mnt/k8s-disks/0.
    """
    node_config = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}} if raid0 else {},
    }
    return "\n".join([
        "MIME-Version: 1.0",
        f'Content-Type: multipart/mixed; boundary="{_BOUNDARY}"',
        "",
        f"--{_BOUNDARY}",
        "Content-Type: application/node.eks.aws",
        "",
        "---",
        json.dumps(node_config, indent=2),
        f"--{_BOUNDARY}--",
        "",
    ])


def node_launch_template(name: str, pool: str, root_volume_gib: int, user_data: str | None,
                         opts: pulumi.ResourceOptions) -> aws.eks.NodeGroupLaunchTemplateArgs:
    """The launch template every managed node group runs from, and the group's reference to it.

    Without one a managed node group keeps the AMI's IMDS settings and an unencrypted root volume
    unless the account encrypts EBS by default."""
    template = aws.ec2.LaunchTemplate(
        f"{name}-lt",
        aws.ec2.LaunchTemplateArgs(
            user_data=base64.b64encode(user_data.encode()).decode() if user_data else None,
            # IMDSv2 only and one hop: pods use EKS Pod Identity, never the node's credentials.
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1,
            ),
            # Encrypted with the account's EBS key: a customer key here would also need a grant
            # to the Auto Scaling service-linked role, or nodes fail to launch.
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=root_volume_gib, volume_type="gp3", encrypted="true",
                    delete_on_termination="true",
                ),
            )],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type="instance", tags={"rtip/pool": pool},
            )],
        ),
        opts=opts,
    )
    return aws.eks.NodeGroupLaunchTemplateArgs(id=template.id,
                                               version=template.latest_version.apply(str))


def gpu_node_group(
    name: str,
    cluster: aws.eks.Cluster,
    node_role: aws.iam.Role,
    pool: PoolFacts,
    subnet_ids: list[pulumi.Output[str]],
    opts: pulumi.ResourceOptions,
) -> aws.eks.NodeGroup:
    capacity_type = "SPOT" if pool.spot else "ON_DEMAND"
    template = node_launch_template(name, pool.name, GPU_ROOT_VOLUME_GIB,
                                    nodeadm_user_data(raid0=pool.nvme_path is not None), opts)
    # The pool's floor, fixed (min = max = desired): it stands even while Karpenter is down, and
    # Karpenter's NodePool adds the nodes above it (components/aws/karpenter.py).
    return _node_group(
        name, cluster, node_role, subnet_ids, pool.machine_type, GPU_AMI_TYPE, capacity_type,
        pool.min_nodes, pool.min_nodes, pool.labels, opts,
        taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=TAINT_EFFECT[t.effect])
                for t in pool.taints],
        launch_template=template, fixed=True,
    )


def system_node_group(
    name: str,
    cluster: aws.eks.Cluster,
    node_role: aws.iam.Role,
    machine_type: str,
    min_nodes: int,
    max_nodes: int,
    subnet_ids: list[pulumi.Output[str]],
    opts: pulumi.ResourceOptions,
) -> aws.eks.NodeGroup:
    template = node_launch_template(name, SYSTEM_POOL, SYSTEM_ROOT_VOLUME_GIB, None, opts)
    return _node_group(name, cluster, node_role, subnet_ids, machine_type, SYSTEM_AMI_TYPE,
                       "ON_DEMAND", min_nodes, max_nodes, {"rtip.dev/pool": SYSTEM_POOL}, opts,
                       launch_template=template)


def _node_group(
    name: str, cluster: aws.eks.Cluster, node_role: aws.iam.Role,
    subnet_ids: list[pulumi.Output[str]], machine_type: str, ami_type: str, capacity_type: str,
    min_nodes: int, max_nodes: int, labels: dict[str, str], opts: pulumi.ResourceOptions,
    taints: list[aws.eks.NodeGroupTaintArgs] | None = None,
    launch_template: aws.eks.NodeGroupLaunchTemplateArgs | None = None,
    fixed: bool = False,
) -> aws.eks.NodeGroup:
    # A group that may vary leaves its live count alone on a re-run; a fixed one is its floor.
    ignore = [] if fixed else ["scalingConfig.desiredSize"]
    return aws.eks.NodeGroup(
        name,
        aws.eks.NodeGroupArgs(
            cluster_name=cluster.name, node_role_arn=node_role.arn, subnet_ids=subnet_ids,
            instance_types=[machine_type], ami_type=ami_type, capacity_type=capacity_type,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=min_nodes, max_size=max_nodes, desired_size=min_nodes),
            labels=labels, taints=taints, launch_template=launch_template,
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=ignore)),
    )


__all__ = ["GPU_AMI_TYPE", "SYSTEM_ROOT_VOLUME_GIB", "TAINT_EFFECT", "gpu_node_group",
           "node_launch_template", "nodeadm_user_data", "system_node_group"]
