"""The Kubernetes bodies of one model on one cluster, from its plan (plain dicts, no Pulumi).

Per model: a ClusterServingRuntime for vLLM (the CUDA or the ROCm image, by the pool's GPU
vendor), an InferenceService in KServe's Standard mode whose scaling KServe leaves to us
(`autoscalerClass: external`), the KEDA ScaledObject that scales its predictor Deployment, a
PodDisruptionBudget, the PodMonitor that feeds KEDA's query, the PrometheusRule of its latency SLO
(serving.slo_rules: error ratios and burn-rate alerts from the same metrics), and a
LocalModelCache on the pool's NVMe when it has one (else vLLM streams the weights from the
bucket). components/models.py applies them; tests validate the very same dicts against the CRDs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from serving import _model_pod as pod
from serving import drain
from serving._model_pod import MODEL_LABEL
from serving.autoscaling import POLLING_INTERVAL_S, SCRAPE_TIMEOUT_S, Autoscaling
from serving.charts import IMAGES, Image, UnpinnedError, pinned_ref
from serving.coldstart import ColdStart
from serving.hardware import Cloud, MachineShape, Vendor
from serving.images import RegionalRegistry
from serving.kube_names import predictor_name
from serving.manifests import MANAGED, POOL_LABEL
from serving.models import Quantization
from serving.profiles import SliceKind
from serving.sharing import Sharing
from serving.slices import SharingMode
from serving.slo_rules import prometheus_rule, rule_notes, watch_rule
from serving.tiers import TierSpec

INFERENCE_SERVICE = ("serving.kserve.io/v1beta1", "InferenceService")
CLUSTER_SERVING_RUNTIME = ("serving.kserve.io/v1alpha1", "ClusterServingRuntime")
LOCAL_MODEL_CACHE = ("serving.kserve.io/v1alpha1", "LocalModelCache")
SCALED_OBJECT = ("keda.sh/v1alpha1", "ScaledObject")
POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")

# FACTS.md section 6: Standard is KServe's plain-Deployment mode (formerly RawDeployment);
# `external` makes KServe create no autoscaler, so the ScaledObject below is the only one.
DEPLOYMENT_MODE = ("serving.kserve.io/deploymentMode", "Standard")
AUTOSCALER_CLASS = ("serving.kserve.io/autoscalerClass", "external")
# The service account in KServe's job namespace the cache's download Jobs take credentials from.
LOCAL_MODEL_DOWNLOAD_SERVICE_ACCOUNT = "model-download"
MODEL_FORMAT = "vllm"

# The vLLM image per GPU vendor: keys of serving.charts.IMAGES.
RUNTIME_IMAGE: dict[Vendor, str] = {Vendor.NVIDIA: "vllm-openai", Vendor.AMD: "vllm-rocm"}
# Pod labels a cloud needs on model pods: AKS's workload identity webhook injects the federated
# token only into pods labelled so (components/identity_azure.py USE_LABEL).
CLOUD_POD_LABELS: dict[Cloud, dict[str, str]] = {Cloud.AZURE: {"azure.workload.identity/use": "true"}}
# GKE advertises every MIG instance as `nvidia.com/gpu`; the slice size is chosen by this label.
MIG_PARTITION_LABEL: dict[Cloud, str] = {Cloud.GCP: "cloud.google.com/gke-gpu-partition-size"}
# Vendors whose model server runs as root: ROCm needs /dev/kfd and /dev/dri, which belong to the
# host's `render` and `video` groups, whose GIDs differ between node images; NVIDIA's device
# nodes are usable by any user.
RUNS_AS_ROOT: frozenset[Vendor] = frozenset({Vendor.AMD})


class ModelRegionPlan(Protocol):
    """The parts of stacks.plan.ModelRegionPlan read here (serving imports nothing of stacks)."""

    @property
    def model(self) -> str: ...
    @property
    def catalog(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def tier(self) -> str: ...
    @property
    def tier_spec(self) -> TierSpec: ...
    @property
    def pool(self) -> str: ...
    @property
    def slice(self) -> SliceKind: ...
    @property
    def resource(self) -> str: ...
    @property
    def quantization(self) -> Quantization: ...
    @property
    def weights_gb(self) -> float: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def grace_s(self) -> int: ...
    @property
    def min_replicas(self) -> int: ...
    @property
    def max_replicas(self) -> int: ...
    @property
    def cold_start(self) -> ColdStart: ...
    @property
    def source_uri(self) -> str: ...
    @property
    def autoscaling(self) -> Autoscaling: ...


@dataclass(frozen=True)
class PoolTarget:
    """The facts of the planned pool on the cluster the model lands on (components/ fills it)."""

    name: str
    vendor: Vendor
    sharing: Sharing
    node: MachineShape
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect), Kubernetes spelling
    nvme_path: str | None  # None: no local NVMe, so no model cache on this pool


@dataclass(frozen=True)
class ClusterTarget:
    """Where on the cluster: namespace, identity, the metrics server and the advertised slice."""

    cloud: Cloud
    namespace: str
    service_account: str
    prometheus_address: str  # KEDA's prometheus trigger reads the model's metrics here
    # The model servers log prompts and outputs for the cluster's redacting collector
    # (components/logs.py); components/models.py sets it only together with the collector.
    log_requests: bool = False


@dataclass(frozen=True)
class ModelManifests:
    runtime: dict[str, Any]
    inference_service: dict[str, Any]
    scaled_object: dict[str, Any]
    pod_disruption_budget: dict[str, Any]
    pod_monitor: dict[str, Any]
    slo_rule: dict[str, Any]
    local_model_cache: dict[str, Any] | None
    notes: tuple[str, ...] = field(default=())

    def custom_resources(self) -> list[dict[str, Any]]:
        """Every body applied as a custom resource (the PDB is a core object)."""
        found = [self.runtime, self.inference_service, self.scaled_object, self.pod_monitor, self.slo_rule]
        return found + ([self.local_model_cache] if self.local_model_cache else [])


def runtime_image(plan: ModelRegionPlan, vendor: Vendor, images: dict[str, Image] = IMAGES,
                  registry: RegionalRegistry | None = None) -> str:
    """The pinned vLLM image for the pool's vendor, as the region's `registry` serves it (by the
    stack's digest where it pins one); anything floating is an error naming the model. Without a
    registry: the upstream reference (what the registry's cache fetches)."""
    key = RUNTIME_IMAGE[vendor]
    pinned = images.get(key)
    what = f"model {plan.model} ({plan.region}, pool {plan.pool}): vLLM runtime {key}"
    if pinned is None:
        raise UnpinnedError(f"{what}: no image in the pinned table (serving/charts.py)")
    upstream = pinned_ref(pinned.ref, what)
    return registry.ref(key, what, images) if registry else upstream


def runtime_name(plan: ModelRegionPlan) -> str:
    # One runtime per model, so a model can move to another vLLM release on its own.
    return f"{plan.model}-vllm"


def _meta(name: str, namespace: str | None, model: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED, MODEL_LABEL: model}, **extra}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def cluster_serving_runtime(plan: ModelRegionPlan, vendor: Vendor, image: str) -> dict[str, Any]:
    api_version, kind = CLUSTER_SERVING_RUNTIME
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(runtime_name(plan), None, plan.model),
        "spec": {
            # Only InferenceServices naming this runtime use it; KServe never auto-selects it.
            "supportedModelFormats": [{"name": MODEL_FORMAT, "autoSelect": False}],
            "protocolVersions": ["v1"],
            "labels": {"rtip.dev/gpu-vendor": str(vendor).lower()},
            "containers": [{
                "name": "kserve-container",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                # The module entry point exists in both the CUDA and the ROCm image.
                "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "args": [f"--port={pod.VLLM_PORT}"],
                "env": pod.env(),
                "ports": [{"containerPort": pod.VLLM_PORT, "protocol": "TCP"}],
            }],
        },
    }


