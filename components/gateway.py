"""Gateway: one cluster's front door, applied from serving/gateway.py's bodies.

Envoy Gateway (CRDs, then the controller), the Envoy AI Gateway controller as its InferencePool
extension server, the rate-limit counters' Redis, a private CA and the listener's certificate from
cert-manager, the Gateway itself, per model an InferencePool with its endpoint picker, and one
AIGatewayRoute over the models with one SecurityPolicy (every caller's key, then which tenant may
call which model) and one BackendTrafficPolicy (each tenant's requests and tokens per minute),
and a route refusing the paths the model route must not forward (`/v1/responses`);
serving/gateway.py says why. Each tenant's API key is the Pulumi secret its `api_key_secret`
names, materialised only as a Kubernetes Secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.addons_helm import helm_release, ready
from components.contract import ClusterFacts, RegionStore
from serving import gateway as gw
from serving import gateway_charts as charts
from serving import gateway_slo
from serving import gateway_tenants as tenants_gw
from serving.charts import ChartKey
from serving.images import RegionalRegistry
from serving.netpol import GATEWAY_NAMESPACE, MODELS
from serving.posture import Posture

# The Inference Extension's CRDs ship in no Helm chart (kubectl apply of the release manifests):
# vendored from ../shared/crds (InferencePool v1.6.0; InferenceObjective v1.5.0, which the v1.5.0
# endpoint picker watches), applied as objects before any pool chart.
CRD_DIR = Path(__file__).resolve().parents[1] / "serving" / "data" / "crds"
CRD_FILES = (
    "inference.networking.k8s.io_inferencepools.yaml",
    "inference.networking.x-k8s.io_inferenceobjectives.yaml",
)


def crd_documents() -> list[dict[str, Any]]:
    return [yaml.safe_load((CRD_DIR / f).read_text()) for f in CRD_FILES]


class Gateway(pulumi.ComponentResource):
    """`tenants` are the stack's; `models` the models planned on this cluster; `releases` the
    add-ons' (cert-manager issues the certificates); `system` and `models_after` what the
    gateway's and the pools' pods wait for (their namespaces and policies); `availability` each
    model's tier availability, the strictest served one the gateway's SLO
    (serving/gateway_slo.py)."""

    def __init__(
        self,
        name: str,
        cluster: ClusterFacts,
        env: Posture,
        tenants: Sequence[tenants_gw.Tenant],
        secrets: Mapping[str, pulumi.Output[str]],
        models: Sequence[str],
        releases: Mapping[ChartKey, pulumi.Resource],
        system: Sequence[pulumi.Resource],
        models_after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
        *,
        store: RegionStore,
        digests: Mapping[str, str] | None = None,
        availability: Mapping[str, float] | None = None,
    ) -> None:
        routed = {m: tenants_gw.allowed(tenants, m) for m in models}
        served = [m for m in models if routed[m]]
        notes = [
            f"model {m}: no tenant may call it, so it gets no route" for m in models if not routed[m]
        ]
        super().__init__(
            "rtip:k8s:Gateway",
            name,
            {
                "cluster": cluster.name,
                "public": env.public_gateway,
                "routes": served,
                "hostnames": charts.hostnames(cluster.name),
                "notes": notes,
            },
            opts,
        )
        self._provider = cluster.provider
        self._name = name
        pins = dict(digests or {})

        def values(build: Any) -> pulumi.Input[dict[str, Any]]:
            """Chart values whose images come from the region's registry once its root is known."""
            return store.image_registry.apply(
                lambda root: build(RegionalRegistry(root, store.cloud, pins))
            )

        sys_ready = ready(list(system))
        replicas = env.controller_replicas
        crds = helm_release(
            f"{name}-gateway-crds",
            ChartKey.GATEWAY_CRDS,
            GATEWAY_NAMESPACE,
            charts.gateway_crds_values(),
            self,
            self._provider,
            sys_ready,
        )
        ai_crds = helm_release(
            f"{name}-ai-gateway-crds",
            ChartKey.AI_GATEWAY_CRDS,
            GATEWAY_NAMESPACE,
            {},
            self,
            self._provider,
            sys_ready,
        )
        ai = helm_release(
            f"{name}-ai-gateway",
            ChartKey.AI_GATEWAY,
            GATEWAY_NAMESPACE,
            values(lambda images: charts.ai_gateway_values(images, replicas)),
            self,
            self._provider,
            [*sys_ready, ai_crds, crds],
        )
        redis_deploy, redis_svc = self._redis(store, pins, sys_ready)
        eg = helm_release(
            f"{name}-envoy-gateway",
            ChartKey.GATEWAY,
            GATEWAY_NAMESPACE,
            values(lambda images: charts.gateway_values(images, replicas)),
            self,
            self._provider,
            [*sys_ready, crds, ai, redis_deploy, redis_svc],
        )
        certs = [
            self._custom(b, [releases[ChartKey.CERT_MANAGER], *sys_ready])
            for b in charts.certificates(cluster.name)
        ]
        pool_crds = [self._crd(doc) for doc in crd_documents()]
        on_gateway = [crds, eg, *sys_ready]
        proxy = self._custom(gw.envoy_proxy(cluster.cloud, env.public_gateway, replicas), on_gateway)
        klass = self._custom(gw.gateway_class(), [*on_gateway, proxy])
        gateway = self._custom(gw.gateway(), [*on_gateway, klass, certs[-1]])
        self._custom(gw.client_traffic_policy(), [*on_gateway, gateway])
        callers = sorted({t for m in served for t in routed[m]})
        keys = [self._secret(t, secrets[t], sys_ready) for t in callers]
        if served:
            self._custom(gw.reference_grant(), [crds, *models_after])
        pools = []
        for m in served:
            pools.append(helm_release(
                f"{name}-pool-{m}",
                ChartKey.INFERENCE_POOL,
                MODELS,
                values(lambda images, m=m: charts.inference_pool_values(m, images, replicas)),
                self,
                self._provider,
                [*pool_crds, *models_after],
                release=m,
            ))
        if served:
            limited = [t for t in tenants if t.name in callers]
            model_route = gw.ai_gateway_route(served, any(t.tokens_per_minute for t in limited))
            route = self._custom(model_route, [*on_gateway, ai_crds, ai, gateway, *pools])
            # /v1/responses answered by the gateway itself: vLLM 0.11 ignores the output cap there.
            refused = self._custom(gw.refused_paths_filter(), on_gateway)
            self._custom(gw.refused_paths_route(model_route), [*on_gateway, gateway, refused])
            # Both policies name the HTTPRoute the AI Gateway generates from `route`.
            self._custom(tenants_gw.security_policy({m: routed[m] for m in served}),
                         [*on_gateway, route, *keys])
            self._custom(tenants_gw.rate_limit_policy(limited), [*on_gateway, route])
            # The front door's availability SLO, against the strictest tier it serves.
            strictest = max((availability or {}).get(m, 0.0) for m in served)
            if strictest > 0:
                monitoring = [releases[ChartKey.KUBE_PROMETHEUS_STACK], *sys_ready]
                self._custom(gateway_slo.pod_monitor(gw.GATEWAY), monitoring)
                self._custom(gateway_slo.prometheus_rule(gw.GATEWAY, strictest), monitoring)
        self.register_outputs({})

    def _redis(
        self, store: RegionStore, pins: dict[str, str], after: list[pulumi.Resource]
    ) -> tuple[pulumi.Resource, pulumi.Resource]:
        ref = store.image_registry.apply(
            lambda root: RegionalRegistry(root, store.cloud, pins).ref(
                "ratelimit-redis", "gateway redis"
            )
        )
        deployment, service = charts.redis("{image}")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        spec = ref.apply(
            lambda r: {
                **deployment["spec"],
                "template": {
                    **deployment["spec"]["template"],
                    "spec": {
                        **deployment["spec"]["template"]["spec"],
                        "containers": [{**container, "image": r}],
                    },
                },
            }
        )
        return self._object({**deployment, "spec": spec}, after), self._object(service, after)

    def _opts(self, after: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=list(after))

    def _object(self, body: dict[str, Any], after: Sequence[pulumi.Resource]) -> pulumi.Resource:
        meta = body["metadata"]
        name = f"{self._name}-{meta['name'].removeprefix('rtip-')}"
        args = k8s.meta.v1.ObjectMetaArgs(**meta)
        if body["kind"] == "Deployment":
            return k8s.apps.v1.Deployment(
                f"{name}-deploy", metadata=args, spec=body["spec"], opts=self._opts(after)
            )
        return k8s.core.v1.Service(
            f"{name}-svc", metadata=args, spec=body["spec"], opts=self._opts(after)
        )

    def _secret(
        self, tenant: str, key: pulumi.Output[str], after: Sequence[pulumi.Resource]
    ) -> pulumi.Resource:
        body = tenants_gw.tenant_secret(tenant)
        return k8s.core.v1.Secret(
            f"{self._name}-key-{tenant}",
            metadata=k8s.meta.v1.ObjectMetaArgs(**body["metadata"]),
            type=body["type"],
            string_data={tenant: pulumi.Output.secret(key)},
            opts=self._opts(after),
        )

    def _crd(self, doc: dict[str, Any]) -> pulumi.Resource:
        return k8s.apiextensions.v1.CustomResourceDefinition(
            f"{self._name}-crd-{doc['spec']['names']['plural']}-{doc['spec']['group'].split('.')[-2]}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=doc["metadata"]["name"], annotations=doc["metadata"].get("annotations")
            ),
            spec=doc["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider),
        )

    def _custom(self, body: dict[str, Any], after: Sequence[pulumi.Resource]) -> pulumi.Resource:
        meta = body["metadata"]
        short = {"Issuer": "issuer", "Certificate": "cert"}.get(body["kind"], body["kind"].lower())
        return k8s.apiextensions.CustomResource(
            f"{self._name}-{short}-{meta['name']}",
            api_version=body["apiVersion"],
            kind=body["kind"],
            metadata=meta,
            spec=body["spec"],
            opts=self._opts(after),
        )


__all__ = ["CRD_FILES", "Gateway", "crd_documents"]
