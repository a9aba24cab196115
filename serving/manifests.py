"""Custom-resource bodies the toolkit applies, as plain dicts (validated against ../shared/crds/).

Pure functions of plain values: components apply them with `k8s.apiextensions.CustomResource`
and tests validate the very same dicts against the CRD schemas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from serving.charts import image
from serving.images import RegionalRegistry
from serving.nodeprep import AGENT_HOST_PATH

POOL_LABEL = "rtip.dev/pool"
MANAGED = {"app.kubernetes.io/managed-by": "rtip"}
# The model cache's share of a node's NVMe: the rest stays for the filesystem and for what the
# cloud also puts on the same disk (EKS moves containerd and kubelet onto the RAID0 array, GKE backs
# pod ephemeral storage with the local SSDs), so a full cache never evicts pods from the node.
CACHE_SHARE = 0.8
CACHE_STORAGE_CLASS = "rtip-local-models"

LOCAL_MODEL_NODE_GROUP = ("serving.kserve.io/v1alpha1", "LocalModelNodeGroup")
DEVICE_CONFIG = ("amd.com/v1alpha1", "DeviceConfig")


def cache_path(nvme_path: str) -> str:
    return nvme_path.rstrip("/") + "/models"


def cache_limit_gb(local_nvme_gb: int) -> int:
    return int(local_nvme_gb * CACHE_SHARE)


def local_model_node_group(pool: str, local_nvme_gb: int) -> dict[str, Any]:
    """KServe's model cache on one GPU pool's local NVMe: a PV pinned to the pool's nodes.

    The PV is a `hostPath` at the node agent's own host path (serving/nodeprep.py: KServe's agent
    and download Jobs meet only there), which the node-prep DaemonSet binds onto the NVMe;
    `DirectoryOrCreate` lets the kubelet create it should a pod land first. A `local` PV would
    need the path to exist and would not be created."""
    size = f"{cache_limit_gb(local_nvme_gb)}G"
    api_version, kind = LOCAL_MODEL_NODE_GROUP
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": pool, "labels": {**MANAGED, POOL_LABEL: pool}},
        "spec": {
            "storageLimit": size,
            "persistentVolumeSpec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": size},
                "volumeMode": "Filesystem",
                "storageClassName": CACHE_STORAGE_CLASS,
                # Cached weights are re-downloadable: a deleted volume costs a download, not data.
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": AGENT_HOST_PATH, "type": "DirectoryOrCreate"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": POOL_LABEL, "operator": "In", "values": [pool]}]}]}},
            },
            "persistentVolumeClaimSpec": {
                "accessModes": ["ReadWriteOnce"],
                "volumeMode": "Filesystem",
                "storageClassName": CACHE_STORAGE_CLASS,
                "resources": {"requests": {"storage": size}},
            },
        },
    }


@dataclass(frozen=True)
class AmdDeviceConfigInput:
    name: str
    namespace: str
    selector: dict[str, str]  # node labels of the MI300X nodes the config manages
    taint_keys: tuple[str, ...]  # taints on those nodes the operator's daemons must tolerate
    # The repository the in-cluster driver build pushes to and the nodes pull from, under the
    # region's own registry, with no tag or digest: the operator appends the tag itself,
    # `:<os>-${KERNEL_FULL_VERSION}-<driver version>` (ROCm/gpu-operator v1.5.1,
    # internal/kmmmodule/kmmmodule.go addNodeInfoSuffixToImageTag), so a tag here would make
    # `repo:tag:suffix`; the CRD says "don't include tag since it will be fully managed by operator".
    driver_image: str = ""
    # The Device Config Manager's ConfigMap, when a pool asks for a CPX/NPS4 partition.
    dcm_configmap: str | None = None
    driver_version: str = "6.4"
    # The region's registry every other image of the config is pulled from; None: the upstream
    # references (what the registry's caches fetch; unit tests of the body only).
    registry: RegionalRegistry | None = None


def _tolerations(keys: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in keys]


def amd_device_config(cfg: AmdDeviceConfigInput) -> dict[str, Any]:
    """The AMD GPU operator's DeviceConfig: driver, device plugin, labeller, metrics, partitioning.

    AKS leaves MI300X nodes without a driver (components/azure/nodes.py), so the operator builds
    and loads the out-of-tree amdgpu driver (`driver.version`) and keeps the built image in
    `driver.image` (DeviceConfig CRD v1.5.1: without it the build has nowhere to push).
    """
    if not cfg.driver_image:
        raise ValueError(f"DeviceConfig {cfg.name}: the driver is enabled but no driver image "
                         f"repository is given")
    if "@" in cfg.driver_image or ":" in cfg.driver_image.rsplit("/", 1)[-1]:
        raise ValueError(f"DeviceConfig {cfg.name}: driver image {cfg.driver_image!r} names a tag or "
                         f"digest; the operator appends its own tag to the repository")
    tolerations = _tolerations(cfg.taint_keys)
    api_version, kind = DEVICE_CONFIG

    def image_of(key: str) -> str:
        return cfg.registry.ref(key, f"DeviceConfig {cfg.name}") if cfg.registry else image(key)

    spec: dict[str, Any] = {
        "selector": dict(cfg.selector),
        "driver": {"enable": True, "version": cfg.driver_version, "image": cfg.driver_image,
                   "tolerations": tolerations},
        "commonConfig": {"utilsContainer": {"image": image_of("amd-utils"),
                                            "imagePullPolicy": "IfNotPresent"}},
        "devicePlugin": {
            "enableDevicePlugin": True,
            "devicePluginImage": image_of("amd-device-plugin"),
            "devicePluginImagePullPolicy": "IfNotPresent",
            "devicePluginTolerations": tolerations,
            # `mixed` names each partition in the resource (amd.com/cpx_nps4) so a pod sized for
            # a CPX slice never lands on a whole GPU; with no partitions it is plain amd.com/gpu.
            "devicePluginArguments": {
                "resource_naming_strategy": "mixed" if cfg.dcm_configmap else "single"},
            "enableNodeLabeller": True,
            "nodeLabellerImage": image_of("amd-node-labeller"),
            "nodeLabellerImagePullPolicy": "IfNotPresent",
            "nodeLabellerTolerations": tolerations,
        },
        "metricsExporter": {
            "enable": True,
            "image": image_of("amd-metrics-exporter"),
            "imagePullPolicy": "IfNotPresent",
            "serviceType": "ClusterIP",
            "port": 5000,
            "tolerations": tolerations,
            "resource": {"requests": {"cpu": "100m", "memory": "256Mi"},
                         "limits": {"cpu": "1", "memory": "1Gi"}},
            "prometheus": {"serviceMonitor": {"enable": True, "interval": "30s"}},
        },
    }
    if cfg.dcm_configmap:
        spec["configManager"] = {
            "enable": True,
            "image": image_of("amd-config-manager"),
            "imagePullPolicy": "IfNotPresent",
            "config": {"name": cfg.dcm_configmap},
            "configManagerTolerations": tolerations,
        }
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": cfg.name, "namespace": cfg.namespace, "labels": dict(MANAGED)},
        "spec": spec,
    }


__all__ = ["CACHE_SHARE", "CACHE_STORAGE_CLASS", "DEVICE_CONFIG", "LOCAL_MODEL_NODE_GROUP",
           "POOL_LABEL", "AmdDeviceConfigInput", "amd_device_config", "cache_limit_gb", "cache_path",
           "local_model_node_group"]
