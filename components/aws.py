"""One AWS region: VPC, EKS cluster with KMS-encrypted secrets, node groups, Kubernetes provider."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws_network import AwsNetwork
from components.aws_nodes import gpu_node_group, system_node_group
from components.contract import ClusterFacts, cluster_props, public_api_cidrs
from components.gpu_pools import GpuPool, pool_facts
from serving.hardware import Cloud
from stacks.schema import AwsRegion

SYSTEM_MACHINE_TYPE = "m7i.xlarge"
MANAGED_POLICY = "arn:aws:iam::aws:policy/"
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                 "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore")
# EKS managed add-ons every cluster runs; versions follow the cluster's Kubernetes version.
ADDONS = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")
LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def _assume(service: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]}],
    })


def kubeconfig(cluster_name: pulumi.Input[str], endpoint: pulumi.Input[str],
               ca_data: pulumi.Input[str], region: str) -> pulumi.Output[str]:
    """A kubeconfig that authenticates with `aws eks get-token`: it holds no credential itself."""
    def build(args: list[str]) -> str:
        name, server, ca = args
        return json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": server,
                                                     "certificate-authority-data": ca}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", name, "--region", region],
            }}}],
        })
    return pulumi.Output.all(cluster_name, endpoint, ca_data).apply(build)


def aws_provider(name: str, region: AwsRegion, tags: dict[str, str],
                 opts: pulumi.ResourceOptions) -> aws.Provider:
    """The region's provider; every AWS resource of the region goes through it."""
    return aws.Provider(name, aws.ProviderArgs(
        region=region.region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags)), opts=opts)


class AwsCluster(pulumi.ComponentResource):
    facts: ClusterFacts

    def __init__(
        self,
        name: str,
        region: AwsRegion,
        kubernetes_version: str,
        prod: bool,
        provider: aws.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        pools = tuple(pool_facts(Cloud.AWS, p, region.zones) for p in region.gpu_pools)
        super().__init__("rtip:aws:Cluster", name, cluster_props(
            Cloud.AWS, region.region, region.zones, kubernetes_version), opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)

        network = AwsNetwork(f"{name}-net", region.region, region.network.cidr, region.zones,
                             name, nat_per_zone=prod, provider=provider,
                             opts=pulumi.ResourceOptions(parent=self))
        key = aws.kms.Key(
            f"{name}-secrets",
            aws.kms.KeyArgs(description=f"EKS secrets encryption for {name}",
                            enable_key_rotation=True, deletion_window_in_days=30),
            opts=child,
        )
        aws.kms.Alias(f"{name}-secrets", aws.kms.AliasArgs(
            name=f"alias/rtip/{name}/eks-secrets", target_key_id=key.key_id), opts=child)

        cluster_role = aws.iam.Role(f"{name}-cluster", aws.iam.RoleArgs(
            assume_role_policy=_assume("eks.amazonaws.com")), opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster", aws.iam.RolePolicyAttachmentArgs(
                role=cluster_role.name, policy_arn=MANAGED_POLICY + "AmazonEKSClusterPolicy"),
            opts=child,
        )
        node_role = aws.iam.Role(f"{name}-node", aws.iam.RoleArgs(
            assume_role_policy=_assume("ec2.amazonaws.com")), opts=child)
        node_policies = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{p.lower()}", aws.iam.RolePolicyAttachmentArgs(
                role=node_role.name, policy_arn=MANAGED_POLICY + p), opts=child)
            for p in NODE_POLICIES
        ]

        private_subnets = [network.private_subnet_ids[z] for z in region.zones]
        cidrs = public_api_cidrs(region.api_access_cidrs)
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            aws.eks.ClusterArgs(
                name=name,
                role_arn=cluster_role.arn,
                version=kubernetes_version,
                vpc_config=aws.eks.ClusterVpcConfigArgs(
                    subnet_ids=private_subnets,
                    endpoint_private_access=True,
                    endpoint_public_access=bool(cidrs),
                    public_access_cidrs=cidrs or None,
                ),
                access_config=aws.eks.ClusterAccessConfigArgs(
                    authentication_mode="API", bootstrap_cluster_creator_admin_permissions=True,
                ),
                encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                    provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn),
                    resources=["secrets"],
                ),
                enabled_cluster_log_types=LOG_TYPES,
                deletion_protection=prod,
            ),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[cluster_policy])),
        )
        nodes_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            depends_on=node_policies))
        system = system_node_group(
            f"{name}-system", cluster, node_role,
            region.system_pool.machine_type or SYSTEM_MACHINE_TYPE,
            region.system_pool.min_nodes, region.system_pool.max_nodes, private_subnets, nodes_opts,
        )
        for addon in ADDONS:
            aws.eks.Addon(f"{name}-{addon}", aws.eks.AddonArgs(
                cluster_name=cluster.name, addon_name=addon,
                resolve_conflicts_on_update="OVERWRITE",
            ), opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[system])))
        for spec_pool, pool in zip(region.gpu_pools, pools, strict=True):
            group = GpuPool(f"{name}-{pool.name}", pool, opts=pulumi.ResourceOptions(parent=self))
            gpu_node_group(
                f"{name}-{pool.name}-ng", cluster, node_role, pool,
                [network.private_subnet_ids[z] for z in pool.zones],
                "SPOT" if spec_pool.capacity_type == "spot" else "ON_DEMAND",
                pulumi.ResourceOptions.merge(nodes_opts, pulumi.ResourceOptions(parent=group)),
            )

        config = kubeconfig(cluster.name, cluster.endpoint,
                            cluster.certificate_authority.data, region.region)
        k8s_provider = k8s.Provider(
            f"{name}-k8s",
            k8s.ProviderArgs(kubeconfig=pulumi.Output.secret(config), enable_server_side_apply=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system]),
        )
        self.facts = ClusterFacts(
            name=name, cloud=Cloud.AWS, region=region.region, zones=tuple(region.zones),
            kubernetes_version=kubernetes_version, provider=k8s_provider, pools=pools,
            endpoint=cluster.endpoint, native_id=cluster.name,
            oidc_issuer=cluster.identities[0].oidcs[0].issuer,
        )
        self.register_outputs({"endpoint": cluster.endpoint, "name": cluster.name})


__all__ = ["AwsCluster", "aws_provider", "kubeconfig"]
