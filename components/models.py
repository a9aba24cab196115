"""ModelDeployment: one model's serving objects on one cluster, applied from its plan.

The bodies come from serving/deployments.py (plain dicts); this component only resolves the
planned pool on the cluster, applies them through the cluster's provider, and orders each after
the add-on release that installs its CRD.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons import MONITORING_NAMESPACE
from components.contract import ClusterFacts, RegionStore
from components.namespaces import MODEL_SERVICE_ACCOUNT, MODELS_NAMESPACE
from serving import deployments as dep
from serving.charts import ChartKey, chart
from serving.images import RegionalRegistry
from stacks.model_plan import ModelRegionPlan

PROMETHEUS_PORT = 9090

# The release each kind of object waits for: the chart that installs its CRD (and, for KServe,
# the controller whose webhook admits it).
NEEDS: dict[str, tuple[ChartKey, ...]] = {
    "ClusterServingRuntime": (ChartKey.KSERVE_CRD, ChartKey.KSERVE),
    "InferenceService": (ChartKey.KSERVE_CRD, ChartKey.KSERVE),
    "LocalModelCache": (ChartKey.KSERVE_LOCALMODEL_CRD, ChartKey.KSERVE_LOCALMODEL),
    "ScaledObject": (ChartKey.KEDA,),
    "PodMonitor": (ChartKey.KUBE_PROMETHEUS_STACK,),
    "PrometheusRule": (ChartKey.KUBE_PROMETHEUS_STACK,),
}


def prometheus_address() -> str:
    """kube-prometheus-stack's Prometheus Service: `<fullname>-prometheus`, where the fullname is
    the release name when it contains the chart name (ours is installed as the chart's name)."""
    release = chart(ChartKey.KUBE_PROMETHEUS_STACK).name
    return f"http://{release}-prometheus.{MONITORING_NAMESPACE}.svc.cluster.local:{PROMETHEUS_PORT}"


def targets(plan: ModelRegionPlan, cluster: ClusterFacts,
            log_requests: bool = False) -> tuple[dep.PoolTarget, dep.ClusterTarget]:
    """The planned pool as it exists on `cluster`; a pool the cluster lacks is an error."""
    pool = cluster.pool(plan.pool)
    if pool is None:
        raise ValueError(
            f"model {plan.model}: planned pool {plan.pool!r} is not on cluster {cluster.name} "
            f"(its pools: {', '.join(p.name for p in cluster.pools) or 'none'})")
    if plan.region != cluster.region:
        raise ValueError(f"model {plan.model}: planned for region {plan.region}, "
                         f"cluster {cluster.name} is in {cluster.region}")
    return (
        dep.PoolTarget(
            name=pool.name, vendor=pool.vendor, sharing=pool.sharing,
            node=pool.shape,
            taints=tuple((t.key, t.value, t.effect) for t in pool.taints),
            nvme_path=pool.nvme_path,
        ),
        dep.ClusterTarget(
            cloud=cluster.cloud, namespace=MODELS_NAMESPACE, service_account=MODEL_SERVICE_ACCOUNT,
            prometheus_address=prometheus_address(), log_requests=log_requests,
        ),
    )


class ModelDeployment(pulumi.ComponentResource):
    """Runtime, InferenceService, ScaledObject, PDB, PodMonitor, SLO rules and model cache of one model.

    `releases` are ClusterAddons.releases; `after` are further resources every object waits for
    (the models namespace and its service account). `store` is the region's registry: the runtime
    image is pulled from it (serving/images.py), by the digest `digests` pins for it if any;
    without a store the upstream reference stays (unit tests of the bodies only).
    `log_requests_to`: the cluster's redacting log collector (components/logs.py); given, the
    model servers log prompts and outputs, and start only once it is installed. There is no other
    way to turn request logging on, so no prompt is logged where no collector redacts it."""

    manifests: dep.ModelManifests

    def __init__(self, name: str, plan: ModelRegionPlan, cluster: ClusterFacts,
                 releases: Mapping[ChartKey, pulumi.Resource], after: Sequence[pulumi.Resource] = (),
                 opts: pulumi.ResourceOptions | None = None, *, store: RegionStore | None = None,
                 digests: Mapping[str, str] | None = None,
                 log_requests_to: pulumi.Resource | None = None) -> None:
        pool, where = targets(plan, cluster, log_requests=log_requests_to is not None)
        # Upstream references first: the pinning is checked here, before anything is registered.
        built = dep.model_manifests(plan, pool, where)
        # Only what this model creates: the cache's releases exist only on clusters with NVMe.
        wanted = {str(k) for body in built.custom_resources() for k in NEEDS[body["kind"]]}
        missing = sorted(wanted - {str(k) for k in releases})
        if missing:
            raise ValueError(f"model {plan.model}: cluster {cluster.name} lacks the add-on releases "
                             f"{', '.join(missing)} its objects need")
        runtime_spec: Any = built.runtime["spec"]
        if store is not None:
            pins = dict(digests or {})
            runtime_spec = store.image_registry.apply(lambda root: dep.model_manifests(
                plan, pool, where, registry=RegionalRegistry(root, store.cloud, pins)).runtime["spec"])
        super().__init__("rtip:k8s:ModelDeployment", name, {
            "cluster": cluster.name,
            "model": plan.model,
            "pool": plan.pool,
            "resource": plan.resource,
            "resourceCount": plan.resource_count,
            "runtimeImage": pulumi.Output.from_input(runtime_spec).apply(
                lambda spec: spec["containers"][0]["image"]),
            "modelCache": built.local_model_cache is not None,
            "notes": list(built.notes),
        }, opts)
        self.manifests = built
        self._provider = cluster.provider
        self._after = [*after, *([log_requests_to] if log_requests_to is not None else [])]
        self._releases = releases
        short = {"ClusterServingRuntime": "runtime", "InferenceService": "isvc",
                 "LocalModelCache": "cache", "ScaledObject": "scaler", "PodMonitor": "monitor",
                 "PrometheusRule": "slo"}
        for body in built.custom_resources():
            if body is built.runtime:
                body = {**body, "spec": runtime_spec}
            self._custom(f"{name}-{short[body['kind']]}", body)
        pdb = built.pod_disruption_budget
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=k8s.meta.v1.ObjectMetaArgs(**pdb["metadata"]),
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                max_unavailable=pdb["spec"]["maxUnavailable"],
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=pdb["spec"]["selector"]["matchLabels"]),
                unhealthy_pod_eviction_policy=pdb["spec"]["unhealthyPodEvictionPolicy"],
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=self._after))
        self.register_outputs({})

    def _custom(self, name: str, body: dict[str, Any]) -> k8s.apiextensions.CustomResource:
        return _custom_resource(name, body, self._releases, self._after,
                                pulumi.ResourceOptions(parent=self, provider=self._provider))


def _custom_resource(name: str, body: dict[str, Any], releases: Mapping[ChartKey, pulumi.Resource],
                     after: Sequence[pulumi.Resource],
                     opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """`body` as a custom resource, after the releases its kind needs (NEEDS) and `after`."""
    needs = [releases[k] for k in NEEDS[body["kind"]]]
    return k8s.apiextensions.CustomResource(
        name, api_version=body["apiVersion"], kind=body["kind"], metadata=body["metadata"],
        spec=body["spec"], opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            depends_on=[*needs, *after])))


def models_watch(name: str, cluster: ClusterFacts, releases: Mapping[ChartKey, pulumi.Resource],
                 after: Sequence[pulumi.Resource] = (),
                 opts: pulumi.ResourceOptions | None = None) -> k8s.apiextensions.CustomResource:
    """The cluster's one kube-state-metrics page for the models' namespace (after `after`, the
    namespace), once the operator that loads it is installed."""
    on_cluster = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(provider=cluster.provider))
    return _custom_resource(name, dep.models_watch_rule(MODELS_NAMESPACE), releases, after, on_cluster)


__all__ = ["NEEDS", "ModelDeployment", "models_watch", "prometheus_address", "targets"]
