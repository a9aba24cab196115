"""IAM documents the EKS clusters' roles share: EKS Pod Identity trust, the VPC CNI's own
permissions, and what a node needs to fill the ECR pull-through caches on a first pull.

Pod Identity trust (EKS user guide, "Create IAM role with trust policy required by EKS Pod
Identity" and "List of session tags added by EKS Pod Identity"): the service principal
`pods.eks.amazonaws.com` assumes the role with `sts:AssumeRole` and `sts:TagSession`, and tags
the request with `eks-cluster-arn`, `kubernetes-namespace` and `kubernetes-service-account`,
which the trust policy can match as `aws:RequestTag/...`. Each role here is bound to its account
(`aws:SourceAccount`; the EKS best-practices guide, "IAM roles for EKS Pod Identities", recommends
the source condition keys against the cross-service confused deputy) and, through the request
tags, to exactly the cluster and service accounts that use it. `aws:SourceArn` is not used: AWS
documents no value for it on Pod Identity requests (users report it is the association's ARN, and
a cluster-wide `ArnLike` on it breaking some credential paths, awslabs/mountpoint-s3-csi-driver
#781), whereas the cluster ARN tag is documented.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

POD_IDENTITY = "pods.eks.amazonaws.com"


def service_trust(service: str) -> str:
    """A role a service assumes for the cluster (EKS' cluster role, EC2's node roles)."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]}],
    })


def pod_identity_trust(account: str, cluster_arn: str, subjects: Sequence[tuple[str, str]]) -> str:
    """Trust for EKS Pod Identity: one statement per (namespace, service account), each held to
    the cluster's account, the cluster and that service account."""
    if not subjects:
        raise ValueError("a Pod Identity role needs at least one service account to trust")
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": POD_IDENTITY},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {
            "aws:SourceAccount": account,
            "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }}} for namespace, service_account in subjects]})


def arn_parts(arn: str) -> tuple[str, str, str]:
    """(partition, region, account) of an ARN such as the cluster's."""
    parts = arn.split(":")
    return parts[1], parts[3], parts[4]


def pod_role(name: str, cluster: aws.eks.Cluster, subjects: Sequence[tuple[str, str]],
             opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """A role only the given service accounts of this cluster can assume through Pod Identity."""
    subjects = list(subjects)
    return aws.iam.Role(name, aws.iam.RoleArgs(assume_role_policy=cluster.arn.apply(
        lambda arn: pod_identity_trust(arn_parts(arn)[2], arn, subjects))), opts=opts)


def cni_policy(partition: str, region: str, account: str, vpc_id: str) -> dict[str, Any]:
    """What the VPC CNI (`aws-node`) calls in IPv4 mode, held to the cluster's region, account
    and VPC.

    Actions: amazon-vpc-cni-k8s docs/iam-policy.md, "IPv4 mode" (the AmazonEKS_CNI_Policy set plus
    ec2:DescribeSecurityGroups); resource types per action from the Service Authorization
    Reference (Amazon EC2): Create/Delete/Assign/Unassign/Modify on network-interface, Attach and
    Detach also on instance, Create also on subnet and security-group (the `ec2:Vpc` condition
    as in the same doc's scope-down sample), Modify also on security-group. The Describe calls
    take no resource ARN.
    """
    def arn(kind: str) -> str:
        return f"arn:{partition}:ec2:{region}:{account}:{kind}/*"

    eni, instance = arn("network-interface"), arn("instance")
    in_vpc = {"ArnEquals": {"ec2:Vpc": f"arn:{partition}:ec2:{region}:{account}:vpc/{vpc_id}"}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DescribeNetwork", "Effect": "Allow", "Resource": "*",
         "Action": ["ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeInstanceTypes", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets"],
         "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
        {"Sid": "TagInterfaces", "Effect": "Allow", "Resource": eni, "Action": "ec2:CreateTags"},
        {"Sid": "CreateInterfaces", "Effect": "Allow", "Resource": eni,
         "Action": "ec2:CreateNetworkInterface"},
        {"Sid": "CreateInterfacesInTheVpc", "Effect": "Allow",
         "Resource": [arn("subnet"), arn("security-group")],
         "Action": "ec2:CreateNetworkInterface", "Condition": in_vpc},
        {"Sid": "ManageInterfaces", "Effect": "Allow", "Resource": eni,
         "Action": ["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
                    "ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface",
                    "ec2:DeleteNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute"]},
        {"Sid": "AttachToInstances", "Effect": "Allow", "Resource": instance,
         "Action": ["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface",
                    "ec2:ModifyNetworkInterfaceAttribute"]},
        {"Sid": "InterfaceSecurityGroups", "Effect": "Allow", "Resource": arn("security-group"),
         "Action": "ec2:ModifyNetworkInterfaceAttribute", "Condition": in_vpc},
    ]}


def pull_through_import_policy(partition: str, region: str, account: str, prefix: str) -> dict[str, Any]:
    """The two calls ECR makes as the pulling principal when an image is first pulled through a
    cache rule (ECR user guide, "IAM permissions required to sync an upstream registry"):
    `ecr:BatchImportUpstreamImage` fetches it upstream, `ecr:CreateRepository` files it when the
    repository does not exist yet. Both take a repository ARN (Service Authorization Reference,
    Amazon ECR), so they are held to the stack's prefix in the cluster's own registry."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "FillPullThroughCaches", "Effect": "Allow",
        "Action": ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
        "Resource": f"arn:{partition}:ecr:{region}:{account}:repository/{prefix}/*"}]}


def grant_pull_through(name: str, role: aws.iam.Role, cluster: aws.eks.Cluster, prefix: str,
                       opts: pulumi.ResourceOptions) -> aws.iam.RolePolicy:
    """Let a node role (the kubelet pulls with it) fill the region's pull-through caches."""
    return aws.iam.RolePolicy(name, aws.iam.RolePolicyArgs(
        role=role.id, policy=cluster.arn.apply(
            lambda arn: json.dumps(pull_through_import_policy(*arn_parts(arn), prefix)))), opts=opts)


__all__ = ["POD_IDENTITY", "arn_parts", "cni_policy", "grant_pull_through", "pod_identity_trust",
           "pod_role", "pull_through_import_policy", "service_trust"]
