"""One region's VPC: a public and a private subnet in every zone, NAT, and an S3 gateway endpoint.

Address plan: the region's CIDR is cut into eight equal blocks; private subnet N takes block N
(VPC-CNI gives every pod a VPC address, so private subnets get the room), and the last block is
cut again into eight small public subnets for load balancers and NAT gateways.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

import pulumi
import pulumi_aws as aws

from serving.karpenter import DISCOVERY_TAG

PRIVATE_SPLIT = 3  # 2**3 blocks
PUBLIC_SPLIT = 6  # 2**6 blocks: the eight in the last private-sized block


@dataclass(frozen=True)
class SubnetPlan:
    zone: str
    private: IPv4Network
    public: IPv4Network


def subnet_plan(cidr: IPv4Network, zones: list[str]) -> list[SubnetPlan]:
    blocks = list(cidr.subnets(prefixlen_diff=PRIVATE_SPLIT))
    public = list(blocks[-1].subnets(prefixlen_diff=PUBLIC_SPLIT - PRIVATE_SPLIT))
    if len(zones) > len(blocks) - 1:
        raise ValueError(f"{cidr} holds subnets for at most {len(blocks) - 1} zones")
    return [SubnetPlan(z, blocks[i], public[i]) for i, z in enumerate(zones)]


class AwsNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: dict[str, pulumi.Output[str]]
    public_subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        region: str,
        cidr: IPv4Network,
        zones: list[str],
        cluster_name: str,
        nat_per_zone: bool,
        provider: aws.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("rtip:aws:Network", name, {"cidr": str(cidr), "zones": zones}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        tags = {"Name": name, f"kubernetes.io/cluster/{cluster_name}": "shared"}
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            aws.ec2.VpcArgs(cidr_block=str(cidr), enable_dns_hostnames=True,
                            enable_dns_support=True, tags=tags),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", aws.ec2.InternetGatewayArgs(vpc_id=vpc.id, tags=tags), opts=child,
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            aws.ec2.RouteTableArgs(
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
                tags=tags,
            ),
            opts=child,
        )
        self.public_subnet_ids = {}
        self.private_subnet_ids = {}
        private_route_tables: list[pulumi.Output[str]] = []
        nat_ids: dict[str, pulumi.Output[str]] = {}
        for plan in subnet_plan(cidr, zones):
            z = plan.zone
            public = aws.ec2.Subnet(
                f"{name}-public-{z}",
                aws.ec2.SubnetArgs(
                    vpc_id=vpc.id, cidr_block=str(plan.public), availability_zone=z,
                    tags={**tags, "kubernetes.io/role/elb": "1"},
                ),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{z}",
                aws.ec2.RouteTableAssociationArgs(subnet_id=public.id, route_table_id=public_rt.id),
                opts=child,
            )
            self.public_subnet_ids[z] = public.id
            # A NAT gateway per zone keeps egress alive through a zone loss; dev shares one.
            if nat_per_zone or not nat_ids:
                eip = aws.ec2.Eip(f"{name}-nat-{z}", aws.ec2.EipArgs(domain="vpc", tags=tags),
                                  opts=child)
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{z}",
                    aws.ec2.NatGatewayArgs(allocation_id=eip.id, subnet_id=public.id, tags=tags),
                    opts=child,
                )
                nat_ids[z] = nat.id
            nat_id = nat_ids.get(z, next(iter(nat_ids.values())))
            private = aws.ec2.Subnet(
                f"{name}-private-{z}",
                aws.ec2.SubnetArgs(
                    vpc_id=vpc.id, cidr_block=str(plan.private), availability_zone=z,
                    # The discovery tag is how Karpenter's EC2NodeClasses find where to launch.
                    tags={**tags, "kubernetes.io/role/internal-elb": "1", DISCOVERY_TAG: cluster_name},
                ),
                opts=child,
            )
            rt = aws.ec2.RouteTable(
                f"{name}-private-{z}",
                aws.ec2.RouteTableArgs(
                    vpc_id=vpc.id,
                    routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0",
                                                         nat_gateway_id=nat_id)],
                    tags=tags,
                ),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{z}",
                aws.ec2.RouteTableAssociationArgs(subnet_id=private.id, route_table_id=rt.id),
                opts=child,
            )
            self.private_subnet_ids[z] = private.id
            private_route_tables.append(rt.id)
        # Weights come from S3: a gateway endpoint keeps that traffic off the NAT (and its bill).
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            aws.ec2.VpcEndpointArgs(
                vpc_id=vpc.id, service_name=f"com.amazonaws.{region}.s3",
                vpc_endpoint_type="Gateway", route_table_ids=private_route_tables, tags=tags,
            ),
            opts=child,
        )
        self.vpc_id = vpc.id
        self.register_outputs({"vpcId": vpc.id})


__all__ = ["AwsNetwork", "SubnetPlan", "subnet_plan"]
