"""Synthesized outputs of Azure resources for the offline engine (see rtip/synth.py).

Azure names a resource by its ARM path, so every synthesizer builds the `id` from the names in
the inputs (resource group, VNet, cluster) and sets `name` to the cloud-side name: the
azure-native inputs carry it as `resourceGroupName`, `virtualNetworkName`, `resourceName` ...,
never as `name`, so the engine's auto-name would be wrong here.

The one invoke the program makes reads back a cluster it created (its user credentials). It
is answered from `_CONTROL_PLANE`, what the cloud knows of every AKS cluster synthesized so far by
ARM ID, so a read of a cluster the program never created fails as the real API's 404 would. A
cluster's state is rewritten each time it is synthesized, and a read follows the creation it
reads in the same run.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from components.azure.cluster import AKS_AAD_SERVER_ID
from rtip.synth_base import AZURE_SUBSCRIPTION, Invoke, SynthArgs, Synthesizer, digest, fake_ca
from rtip.synth_base import uuid_of as _uuid

AZURE_TENANT = "00000000-0000-4000-8000-0000000000aa"


def _group_path(a: SynthArgs) -> str:
    return _group(a.inputs.get("resourceGroupName"))


def _group(name: object) -> str:
    return f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{name}"


_CONTROL_PLANE: dict[str, dict[str, Any]] = {}


def _named(key: str, a: SynthArgs) -> str:
    value = a.inputs.get(key)
    return value if isinstance(value, str) else a.physical


def _resource_group(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("resourceGroupName", a)
    rid = f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{name}"
    return rid, {"name": name, "provisioningState": "Succeeded",
                 "properties": {"provisioningState": "Succeeded"}}


def _vnet(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("virtualNetworkName", a)
    rid = f"{_group_path(a)}/providers/Microsoft.Network/virtualNetworks/{name}"
    return rid, {"name": name, "resourceGuid": _uuid(a.urn), "provisioningState": "Succeeded"}


def _subnet(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("subnetName", a)
    vnet = a.inputs.get("virtualNetworkName")
    rid = f"{_group_path(a)}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"
    return rid, {"name": name, "provisioningState": "Succeeded"}


def _managed_cluster(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("resourceName", a)
    location = a.inputs.get("location") or a.region
    group = a.inputs.get("resourceGroupName")
    rid = f"{_group_path(a)}/providers/Microsoft.ContainerService/managedClusters/{name}"
    prefix = f"{a.inputs.get('dnsPrefix', name)}-{digest(a.urn, 8)}"
    access = a.inputs.get("apiServerAccessProfile") or {}
    private = bool(access.get("enablePrivateCluster"))
    public_fqdn = not private or access.get("enablePrivateClusterPublicFQDN", True)
    out: dict[str, Any] = {
        "name": name,
        "azurePortalFQDN": f"{prefix}.portal.hcp.{location}.azmk8s.io",
        "currentKubernetesVersion": f"{a.inputs.get('kubernetesVersion')}.0",
        "nodeResourceGroup": f"MC_{group}_{name}_{location}",
        "provisioningState": "Succeeded",
        "powerState": {"code": "Running"},
        "maxAgentPools": 100,
        "identity": {**(a.inputs.get("identity") or {}), "principalId": _uuid(a.urn + "identity"),
                     "tenantId": AZURE_TENANT},
        "identityProfile": {"kubeletidentity": {
            "clientId": _uuid(a.urn + "kubelet-client"), "objectId": _uuid(a.urn + "kubelet"),
            "resourceId": (f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/"
                           f"MC_{group}_{name}_{location}/providers/Microsoft.ManagedIdentity/"
                           f"userAssignedIdentities/{name}-agentpool"),
        }},
        "oidcIssuerProfile": {
            **(a.inputs.get("oidcIssuerProfile") or {}),
            "issuerURL": f"https://{location}.oic.prod-aks.azure.com/{AZURE_TENANT}/{_uuid(a.urn)}/",
        },
    }
    # A private cluster answers on its private link FQDN; the public one exists only on request.
    if public_fqdn:
        out["fqdn"] = f"{prefix}.hcp.{location}.azmk8s.io"
    if private:
        out["privateFQDN"] = f"{prefix}.{digest(a.urn + 'pl', 8)}.privatelink.{location}.azmk8s.io"
    _CONTROL_PLANE[rid.lower()] = {**a.inputs, **out, "id": rid, "_urn": a.urn}
    return rid, out


def _agent_pool(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("agentPoolName", a)
    cluster = a.inputs.get("resourceName")
    rid = (f"{_group_path(a)}/providers/Microsoft.ContainerService/managedClusters/{cluster}"
           f"/agentPools/{name}")
    return rid, {"name": name, "provisioningState": "Succeeded", "powerState": {"code": "Running"},
                 "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202501.01.0"}


def _provider_path(a: SynthArgs, provider: str, kind: str, key: str) -> tuple[str, str]:
    name = _named(key, a)
    return name, f"{_group_path(a)}/providers/{provider}/{kind}/{name}"


def _registry(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, rid = _provider_path(a, "Microsoft.ContainerRegistry", "registries", "registryName")
    return rid, {"name": name, "loginServer": f"{name.lower()}.azurecr.io", "provisioningState": "Succeeded",
                 "creationDate": "2025-01-01T00:00:00Z"}


def _replication(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("replicationName", a)
    rid = (f"{_group_path(a)}/providers/Microsoft.ContainerRegistry/registries/{a.inputs.get('registryName')}"
           f"/replications/{name}")
    return rid, {"name": name, "provisioningState": "Succeeded"}


def _account_path(a: SynthArgs) -> str:
    return f"{_group_path(a)}/providers/Microsoft.Storage/storageAccounts/{a.inputs.get('accountName')}"


def _storage_account(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, rid = _provider_path(a, "Microsoft.Storage", "storageAccounts", "accountName")
    location = a.inputs.get("location") or a.region
    out: dict[str, Any] = {"name": name, "provisioningState": "Succeeded", "primaryLocation": location,
                           "primaryEndpoints": {"blob": f"https://{name}.blob.core.windows.net/",
                                                "dfs": f"https://{name}.dfs.core.windows.net/"}}
    # The account is given a list of identity IDs and answers with a map keyed by them.
    identity = a.inputs.get("identity")
    if identity:
        out["identity"] = {**identity, "userAssignedIdentities": {
            uid: {"principalId": _uuid(uid + "principal"), "clientId": _uuid(uid + "client")}
            for uid in identity.get("userAssignedIdentities") or []}}
    return rid, out


def _blob_service(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    return f"{_account_path(a)}/blobServices/default", {"name": "default"}


def _blob_container(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("containerName", a)
    return f"{_account_path(a)}/blobServices/default/containers/{name}", {"name": name}


def _object_replication(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # On the destination (`default`) Azure picks the policy and rule IDs; the source repeats them.
    given = a.inputs.get("objectReplicationPolicyId")
    policy = _uuid(a.urn) if given in (None, "default") else given
    rules = [{**r, "ruleId": r.get("ruleId") or _uuid(f"{a.urn}/rule/{i}")}
             for i, r in enumerate(a.inputs.get("rules") or [])]
    return f"{_account_path(a)}/objectReplicationPolicies/{policy}", {
        "name": policy, "policyId": policy, "rules": rules, "enabledTime": "2025-01-01T00:00:00Z"}


def _vault(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, rid = _provider_path(a, "Microsoft.KeyVault", "vaults", "vaultName")
    return rid, {"name": name, "properties": {**(a.inputs.get("properties") or {}),
                                              "vaultUri": f"https://{name}.vault.azure.net/",
                                              "provisioningState": "Succeeded"}}


def _key(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, vault = _named("keyName", a), a.inputs.get("vaultName")
    uri = f"https://{vault}.vault.azure.net/keys/{name}"
    return f"{_group_path(a)}/providers/Microsoft.KeyVault/vaults/{vault}/keys/{name}", {
        "name": name, "keyUri": uri, "keyUriWithVersion": f"{uri}/{digest(a.urn, 32)}"}


def _user_identity(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, rid = _provider_path(a, "Microsoft.ManagedIdentity", "userAssignedIdentities", "resourceName")
    return rid, {"name": name, "clientId": _uuid(a.urn + "client"), "principalId": _uuid(a.urn + "principal"),
                 "tenantId": AZURE_TENANT}


def _federated_credential(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("federatedIdentityCredentialResourceName", a)
    rid = (f"{_group_path(a)}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"
           f"{a.inputs.get('resourceName')}/federatedIdentityCredentials/{name}")
    return rid, {"name": name}


def _role_assignment(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # azure-native names an assignment with a fresh GUID when the program gives none.
    name = a.inputs.get("roleAssignmentName") or _uuid(a.urn)
    return f"{a.inputs.get('scope')}/providers/Microsoft.Authorization/roleAssignments/{name}", {
        "name": name, "principalType": a.inputs.get("principalType", "ServicePrincipal")}


def _workspace(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name, rid = _provider_path(a, "Microsoft.OperationalInsights", "workspaces", "workspaceName")
    return rid, {"name": name, "customerId": _uuid(a.urn), "provisioningState": "Succeeded"}


def _insights(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    # The connection string's shape as the Azure portal shows it (InstrumentationKey, regional
    # IngestionEndpoint, LiveEndpoint, ApplicationId).
    name, rid = _provider_path(a, "Microsoft.Insights", "components", "resourceName")
    key, app, region = _uuid(a.urn + "key"), _uuid(a.urn + "app"), a.inputs.get("location", a.region)
    return rid, {"name": name, "instrumentationKey": key, "appId": app, "connectionString": (
        f"InstrumentationKey={key};IngestionEndpoint=https://{region}-0.in.applicationinsights.azure.com/;"
        f"LiveEndpoint=https://{region}.livediagnostics.monitor.azure.com/;ApplicationId={app}")}


AZURE: dict[str, Synthesizer] = {
    "azure-native:resources:ResourceGroup": _resource_group,
    "azure-native:network:VirtualNetwork": _vnet,
    "azure-native:network:Subnet": _subnet,
    "azure-native:containerservice:ManagedCluster": _managed_cluster,
    "azure-native:containerservice:AgentPool": _agent_pool,
    "azure-native:containerregistry:Registry": _registry,
    "azure-native:containerregistry:Replication": _replication,
    "azure-native:storage:StorageAccount": _storage_account,
    "azure-native:storage:BlobServiceProperties": _blob_service,
    "azure-native:storage:BlobContainer": _blob_container,
    "azure-native:storage:ObjectReplicationPolicy": _object_replication,
    "azure-native:keyvault:Vault": _vault,
    "azure-native:keyvault:Key": _key,
    "azure-native:managedidentity:UserAssignedIdentity": _user_identity,
    "azure-native:managedidentity:FederatedIdentityCredential": _federated_credential,
    "azure-native:authorization:RoleAssignment": _role_assignment,
    "azure-native:operationalinsights:Workspace": _workspace,
    "azure-native:applicationinsights:Component": _insights,
}


def _cluster(args: dict[str, Any]) -> dict[str, Any]:
    rid = (f"{_group(args.get('resourceGroupName'))}/providers/Microsoft.ContainerService/managedClusters/"
           f"{args.get('resourceName')}")
    state = _CONTROL_PLANE.get(rid.lower())
    if state is None:
        raise LookupError(f"ResourceNotFound: the managed cluster {rid} was not found")
    return state


def _user_credentials(args: dict[str, Any]) -> dict[str, Any]:
    """What `listClusterUserCredential` returns for an Entra ID cluster in `exec` format: one
    base64 kubeconfig whose user runs kubelogin with a device-code login."""
    if args.get("format") != "exec":
        raise ValueError("listClusterUserCredential: only format=exec is synthesized, "
                         f"not {args.get('format')}")
    cluster = _cluster(args)
    name, group = cluster["name"], args.get("resourceGroupName")
    # A private cluster's credentials name its private FQDN; the public one otherwise.
    fqdn = cluster.get("privateFQDN") or cluster["fqdn"]
    user = f"clusterUser_{group}_{name}"
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": name,
        "clusters": [{"name": name, "cluster": {"certificate-authority-data": fake_ca(cluster["_urn"]),
                                                "server": f"https://{fqdn}:443"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
            "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_AAD_SERVER_ID,
                     "--tenant-id", AZURE_TENANT, "--login", "devicecode"],
            "env": None, "provideClusterInfo": False}}}],
    }
    value = base64.b64encode(yaml.safe_dump(doc, sort_keys=False).encode()).decode()
    return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}


# Invokes the Azure program may make offline (token -> answer); see rtip.synth.Invoke.
AZURE_INVOKES: dict[str, Invoke] = {
    "azure-native:containerservice:listManagedClusterUserCredentials": _user_credentials,
}

__all__ = ["AZURE", "AZURE_INVOKES", "AZURE_TENANT"]
