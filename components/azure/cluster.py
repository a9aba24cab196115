"""One Azure region: resource group, VNet, AKS cluster with Entra ID auth, GPU agent pools, k8s provider.

The Kubernetes provider's kubeconfig takes the API server and its certificate authority from the
cluster's `listClusterUserCredential` action, and authenticates with the `kubelogin` exec plugin
reading the Azure CLI login, so it holds no credential. See `user_kubeconfig`.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pulumi_azure_native as azure_native
import yaml
from pulumi_azure_native import containerservice as aks
from pulumi_azure_native import resources

from components.azure.access import grant_deployer
from components.azure.keys import ENCRYPT, KEY_VAULT_CONTRIBUTOR, CustomerKey, grant
from components.azure.network import DNS_SERVICE_IP, POD_CIDR, SERVICE_CIDR, AzureNetwork
from components.azure.nodes import gpu_agent_pool, system_pool_profile
from components.cluster import ControlPlane, ExecUser, KubernetesCluster, exec_kubeconfig
from components.contract import PoolFacts, public_api_cidrs
from components.gpu_pools import GpuPool
from serving.hardware import Cloud
from serving.nodescaling import NODE_AUTOSCALER
from stacks.naming import azure_subscription, vault_stem
from stacks.schema import AzureRegion, RegionSpec, StackSpec


def _aks_pod_grace_limit_s() -> float:
    limit = NODE_AUTOSCALER[Cloud.AZURE].pod_grace_limit_s
    if limit is None:
        raise RuntimeError("serving/nodescaling.py: the AKS cluster autoscaler's row states no pod wait")
    return limit


AKS_POD_GRACE_LIMIT_S = _aks_pod_grace_limit_s()


def _aks_unneeded_time() -> str:
    """The row's empty-node wait as AKS's profile writes it: whole minutes ('10m')."""
    wait = NODE_AUTOSCALER[Cloud.AZURE].empty_node_s
    if wait is None or wait % 60:
        raise RuntimeError(f"serving/nodescaling.py: the AKS row's empty_node_s ({wait}) is no whole "
                           "number of minutes, the only unit AKS's scale-down-unneeded-time takes")
    return f"{wait / 60:g}m"


AKS_SCALE_DOWN_UNNEEDED_TIME = _aks_unneeded_time()

# Built-in role "Network Contributor" (the same GUID in every tenant).
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
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


def azure_provider(name: str, region: RegionSpec, labels: dict[str, str],
                   opts: pulumi.ResourceOptions, spec: StackSpec) -> AzureProvider:
    """The region's provider; every Azure resource of the region goes through it, in the
    deployer's subscription (not whichever one the runner's login defaults to)."""
    return AzureProvider(name, azure_native.ProviderArgs(
        location=region.region, subscription_id=azure_subscription(spec)), labels, opts=opts)


# kubelogin with the Azure CLI login: an Entra ID token for the AKS server app, never a stored secret.
AKS_USER = ExecUser("kubelogin", ("get-token", "--login", "azurecli", "--server-id", AKS_AAD_SERVER_ID),
                    interactive_mode="Never")


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
    server = entry[0].apply(lambda host: f"https://{host}:443")
    return pulumi.Output.secret(exec_kubeconfig(cluster_name, server, entry[1], AKS_USER))


def _issuer(profile: object) -> str | None:
    return getattr(profile, "issuer_url", None) if profile is not None else None


def _kubelet_object_id(profile: object) -> str:
    kubelet = (profile or {}).get("kubeletidentity")  # type: ignore[attr-defined]
    if kubelet is None or not kubelet.object_id:
        raise ValueError("the AKS cluster reports no kubelet identity")
    return str(kubelet.object_id)


class AzureCluster(KubernetesCluster):
    TYPE = "rtip:azure:Cluster"

    @property
    def spec(self) -> AzureRegion:
        region = self.region.region
        assert isinstance(region, AzureRegion)
        return region

    @property
    def tags(self) -> dict[str, str]:
        provider = self.cloud_provider
        assert isinstance(provider, AzureProvider)
        return provider.tags

    def build_network(self) -> None:
        name, region = self.cluster_name, self.spec
        self.group = resources.ResourceGroup(f"{name}-rg", resources.ResourceGroupArgs(
            resource_group_name=name, location=region.region, tags=self.tags), opts=self.child)
        # A KMS key in a private vault takes API Server VNet Integration (see _kms): its subnet.
        self.network = AzureNetwork(f"{name}-net", region.network.cidr, region.region, self.group.name,
                                    self.tags, self.cloud_provider, opts=pulumi.ResourceOptions(parent=self),
                                    api_server_subnet=self.posture.secrets_customer_key)

    def _kms(self) -> tuple[CustomerKey | None, aks.ManagedClusterIdentityArgs | pulumi.Output[Any]]:
        """The KMS key of Kubernetes secrets and the control plane identity that may use it.

        AKS's KMS plugin cannot use a system-assigned identity (it exists only once the cluster
        does, and KMS must be set at creation: learn.microsoft.com/azure/aks/use-kms-etcd-encryption,
        "Limitations"), so with a customer key the control plane runs as a user-assigned identity
        granted Key Vault Crypto User on that one key.

        The vault answers on no public network. The same page: a vault firewalled to "specific
        virtual networks and IP addresses" or with public access disabled blocks the KMS plugin
        unless KMS runs in private mode (`keyVaultNetworkAccess: Private` with the vault's
        resource ID), where AKS makes a private endpoint to the vault itself; that needs Key Vault
        Contributor on the vault for the identity ("Assign permissions to create a private link")
        and API Server VNet Integration ("KMS only supports API Server VNet Integration for
        private key vault"; Konnectivity is refused for new subscriptions since 2024-09-15). The
        integration puts the API server behind an internal load balancer in a delegated subnet,
        on which the identity needs Network Contributor as on the node subnet (AKS docs, "API
        Server VNet Integration", bring-your-own VNet). Both are set at creation: KMS cannot
        switch a key vault between public and private mode while it is on."""
        if not self.posture.secrets_customer_key:
            return None, aks.ManagedClusterIdentityArgs(type=aks.ResourceIdentityType.SYSTEM_ASSIGNED)
        name, region = self.cluster_name, self.spec
        key = CustomerKey(f"{name}-kms", vault_stem(self.stack, region.region, "kms"),
                          f"{name}-control-plane", ENCRYPT, region.region, self.group.name, self.tags,
                          self.child, private=True)
        identity = key.identity.id.apply(lambda uid: aks.ManagedClusterIdentityArgs(
            type=aks.ResourceIdentityType.USER_ASSIGNED,
            user_assigned_identities={uid: {}}))  # type: ignore[dict-item]
        # A user-assigned control plane on a subnet it did not create must be allowed to join its
        # nodes and load balancers to it (AKS docs, "Use a managed identity": Network Contributor
        # on the subnet); az CLI grants it, ARM does not, so the program does before the cluster.
        self.subnet_grant = grant(f"{name}-subnet", NETWORK_CONTRIBUTOR, self.network.node_subnet_id,
                                  key.identity.principal_id, self.child)
        assert self.network.api_server_subnet_id is not None  # made for every cluster with a KMS key
        self.kms_grants = [
            self.subnet_grant,
            grant(f"{name}-apiserver-subnet", NETWORK_CONTRIBUTOR, self.network.api_server_subnet_id,
                  key.identity.principal_id, self.child),
            grant(f"{name}-kms-link", KEY_VAULT_CONTRIBUTOR, key.vault.id, key.identity.principal_id,
                  self.child),
        ]
        return key, identity

    def build_control_plane(self) -> None:
        name, region, env = self.cluster_name, self.spec, self.posture
        # A private API server unless the stack lists networks to open it to (never with a
        # posture whose API is private: stacks.checks rejects the list there).
        cidrs = public_api_cidrs(list(region.api_access_cidrs))
        self.private = not cidrs
        system = region.system_pool
        key, identity = self._kms()
        # With a KMS key in a private vault: the API server in the VNet (see _kms).
        vnet_integration: dict[str, Any] = {
            "enable_vnet_integration": True, "subnet_id": self.network.api_server_subnet_id} if key else {}
        # Keyword arguments, not ManagedClusterArgs: the Args class names the cluster `resource_name`,
        # which collides with the resource's own first parameter in the 3.29 SDK (TypeError
        # "multiple values for argument 'resource_name'"); the keyword form spells it
        # `resource_name_`. Nested values stay typed ...Args.
        self.aks = aks.ManagedCluster(
            f"{name}-aks",
            resource_group_name=self.group.name,
            resource_name_=name,
            location=region.region,
            dns_prefix=name,
            kubernetes_version=self.kubernetes_version,
            # Standard tier carries the API server uptime SLA.
            sku=aks.ManagedClusterSKUArgs(
                name=aks.ManagedClusterSKUName.BASE,
                tier=aks.ManagedClusterSKUTier.STANDARD if env.control_plane_sla
                else aks.ManagedClusterSKUTier.FREE,
            ),
            identity=identity,
            # Entra ID for people and pipelines, Azure RBAC for what they may do, and no
            # local admin kubeconfig that would bypass both.
            aad_profile=aks.ManagedClusterAADProfileArgs(managed=True, enable_azure_rbac=True),
            disable_local_accounts=True,
            enable_rbac=True,
            oidc_issuer_profile=aks.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
            security_profile=aks.ManagedClusterSecurityProfileArgs(
                workload_identity=aks.ManagedClusterSecurityProfileWorkloadIdentityArgs(enabled=True),
                azure_key_vault_kms=aks.AzureKeyVaultKmsArgs(
                    enabled=True, key_id=key.key.key_uri_with_version,
                    key_vault_network_access=aks.KeyVaultNetworkAccessTypes.PRIVATE,
                    key_vault_resource_id=key.vault.id,
                ) if key else None,
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
                **vnet_integration,
            ) if self.private else aks.ManagedClusterAPIServerAccessProfileArgs(
                authorized_ip_ranges=cidrs, **vnet_integration,
            ),
            # Patch releases of the pinned minor only: a minor upgrade is a stack change.
            auto_upgrade_profile=aks.ManagedClusterAutoUpgradeProfileArgs(
                upgrade_channel=aks.UpgradeChannel.PATCH,
                node_os_upgrade_channel=aks.NodeOSUpgradeChannel.NODE_IMAGE,
            ),
            # The cluster autoscaler's wait for the pods of a node it removes, stated instead of
            # left to the default (AKS documents 600 s): each model's preStop drain and grace
            # period are sized to fit it (serving/drain.py NODE_DRAIN_LIMIT_S), and the deploy
            # check reads it back. And how long an unneeded node stays (AKS's default '10m'),
            # which the simulator bills as the plan's GPU time. The others keep AKS's defaults.
            auto_scaler_profile=aks.ManagedClusterPropertiesAutoScalerProfileArgs(
                max_graceful_termination_sec=f"{AKS_POD_GRACE_LIMIT_S:g}",
                scale_down_unneeded_time=AKS_SCALE_DOWN_UNNEEDED_TIME),
            agent_pool_profiles=[system_pool_profile(
                self.system_machine_type, system.min_nodes, system.max_nodes,
                region.zones, self.kubernetes_version, self.network.node_subnet_id,
            )],
            tags=self.tags,
            opts=pulumi.ResourceOptions.merge(self.child, pulumi.ResourceOptions(
                # The autoscaler owns the system pool's live node count.
                ignore_changes=["agentPoolProfiles[0].count"],
                depends_on=[key.grant, *self.kms_grants] if key else [],
                # AKS has no deletion-protection field (EKS and GKE do): where the posture asks for
                # it, the engine refuses to delete the cluster until the option is removed.
                protect=env.deletion_protection,
            )),
        )

    def build_system_pool(self) -> pulumi.Resource:
        # AKS carries its System-mode pool inside the ManagedCluster (agent_pool_profiles).
        return self.aks

    def build_gpu_pool(self, pool: PoolFacts, parent: GpuPool, system: pulumi.Resource) -> None:
        gpu_agent_pool(
            f"{self.cluster_name}-{pool.name}-ap", self.aks, self.group.name, pool,
            self.kubernetes_version, self.network.node_subnet_id, self.tags,
            pulumi.ResourceOptions(parent=parent, provider=self.cloud_provider),
        )

    def grant_deployer(self) -> list[pulumi.Resource]:
        return grant_deployer(self.cluster_name, self.aks.id, self.stack, self.child)

    def access(self, system: pulumi.Resource) -> ControlPlane:
        server = self.aks.private_fqdn if self.private else self.aks.fqdn
        # The default providers are disabled: the credentials call goes through the region's.
        config = user_kubeconfig(self.cluster_name, self.group.name, self.aks.name,
                                 pulumi.InvokeOutputOptions(parent=self, provider=self.cloud_provider))
        return ControlPlane(endpoint=pulumi.Output.concat("https://", server), native_id=self.aks.id,
                            kubeconfig=config, ready=[self.aks])

    @property
    def oidc_issuer(self) -> pulumi.Output[str]:
        return self.aks.oidc_issuer_profile.apply(_issuer)  # type: ignore[return-value]

    @property
    def kubelet_object_id(self) -> pulumi.Output[str]:
        """The identity the cluster's kubelets pull images as (AcrPull is granted to it)."""
        return self.aks.identity_profile.apply(_kubelet_object_id)


__all__ = ["AKS_AAD_SERVER_ID", "AKS_USER", "AzureCluster", "AzureProvider", "azure_provider",
           "user_kubeconfig"]