def node_selector(plan: ModelRegionPlan, cloud: Cloud) -> dict[str, str]:
    """The nodes a model's predictor selects: its pool's, and on a cloud that labels MIG
    partitions (GKE), those of its slice's size."""
    selector = {POOL_LABEL: plan.pool}
    partition_label = MIG_PARTITION_LABEL.get(cloud)
    if partition_label and plan.slice.mode is SharingMode.MIG and plan.slice.mig_profile:
        selector[partition_label] = plan.slice.mig_profile
    return selector


def inference_service(plan: ModelRegionPlan, pool: PoolTarget, cluster: ClusterTarget) -> dict[str, Any]:
    api_version, kind = INFERENCE_SERVICE
    cached = pool.nvme_path is not None
    kind_ = plan.slice
    as_root = pool.vendor in RUNS_AS_ROOT
    volumes, mounts = pod.volumes(kind_)
    container: dict[str, Any] = {
        "modelFormat": {"name": MODEL_FORMAT},
        "runtime": runtime_name(plan),
        "args": pod.vllm_args(plan.model, kind_, pool.sharing, plan.max_model_len,
                              plan.max_output_tokens, None if cached else plan.source_uri,
                              cluster.log_requests),
        "resources": pod.container_resources(kind_, pool.node, plan.resource, plan.weights_gb),
        "securityContext": pod.security_context(as_root),
        "volumeMounts": mounts,
        **pod.probes(plan.cold_start),
        # vLLM 0.11 stops its streams at once on SIGTERM: the preStop hook drains first.
        "lifecycle": drain.lifecycle(plan.grace_s),
    }
    if cached:
        # KServe matches this URI to the model's LocalModelCache and mounts the node's copy.
        container["storageUri"] = plan.source_uri
    labels = {MODEL_LABEL: plan.model, **CLOUD_POD_LABELS.get(cluster.cloud, {})}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(plan.model, cluster.namespace, plan.model, annotations=dict(
            [DEPLOYMENT_MODE, AUTOSCALER_CLASS])),
        "spec": {"predictor": {
            "minReplicas": plan.min_replicas,
            "maxReplicas": plan.max_replicas,
            "serviceAccountName": cluster.service_account,
            "labels": labels,
            "annotations": {"rtip.dev/weights": f"{plan.catalog} {plan.quantization}",
                            pod.TIER_ANNOTATION: str(plan.tier)},
            "nodeSelector": node_selector(plan, cluster.cloud),
            "tolerations": pod.tolerations(pool.taints),
            "topologySpreadConstraints": pod.spread({MODEL_LABEL: plan.model}),
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"},
                                 **({} if as_root else {"runAsNonRoot": True})},
            # The servers never call the Kubernetes API; each cloud's workload identity brings
            # its own projected token.
            "automountServiceAccountToken": False,
            # The time the preStop drain has to let in-flight generations finish: the longest
            # response vLLM allows, at the tier's TPOT (serving/drain.py grace_s).
            "terminationGracePeriodSeconds": plan.grace_s,
            "volumes": volumes,
            "model": container,
        }},
    }


