"""Azure stores off the internet: the registry and the weights accounts answer on no public
network, and each AKS cluster reaches them through private endpoints in its own VNet."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

import pytest

from components.azure.identity import CLIENT_ID_ANNOTATION
from rtip.offline import Record
from serving import netpol
from serving.hardware import Cloud
from stacks.naming import storage_account
from stacks.schema import AzureRegion
from tests.conftest import record_of, spec_of
from tests.test_netpol import MODEL, Endpoint, cluster_policies, reach

REGISTRY = "azure-native:containerregistry:Registry"
ACCOUNT = "azure-native:storage:StorageAccount"
SUBNET = "azure-native:network:Subnet"
ENDPOINT = "azure-native:network:PrivateEndpoint"
ZONE = "azure-native:privatedns:PrivateZone"
LINK = "azure-native:privatedns:VirtualNetworkLink"
ZONE_GROUP = "azure-native:network:PrivateDnsZoneGroup"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
# Azure Private Link, "Azure Private Endpoint private DNS zone values": sub-resource -> zone.
ZONES = {"registry": "privatelink.azurecr.io", "blob": "privatelink.blob.core.windows.net"}


@pytest.fixture(scope="module")
def prod() -> Record:
    return record_of("prod")


def azure_region() -> AzureRegion:
    (region,) = [r for r in spec_of("prod").regions if isinstance(r, AzureRegion)]
    return region


def test_the_registry_refuses_every_public_network(prod: Record) -> None:
    (acr,) = prod.by_type(REGISTRY)
    assert acr.inputs["sku"] == {"name": "Premium"}  # the tier with private endpoints
    assert acr.inputs["publicNetworkAccess"] == "Disabled"
    assert acr.inputs["networkRuleSet"] == {"defaultAction": "Deny"}
    assert acr.inputs["networkRuleBypassOptions"] == "None"


def test_every_weights_account_refuses_every_public_network(prod: Record) -> None:
    accounts = prod.by_type(ACCOUNT)
    assert [a.inputs["accountName"] for a in accounts] == [storage_account(spec_of("prod"), azure_region())]
    for account in accounts:
        assert account.inputs["publicNetworkAccess"] == "Disabled"
        assert account.inputs["networkRuleSet"] == {"defaultAction": "Deny", "bypass": "None"}


def test_private_endpoints_take_the_second_quarter_of_the_region_network(prod: Record) -> None:
    (subnet,) = [s for s in prod.by_type(SUBNET) if s.inputs["subnetName"] == "endpoints"]
    # prod's eastus network is 10.40.0.0/16: nodes 10.40.0.0/18, endpoints 10.40.64.0/18.
    assert azure_region().network.cidr == ip_network("10.40.0.0/16")
    assert subnet.inputs["addressPrefix"] == "10.40.64.0/18"
    assert subnet.inputs["privateEndpointNetworkPolicies"] == "Disabled"
    assert subnet.inputs["defaultOutboundAccess"] is False


def test_the_cluster_reaches_registry_and_blob_through_private_endpoints(prod: Record) -> None:
    (acr,) = prod.by_type(REGISTRY)
    (account,) = prod.by_type(ACCOUNT)
    (subnet,) = [s for s in prod.by_type(SUBNET) if s.inputs["subnetName"] == "endpoints"]
    (vnet,) = prod.by_type("azure-native:network:VirtualNetwork")
    targets = {"registry": acr.outputs["id"], "blob": account.outputs["id"]}
    endpoints = prod.by_type(ENDPOINT)
    assert len(endpoints) == 2
    zones = {z.outputs["id"]: z for z in prod.by_type(ZONE)}
    links = {lk.inputs["privateZoneName"]: lk for lk in prod.by_type(LINK)}
    groups = {g.inputs["privateEndpointName"]: g for g in prod.by_type(ZONE_GROUP)}
    for pe in endpoints:
        assert pe.inputs["subnet"]["id"] == subnet.outputs["id"]
        assert pe.inputs["location"] == azure_region().region
        (connection,) = pe.inputs["privateLinkServiceConnections"]
        (group_id,) = connection["groupIds"]
        assert connection["privateLinkServiceId"] == targets.pop(group_id)
        # The zone group writes the endpoint's records into the zone Azure's names point into,
        # and that zone answers inside the cluster's VNet.
        (config,) = groups[pe.outputs["name"]].inputs["privateDnsZoneConfigs"]
        zone = zones[config["privateDnsZoneId"]]
        assert zone.inputs["privateZoneName"] == ZONES[group_id]
        link = links[zone.outputs["name"]]
        assert link.inputs["virtualNetwork"] == {"id": vnet.outputs["id"]}
        assert link.inputs["registrationEnabled"] is False
        assert link.urn in groups[pe.outputs["name"]].dependencies
    assert targets == {}


def test_model_service_accounts_wait_for_the_private_names(prod: Record) -> None:
    groups = {g.urn for g in prod.by_type(ZONE_GROUP)}
    azure_accounts = [sa for sa in prod.by_type(SERVICE_ACCOUNT) if CLIENT_ID_ANNOTATION in
                      (sa.inputs["metadata"].get("annotations") or {})]
    assert azure_accounts
    for sa in azure_accounts:
        assert groups <= set(sa.dependencies), sa.urn


def test_model_pods_may_reach_the_blob_endpoint_and_nothing_else_in_the_network(prod: Record) -> None:
    policies = cluster_policies(prod, "azure")
    inside = Endpoint(str(ip_address("10.40.64.4")))  # an address of the endpoints subnet
    assert reach(policies, MODEL, inside, 443)
    assert not reach(policies, MODEL, inside, 80)
    assert not reach(policies, MODEL, Endpoint("10.40.0.10"), 443)  # a node: still refused
    # The gateway's proxies call no store (controllers that watch the private API may reach the
    # whole network on 443: that is where the API server's private endpoint is).
    proxy = Endpoint("10.40.0.50", netpol.SYSTEM, dict([netpol.PROXY_LABEL]))
    assert not reach(policies, proxy, inside, 443)


def test_other_clouds_open_nothing_inside_their_network() -> None:
    net = netpol.ClusterNetwork(Cloud.AWS, ip_network("10.20.0.0/16"), private_api=True)
    policies = [p for ns in netpol.GOVERNED for p in netpol.namespace_policies(ns, net)]
    assert not reach(policies, MODEL, Endpoint("10.20.64.4"), 443)


def test_with_a_public_api_only_store_clients_reach_the_endpoints_block() -> None:
    # A public AKS API is outside the VNet: only the store rule opens the endpoints block.
    net = netpol.ClusterNetwork(Cloud.AZURE, ip_network("10.40.0.0/16"), private_api=False,
                                store_endpoints=ip_network("10.40.64.0/18"))
    policies = [p for ns in netpol.GOVERNED for p in netpol.namespace_policies(ns, net)]
    inside, node = Endpoint("10.40.64.4"), Endpoint("10.40.0.10")
    # (The AMD driver build, which pushes to the registry's endpoint, watches the API: with a
    # public AKS API its 443 is open to any address, with a private one to the whole VNet.)
    proxy = Endpoint("10.40.0.50", netpol.SYSTEM, dict([netpol.PROXY_LABEL]))
    assert reach(policies, MODEL, inside, 443)
    assert not reach(policies, MODEL, node, 443)
    assert not reach(policies, proxy, inside, 443)
