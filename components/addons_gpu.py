"""GPU enablement and the NVMe model cache, from the pools on one cluster.

NVIDIA: the GPU Operator where the cloud leaves something to do (EKS, AKS), told through two
ConfigMaps what the pools' node labels select: the MIG manager's layouts (`nvidia.com/mig.config`)
and the device plugin's time-slicing (`nvidia.com/device-plugin.config`). AMD: the ROCm GPU Operator
and one DeviceConfig for the MI300X nodes; the operator's images, and the driver image it builds,
are all in the region's registry. One
node-feature-discovery per cluster: with both vendors, NVIDIA's serves the AMD nodes too. The model
cache's notes come from here; its objects are components/addons_cache.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.addons_helm import helm_release, namespace, resources
from components.contract import ClusterFacts, PoolFacts
from components.gpu_pools import LABEL_PREFIX
from serving import gpu_config as gc
from serving import manifests
from serving.charts import IMAGES, ChartKey
from serving.hardware import Cloud, Vendor
from serving.images import RegionalRegistry

NVIDIA_NAMESPACE = "gpu-operator"
AMD_NAMESPACE = "kube-amd-gpu"
MIG_CONFIGMAP = "rtip-mig-parted-config"
MIG_CONFIG_FILE = "config.yaml"
DEVICE_PLUGIN_CONFIGMAP = "rtip-device-plugin-config"
DCM_CONFIGMAP = "rtip-dcm-config"
AMD_DEVICE_CONFIG = "rtip-mi300x"


@dataclass(frozen=True)
class NvidiaOnCloud:
    """What the NVIDIA GPU Operator must do itself on one cloud's GPU nodes."""

    operator: bool  # install the operator at all
    driver: bool
    toolkit: bool
    mig_manager: bool  # cut MIG layouts from the node label
    why: str


NVIDIA_ON: dict[Cloud, NvidiaOnCloud] = {
    # The AL2023 NVIDIA AMI (components/aws_nodes.py) ships the driver and container toolkit;
    # nothing on EKS partitions MIG, so the operator's MIG manager does it from the node label.
    Cloud.AWS: NvidiaOnCloud(True, False, False, True,
                             "EKS AL2023 NVIDIA AMI brings driver and toolkit; MIG manager cuts layouts"),
    # AKS installs the driver and runtime (`gpu_profile.driver=Install`) and cuts MIG itself from
    # the pool's immutable `gpu_instance_profile`: a MIG manager acting on the same node label would
    # try to repartition GPUs AKS owns, so it stays off and only the device plugin runs.
    Cloud.AZURE: NvidiaOnCloud(True, False, False, False,
                               "AKS installs the driver and partitions MIG from the agent pool"),
    # GKE installs the driver and its own device plugin, and partitions and time-shares from the
    # node pool's accelerator config: the operator would fight it.
    Cloud.GCP: NvidiaOnCloud(False, False, False, False,
                             "GKE brings driver, device plugin, MIG partitions and time-sharing"),
}

_DAEMON = resources("50m", "128Mi", "500m", "512Mi")


def _exists(taint_keys: list[str]) -> list[dict[str, str]]:
    return [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in taint_keys]


def nvidia_values(on: NvidiaOnCloud, cfg: gc.NvidiaConfig, taint_keys: list[str],
                  nfd_taint_keys: list[str] | None = None) -> dict[str, Any]:
    """`nfd_taint_keys`: the taints NFD's worker tolerates, when its NFD is the cluster's only one
    and also labels other vendors' nodes (default: `taint_keys`)."""
    tolerations = _exists(taint_keys)
    mig_manager = on.mig_manager and bool(cfg.mig_layouts)
    return {
        "operator": {"resources": resources("100m", "256Mi", "1", "1Gi")},
        "driver": {"enabled": on.driver},
        "toolkit": {"enabled": on.toolkit},
        # With no MIG pool the strategy is moot; `single` is the chart's own default.
        "mig": {"strategy": str(cfg.mig_strategy or gc.MigStrategy.SINGLE)},
        "migManager": {"enabled": mig_manager, "resources": _DAEMON,
                       **({"config": {"name": MIG_CONFIGMAP, "default": gc.MIG_DISABLED}}
                          if mig_manager else {})},
        "devicePlugin": {"resources": _DAEMON, "config": {
            "name": DEVICE_PLUGIN_CONFIGMAP, "default": gc.DEVICE_PLUGIN_DEFAULT}},
        "dcgmExporter": {"enabled": True, "resources": _DAEMON,
                         "serviceMonitor": {"enabled": True, "interval": "15s"}},
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": _exists(
            taint_keys if nfd_taint_keys is None else nfd_taint_keys)}},
    }