def predictor_deployment(plan: ModelRegionPlan) -> str:
    """KServe's Standard mode names the predictor Deployment `<isvc>-predictor`."""
    return predictor_name(plan.model)


def scaled_object(plan: ModelRegionPlan, cluster: ClusterTarget) -> dict[str, Any]:
    api_version, kind = SCALED_OBJECT
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(plan.model, cluster.namespace, plan.model),
        "spec": plan.autoscaling.scaled_object_spec(predictor_deployment(plan), cluster.prometheus_address),
    }


def pod_disruption_budget(plan: ModelRegionPlan, cluster: ClusterTarget) -> dict[str, Any]:
    """One replica down at a time: a drain or node upgrade never takes out a zone's replicas
    at once, so the spread the replica count was sized for holds."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(plan.model, cluster.namespace, plan.model),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {MODEL_LABEL: plan.model}},
            # A crash-looping replica serves nothing; it must not block draining its node.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def pod_monitor_spec(model: str) -> dict[str, Any]:
    """vLLM's /metrics scraped as often as KEDA polls, so each poll sees a fresh queue length. The
    model's label goes onto each target's `up` and `scrape_duration_seconds` (podTargetLabels),
    which is how the autoscaling query's lost-pod term finds the model's pods that stopped
    answering, loading ones included: a pod that no longer answers has no vLLM series to select."""
    return {
        "selector": {"matchLabels": {MODEL_LABEL: model}},
        "podTargetLabels": [MODEL_LABEL],
        "podMetricsEndpoints": [{"portNumber": pod.VLLM_PORT, "path": "/metrics",
                                 "interval": f"{POLLING_INTERVAL_S}s",
                                 "scrapeTimeout": f"{SCRAPE_TIMEOUT_S}s"}],
    }


def pod_monitor(plan: ModelRegionPlan, cluster: ClusterTarget) -> dict[str, Any]:
    api_version, kind = POD_MONITOR
    return {"apiVersion": api_version, "kind": kind,
            "metadata": _meta(plan.model, cluster.namespace, plan.model),
            "spec": pod_monitor_spec(plan.model)}


def overdue(plan: ModelRegionPlan) -> tuple[str, int]:
    """What the model's replicas-overdue page watches: its predictor Deployment's pods, and how long
    one may take to serve (serving/slo_rules.py `overdue_rule`)."""
    return predictor_deployment(plan), pod.replica_overdue_s(plan.cold_start)


def slo_rule(plan: ModelRegionPlan, cluster: ClusterTarget) -> dict[str, Any]:
    """The model's latency SLO rules, on the series the PodMonitor scrapes (the operator loads
    rules from every namespace: components/addons.py opens its rule selector)."""
    return prometheus_rule(plan.model, cluster.namespace, plan.tier_spec,
                           _meta(f"{plan.model}-slo", cluster.namespace, plan.model), *overdue(plan))


WATCH_RULE = "rtip-models-watched"


def models_watch_rule(namespace: str) -> dict[str, Any]:
    """The cluster's one page for kube-state-metrics no longer exporting the models' pods
    (serving/slo_rules.py `watch_rule`)."""
    return watch_rule(namespace, {"name": WATCH_RULE, "namespace": namespace, "labels": dict(MANAGED)})


def local_model_cache(plan: ModelRegionPlan, pool: PoolTarget) -> dict[str, Any]:
    """The model's weights on the pool's NVMe (LocalModelNodeGroup named after the pool)."""
    api_version, kind = LOCAL_MODEL_CACHE
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(plan.model, None, plan.model),
        "spec": {
            "sourceModelUri": plan.source_uri,
            # Rounded up so the node agent's space check never cuts a shard off.
            "modelSize": f"{math.ceil(plan.weights_gb) + 1}G",
            "nodeGroups": [pool.name],
            # The download Jobs' credentials (components/addons_cache.py); without it KServe uses
            # `default`, which has no cloud identity.
            "serviceAccountName": LOCAL_MODEL_DOWNLOAD_SERVICE_ACCOUNT,
        },
    }


def model_manifests(plan: ModelRegionPlan, pool: PoolTarget, cluster: ClusterTarget,
                    images: dict[str, Image] = IMAGES,
                    registry: RegionalRegistry | None = None) -> ModelManifests:
    """Every body of one model on one cluster, and what the plan should say about it."""
    if pool.name != plan.pool:
        raise ValueError(f"model {plan.model}: planned on pool {plan.pool!r}, given pool {pool.name!r}")
    notes = [*plan.autoscaling.notes, *rule_notes(plan.model, plan.tier_spec)]
    if pool.nvme_path is None:
        notes.append(f"model {plan.model}: pool {pool.name} has no local NVMe, so no LocalModelCache; "
                     f"vLLM streams the weights from {plan.source_uri} (--load-format runai_streamer)")
    return ModelManifests(
        runtime=cluster_serving_runtime(plan, pool.vendor,
                                        runtime_image(plan, pool.vendor, images, registry)),
        inference_service=inference_service(plan, pool, cluster),
        scaled_object=scaled_object(plan, cluster),
        pod_disruption_budget=pod_disruption_budget(plan, cluster),
        pod_monitor=pod_monitor(plan, cluster),
        slo_rule=slo_rule(plan, cluster),
        local_model_cache=local_model_cache(plan, pool) if pool.nvme_path is not None else None,
        notes=tuple(notes),
    )


__all__ = ["AUTOSCALER_CLASS", "CLOUD_POD_LABELS", "CLUSTER_SERVING_RUNTIME", "DEPLOYMENT_MODE",
           "INFERENCE_SERVICE", "LOCAL_MODEL_CACHE", "MIG_PARTITION_LABEL", "MODEL_LABEL",
           "POD_MONITOR", "RUNS_AS_ROOT", "RUNTIME_IMAGE", "SCALED_OBJECT", "WATCH_RULE", "ClusterTarget",
           "ModelManifests",
           "ModelRegionPlan",
           "PoolTarget", "cluster_serving_runtime", "inference_service", "local_model_cache",
           "model_manifests", "models_watch_rule", "node_selector", "overdue", "pod_disruption_budget",
           "pod_monitor", "pod_monitor_spec", "predictor_deployment",
           "runtime_image", "runtime_name", "scaled_object", "slo_rule"]
