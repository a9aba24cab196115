"""One Azure region: resource group, VNet, AKS cluster with Entra ID auth, GPU agent pools, k8s provider.

The Kubernetes provider's kubeconfig takes the API server and its certificate authority from the
cluster's `listClusterUserCredential` action, and authenticates with the `kubelogin` exec plugin
reading the Azure CLI login, so it holds no credential. See `user_kubeconfig`.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import urlsplit

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s
import yaml
from pulumi_azure_native import containerservice as aks
from pulumi_azure_native import resources

from components.azure_network import DNS_SERVICE_IP, POD_CIDR, SERVICE_CIDR, AzureNetwork
from components.azure_nodes import SYSTEM_VM_SIZE, gpu_agent_pool, system_pool_profile
from components.contract import ClusterFacts, cluster_props, public_api_cidrs
from components.gpu_pools import GpuPool, pool_facts
from serving.hardware import Cloud
from stacks.pools import shape_of
from stacks.schema import AzureRegion

# The application ID of the AKS AAD server app, the audience of every Entra ID token AKS accepts
# (kubelogin docs, "Using kubelogin with AKS"; recalled, not rechecked here).
AKS_AAD_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"


class AzureProvider(azure_native.Provider):
    """The region's azure-native provider, carrying the tags its resources must repeat.

    azure-native has no provider-level default tags, so each resource sets `tags` itself.
    """

    tags: dict[str, str]

    def __init__(self, name: str, args: azure_native.ProviderArgs, tags: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts=opts)
        self.tags = dict(tags)


def azure_provider(name: str, region: AzureRegion, labels: dict[str, str],
                   opts: pulumi.ResourceOptions) -> AzureProvider:
    """The region's provider; every Azure resource of the region goes through it."""
    return AzureProvider(name, azure_native.ProviderArgs(location=region.region), labels, opts=opts)


def kubeconfig(cluster_name: pulumi.Input[str], server_fqdn: pulumi.Input[str],
               certificate_authority_data: pulumi.Input[str] | None = None) -> pulumi.Output[str]:
    """A kubeconfig that gets an Entra ID token from `kubelogin` (Azure CLI login): no credential.

    `certificate_authority_data` is the cluster CA (base64 PEM): AKS signs its API server
    certificate with the cluster's own CA, which is not among the system roots.
    """
    def build(args: list[str | None]) -> str:
        name, fqdn, ca = args
        server: dict[str, str] = {"server": f"https://{fqdn}:443"}
        if ca:
            server["certificate-authority-data"] = ca
        return json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": server}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "kubelogin",
                "args": ["get-token", "--login", "azurecli", "--server-id", AKS_AAD_SERVER_ID],
                "interactiveMode": "Never",
            }}}],
        })
    return pulumi.Output.all(cluster_name, server_fqdn, certificate_authority_data).apply(build)


