"""Private endpoints: how one AKS cluster reaches the stack's container registry and its region's
weights storage account, neither of which answers on a public network
(components/azure/registries.py).

Per cluster, in the `endpoints` subnet of its VNet (components/azure/network.py):
- a private endpoint for the registry (sub-resource `registry`) and one for the account's blob
  service (sub-resource `blob`);
- for each, the private DNS zone Azure's public names point into (`<registry>.azurecr.io` is a
  CNAME to `<registry>.privatelink.azurecr.io`, the account's blob host to
  `<account>.privatelink.blob.core.windows.net`), linked to the VNet, so the nodes' resolver
  (Azure DNS) answers with the endpoint's private address;
- a DNS zone group on each endpoint, which makes Azure write (and keep) the zone's A records,
  the registry's regional data endpoints (`<registry>.<region>.data.azurecr.io`) included.
Zone names and sub-resources: Azure Private Link docs, "Azure Private Endpoint private DNS zone
values" (Container Registry: `registry`, privatelink.azurecr.io; Storage blob: `blob`,
privatelink.blob.core.windows.net), as recalled and as every public template that wires these
endpoints names them. The zones live in the cluster's resource group, one set per VNet, so two
regions never share (or fight over) a record.

Who uses them: each node's kubelet pulls images from the registry (AcrPull, granted in
components/azure/identity.py); the model servers and the model cache's download Jobs read the
weights container (serving/netpol.py admits HTTPS to the endpoints block for exactly those pods).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import network, privatedns

from components.azure.cluster import AzureCluster
from components.azure.registries import AzureStore


@dataclass(frozen=True)
class PrivateLink:
    """One kind of private endpoint: the target's sub-resource and the DNS zone of its names."""

    key: str
    group_id: str
    zone: str


REGISTRY = PrivateLink("acr", "registry", "privatelink.azurecr.io")
BLOB = PrivateLink("blob", "blob", "privatelink.blob.core.windows.net")
DNS_ZONE_LOCATION = "global"  # private DNS zones and their VNet links are global resources


class PrivateStoreAccess(pulumi.ComponentResource):
    """The cluster's private endpoints to the registry and to its region's weights account."""

    ready: list[pulumi.Resource]  # the zone groups: the names resolve privately once they exist

    def __init__(self, name: str, cluster: AzureCluster, store: AzureStore,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:azure:PrivateStoreAccess", name, {
            "cluster": cluster.cluster_name, "region": store.region,
            "zones": [REGISTRY.zone, BLOB.zone]}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=cluster.cloud_provider)
        self.ready = [self._endpoint(f"{name}-{link.key}", link, target, cluster, child)
                      for link, target in ((REGISTRY, store.registry_id), (BLOB, store.account_id))]
        self.register_outputs({})

    def _endpoint(self, name: str, link: PrivateLink, target: pulumi.Input[str], cluster: AzureCluster,
                  child: pulumi.ResourceOptions) -> pulumi.Resource:
        group, tags = cluster.group.name, cluster.tags
        zone = privatedns.PrivateZone(f"{name}-zone", privatedns.PrivateZoneArgs(
            resource_group_name=group, private_zone_name=link.zone, location=DNS_ZONE_LOCATION,
            tags=tags), opts=child)
        vnet_link = privatedns.VirtualNetworkLink(f"{name}-link", privatedns.VirtualNetworkLinkArgs(
            resource_group_name=group, private_zone_name=zone.name, location=DNS_ZONE_LOCATION,
            virtual_network_link_name=f"{cluster.cluster_name}-vnet",
            virtual_network=privatedns.SubResourceArgs(id=cluster.network.vnet_id),
            # Only the endpoints' records live here; VMs do not register themselves.
            registration_enabled=False, tags=tags), opts=child)
        endpoint = network.PrivateEndpoint(f"{name}-pe", network.PrivateEndpointArgs(
            resource_group_name=group, private_endpoint_name=f"{cluster.cluster_name}-{link.key}",
            location=cluster.region.name, tags=tags,
            subnet=network.SubnetArgs(id=cluster.network.endpoint_subnet_id),
            # An automatic connection: the deployer owns both ends, so no manual approval waits.
            private_link_service_connections=[network.PrivateLinkServiceConnectionArgs(
                name=f"{cluster.cluster_name}-{link.key}", private_link_service_id=target,
                group_ids=[link.group_id])]), opts=child)
        return network.PrivateDnsZoneGroup(f"{name}-dns", network.PrivateDnsZoneGroupArgs(
            resource_group_name=group, private_endpoint_name=endpoint.name,
            private_dns_zone_group_name="default",
            private_dns_zone_configs=[network.PrivateDnsZoneConfigArgs(
                name=link.zone.replace(".", "-"), private_dns_zone_id=zone.id)]),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[vnet_link])))


__all__ = ["BLOB", "REGISTRY", "PrivateLink", "PrivateStoreAccess"]
