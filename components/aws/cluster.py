"""One AWS region: VPC, EKS cluster (secrets under a customer key where the posture says so),
node groups, Kubernetes provider."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.aws.access import creator_admin, grant_deployer
from components.aws.karpenter import Karpenter
from components.aws.keys import customer_key
from components.aws.network import AwsNetwork
from components.aws.nodes import gpu_node_group, system_node_group
from components.aws.storage import ebs_storage
from components.cluster import ControlPlane, ExecUser, KubernetesCluster, exec_kubeconfig
from components.contract import PoolFacts, public_api_cidrs
from components.gpu_pools import GpuPool
from serving.coldstart import TIMINGS
from serving.hardware import Cloud
from serving.karpenter import DISCOVERY_TAG
from stacks.naming import aws_account
from stacks.plan import Plan, RegionPlan
from stacks.schema import RegionSpec, StackSpec

MANAGED_POLICY = "arn:aws:iam::aws:policy/"
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                 "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore")
# EKS managed add-ons every cluster runs; versions follow the cluster's Kubernetes version.
ADDONS = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")
LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def assume_role_policy(service: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]}],
    })


def aws_user(cluster: str, region: str) -> ExecUser:
    """`aws eks get-token`: the deployer's own AWS credentials, exchanged per call."""
    return ExecUser("aws", ("eks", "get-token", "--cluster-name", cluster, "--region", region))


def aws_provider(name: str, region: RegionSpec, tags: dict[str, str],
                 opts: pulumi.ResourceOptions, spec: StackSpec) -> aws.Provider:
    """The region's provider; every AWS resource of the region goes through it. Pinned to the
    deployer's account: credentials for any other account fail before a resource is touched."""
    account = aws_account(spec)
    return aws.Provider(name, aws.ProviderArgs(
        region=region.region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
        allowed_account_ids=[account] if account else None), opts=opts)