def user_kubeconfig(cluster_name: str, resource_group_name: pulumi.Input[str],
                    resource_name: pulumi.Input[str], opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    """The kubeconfig for the cluster's API, from its user credentials (a secret).

    Only the cluster entry (server and CA) of AKS's answer is kept: its `exec` user logs in with a
    device code, which blocks an unattended `pulumi up`, so the user is ours (see `kubeconfig`).
    `resource_name` should be an output of the cluster, so the call waits for the cluster to exist.
    """
    credentials = aks.list_managed_cluster_user_credentials_output(
        resource_group_name=resource_group_name, resource_name=resource_name, format="exec", opts=opts)

    def cluster_entry(result: aks.ListManagedClusterUserCredentialsResult) -> tuple[str, str]:
        if not result.kubeconfigs:
            raise ValueError(f"{cluster_name}: AKS returned no user kubeconfig")
        doc = yaml.safe_load(base64.b64decode(result.kubeconfigs[0].value))
        entry = doc["clusters"][0]["cluster"]
        host = urlsplit(entry["server"]).hostname
        if not host or not entry.get("certificate-authority-data"):
            raise ValueError(f"{cluster_name}: the AKS user kubeconfig lacks a server or CA")
        return host, entry["certificate-authority-data"]

    entry = pulumi.Output.secret(credentials.apply(cluster_entry))
    return pulumi.Output.secret(kubeconfig(cluster_name, entry[0], entry[1]))


def _issuer(profile: object) -> str | None:
    return getattr(profile, "issuer_url", None) if profile is not None else None


class AzureCluster(pulumi.ComponentResource):
    facts: ClusterFacts

    def __init__(
        self,
        name: str,
        region: AzureRegion,
        kubernetes_version: str,
        prod: bool,
        provider: AzureProvider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        pools = tuple(pool_facts(Cloud.AZURE, p, region.zones) for p in region.gpu_pools)
        super().__init__("rtip:azure:Cluster", name, cluster_props(
            Cloud.AZURE, region.region, region.zones, kubernetes_version), opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        tags = provider.tags

        group = resources.ResourceGroup(f"{name}-rg", resources.ResourceGroupArgs(
            resource_group_name=name, location=region.region, tags=tags), opts=child)
        network = AzureNetwork(f"{name}-net", region.network.cidr, region.region, group.name, tags,
                               provider, opts=pulumi.ResourceOptions(parent=self))

        # Prod's API server is private; elsewhere it is public only to the CIDRs the stack lists,
        # and private when it lists none (as on EKS).
        cidrs = public_api_cidrs(region.api_access_cidrs)
        private = not cidrs
        system = region.system_pool
        # Keyword arguments, not ManagedClusterArgs: the Args class names the cluster `resource_name`,
        # which collides with the resource's own first parameter in the 3.29 SDK (TypeError
        # "multiple values for argument 'resource_name'"); the keyword form spells it
        # `resource_name_`. Nested values stay typed ...Args.
        cluster = aks.ManagedCluster(
            f"{name}-aks",
            resource_group_name=group.name,
            resource_name_=name,
            location=region.region,
            dns_prefix=name,
            kubernetes_version=kubernetes_version,
            # Standard tier carries the API server uptime SLA that prod needs.
            sku=aks.ManagedClusterSKUArgs(
                name=aks.ManagedClusterSKUName.BASE,
                tier=aks.ManagedClusterSKUTier.STANDARD if prod else aks.ManagedClusterSKUTier.FREE,
            ),
            identity=aks.ManagedClusterIdentityArgs(type=aks.ResourceIdentityType.SYSTEM_ASSIGNED),
            # Entra ID for people and pipelines, Azure RBAC for what they may do, and no
            # local admin kubeconfig that would bypass both.
            aad_profile=aks.ManagedClusterAADProfileArgs(managed=True, enable_azure_rbac=True),
            disable_local_accounts=True,
            enable_rbac=True,
            oidc_issuer_profile=aks.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
            security_profile=aks.ManagedClusterSecurityProfileArgs(
                workload_identity=aks.ManagedClusterSecurityProfileWorkloadIdentityArgs(enabled=True),
            ),
            network_profile=aks.ContainerServiceNetworkProfileArgs(
                network_plugin=aks.NetworkPlugin.AZURE,
                network_plugin_mode=aks.NetworkPluginMode.OVERLAY,
                network_dataplane=aks.NetworkDataplane.CILIUM,
                network_policy=aks.NetworkPolicy.CILIUM,
                pod_cidr=POD_CIDR,
                service_cidr=SERVICE_CIDR,
                dns_service_ip=DNS_SERVICE_IP,
                load_balancer_sku=aks.LoadBalancerSku.STANDARD,
                outbound_type=aks.OutboundType.LOAD_BALANCER,
            ),
            api_server_access_profile=aks.ManagedClusterAPIServerAccessProfileArgs(
                enable_private_cluster=True,
                # No public DNS record pointing at the private address.
                enable_private_cluster_public_fqdn=False,
            ) if private else aks.ManagedClusterAPIServerAccessProfileArgs(
                authorized_ip_ranges=cidrs,
            ),
            # Patch releases of the pinned minor only: a minor upgrade is a stack change.
            auto_upgrade_profile=aks.ManagedClusterAutoUpgradeProfileArgs(
                upgrade_channel=aks.UpgradeChannel.PATCH,
                node_os_upgrade_channel=aks.NodeOSUpgradeChannel.NODE_IMAGE,
            ),
            agent_pool_profiles=[system_pool_profile(
                system.machine_type or SYSTEM_VM_SIZE, system.min_nodes, system.max_nodes,
                region.zones, kubernetes_version, network.node_subnet_id,
            )],
            tags=tags,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                # The autoscaler owns the system pool's live node count.
                ignore_changes=["agentPoolProfiles[0].count"],
            )),
        )
        for spec_pool, pool in zip(region.gpu_pools, pools, strict=True):
            gpu_group = GpuPool(f"{name}-{pool.name}", pool, opts=pulumi.ResourceOptions(parent=self))
            gpu_agent_pool(
                f"{name}-{pool.name}-ap", cluster, group.name, pool, spec_pool,
                shape_of(Cloud.AZURE, spec_pool).gpu_spec, kubernetes_version,
                network.node_subnet_id, tags,
                pulumi.ResourceOptions(parent=gpu_group, provider=provider),
            )

        server = cluster.private_fqdn if private else cluster.fqdn
        # The default providers are disabled: the credentials call goes through the region's.
        config = user_kubeconfig(name, group.name, cluster.name,
                                 pulumi.InvokeOutputOptions(parent=self, provider=provider))
        k8s_provider = k8s.Provider(
            f"{name}-k8s",
            k8s.ProviderArgs(kubeconfig=config, enable_server_side_apply=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )
        endpoint = pulumi.Output.concat("https://", server)
        self.facts = ClusterFacts(
            name=name, cloud=Cloud.AZURE, region=region.region, zones=tuple(region.zones),
            kubernetes_version=kubernetes_version, provider=k8s_provider, pools=pools,
            endpoint=endpoint, native_id=cluster.id,
            oidc_issuer=cluster.oidc_issuer_profile.apply(_issuer),
            resource_group=group.name,
        )
        self.register_outputs({"endpoint": endpoint, "id": cluster.id})


__all__ = ["AKS_AAD_SERVER_ID", "AzureCluster", "AzureProvider", "azure_provider", "kubeconfig",
           "user_kubeconfig"]
