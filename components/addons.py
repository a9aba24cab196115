"""ClusterAddons: the platform services every cluster runs before any model lands on it.

cert-manager, KServe (CRDs, then the controller in Standard mode), KEDA and kube-prometheus-stack
are pinned Helm releases (serving/charts.py) with values from code; GPU enablement follows the
cluster's pools (components/addons_gpu.py), and so does KServe's local model cache: installed,
flag and all, only on clusters with NVMe pools (components/addons_cache.py).
Every release names what it needs in `depends_on`, so CRDs exist before anything that uses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons_cache import ModelCacheAddons, has_cache
from components.addons_gpu import GpuAddons, gpu_notes, model_cache
from components.addons_helm import helm_release, namespace, resources
from components.contract import ClusterFacts, RegionStore
from serving._model_pod import unreachable_toleration, zone_spread
from serving.alert_routes import RECEIVER_SECRET, alertmanager_values
from serving.autoscaling import POLLING_INTERVAL_S
from serving.charts import ChartKey
from serving.hardware import Cloud
from serving.manifests import MANAGED
from serving.posture import Posture
from serving.storage import BLOCK_STORAGE_CLASS, prometheus_volume_gib

_SMALL = resources("50m", "64Mi", "500m", "256Mi")
_CONTROLLER = resources("100m", "256Mi", "1", "1Gi")

CERT_MANAGER_NAMESPACE = "cert-manager"
KSERVE_NAMESPACE = "kserve"
KEDA_NAMESPACE = "keda"
MONITORING_NAMESPACE = "monitoring"

# Pod Security admission per add-on namespace. node-exporter reads the host (hostNetwork, hostPID,
# hostPath), so monitoring is privileged; the controllers need nothing beyond baseline.
NAMESPACES: dict[str, str] = {
    CERT_MANAGER_NAMESPACE: "baseline",
    KSERVE_NAMESPACE: "baseline",
    KEDA_NAMESPACE: "baseline",
    MONITORING_NAMESPACE: "privileged",
}


def cert_manager_values(env: Posture) -> dict[str, Any]:
    return {
        "crds": {"enabled": True},
        "replicaCount": env.controller_replicas,
        "resources": _CONTROLLER,
        "webhook": {"replicaCount": env.controller_replicas, "resources": _SMALL},
        "cainjector": {"resources": _CONTROLLER},
        "startupapicheck": {"resources": _SMALL},
    }


def kserve_values(local_model_cache: bool) -> dict[str, Any]:
    """`local_model_cache`: the cluster gets the cache's charts (components/addons_cache.py). The
    flag must follow them: on without the LocalModelCache CRD, KServe's InferenceService
    defaulting fails and rejects every InferenceService (FACTS.md section 9)."""
    return {"kserve": {
        # Standard (plain Deployments) so KEDA, not Knative, owns scaling (FACTS.md section 6).
        "controller": {"deploymentMode": "Standard", "resources": _CONTROLLER},
        "localmodel": {"enabled": local_model_cache},
    }}


# The pod labels each spread rule selects, as the charts and the operator set them: KEDA chart
# v2.20.2 templates/manager/deployment.yaml and metrics-server/deployment.yaml label the pods
# `app: {{ .Values.operator.name }}` and `app: {{ .Values.operator.name }}-metrics-apiserver`
# (operator.name defaults to keda-operator); prometheus-operator v0.93 reserves
# `app.kubernetes.io/name: prometheus` and `alertmanager` on its pods (prometheus_types.go,
# alertmanager_types.go, podMetadata). One Prometheus and one Alertmanager run per cluster.
KEDA_OPERATOR_POD = {"app": "keda-operator"}
KEDA_METRICS_POD = {"app": "keda-operator-metrics-apiserver"}
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
ALERTMANAGER_POD = {"app.kubernetes.io/name": "alertmanager"}


def keda_values(env: Posture) -> dict[str, Any]:
    """Every autoscaled model's HPA reads its metric through KEDA's metrics API server, which asks
    KEDA's operator to run the query against Prometheus. With one
    metrics server, the chart's default, a zone lost with it blinds every HPA until the pod is
    evicted (300 s: no toleration of its own) and restarted, just when the zone branch and the
    lost-pod term must add replicas; so it runs as many replicas as the operator, and each runs
    spread over the zones (`zone_spread`)."""
    return {
        "operator": {"replicaCount": env.controller_replicas},
        "metricsServer": {"replicaCount": env.controller_replicas},
        "topologySpreadConstraints": {"operator": [zone_spread(KEDA_OPERATOR_POD)],
                                      "metricsServer": [zone_spread(KEDA_METRICS_POD)]},
        "resources": {"operator": _CONTROLLER, "metricServer": _CONTROLLER, "webhooks": _SMALL},
        "prometheus": {"operator": {"enabled": True, "serviceMonitor": {"enabled": True}},
                       "metricServer": {"enabled": True, "serviceMonitor": {"enabled": True}}},
    }


def prometheus_storage(env: Posture, cloud: Cloud) -> dict[str, Any]:
    """The Prometheus TSDB on a PersistentVolumeClaim sized for the retention: it holds the
    signal KEDA scales on, which an emptyDir loses with the pod."""
    return {"volumeClaimTemplate": {"spec": {
        "storageClassName": BLOCK_STORAGE_CLASS[cloud],
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{prometheus_volume_gib(env.metrics_retention_days)}Gi"}},
    }}}


def prometheus_values(env: Posture, cloud: Cloud, webhooks: list[str] | None = None,
                      cluster: tuple[str, str] | None = None) -> dict[str, Any]:
    """`webhooks`: what this cluster's Alertmanager posts to (keys of serving/alert_routes.py
    WEBHOOKS);
    `cluster`: (name, region), which Prometheus puts on every alert it sends (`externalLabels`),
    so a page from one of several regions says which."""
    routes = alertmanager_values(webhooks or [])
    # Without these the operator picks up only monitors and rules labelled with its own release,
    # and the model servers' monitors and SLO rules would be silently ignored.
    selectors_open = {f"{kind}SelectorNilUsesHelmValues": False for kind in (
        "serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig")}
    return {
        "prometheus": {"prometheusSpec": {
            **selectors_open,
            **({"externalLabels": {"cluster": cluster[0], "region": cluster[1]}} if cluster else {}),
            "replicas": env.controller_replicas,
            # The replicas in different zones: KEDA queries either through the Service, and a zone
            # lost with both would leave every ScaledObject on its fallback and every alert silent
            # for the outage (the chart's default anti-affinity is per host, and soft).
            "topologySpreadConstraints": [zone_spread(PROMETHEUS_POD)],
            "retention": f"{env.metrics_retention_days}d",
            "storageSpec": prometheus_storage(env, cloud),
            "resources": resources("500m", "2Gi", "2", "8Gi"),
        }},
        "alertmanager": {**routes, "alertmanagerSpec": {
            **routes.get("alertmanagerSpec", {}), "replicas": env.controller_replicas, "resources": _SMALL,
            "topologySpreadConstraints": [zone_spread(ALERTMANAGER_POD)]}},
        "prometheusOperator": {"resources": _CONTROLLER},
        "grafana": {"resources": _CONTROLLER},
        # One replica (two would export every series twice and double the chart's sums), and the
        # only source of the HPA conditions `RtipAutoscalerBlind` reads: lost with a zone, its
        # Deployment replaces it only once it is evicted, 300 s into the taint by default, 30 s
        # here (a node silent for 90 s), so the page is blind from about 1.5 minutes (the zone's
        # nodes are tainted one each 10 s; then it schedules and starts), not 6. (Chart 8.4.0, which
        # this chart pins, renders `tolerations` into the pod and `replicas` into its Deployment.)
        # Scraped as often as the models (the chart leaves its interval to Prometheus's 30 s): the
        # lost-pod term stops counting an evicted pod when its deletion timestamp arrives, and the
        # simulator, whose zone-loss verdicts the plan reports, reads these series at that pace
        # (the deploy checks `autoscaling` and `alerts` hold the two together: ksm_pace.py).
        "kube-state-metrics": {"resources": _CONTROLLER, "tolerations": [unreachable_toleration()],
                               "prometheus": {"monitor": {"http": {"interval": f"{POLLING_INTERVAL_S}s"}}}},
        "prometheus-node-exporter": {"resources": _SMALL},
    }


class ClusterAddons(pulumi.ComponentResource):
    """The serving stack's cluster services, created through `cluster.provider`."""

    releases: dict[ChartKey, k8s.helm.v3.Release]

    def __init__(self, name: str, cluster: ClusterFacts, env: Posture,
                 opts: pulumi.ResourceOptions | None = None, *, store: RegionStore | None = None,
                 digests: Mapping[str, str] | None = None,
                 alert_webhooks: Mapping[str, pulumi.Output[str]] | None = None) -> None:
        """`store`: the region's registries: the GPU operators' and node preparation's images are
        pulled from there (by the digests `digests` pins, the stack's `registries.digests`), and
        the AMD operator's driver build pushes there. `alert_webhooks`: the SLO alerts' webhook
        URL by severity and this cluster's heartbeat URL (secret Outputs, keyed as
        serving/alert_routes.py WEBHOOKS), kept in a Secret Alertmanager mounts."""
        cache, notes = model_cache(cluster)
        cached = has_cache(cluster)
        super().__init__("rtip:k8s:ClusterAddons", name, {
            "cluster": cluster.name,
            "environment": str(env.environment),
            "modelCache": cache,
            "notes": notes + gpu_notes(cluster),
        }, opts)
        provider = cluster.provider
        ns = {n: namespace(f"{name}-ns-{n}", n, level, self, provider) for n, level in NAMESPACES.items()}
        rel: dict[ChartKey, k8s.helm.v3.Release] = {}
        rel[ChartKey.CERT_MANAGER] = helm_release(
            f"{name}-cert-manager", ChartKey.CERT_MANAGER, CERT_MANAGER_NAMESPACE,
            cert_manager_values(env), self, provider, [ns[CERT_MANAGER_NAMESPACE]])
        # Monitoring comes early: its chart brings the ServiceMonitor CRD the others' monitors need.
        monitoring_after: list[pulumi.Resource] = [ns[MONITORING_NAMESPACE]]
        if alert_webhooks:
            # Before the release: Alertmanager's pods mount it and would not start without it.
            monitoring_after.append(k8s.core.v1.Secret(
                f"{name}-slo-alert-receivers",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=RECEIVER_SECRET, namespace=MONITORING_NAMESPACE,
                                                    labels=dict(MANAGED)),
                string_data=dict(alert_webhooks),
                opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                            depends_on=[ns[MONITORING_NAMESPACE]],
                                            additional_secret_outputs=["stringData", "data"])))
        rel[ChartKey.KUBE_PROMETHEUS_STACK] = helm_release(
            f"{name}-kube-prometheus-stack", ChartKey.KUBE_PROMETHEUS_STACK, MONITORING_NAMESPACE,
            prometheus_values(env, cluster.cloud, sorted(alert_webhooks or {}),
                              (cluster.name, cluster.region)),
            self, provider,
            monitoring_after)
        rel[ChartKey.KSERVE_CRD] = helm_release(
            f"{name}-kserve-crd", ChartKey.KSERVE_CRD, KSERVE_NAMESPACE, {}, self, provider,
            [ns[KSERVE_NAMESPACE]])
        kserve_after: list[pulumi.Resource] = [ns[KSERVE_NAMESPACE], rel[ChartKey.KSERVE_CRD],
                                               rel[ChartKey.CERT_MANAGER]]
        if cached:
            # Before the controller: with the cache flag on it lists LocalModelCaches.
            rel[ChartKey.KSERVE_LOCALMODEL_CRD] = helm_release(
                f"{name}-kserve-localmodel-crd", ChartKey.KSERVE_LOCALMODEL_CRD, KSERVE_NAMESPACE, {},
                self, provider, [ns[KSERVE_NAMESPACE]])
            kserve_after.append(rel[ChartKey.KSERVE_LOCALMODEL_CRD])
        # The controller's webhooks take their certificates from cert-manager.
        rel[ChartKey.KSERVE] = helm_release(
            f"{name}-kserve", ChartKey.KSERVE, KSERVE_NAMESPACE, kserve_values(cached), self, provider,
            kserve_after)
        if cached:
            self.cache = ModelCacheAddons(
                f"{name}-cache", cluster, rel[ChartKey.KSERVE_LOCALMODEL_CRD],
                [ns[KSERVE_NAMESPACE], rel[ChartKey.KSERVE_CRD], rel[ChartKey.KSERVE],
                 rel[ChartKey.CERT_MANAGER]], opts=pulumi.ResourceOptions(parent=self),
                image_registry=store.image_registry if store else None, digests=digests)
            rel[ChartKey.KSERVE_LOCALMODEL] = self.cache.release
        rel[ChartKey.KEDA] = helm_release(
            f"{name}-keda", ChartKey.KEDA, KEDA_NAMESPACE, keda_values(env), self, provider,
            [ns[KEDA_NAMESPACE], rel[ChartKey.KUBE_PROMETHEUS_STACK]])
        self.gpu = GpuAddons(f"{name}-gpu", cluster, rel, opts=pulumi.ResourceOptions(parent=self),
                             image_registry=store.image_registry if store else None, digests=digests)
        rel.update(self.gpu.releases)
        self.releases = rel
        self.register_outputs({})


__all__ = ["CERT_MANAGER_NAMESPACE", "KEDA_NAMESPACE", "KSERVE_NAMESPACE", "MONITORING_NAMESPACE",
           "NAMESPACES", "ClusterAddons", "cert_manager_values", "keda_values", "kserve_values",
           "prometheus_storage", "prometheus_values"]
