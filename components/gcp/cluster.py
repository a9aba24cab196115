"""One GCP region: VPC, regional private GKE cluster, node pools, Kubernetes provider."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.cluster import ControlPlane, ExecUser, KubernetesCluster, exec_kubeconfig
from components.contract import PoolFacts, public_api_cidrs
from components.gcp.access import grant_deployer
from components.gcp.keys import customer_key, service_agent
from components.gcp.network import PODS_RANGE, SERVICES_RANGE, GcpNetwork
from components.gcp.nodes import OAUTH_SCOPES, gpu_node_pool, node_service_account, system_node_pool
from components.gpu_pools import GpuPool
from serving.nodescaling import GKE_AUTOSCALING_PROFILE
from stacks.schema import GcpRegion, RegionSpec, StackSpec

GKE_USER = ExecUser(
    "gke-gcloud-auth-plugin",
    install_hint="Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
    provide_cluster_info=True,
)


def gcp_provider(name: str, region: RegionSpec, labels: dict[str, str],
                 opts: pulumi.ResourceOptions, spec: StackSpec) -> gcp.Provider:
    """The region's provider; every GCP resource of the region goes through it, in the region's
    project (`spec` is the stack's: GCP's pin is per region)."""
    if not isinstance(region, GcpRegion):
        raise TypeError(f"{region.region} is a {region.cloud} region, not a GCP one")
    return gcp.Provider(name, gcp.ProviderArgs(
        project=region.project, region=region.region, default_labels=labels), opts=opts)


class GcpCluster(KubernetesCluster):
    TYPE = "rtip:gcp:Cluster"

    @property
    def spec(self) -> GcpRegion:
        region = self.region.region
        assert isinstance(region, GcpRegion)
        return region

    @property
    def workload_pool(self) -> str:
        """GKE Workload Identity's pool: Kubernetes service accounts become `<pool>[ns/sa]`."""
        return f"{self.spec.project}.svc.id.goog"

    def build_network(self) -> None:
        self.network = GcpNetwork(f"{self.cluster_name}-net", self.spec.project, self.spec.region,
                                  self.spec.network.cidr, provider=self.cloud_provider,
                                  opts=pulumi.ResourceOptions(parent=self))

    def build_control_plane(self) -> None:
        name, child, region, env = self.cluster_name, self.child, self.spec, self.posture
        self.account, self.grants = node_service_account(name, region.project, child)
        cidrs = public_api_cidrs(list(region.api_access_cidrs))
        key, key_grants = customer_key(
            f"{name}-secrets", region.project, region.region, "gke-secrets",
            [service_agent(region.project_number, "gke")], child,
        ) if env.secrets_customer_key else (None, [])
        self.gke = gcp.container.Cluster(
            f"{name}-gke",
            gcp.container.ClusterArgs(
                name=name,
                project=region.project,
                # A region, not a zone: the control plane is replicated across the region's zones.
                location=region.region,
                node_locations=list(region.zones),
                min_master_version=self.kubernetes_version,
                release_channel=gcp.container.ClusterReleaseChannelArgs(
                    channel="STABLE" if env.stable_channel else "REGULAR"),
                network=self.network.network.id,
                subnetwork=self.network.subnetwork.id,
                networking_mode="VPC_NATIVE",
                ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                    cluster_secondary_range_name=PODS_RANGE,
                    services_secondary_range_name=SERVICES_RANGE,
                    stack_type="IPV4",
                ),
                private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                    enable_private_nodes=True, enable_private_endpoint=not cidrs,
                ),
                master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                    cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=c, display_name=f"api-access-{i}") for i, c in enumerate(cidrs)],
                    gcp_public_cidrs_access_enabled=False,
                ),
                # Dataplane V2 (eBPF) enforces NetworkPolicy itself: no Calico add-on.
                datapath_provider="ADVANCED_DATAPATH",
                workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                    workload_pool=self.workload_pool),
                enable_shielded_nodes=True,
                # The cluster autoscaler's profile stated, not left to GKE's default: the
                # simulator bills an unneeded node for the upstream 10 minutes, which the
                # BALANCED profile keeps and OPTIMIZE_UTILIZATION shortens. Node auto-provisioning
                # stays off (a GKE Standard cluster must say so): the plan's pools are the nodes.
                cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
                    enabled=False, autoscaling_profile=GKE_AUTOSCALING_PROFILE),
                # GKE insists on a first pool; it is removed once the cluster exists, and it
                # runs as the narrow node account rather than the project's default one.
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config=gcp.container.ClusterNodeConfigArgs(
                    service_account=self.account.email, oauth_scopes=OAUTH_SCOPES),
                deletion_protection=env.deletion_protection,
                # Application-layer secrets encryption with a customer key, as on EKS and AKS.
                database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                    state="ENCRYPTED", key_name=key.id) if key else None,
            ),
            # node_config describes only the removed default pool: a change there must not
            # replace the cluster.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[*self.grants, *key_grants], ignore_changes=["nodeConfig"])),
        )
        self.nodes_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            depends_on=self.grants))

    def build_system_pool(self) -> pulumi.Resource:
        system, region = self.spec.system_pool, self.spec
        return system_node_pool(
            f"{self.cluster_name}-system", self.gke, region.project, region.region, region.zones,
            self.system_machine_type, system.min_nodes, system.max_nodes,
            self.account.email, self.nodes_opts,
        )

    def build_gpu_pool(self, pool: PoolFacts, parent: GpuPool, system: pulumi.Resource) -> None:
        gpu_node_pool(
            f"{self.cluster_name}-{pool.name}-np", self.gke, self.spec.project, self.spec.region, pool,
            self.account.email,
            # After the system pool: GKE adds its GPU taint only while a CPU pool exists.
            pulumi.ResourceOptions.merge(self.nodes_opts, pulumi.ResourceOptions(
                parent=parent, depends_on=[system])),
        )

    def grant_deployer(self) -> list[pulumi.Resource]:
        return grant_deployer(self.cluster_name, self.spec.project, self.spec.region, self.gke,
                              self.stack, self.child)

    def access(self, system: pulumi.Resource) -> ControlPlane:
        endpoint = self.gke.endpoint.apply(lambda ip: f"https://{ip}")
        config = exec_kubeconfig(self.cluster_name, endpoint,
                                 self.gke.master_auth.cluster_ca_certificate, GKE_USER)
        return ControlPlane(endpoint=endpoint, native_id=self.gke.id, kubeconfig=config, ready=[system])


__all__ = ["GKE_USER", "GcpCluster", "gcp_provider"]
