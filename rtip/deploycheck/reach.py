"""Reach: every Kubernetes provider's API is reachable from the deployer and authorizes it first.

Read from the record alone: the stack's `deployer` (the plan's spec), each cluster's control
plane inputs (private endpoint, allowed ranges, authentication) and the grants in the record.
The facts checked against are stated here, apart from the program's own constants:
- EKS: access entries with AmazonEKSClusterAdminPolicy at cluster scope (EKS user guide,
  "access policies"); `bootstrapClusterCreatorAdminPermissions` grants only the creator.
- GKE: IAM `roles/container.admin` for the deployer in the cluster's project.
- AKS with Azure RBAC and no local accounts: "Azure Kubernetes Service RBAC Cluster Admin"
  (b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b, FACTS.md section 9) at the cluster's scope, or an admin
  group (`aadProfile.adminGroupObjectIDs`).
A grant the provider does not wait for may come after its first call: that is reported too.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import waits_for
from rtip.offline import Record, Resource

CHECK = "reach"
EKS_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
GKE_ADMIN_ROLE = "roles/container.admin"
AKS_ADMIN_ROLE_ID = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
CONTROL_PLANES = ("aws:eks/cluster:Cluster", "gcp:container/cluster:Cluster",
                  "azure-native:containerservice:ManagedCluster")


def _endpoint(plane: Resource) -> tuple[bool, list[str]]:
    """(private only, the ranges a public endpoint admits)."""
    i = plane.inputs
    if plane.type == CONTROL_PLANES[0]:
        vpc = i.get("vpcConfig") or {}
        return not vpc.get("endpointPublicAccess"), list(vpc.get("publicAccessCidrs") or [])
    if plane.type == CONTROL_PLANES[1]:
        private = bool((i.get("privateClusterConfig") or {}).get("enablePrivateEndpoint"))
        blocks = (i.get("masterAuthorizedNetworksConfig") or {}).get("cidrBlocks") or []
        return private, [b.get("cidrBlock") for b in blocks]
    access = i.get("apiServerAccessProfile") or {}
    return bool(access.get("enablePrivateCluster")), list(access.get("authorizedIPRanges") or [])


def _reach(plane: Resource, deployer: Any) -> list[tuple[Severity, str]]:
    private, allowed = _endpoint(plane)
    network = deployer.network if deployer else None
    if private:
        if network == "inside":
            return []
        who = "the stack declares no deployer" if deployer is None else "deployer.network is public"
        return [(Severity.ERROR, f"its API endpoint is private and {who}: `pulumi up` cannot reach "
                 "it; run inside the region's network (deployer.network: inside)")]
    if network == "inside":
        if plane.type == CONTROL_PLANES[2]:
            return [(Severity.WARNING, "a public AKS API has no private endpoint: a runner inside the "
                     "network reaches it through its egress address, which api_access_cidrs must list")]
        return []
    if deployer is None:
        return [(Severity.WARNING, "the stack declares no deployer: whether `pulumi up` can reach the "
                 "public endpoint is not known")]
    nets = [IPv4Network(str(a)) for a in allowed]
    return [(Severity.ERROR, f"the deployer's range {c} is not among the API's allowed ranges "
             f"({', '.join(map(str, allowed)) or 'none'})")
            for c in deployer.cidrs if not any(IPv4Network(str(c)).subnet_of(n) for n in nets)]


Notes = list[tuple[Severity, str]]


def _grants(record: Record, plane: Resource, deployer: Any) -> tuple[list[Resource], Notes]:
    """The record's resources that authorize the deployer on this control plane, or why none do."""
    i, out = plane.inputs, plane.outputs
    if plane.type == CONTROL_PLANES[0]:
        role = deployer.aws.role_arn if deployer and deployer.aws else None
        creator = bool((i.get("accessConfig") or {}).get("bootstrapClusterCreatorAdminPermissions"))
        if role is None:
            return [], [(Severity.WARNING if creator else Severity.ERROR,
                         "no deployer.aws: only the cluster's creator is admin" if creator else
                         "no deployer.aws and no creator admin: nobody may call the API")]
        entries = [r for r in record.by_type("aws:eks/accessEntry:AccessEntry")
                   if r.inputs.get("principalArn") == role and r.inputs.get("clusterName") == out.get("name")]
        admin = [r for r in record.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
                 if r.inputs.get("principalArn") == role and r.inputs.get("clusterName") == out.get("name")
                 and r.inputs.get("policyArn") == EKS_ADMIN_POLICY
                 and (r.inputs.get("accessScope") or {}).get("type") == "cluster"]
        if not entries or not admin:
            return [], [(Severity.ERROR, f"no access entry with AmazonEKSClusterAdminPolicy at cluster "
                         f"scope for the deployer {role}")]
        extra = [(Severity.WARNING, "the creator is admin too (bootstrapClusterCreatorAdminPermissions)")
                 ] if creator else []
        return [*entries, *admin], extra
    if plane.type == CONTROL_PLANES[1]:
        account = deployer.gcp.service_account if deployer and deployer.gcp else None
        found = [r for r in record.by_type("gcp:projects/iAMMember:IAMMember")
                 if account and r.inputs.get("member") == f"serviceAccount:{account}"
                 and r.inputs.get("role") == GKE_ADMIN_ROLE and r.inputs.get("project") == i.get("project")]
        if not found:
            return [], [(Severity.ERROR, f"no {GKE_ADMIN_ROLE} for "
                         f"{account or 'a deployer (no deployer.gcp)'} in project {i.get('project')}")]
        return found, []
    aad = i.get("aadProfile") or {}
    if aad.get("adminGroupObjectIDs"):
        return [plane], [(Severity.INFO, "an admin group is set: the deployer must be a member")]
    principal = deployer.azure.object_id if deployer and deployer.azure else None
    found = [r for r in record.by_type("azure-native:authorization:RoleAssignment")
             if principal and r.inputs.get("principalId") == principal
             and r.inputs.get("scope") == out.get("id")
             and str(r.inputs.get("roleDefinitionId", "")).endswith(f"/roleDefinitions/{AKS_ADMIN_ROLE_ID}")]
    if not found and aad.get("enableAzureRBAC") and i.get("disableLocalAccounts"):
        who = principal or "a deployer (no deployer.azure)"
        return [], [(Severity.ERROR, "Azure RBAC with local accounts off, and no 'Azure Kubernetes Service "
                     f"RBAC Cluster Admin' assignment at the cluster for {who}: every Kubernetes call "
                     "is refused (403)")]
    return found, []


