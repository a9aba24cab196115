"""One GCP region's network: a custom-mode VPC, one regional subnetwork, Cloud Router and Cloud NAT.

Address plan (the region's CIDR, a /16 to a /20, cut by prefix length p):

    first half      /p+1  pods secondary range (`pods`)
    third quarter   /p+2  nodes: the subnetwork's primary range
    last quarter    /p+4  services secondary range (`services`): its first sixteenth
                          the rest of the last quarter is left free for later ranges (proxy-only
                          subnets for internal L7 load balancers, Private Service Connect)

Pods get the room because GKE hands every node a whole range for its pods: with the default of
110 pods a node that is a /24, so the pod range, not the node range, caps the cluster's size
(`AddressPlan.max_nodes`: 128 nodes for a /16, 8 for a /20).

A GCP subnetwork is regional and spans every zone, so one subnetwork serves all of the region's
zones, and Cloud NAT is a regional, zone-resilient service: unlike AWS there is nothing per zone.
"""

from __future__ import annotations

from ipaddress import IPv4Network

import pulumi
import pulumi_gcp as gcp

from stacks.netplan import AddressPlan, address_plan

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
class GcpNetwork(pulumi.ComponentResource):
    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork
    plan: AddressPlan

    def __init__(
        self,
        name: str,
        project: str,
        region: str,
        cidr: IPv4Network,
        provider: gcp.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        self.plan = plan = address_plan(cidr)
        super().__init__("rtip:gcp:Network", name, {
            "cidr": str(cidr), "nodes": str(plan.nodes), "pods": str(plan.pods),
            "services": str(plan.services),
        }, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        # Custom mode: auto mode would put a subnet in every region of the world, overlapping
        # the other regions of the stack.
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            gcp.compute.NetworkArgs(project=project, auto_create_subnetworks=False,
                                    routing_mode="REGIONAL"),
            opts=child,
        )
        self.subnetwork = gcp.compute.Subnetwork(
            f"{name}-nodes",
            gcp.compute.SubnetworkArgs(
                project=project,
                region=region,
                network=self.network.id,
                ip_cidr_range=str(plan.nodes),
                secondary_ip_ranges=[
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE,
                                                               ip_cidr_range=str(plan.pods)),
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE,
                                                               ip_cidr_range=str(plan.services)),
                ],
                # Nodes have no external address: Google APIs (Artifact Registry, Cloud Storage
                # for weights) are reached over Google's network, not through the NAT.
                private_ip_google_access=True,
                log_config=gcp.compute.SubnetworkLogConfigArgs(
                    aggregation_interval="INTERVAL_5_MIN", flow_sampling=0.5,
                    metadata="INCLUDE_ALL_METADATA",
                ),
            ),
            opts=child,
        )
        router = gcp.compute.Router(
            f"{name}-router",
            gcp.compute.RouterArgs(project=project, region=region, network=self.network.id),
            opts=child,
        )
        # Private nodes still pull from public registries (Hugging Face, Docker Hub mirrors):
        # NAT only this subnetwork, every range of it, so pods egress too.
        gcp.compute.RouterNat(
            f"{name}-nat",
            gcp.compute.RouterNatArgs(
                project=project,
                region=region,
                router=router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[gcp.compute.RouterNatSubnetworkArgs(
                    name=self.subnetwork.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"],
                )],
                log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            ),
            opts=child,
        )
        self.register_outputs({"networkId": self.network.id, "subnetworkId": self.subnetwork.id})


__all__ = ["PODS_RANGE", "SERVICES_RANGE", "AddressPlan", "GcpNetwork", "address_plan"]
