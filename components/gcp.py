"""One GCP region: VPC, regional private GKE cluster, node pools, Kubernetes provider."""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.contract import ClusterFacts, cluster_props, public_api_cidrs
from components.gcp_network import PODS_RANGE, SERVICES_RANGE, GcpNetwork
from components.gcp_nodes import (
    OAUTH_SCOPES,
    gpu_node_pool,
    node_service_account,
    system_node_pool,
)
from components.gpu_pools import GpuPool, pool_facts
from serving.hardware import Cloud
from stacks.pools import shape_of
from stacks.schema import GcpRegion

SYSTEM_MACHINE_TYPE = "n2-standard-4"
# Surge upgrades of the system pool add one node at a time.
_SURGE_NODES = 1


def kubeconfig(cluster_name: str, endpoint: pulumi.Input[str],
               ca_data: pulumi.Input[str]) -> pulumi.Output[str]:
    """A kubeconfig that authenticates with `gke-gcloud-auth-plugin`: it holds no credential itself."""
    def build(args: list[str]) -> str:
        server, ca = args
        return json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {
                "server": f"https://{server}", "certificate-authority-data": ca}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name,
                                                            "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [{"name": cluster_name, "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "gke-gcloud-auth-plugin",
                "installHint": "Install gke-gcloud-auth-plugin: "
                               "gcloud components install gke-gcloud-auth-plugin",
                "provideClusterInfo": True,
            }}}],
        })
    return pulumi.Output.all(endpoint, ca_data).apply(build)


def gcp_provider(name: str, region: GcpRegion, labels: dict[str, str],
                 opts: pulumi.ResourceOptions) -> gcp.Provider:
    """The region's provider; every GCP resource of the region goes through it."""
    return gcp.Provider(name, gcp.ProviderArgs(
        project=region.project, region=region.region, default_labels=labels), opts=opts)


def _secrets_key(name: str, region: GcpRegion, opts: pulumi.ResourceOptions,
                 ) -> tuple[gcp.kms.CryptoKey, gcp.kms.CryptoKeyIAMMember]:
    """A regional key for Kubernetes secrets, usable by the project's GKE service agent only."""
    ring = gcp.kms.KeyRing(f"{name}-secrets", gcp.kms.KeyRingArgs(
        name=f"{name}-secrets", location=region.region, project=region.project), opts=opts)
    key = gcp.kms.CryptoKey(f"{name}-secrets", gcp.kms.CryptoKeyArgs(
        name="gke-secrets", key_ring=ring.id, rotation_period="7776000s"), opts=opts)
    agent = f"service-{region.project_number}@container-engine-robot.iam.gserviceaccount.com"
    grant = gcp.kms.CryptoKeyIAMMember(f"{name}-secrets", gcp.kms.CryptoKeyIAMMemberArgs(
        crypto_key_id=key.id, role="roles/cloudkms.cryptoKeyEncrypterDecrypter",
        member=f"serviceAccount:{agent}"), opts=opts)
    return key, grant


class GcpCluster(pulumi.ComponentResource):
    facts: ClusterFacts

    def __init__(
        self,
        name: str,
        region: GcpRegion,
        kubernetes_version: str,
        prod: bool,
        provider: gcp.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        pools = tuple(pool_facts(Cloud.GCP, p, region.zones) for p in region.gpu_pools)
        super().__init__("rtip:gcp:Cluster", name, cluster_props(
            Cloud.GCP, region.region, region.zones, kubernetes_version), opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        project = region.project

        network = GcpNetwork(f"{name}-net", project, region.region, region.network.cidr,
                             provider=provider, opts=pulumi.ResourceOptions(parent=self))
        account, grants = node_service_account(name, project, child)

        cidrs = public_api_cidrs(region.api_access_cidrs)
        workload_pool = f"{project}.svc.id.goog"
        secrets_key = _secrets_key(name, region, child) if prod else None
        cluster = gcp.container.Cluster(
            f"{name}-gke",
            gcp.container.ClusterArgs(
                name=name,
                project=project,
                # A region, not a zone: the control plane is replicated across the region's zones.
                location=region.region,
                node_locations=list(region.zones),
                min_master_version=kubernetes_version,
                release_channel=gcp.container.ClusterReleaseChannelArgs(
                    channel="STABLE" if prod else "REGULAR"),
                network=network.network.id,
                subnetwork=network.subnetwork.id,
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
                    workload_pool=workload_pool),
                enable_shielded_nodes=True,
                # GKE insists on a first pool; it is removed once the cluster exists, and it
                # runs as the narrow node account rather than the project's default one.
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config=gcp.container.ClusterNodeConfigArgs(
                    service_account=account.email, oauth_scopes=OAUTH_SCOPES),
                deletion_protection=prod,
                # Application-layer secrets encryption with a customer key, as on EKS.
                database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                    state="ENCRYPTED", key_name=secrets_key[0].id) if secrets_key else None,
            ),
            # node_config describes only the removed default pool: a change there must not
            # replace the cluster.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[*grants, *(secrets_key[1:] if secrets_key else [])],
                ignore_changes=["nodeConfig"])),
        )
        nodes_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=grants))
        system = system_node_pool(
            f"{name}-system", cluster, project, region.region, region.zones,
            region.system_pool.machine_type or SYSTEM_MACHINE_TYPE,
            region.system_pool.min_nodes, region.system_pool.max_nodes, account.email, nodes_opts,
        )
        for spec_pool, pool in zip(region.gpu_pools, pools, strict=True):
            group = GpuPool(f"{name}-{pool.name}", pool, opts=pulumi.ResourceOptions(parent=self))
            gpu_node_pool(
                f"{name}-{pool.name}-np", cluster, project, region.region, pool, spec_pool,
                shape_of(Cloud.GCP, spec_pool), account.email,
                # After the system pool: GKE adds its GPU taint only while a CPU pool exists.
                pulumi.ResourceOptions.merge(nodes_opts, pulumi.ResourceOptions(
                    parent=group, depends_on=[system])),
            )

        config = kubeconfig(name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate)
        k8s_provider = k8s.Provider(
            f"{name}-k8s",
            k8s.ProviderArgs(kubeconfig=pulumi.Output.secret(config), enable_server_side_apply=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system]),
        )
        endpoint = cluster.endpoint.apply(lambda ip: f"https://{ip}")
        self.facts = ClusterFacts(
            name=name, cloud=Cloud.GCP, region=region.region, zones=tuple(region.zones),
            kubernetes_version=kubernetes_version, provider=k8s_provider, pools=pools,
            endpoint=endpoint, native_id=cluster.id, workload_pool=workload_pool,
        )
        self.register_outputs({"endpoint": endpoint, "name": cluster.name})


__all__ = ["GcpCluster", "gcp_provider", "kubeconfig"]
