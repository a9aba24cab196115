"""One Azure region's virtual network: the VNet and the subnet the AKS nodes live in.

Address plan. The region's CIDR (a /16 to /20, see stacks/checks.py) is the VNet's address space,
cut into four equal blocks:

- block 0: `nodes`, the subnet every agent pool's VMs take their NIC address from. Azure subnets
  span all zones of a region, so one subnet serves the pools of every zone.
- block 1: `endpoints`, the private endpoints through which the cluster reaches the stack's
  container registry and its region's weights storage account (components/azure/endpoints.py);
  both refuse every public network.
- block 2: its first /28 is `apiserver`, delegated to AKS, where API Server VNet Integration puts
  the API server's internal load balancer (only where the cluster encrypts secrets with a key in a
  private vault, which requires that integration; see components/azure/cluster.py); the rest and
  block 3 are reserved for growth (internal load balancers).

Pods and services take no VNet addresses: the cluster runs Azure CNI overlay, whose pod CIDR is
private to the cluster, so the node subnet needs room only for nodes (a /22 holds ~1,000 even in
a /20 region). Both overlay ranges sit in the shared address space 100.64.0.0/10, away from the
10.0.0.0/8 networks our regions use, so they do not collide with a peered region's VNet.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

import pulumi
from pulumi_azure_native import network

BLOCKS_SPLIT = 2  # 2**2 equal blocks of the region CIDR
# Azure CNI overlay ranges (not routable outside the cluster, so every cluster reuses them).
POD_CIDR = "100.64.0.0/14"
SERVICE_CIDR = "100.72.0.0/16"
DNS_SERVICE_IP = "100.72.0.10"  # inside SERVICE_CIDR, as AKS requires
NODE_SUBNET = "nodes"
ENDPOINT_SUBNET = "endpoints"
API_SERVER_SUBNET = "apiserver"
# AKS docs, "API Server VNet Integration" (MicrosoftDocs/azure-aks-docs
# articles/aks/api-server-vnet-integration.md): a bring-your-own API server subnet is delegated to
# Microsoft.ContainerService/managedClusters, holds nothing else, and is at least a /28.
API_SERVER_PREFIX = 28
API_SERVER_DELEGATION = "Microsoft.ContainerService/managedClusters"


@dataclass(frozen=True)
class AddressPlan:
    vnet: IPv4Network
    nodes: IPv4Network
    endpoints: IPv4Network
    apiserver: IPv4Network
    reserved: tuple[IPv4Network, ...]


def address_plan(cidr: IPv4Network) -> AddressPlan:
    blocks = list(cidr.subnets(prefixlen_diff=BLOCKS_SPLIT))
    apiserver = next(blocks[2].subnets(new_prefix=API_SERVER_PREFIX))
    return AddressPlan(vnet=cidr, nodes=blocks[0], endpoints=blocks[1], apiserver=apiserver,
                       reserved=tuple(blocks[2:]))


class AzureNetwork(pulumi.ComponentResource):
    vnet_id: pulumi.Output[str]
    node_subnet_id: pulumi.Output[str]
    endpoint_subnet_id: pulumi.Output[str]
    api_server_subnet_id: pulumi.Output[str] | None  # only with `api_server_subnet`

    def __init__(
        self,
        name: str,
        cidr: IPv4Network,
        location: str,
        resource_group_name: pulumi.Input[str],
        tags: dict[str, str],
        provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
        api_server_subnet: bool = False,
    ) -> None:
        plan = address_plan(cidr)
        super().__init__("rtip:azure:Network", name, {
            "cidr": str(cidr), "nodes": str(plan.nodes), "endpoints": str(plan.endpoints),
            "reserved": [str(r) for r in plan.reserved],
            "podCidr": POD_CIDR, "serviceCidr": SERVICE_CIDR,
        }, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        vnet = network.VirtualNetwork(
            f"{name}-vnet",
            # No inline `subnets`: the Subnet below owns the node subnet, and a VNet update that
            # omits the property leaves existing subnets alone (Network API 2023-09-01 and later;
            # pulumi/pulumi-azure-native#611).
            network.VirtualNetworkInitArgs(
                resource_group_name=resource_group_name,
                virtual_network_name=f"{name}-vnet",
                location=location,
                address_space=network.AddressSpaceArgs(address_prefixes=[str(plan.vnet)]),
                tags=tags,
            ),
            opts=child,
        )
        subnet = network.Subnet(
            f"{name}-{NODE_SUBNET}",
            network.SubnetInitArgs(
                resource_group_name=resource_group_name,
                virtual_network_name=vnet.name,
                subnet_name=NODE_SUBNET,
                address_prefix=str(plan.nodes),
                # Egress goes through the cluster's load balancer; the implicit default outbound
                # IP Azure is retiring would be a second, unmanaged way out.
                default_outbound_access=False,
            ),
            opts=child,
        )
        endpoints = network.Subnet(
            f"{name}-{ENDPOINT_SUBNET}",
            network.SubnetInitArgs(
                resource_group_name=resource_group_name,
                virtual_network_name=vnet.name,
                subnet_name=ENDPOINT_SUBNET,
                address_prefix=str(plan.endpoints),
                # Private endpoints only: no VM takes an address here, so no way out either.
                default_outbound_access=False,
                private_endpoint_network_policies=network.VirtualNetworkPrivateEndpointNetworkPolicies.DISABLED,
            ),
            # ARM changes one subnet of a VNet at a time; a second concurrent write fails with
            # AnotherOperationInProgress, so the subnets are written one after the other.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[subnet])),
        )
        self.api_server_subnet_id = None
        if api_server_subnet:
            self.api_server_subnet_id = network.Subnet(
                f"{name}-{API_SERVER_SUBNET}",
                network.SubnetInitArgs(
                    resource_group_name=resource_group_name,
                    virtual_network_name=vnet.name,
                    subnet_name=API_SERVER_SUBNET,
                    address_prefix=str(plan.apiserver),
                    delegations=[network.DelegationArgs(name="aks", service_name=API_SERVER_DELEGATION)],
                    default_outbound_access=False,
                ),
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[endpoints])),
            ).id
        self.vnet_id = vnet.id
        self.node_subnet_id = subnet.id
        self.endpoint_subnet_id = endpoints.id
        self.register_outputs({"vnetId": vnet.id, "nodeSubnetId": subnet.id,
                               "endpointSubnetId": endpoints.id})


__all__ = ["API_SERVER_SUBNET", "DNS_SERVICE_IP", "ENDPOINT_SUBNET", "NODE_SUBNET", "POD_CIDR",
           "SERVICE_CIDR", "AddressPlan", "AzureNetwork", "address_plan"]
