"""GKE nodes: their service account, the system node pool and one node pool per GPU pool."""

from __future__ import annotations

import math

import pulumi
import pulumi_gcp as gcp

from components.contract import PoolFacts
from serving.sharing import Mig, TimeSlice
from stacks.naming import gcp_account_id

# Only what a node itself does: ship logs and metrics, pull images. Workloads get their own
# identities through Workload Identity, never the node's.
NODE_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter",
              "roles/artifactregistry.reader")
# With a narrow service account the scopes stop mattering: IAM decides, so grant the one scope
# IAM can narrow.
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
IMAGE_TYPE = "COS_CONTAINERD"
# Room for the ~12 GB compressed vLLM image unpacked, plus logs; weights live on the local SSDs.
GPU_BOOT_DISK_GB = 200
SYSTEM_BOOT_DISK_GB = 100
LOCAL_SSD_GB = 375  # one GCP local SSD (FACTS.md section 4)
SYSTEM_POOL = "system"

TAINT_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE",
                "PreferNoSchedule": "PREFER_NO_SCHEDULE"}

def node_service_account(
    name: str, project: str, opts: pulumi.ResourceOptions,
) -> tuple[gcp.serviceaccount.Account, list[gcp.projects.IAMMember]]:
    account = gcp.serviceaccount.Account(
        f"{name}-nodes",
        gcp.serviceaccount.AccountArgs(
            project=project, account_id=gcp_account_id(name, "nodes"),
            display_name=f"GKE nodes of {name}",
        ),
        opts=opts,
    )
    member = account.email.apply(lambda email: f"serviceAccount:{email}")
    grants = [
        gcp.projects.IAMMember(
            f"{name}-nodes-{role.split('/')[1].replace('.', '-').lower()}",
            gcp.projects.IAMMemberArgs(project=project, role=role, member=member),
            opts=opts,
        )
        for role in NODE_ROLES
    ]
    return account, grants


def _shielded() -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    # COS and GKE's own GPU drivers are signed, so secure boot costs nothing here.
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=True, enable_integrity_monitoring=True,
    )


def _initial_per_zone(min_nodes: int, zones: int) -> int:
    """Nodes per zone at creation, so the pool starts at or above its total minimum."""
    return math.ceil(min_nodes / zones) if min_nodes else 0


def mig_partition_size(pool: PoolFacts) -> str | None:
    """The one MIG profile GKE cuts every GPU of the pool into; None for non-MIG pools."""
    if not isinstance(pool.sharing, Mig):
        return None
    profile = pool.sharing.single_profile
    if profile is None:  # the planner and stacks.checks give GKE single-profile layouts only
        raise ValueError(f"GKE pool {pool.name} needs a single-profile MIG layout, got "
                         f"{pool.sharing.profiles}")
    return profile


def _accelerator(pool: PoolFacts) -> gcp.container.NodePoolNodeConfigGuestAcceleratorArgs:
    sharing = None
    if isinstance(pool.sharing, TimeSlice):
        sharing = gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
            gpu_sharing_strategy="TIME_SHARING", max_shared_clients_per_gpu=pool.sharing.replicas,
        )
    return gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
        type=pool.shape.accelerator,
        count=pool.gpus_per_node,
        gpu_partition_size=mig_partition_size(pool),
        gpu_sharing_config=sharing,
        # GKE installs the driver and its device plugin itself (FACTS.md section 4).
        gpu_driver_installation_config=(
            gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST")),
    )


def gpu_node_pool(
    name: str,
    cluster: gcp.container.Cluster,
    project: str,
    region: str,
    pool: PoolFacts,
    service_account: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> gcp.container.NodePool:
    spot = pool.spot
    local_ssds = pool.shape.local_nvme_gb // LOCAL_SSD_GB
    return gcp.container.NodePool(
        name,
        gcp.container.NodePoolArgs(
            # Pool names are identities (renaming one replaces it), so the GKE name is the spec's.
            name=pool.name,
            project=project,
            location=region,
            cluster=cluster.name,
            node_locations=list(pool.zones),
            initial_node_count=_initial_per_zone(pool.min_nodes, len(pool.zones)),
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_nodes,
                total_max_node_count=pool.max_nodes,
                # ANY follows spot capacity wherever a zone has it; BALANCED keeps on-demand
                # nodes even across zones so a zone loss takes only its share.
                location_policy="ANY" if spot else "BALANCED",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            # No surge: a surge node is one more GPU node of quota that is rarely there.
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=0, max_unavailable=1,
            ),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=pool.machine_type,
                image_type=IMAGE_TYPE,
                disk_type="pd-balanced",
                disk_size_gb=GPU_BOOT_DISK_GB,
                guest_accelerators=[_accelerator(pool)],
                ephemeral_storage_local_ssd_config=(
                    gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                        local_ssd_count=local_ssds) if local_ssds else None),
                # A3 machines need gVNIC; on the others it is the faster NIC anyway.
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                labels=pool.labels,
                resource_labels={"rtip-pool": pool.name},
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(
                    key=t.key, value=t.value, effect=TAINT_EFFECT[t.effect]) for t in pool.taints],
                spot=spot,
                service_account=service_account,
                oauth_scopes=OAUTH_SCOPES,
                # Pods reach the metadata server only through GKE's Workload Identity proxy.
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"),
                shielded_instance_config=_shielded(),
            ),
        ),
        # GKE creates the pool with the initial count; the autoscaler owns the live count, and a
        # changed minimum must not replace the pool.
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])),
    )


def system_node_pool(
    name: str,
    cluster: gcp.container.Cluster,
    project: str,
    region: str,
    zones: list[str],
    machine_type: str,
    min_nodes: int,
    max_nodes: int,
    service_account: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> gcp.container.NodePool:
    return gcp.container.NodePool(
        name,
        gcp.container.NodePoolArgs(
            name=SYSTEM_POOL,
            project=project,
            location=region,
            cluster=cluster.name,
            node_locations=list(zones),
            initial_node_count=_initial_per_zone(min_nodes, len(zones)),
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=min_nodes, total_max_node_count=max_nodes,
                location_policy="BALANCED",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=1, max_unavailable=0,
            ),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=machine_type,
                image_type=IMAGE_TYPE,
                disk_type="pd-balanced",
                disk_size_gb=SYSTEM_BOOT_DISK_GB,
                labels={"rtip.dev/pool": SYSTEM_POOL},
                resource_labels={"rtip-pool": SYSTEM_POOL},
                service_account=service_account,
                oauth_scopes=OAUTH_SCOPES,
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"),
                shielded_instance_config=_shielded(),
            ),
        ),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])),
    )


__all__ = ["NODE_ROLES", "SYSTEM_POOL", "TAINT_EFFECT", "gpu_node_pool",
           "mig_partition_size", "node_service_account", "system_node_pool"]
