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
from components.aws.roles import arn_parts, cni_policy, grant_pull_through, pod_role, service_trust
from components.aws.storage import ebs_storage
from components.cluster import ControlPlane, ExecUser, KubernetesCluster, exec_kubeconfig
from components.contract import PoolFacts, public_api_cidrs
from components.gpu_pools import GpuPool
from serving.karpenter import DISCOVERY_TAG
from stacks.naming import aws_account
from stacks.plan import Plan, RegionPlan
from stacks.schema import RegionSpec, StackSpec

MANAGED_POLICY = "arn:aws:iam::aws:policy/"
# The VPC CNI's permissions are not here: `aws-node` gets them through Pod Identity (below).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly",
                 "AmazonSSMManagedInstanceCore")
# EKS managed add-ons every cluster runs; versions follow the cluster's Kubernetes version (EKS
# picks its default for it: for 1.33 the VPC CNI is v1.20 or later, past v1.15.5-eksbuild.1, the
# first with Pod Identity, and v1.14.0-eksbuild.3, the first with network policy; EKS user guide,
# "Pod Identity Support Reference", "Restrict Pod network traffic with Kubernetes network
# policies", "Amazon VPC CNI versions"). The first two run before any node joins (the
# `before_compute` add-ons of terraform-aws-eks): nodes need aws-node, and aws-node now takes
# its credentials from the Pod Identity agent. CoreDNS and kube-proxy follow the system nodes.
BEFORE_NODES = ("eks-pod-identity-agent", "vpc-cni")
AFTER_NODES = ("kube-proxy", "coredns")
ADDONS = (*BEFORE_NODES, *AFTER_NODES)
# The VPC CNI DaemonSet's service account (EKS user guide, "Configure Amazon VPC CNI plugin to
# use IRSA": the plugin creates and uses `aws-node`).
CNI_SERVICE_ACCOUNT = ("kube-system", "aws-node")
# Enforce Kubernetes NetworkPolicies with the VPC CNI's eBPF agent: the add-on's configuration
# key, a string (EKS user guide, "Restrict Pod network traffic with Kubernetes network policies").
CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def assume_role_policy(service: str) -> str:
    return service_trust(service)


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
        cold = {p.name: self.region.pool_cold_start_s(p.name) for p, _ in self.gpu_groups}
        self.karpenter = Karpenter(
            f"{name}-karpenter", name, self.region.name, self.eks, k8s_provider, self.gpu_groups, cold,
            self.posture, ready, self.cloud_provider, self.stack.registries.name_prefix,
            zones_down=tuple(self.region.region.zones_down), opts=pulumi.ResourceOptions(parent=self))
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
        node_policies: list[pulumi.Resource] = [
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
        # The kubelet pulls with the node role: a first pull through a cache rule fills it.
        node_policies.append(grant_pull_through(
            f"{name}-node-pull-through", self.node_role, self.eks,
            self.stack.registries.name_prefix, child))
        before = self._addons_before_nodes()
        self.nodes_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            depends_on=[*node_policies, *before]))
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
        for addon in AFTER_NODES:
            self.addons[addon] = aws.eks.Addon(f"{name}-{addon}", aws.eks.AddonArgs(
                cluster_name=self.eks.name, addon_name=addon,
                resolve_conflicts_on_update="OVERWRITE",
            ), opts=pulumi.ResourceOptions.merge(self.child, pulumi.ResourceOptions(
                depends_on=[group])))
        return group

    def _addons_before_nodes(self) -> list[pulumi.Resource]:
        """The Pod Identity agent, then the VPC CNI with its own role for `aws-node` (the
        add-on's `podIdentityAssociations`; EKS user guide, "IAM roles for Amazon EKS add-ons":
        the agent first) and network policy enforcement on."""
        name, child = self.cluster_name, self.child
        agent = aws.eks.Addon(f"{name}-eks-pod-identity-agent", aws.eks.AddonArgs(
            cluster_name=self.eks.name, addon_name="eks-pod-identity-agent",
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
        ), opts=child)
        role = pod_role(f"{name}-vpc-cni", self.eks, [CNI_SERVICE_ACCOUNT], child)
        grant = aws.iam.RolePolicy(f"{name}-vpc-cni", aws.iam.RolePolicyArgs(
            role=role.id, policy=pulumi.Output.all(self.eks.arn, self.network.vpc_id).apply(
                lambda a: json.dumps(cni_policy(*arn_parts(a[0]), a[1])))), opts=child)
        # EKS installs a self-managed aws-node with every cluster; the add-on takes it over.
        cni = aws.eks.Addon(f"{name}-vpc-cni", aws.eks.AddonArgs(
            cluster_name=self.eks.name, addon_name="vpc-cni",
            configuration_values=json.dumps(CNI_CONFIGURATION),
            pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=role.arn, service_account=CNI_SERVICE_ACCOUNT[1])],
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
        ), opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            depends_on=[agent, grant])))
        self.addons["eks-pod-identity-agent"], self.addons["vpc-cni"] = agent, cni
        return [agent, cni]

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


__all__ = ["ADDONS", "CNI_CONFIGURATION", "CNI_SERVICE_ACCOUNT", "AwsCluster", "assume_role_policy",
           "aws_provider", "aws_user"]
