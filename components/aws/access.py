"""The deployer's access to an EKS cluster: an access entry with cluster admin, nothing bootstrapped.

With `authentication_mode="API"` EKS authorizes through access entries; the cluster's creator gets
no implicit admin (`bootstrap_cluster_creator_admin_permissions=False`, see `creator_admin`), so
the one identity the stack declares (`deployer.aws.role_arn`) is granted, and the Kubernetes
provider waits for the grant before its first call. AmazonEKSClusterAdminPolicy with a cluster
access scope is the access policy that maps to Kubernetes `cluster-admin` (EKS user guide,
"Associate access policies with access entries"): the program creates CRDs, ClusterRoles and
objects in every namespace.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stacks.schema import StackSpec

CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def deployer_role(spec: StackSpec) -> str | None:
    return spec.deployer.aws.role_arn if spec.deployer and spec.deployer.aws else None


def creator_admin(spec: StackSpec) -> bool:
    """Whether EKS should make the cluster's creator admin: only when the stack names no deployer
    (then whoever runs `pulumi up` is the only one who can reach the cluster)."""
    return deployer_role(spec) is None


def grant_deployer(name: str, cluster: aws.eks.Cluster, spec: StackSpec,
                   opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """An access entry for the deployer's role and the cluster-admin policy on it."""
    role = deployer_role(spec)
    if role is None:
        return []
    entry = aws.eks.AccessEntry(f"{name}-deployer", aws.eks.AccessEntryArgs(
        cluster_name=cluster.name, principal_arn=role, type="STANDARD"), opts=opts)
    admin = aws.eks.AccessPolicyAssociation(f"{name}-deployer", aws.eks.AccessPolicyAssociationArgs(
        cluster_name=cluster.name, principal_arn=entry.principal_arn, policy_arn=CLUSTER_ADMIN_POLICY,
        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster")), opts=opts)
    return [entry, admin]


__all__ = ["CLUSTER_ADMIN_POLICY", "creator_admin", "deployer_role", "grant_deployer"]