def amd_values(own_nfd: bool, taint_keys: list[str],
               controller: tuple[pulumi.Input[str], str] | None = None) -> dict[str, Any]:
    """`own_nfd`: the AMD chart installs node-feature-discovery (dependency with condition
    `node-feature-discovery.enabled`); off where NVIDIA's operator already runs one (FACTS.md
    section 9): two NFD masters and workers would fight over the same node labels.
    `controller`: the controller image's repository and tag in the region's registry (None: the
    upstream ones, for unit tests of the values)."""
    operator = IMAGES["amd-gpu-operator"]
    repository, tag = controller or (operator.repository, operator.tag)
    nfd: dict[str, Any] = {"enabled": own_nfd}
    if own_nfd:
        nfd["worker"] = {"tolerations": _exists(taint_keys)}
    return {
        # The toolkit applies its own DeviceConfig (serving/manifests.py); the chart's default one
        # would select every AMD node with settings nobody reviewed.
        "crds": {"defaultCR": {"install": False}},
        "node-feature-discovery": nfd,
        "controllerManager": {"manager": {
            "image": {"repository": repository, "tag": tag},
            "imagePullPolicy": "IfNotPresent",
            "resources": resources("100m", "256Mi", "1", "1Gi"),
        }},
    }


def model_cache(cluster: ClusterFacts) -> tuple[dict[str, str | None], list[str]]:
    """Each GPU pool's cache directory (None: no local NVMe) and the notes the plan shows."""
    cache: dict[str, str | None] = {}
    notes: list[str] = []
    for pool in cluster.pools:
        if pool.nvme_path is None:
            cache[pool.name] = None
            notes.append(f"pool {pool.name} has no local NVMe: its models stream weights from "
                         f"the bucket (vLLM --load-format runai_streamer), no local model cache")
        else:
            cache[pool.name] = manifests.cache_path(pool.nvme_path)
    return cache, notes


def gpu_notes(cluster: ClusterFacts) -> list[str]:
    """What the plan should say about GPU enablement the toolkit leaves to the cloud."""
    if cluster.cloud is Cloud.GCP and any(p.vendor is Vendor.NVIDIA for p in cluster.pools):
        # GKE's driver paths and its own device plugin make an in-cluster DCGM exporter a fork
        # of GKE's setup; GKE ships DCGM metrics itself, switched on in the cluster's monitoring.
        return ["GKE: no NVIDIA operator and no in-cluster DCGM exporter; GPU metrics come from "
                "GKE's managed DCGM metrics (cluster monitoring config)"]
    return []


# The repository under the region's registry the AMD operator's in-cluster driver build pushes
# the amdgpu kernel-module image to and the nodes load it from; the operator sets the tag
# (serving/manifests.py AmdDeviceConfigInput.driver_image).
AMD_DRIVER_REPOSITORY = "amdgpu-driver"
CONTROLLER_IMAGE = "amd-gpu-operator"
# A registry root that stands in for the region's while the bodies are built plainly, so that a
# bad pin or config fails before anything is registered.
PLAIN_ROOT = "registry.invalid/rtip"


def amd_driver_image(image_registry: str) -> str:
    return f"{image_registry.rstrip('/')}/{AMD_DRIVER_REPOSITORY}"


