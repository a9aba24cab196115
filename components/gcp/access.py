"""The deployer's access to a GKE cluster: Kubernetes Engine Admin, conditioned on the cluster.

GKE authorizes a Kubernetes API call if IAM or RBAC allows it. The program creates CRDs,
ClusterRoles and ClusterRoleBindings and objects in every namespace, which among the predefined
roles only `roles/container.admin` carries (container.developer lacks the RBAC and CRD writes;
docs.cloud.google.com/iam/docs/roles-permissions/container). Its lowest grant level is the
project, so the binding carries an IAM condition on the cluster's resource name
(`container.googleapis.com` recognizes resource attributes: iam/docs/conditions-resource-attributes),
one binding per cluster, so removing one region never revokes another's.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from stacks.schema import StackSpec

DEPLOYER_ROLE = "roles/container.admin"


def deployer_account(spec: StackSpec) -> str | None:
    return spec.deployer.gcp.service_account if spec.deployer and spec.deployer.gcp else None


def cluster_resource_name(project: str, location: str, cluster: str) -> str:
    return f"projects/{project}/locations/{location}/clusters/{cluster}"


def grant_deployer(name: str, project: str, location: str, cluster: gcp.container.Cluster,
                   spec: StackSpec, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    account = deployer_account(spec)
    if account is None:
        return []
    path = cluster_resource_name(project, location, name)
    member = gcp.projects.IAMMember(f"{name}-deployer", gcp.projects.IAMMemberArgs(
        project=project, role=DEPLOYER_ROLE, member=f"serviceAccount:{account}",
        condition=gcp.projects.IAMMemberConditionArgs(
            title=f"rtip deployer on {name}"[:100],
            description="Kubernetes Engine Admin on this one cluster, for `pulumi up`",
            expression=f'resource.name.startsWith("{path}")')),
        # After the cluster: the grant is for its API, which exists once the cluster does.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[cluster])))
    return [member]


__all__ = ["DEPLOYER_ROLE", "cluster_resource_name", "deployer_account", "grant_deployer"]
