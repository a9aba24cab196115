"""The deployer's access to an AKS cluster: 'Azure Kubernetes Service RBAC Cluster Admin'.

The clusters use Entra ID with Azure RBAC and no local accounts, so every Kubernetes call is an
Azure data-plane action; Owner and Contributor carry none. The deployer's object ID gets the
built-in 'Azure Kubernetes Service RBAC Cluster Admin' role (FACTS.md section 9, id
b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b) at the cluster's own scope, and the Kubernetes provider
waits for it.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization

from components.azure.keys import role_definition
from stacks.schema import StackSpec

AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"


def deployer_object(spec: StackSpec) -> str | None:
    return spec.deployer.azure.object_id if spec.deployer and spec.deployer.azure else None


def grant_deployer(name: str, cluster_id: pulumi.Input[str], spec: StackSpec,
                   opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    principal = deployer_object(spec)
    if principal is None:
        return []
    return [authorization.RoleAssignment(f"{name}-deployer", authorization.RoleAssignmentArgs(
        scope=cluster_id, role_definition_id=role_definition(cluster_id, AKS_RBAC_CLUSTER_ADMIN),
        principal_id=principal,
        # The deployer may be a person's pipeline identity or a managed identity; a service
        # principal either way (a user object would say User).
        principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL), opts=opts)]


__all__ = ["AKS_RBAC_CLUSTER_ADMIN", "deployer_object", "grant_deployer"]
