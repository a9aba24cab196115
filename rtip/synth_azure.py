"""Synthesized outputs of Azure resources for the offline engine (see rtip/synth.py).

Azure names a resource by its ARM path, so every synthesizer builds the `id` from the names in
the inputs (resource group, VNet, cluster) and sets `name` to the cloud-side name: the
azure-native inputs carry it as `resourceGroupName`, `virtualNetworkName`, `resourceName` ...,
never as `name`, so the engine's auto-name would be wrong here.
"""

from __future__ import annotations

from typing import Any

from rtip.synth import AZURE_SUBSCRIPTION, Invoke, SynthArgs, Synthesizer, _uuid, digest

AZURE_TENANT = "00000000-0000-4000-8000-0000000000aa"


def _group_path(a: SynthArgs) -> str:
    return f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{a.inputs.get('resourceGroupName')}"


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
    return rid, out


def _agent_pool(a: SynthArgs) -> tuple[str, dict[str, Any]]:
    name = _named("agentPoolName", a)
    cluster = a.inputs.get("resourceName")
    rid = (f"{_group_path(a)}/providers/Microsoft.ContainerService/managedClusters/{cluster}"
           f"/agentPools/{name}")
    return rid, {"name": name, "provisioningState": "Succeeded", "powerState": {"code": "Running"},
                 "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202501.01.0"}


AZURE: dict[str, Synthesizer] = {
    "azure-native:resources:ResourceGroup": _resource_group,
    "azure-native:network:VirtualNetwork": _vnet,
    "azure-native:network:Subnet": _subnet,
    "azure-native:containerservice:ManagedCluster": _managed_cluster,
    "azure-native:containerservice:AgentPool": _agent_pool,
}

# Invokes the Azure program may make offline (token -> answer); see rtip.synth.Invoke.
AZURE_INVOKES: dict[str, Invoke] = {}

__all__ = ["AZURE", "AZURE_INVOKES", "AZURE_TENANT"]
