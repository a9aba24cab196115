"""KServe's local model cache on the NVMe GPU pools of one cluster.

KServe v0.20.0 ships the cache apart from `kserve-resources` (FACTS.md section 9): the CRDs
(LocalModelCache, LocalModelNodeGroup, ...) in chart `kserve-localmodel-crd`, the controller and
the node agent DaemonSet in `kserve-localmodel-resources`; `kserve-resources`' value
`localmodel.enabled` only flips the flag in its ConfigMap, and with the flag on but no CRD every
InferenceService is rejected at admission (its defaulting lists LocalModelCaches). So on a cluster
with NVMe pools, ClusterAddons installs the CRD chart before `kserve-resources` and turns the flag
on there; this module adds the rest: the agent on the NVMe nodes (label and tolerations), the
node preparation that puts the NVMe under the agent's host path, and a LocalModelNodeGroup per pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons_helm import helm_release, namespace
from components.contract import ClusterFacts, PoolFacts
from components.gpu_pools import ASSEMBLE_NVME, LOCALMODEL_NODE_LABEL
from serving import manifests
from serving.charts import ChartKey, image
from serving.images import CACHE_IMAGES, RegionalRegistry
from serving.nodeprep import NODE_PREP_NAME, node_prep_daemonset

# kserve-resources value `kserve.localmodel.jobNamespace` (chart default); KServe creates no
# namespace for it.
JOBS_NAMESPACE = "kserve-localmodel-jobs"
# The download Jobs' service account, federated with the region's cloud identity
# (components/identity.py) and named by every LocalModelCache (serving/deployments.py).
DOWNLOAD_SERVICE_ACCOUNT = "model-download"
# The node-prep DaemonSet mounts and formats host disks: a privileged namespace of its own.
NODE_PREP_NAMESPACE = "rtip-node-prep"
(NODE_PREP_IMAGE,) = CACHE_IMAGES
# Stands in for the region's registry root while the body is built plainly (a bad pin fails then).
PLAIN_ROOT = "registry.invalid/rtip"


def cached_pools(cluster: ClusterFacts) -> list[PoolFacts]:
    return [p for p in cluster.pools if p.nvme_path is not None]


def has_cache(cluster: ClusterFacts) -> bool:
    return bool(cached_pools(cluster))


def tolerations(pools: list[PoolFacts]) -> list[dict[str, str]]:
    """Exactly the pools' taints, so node daemons run on those nodes and no others are implied."""
    seen = sorted({(t.key, t.value, t.effect) for p in pools for t in p.taints})
    return [{"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in seen]


def localmodel_values(pools: list[PoolFacts]) -> dict[str, Any]:
    """kserve-localmodel-resources values: the node agent DaemonSet takes its nodeSelector,
    tolerations and affinity from `kserve.localmodelnode.controller.*` (files/daemonset-patch.yaml
    at v0.20.0; the `kserve.localmodel.agent.*` ones are read by no template)."""
    key, value = LOCALMODEL_NODE_LABEL
    return {"kserve": {"localmodelnode": {"controller": {
        "nodeSelector": {key: value},
        "tolerations": tolerations(pools),
    }}}}


class ModelCacheAddons(pulumi.ComponentResource):
    """Controller and agent release, node preparation, storage class and LocalModelNodeGroups."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, cluster: ClusterFacts, crds: pulumi.Resource,
                 after: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None, *,
                 image_registry: pulumi.Input[str] | None = None,
                 digests: Mapping[str, str] | None = None) -> None:
        """`image_registry`: the region's registry root, which node preparation pulls its image
        from (by the digest `digests` pins for it if any); None: the upstream reference (unit
        tests of the bodies only)."""
        pools = cached_pools(cluster)
        super().__init__("rtip:k8s:ModelCacheAddons", name, {
            "cluster": cluster.name, "pools": [p.name for p in pools],
            "jobNamespace": JOBS_NAMESPACE, "downloadServiceAccount": DOWNLOAD_SERVICE_ACCOUNT}, opts)
        provider = cluster.provider
        # `after`: the kserve namespace, kserve-crd (ClusterStorageContainer, which the agent
        # lists), kserve-resources (its ConfigMap configures the agent) and cert-manager (the
        # chart's webhook Certificate).
        self.release = helm_release(
            f"{name}-kserve-localmodel", ChartKey.KSERVE_LOCALMODEL, "kserve",
            localmodel_values(pools), self, provider, [crds, *after])
        prep_ns = namespace(f"{name}-ns-node-prep", NODE_PREP_NAMESPACE, "privileged", self, provider)
        key, value = LOCALMODEL_NODE_LABEL
        paths = sorted({p.nvme_path for p in pools if p.nvme_path})
        if len(paths) != 1:
            raise ValueError(f"cluster {cluster.name}: NVMe pools mount their disks at {paths}; "
                             f"one node-prep DaemonSet serves one path")
        pins = dict(digests or {})
        what = f"DaemonSet {NODE_PREP_NAMESPACE}/{NODE_PREP_NAME}"

        def prep_body(img: str) -> dict[str, Any]:
            return node_prep_daemonset(NODE_PREP_NAMESPACE, paths[0], cluster.cloud in ASSEMBLE_NVME,
                                       img, {key: value}, tolerations(pools))

        # The upstream reference first: its pin (and any digest) is checked before registering.
        body = prep_body(RegionalRegistry(PLAIN_ROOT, cluster.cloud, pins).ref(NODE_PREP_IMAGE, what)
                         if image_registry is not None else image(NODE_PREP_IMAGE))
        spec: Any = body["spec"]
        if image_registry is not None:
            spec = pulumi.Output.from_input(image_registry).apply(lambda root: prep_body(
                RegionalRegistry(root, cluster.cloud, pins).ref(NODE_PREP_IMAGE, what))["spec"])
        prep = k8s.apps.v1.DaemonSet(f"{name}-node-prep", metadata=body["metadata"], spec=spec,
                                     opts=self._opts(provider, [prep_ns]))
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-local-models", metadata=k8s.meta.v1.ObjectMetaArgs(
                name=manifests.CACHE_STORAGE_CLASS, labels=dict(manifests.MANAGED)),
            # Host-path volumes have no provisioner; binding waits for the pod so the PV's node wins.
            provisioner="kubernetes.io/no-provisioner", volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Delete", opts=self._opts(provider, []))
        for pool in pools:
            group = manifests.local_model_node_group(pool.name, pool.shape.local_nvme_gb)
            k8s.apiextensions.CustomResource(
                f"{name}-{pool.name}", api_version=group["apiVersion"], kind=group["kind"],
                metadata=group["metadata"], spec=group["spec"],
                opts=self._opts(provider, [crds, self.release, storage_class, prep]))
        self.register_outputs({})

    def _opts(self, provider: k8s.Provider, after: list[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after)


__all__ = ["DOWNLOAD_SERVICE_ACCOUNT", "JOBS_NAMESPACE", "NODE_PREP_IMAGE", "NODE_PREP_NAMESPACE",
           "ModelCacheAddons", "cached_pools", "has_cache", "localmodel_values", "tolerations"]