class AwsCluster(KubernetesCluster):
    TYPE = "rtip:aws:Cluster"

    def __init__(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        self.gpu_groups: list[tuple[PoolFacts, GpuPool]] = []
        self.addons: dict[str, aws.eks.Addon] = {}
        super().__init__(name, region, plan, provider, opts)
        self.build_cluster_services()

    def build_cluster_services(self) -> None:
        """What runs through the Kubernetes provider the skeleton made: Karpenter above the GPU
        pools' floors, and the EBS CSI driver with the default `gp3` class."""
        name, k8s_provider = self.cluster_name, self.facts.provider
        # Pod Identity needs its agent on the nodes before a pod asks for credentials.
        ready = [self.addons["eks-pod-identity-agent"], self.addons["coredns"]]
        node_only = TIMINGS[Cloud.AWS].node_provisioning_s + TIMINGS[Cloud.AWS].node_init_s
        cold = {p.name: max((m.cold_start.total_s for m in self.region.models if m.pool == p.name),
                            default=node_only) for p, _ in self.gpu_groups}
        self.karpenter = Karpenter(
            f"{name}-karpenter", name, self.region.name, self.eks, k8s_provider, self.gpu_groups, cold,
            self.posture, ready, self.cloud_provider, opts=pulumi.ResourceOptions(parent=self))
        self.storage_class = ebs_storage(name, self.eks, k8s_provider, ready, self.child)

    def build_network(self) -> None:
        r = self.region.region
        self.network = AwsNetwork(f"{self.cluster_name}-net", r.region, r.network.cidr, r.zones,
                                  self.cluster_name, nat_per_zone=self.posture.nat_per_zone,
                                  provider=self.cloud_provider, opts=pulumi.ResourceOptions(parent=self))
        self.private_subnets = [self.network.private_subnet_ids[z] for z in r.zones]

    def build_control_plane(self) -> None:
        name, child = self.cluster_name, self.child
        key = None
        if self.posture.secrets_customer_key:
            key = customer_key(f"{name}-secrets", f"EKS secrets encryption for {name}", child,
                               alias=f"alias/rtip/{name}/eks-secrets")
        cluster_role = aws.iam.Role(f"{name}-cluster", aws.iam.RoleArgs(
            assume_role_policy=assume_role_policy("eks.amazonaws.com")), opts=child)
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster", aws.iam.RolePolicyAttachmentArgs(
                role=cluster_role.name, policy_arn=MANAGED_POLICY + "AmazonEKSClusterPolicy"),
            opts=child,
        )
        self.node_role = aws.iam.Role(f"{name}-node", aws.iam.RoleArgs(
            assume_role_policy=assume_role_policy("ec2.amazonaws.com")), opts=child)
        node_policies = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{p.lower()}", aws.iam.RolePolicyAttachmentArgs(
                role=self.node_role.name, policy_arn=MANAGED_POLICY + p), opts=child)
            for p in NODE_POLICIES
        ]
        cidrs = public_api_cidrs(list(self.region.region.api_access_cidrs))
        self.eks = aws.eks.Cluster(
            f"{name}-eks",
            aws.eks.ClusterArgs(
                name=name,
                role_arn=cluster_role.arn,
                version=self.kubernetes_version,
                vpc_config=aws.eks.ClusterVpcConfigArgs(
                    subnet_ids=self.private_subnets,
                    endpoint_private_access=True,
                    endpoint_public_access=bool(cidrs),
                    public_access_cidrs=cidrs or None,
                ),
                access_config=aws.eks.ClusterAccessConfigArgs(
                    authentication_mode="API",
                    # The stack's deployer gets an access entry instead (grant_deployer).
                    bootstrap_cluster_creator_admin_permissions=creator_admin(self.stack),
                ),
                encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                    provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn),
                    resources=["secrets"],
                ) if key else None,
                enabled_cluster_log_types=LOG_TYPES,
                deletion_protection=self.posture.deletion_protection,
            ),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[cluster_policy])),
        )
        self.nodes_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            depends_on=node_policies))
        # Karpenter's nodes join with the cluster security group, which EKS creates: tag it so
        # the EC2NodeClasses select it (the private subnets carry the same tag).
        aws.ec2.Tag(f"{name}-cluster-sg-discovery", aws.ec2.TagArgs(
            resource_id=self.eks.vpc_config.cluster_security_group_id, key=DISCOVERY_TAG, value=name),
            opts=child)

    def build_system_pool(self) -> pulumi.Resource:
        name, system = self.cluster_name, self.region.region.system_pool
        group = system_node_group(
            f"{name}-system", self.eks, self.node_role, self.system_machine_type,
            system.min_nodes, system.max_nodes, self.private_subnets, self.nodes_opts,
        )
        for addon in ADDONS:
            self.addons[addon] = aws.eks.Addon(f"{name}-{addon}", aws.eks.AddonArgs(
                cluster_name=self.eks.name, addon_name=addon,
                resolve_conflicts_on_update="OVERWRITE",
            ), opts=pulumi.ResourceOptions.merge(self.child, pulumi.ResourceOptions(
                depends_on=[group])))
        return group

    def build_gpu_pool(self, pool: PoolFacts, parent: GpuPool, system: pulumi.Resource) -> None:
        self.gpu_groups.append((pool, parent))
        if not pool.min_nodes:
            return  # no floor to hold: Karpenter's NodePool holds the whole pool
        gpu_node_group(
            f"{self.cluster_name}-{pool.name}-ng", self.eks, self.node_role, pool,
            [self.network.private_subnet_ids[z] for z in pool.zones],
            pulumi.ResourceOptions.merge(self.nodes_opts, pulumi.ResourceOptions(parent=parent)),
        )

    def grant_deployer(self) -> list[pulumi.Resource]:
        return grant_deployer(self.cluster_name, self.eks, self.stack, self.child)

    def access(self, system: pulumi.Resource) -> ControlPlane:
        config = exec_kubeconfig(self.cluster_name, self.eks.endpoint,
                                 self.eks.certificate_authority.data,
                                 aws_user(self.cluster_name, self.region.name))
        return ControlPlane(endpoint=self.eks.endpoint, native_id=self.eks.name, kubeconfig=config,
                            ready=[system])

    @property
    def oidc_issuer(self) -> pulumi.Output[str]:
        return self.eks.identities[0].oidcs[0].issuer


__all__ = ["AwsCluster", "assume_role_policy", "aws_provider", "aws_user"]