def check_reach(record: Record) -> list[Finding]:
    deployer = getattr(getattr(record.plan, "spec", None), "deployer", None)
    findings: list[Finding] = []
    for provider in record.by_type("pulumi:providers:kubernetes"):
        cluster = next((a for a in record.ancestors(provider)
                        if a.type.startswith("rtip:") and a.type.endswith(":Cluster")), None)
        if cluster is None:
            continue
        plane = next((r for r in record.children(cluster.urn) if r.type in CONTROL_PLANES), None)
        if plane is None:
            continue
        where = f"Kubernetes provider {provider.name} (cluster {cluster.name})"
        grants, notes = _grants(record, plane, deployer)
        notes = [*_reach(plane, deployer), *notes]
        waited = waits_for(record, provider)
        late = [g for g in grants if g.urn != plane.urn and g.urn not in waited]
        notes += [(Severity.ERROR, f"does not wait for {g.type.rsplit(':', 1)[-1]} {g.name}: its first "
                   "call may come before the grant") for g in late]
        findings += [Finding(CHECK, provider.urn, f"{where}: {why}", sev) for sev, why in notes]
    return findings


__all__ = ["AKS_ADMIN_ROLE_ID", "CHECK", "EKS_ADMIN_POLICY", "GKE_ADMIN_ROLE", "check_reach"]