def _taint_keys(pools: list[PoolFacts]) -> list[str]:
    return sorted({t.key for p in pools for t in p.taints})


class GpuAddons(pulumi.ComponentResource):
    """GPU operators, their configs and the model cache; `platform` are ClusterAddons' releases."""

    releases: dict[ChartKey, k8s.helm.v3.Release]

    def __init__(self, name: str, cluster: ClusterFacts,
                 platform: dict[ChartKey, k8s.helm.v3.Release],
                 opts: pulumi.ResourceOptions | None = None, *,
                 image_registry: pulumi.Input[str] | None = None,
                 digests: Mapping[str, str] | None = None) -> None:
        """`image_registry`: the region's registry root (RegionStore.image_registry), which every
        AMD operator image is pulled from, by the digest `digests` pins for it if any."""
        nvidia = [p for p in cluster.pools if p.vendor is Vendor.NVIDIA]
        amd = [p for p in cluster.pools if p.vendor is Vendor.AMD]
        cfg = gc.nvidia_config(nvidia)
        on = NVIDIA_ON[cluster.cloud]
        super().__init__("rtip:k8s:GpuAddons", name, {
            "cluster": cluster.name,
            "nvidiaOperator": bool(nvidia) and on.operator,
            "nvidiaWhy": on.why,
            "migStrategy": str(cfg.mig_strategy) if cfg.mig_strategy and on.operator else None,
            "amdOperator": bool(amd),
        }, opts)
        self._provider = cluster.provider
        self._cloud = cluster.cloud
        self._digests = dict(digests or {})
        self.releases = {}
        monitoring = platform[ChartKey.KUBE_PROMETHEUS_STACK]
        nvidia_nfd = bool(nvidia) and on.operator
        if nvidia_nfd:
            self._nvidia(name, on, cfg, nvidia, monitoring, _taint_keys(list(cluster.pools)))
        if amd:
            if image_registry is None:
                raise ValueError(f"cluster {cluster.name}: AMD pools {[p.name for p in amd]} need the "
                                 f"region's registry for the driver image the operator builds")
            # With NVIDIA's NFD as the only one, the AMD chart's NodeFeatureRule needs its CRD.
            after = [platform[ChartKey.CERT_MANAGER], monitoring,
                     *([self.releases[ChartKey.NVIDIA_GPU_OPERATOR]] if nvidia_nfd else [])]
            self._amd(name, amd, after, not nvidia_nfd, image_registry)
        self.register_outputs({})

    def _opts(self, after: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=after or [])

    def _configmap(self, name: str, ns: k8s.core.v1.Namespace, cm: str, namespace_name: str,
                   data: dict[str, str]) -> k8s.core.v1.ConfigMap:
        return k8s.core.v1.ConfigMap(name, metadata=k8s.meta.v1.ObjectMetaArgs(
            name=cm, namespace=namespace_name, labels=dict(manifests.MANAGED)),
            data=data, opts=self._opts([ns]))

    def _nvidia(self, name: str, on: NvidiaOnCloud, cfg: gc.NvidiaConfig, pools: list[PoolFacts],
                monitoring: pulumi.Resource, nfd_taint_keys: list[str]) -> None:
        # The operator's daemons touch the host (driver state, device nodes): privileged namespace.
        ns = namespace(f"{name}-ns-nvidia", NVIDIA_NAMESPACE, "privileged", self, self._provider)
        after: list[pulumi.Resource] = [ns, monitoring]  # DCGM's ServiceMonitor needs the CRD
        plugin = gc.device_plugin_configs(cfg.time_slicing, cfg.mig_strategy)
        after.append(self._configmap(
            f"{name}-device-plugin-config", ns, DEVICE_PLUGIN_CONFIGMAP, NVIDIA_NAMESPACE,
            {key: yaml.safe_dump(doc, sort_keys=False) for key, doc in plugin.items()}))
        if on.mig_manager and cfg.mig_layouts:
            after.append(self._configmap(
                f"{name}-mig-config", ns, MIG_CONFIGMAP, NVIDIA_NAMESPACE,
                {MIG_CONFIG_FILE: yaml.safe_dump(gc.mig_parted_config(cfg.mig_layouts),
                                                 sort_keys=False)}))
        self.releases[ChartKey.NVIDIA_GPU_OPERATOR] = helm_release(
            f"{name}-nvidia-gpu-operator", ChartKey.NVIDIA_GPU_OPERATOR, NVIDIA_NAMESPACE,
            nvidia_values(on, cfg, _taint_keys(pools), nfd_taint_keys), self, self._provider, after)

    def _amd(self, name: str, pools: list[PoolFacts], platform: list[pulumi.Resource], own_nfd: bool,
             image_registry: pulumi.Input[str]) -> None:
        ns = namespace(f"{name}-ns-amd", AMD_NAMESPACE, "privileged", self, self._provider)
        root = pulumi.Output.from_input(image_registry)

        def registry(at: str) -> RegionalRegistry:
            return RegionalRegistry(at, self._cloud, self._digests)

        # The chart takes the controller as repository and tag: a pinned digest fails here, plainly,
        # before anything is registered (serving/images.py TAG_ONLY).
        what = f"release {ChartKey.AMD_GPU_OPERATOR} controllerManager.manager.image"
        _, tag = registry(PLAIN_ROOT).repository_and_tag(CONTROLLER_IMAGE, what)
        repository = root.apply(lambda r: registry(r).repository_and_tag(CONTROLLER_IMAGE, what)[0])
        # The operator's webhooks take certificates from cert-manager.
        release = helm_release(f"{name}-amd-gpu-operator", ChartKey.AMD_GPU_OPERATOR, AMD_NAMESPACE,
                               amd_values(own_nfd, _taint_keys(pools), (repository, tag)), self,
                               self._provider, [ns, *platform])
        self.releases[ChartKey.AMD_GPU_OPERATOR] = release
        after: list[pulumi.Resource] = [release]
        profiles = gc.amd_partitions(pools)
        if profiles:
            after.append(self._configmap(f"{name}-dcm-config", ns, DCM_CONFIGMAP, AMD_NAMESPACE,
                                         {"config.json": gc.dcm_config_json(profiles)}))
        gpus = sorted({p.labels[f"{LABEL_PREFIX}/gpu"] for p in pools})
        if len(gpus) != 1:
            raise ValueError(f"cluster AMD pools {[p.name for p in pools]} mix GPU models {gpus}: "
                             f"one DeviceConfig selects one model")

        def body(at: str) -> dict[str, Any]:
            return manifests.amd_device_config(manifests.AmdDeviceConfigInput(
                name=AMD_DEVICE_CONFIG, namespace=AMD_NAMESPACE,
                selector={f"{LABEL_PREFIX}/gpu": gpus[0]}, taint_keys=tuple(_taint_keys(pools)),
                driver_image=amd_driver_image(at), dcm_configmap=DCM_CONFIGMAP if profiles else None,
                registry=registry(at)))

        # Built once plainly so a bad config fails before anything is registered.
        plain = body(PLAIN_ROOT)
        _custom_resource(f"{name}-device-config", {**plain, "spec": root.apply(lambda r: body(r)["spec"])},
                         self._opts(after))


def _custom_resource(name: str, body: dict[str, Any],
                     opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=body["apiVersion"], kind=body["kind"], metadata=body["metadata"],
        spec=body["spec"], opts=opts)


__all__ = ["AMD_DEVICE_CONFIG", "AMD_DRIVER_REPOSITORY", "AMD_NAMESPACE", "DCM_CONFIGMAP",
           "DEVICE_PLUGIN_CONFIGMAP", "MIG_CONFIGMAP", "MIG_CONFIG_FILE", "NVIDIA_NAMESPACE", "NVIDIA_ON",
           "GpuAddons", "NvidiaOnCloud", "amd_driver_image", "amd_values", "gpu_notes", "model_cache",
           "nvidia_values"]
