"""The front door of every cluster as plain bodies (no Pulumi): Envoy Gateway with TLS, one
inference-aware route per model, API-key auth per tenant and per-tenant request limits.

Shape (components/gateway.py applies it):
- Envoy Gateway (gateway-helm) runs in `rtip-system` with its proxies, the rate-limit service it
  deploys and the Redis that service counts in. Envoy Gateway reaches an InferencePool only
  through an extension server: the Envoy AI Gateway controller (ai-gateway-helm), configured as
  its `extensionManager` with InferencePool as a backend resource (envoyproxy/ai-gateway
  examples/inference-pool/envoy-gateway-values-addon.yaml and manifests/envoy-gateway-values.yaml).
- Per model, the `inferencepool` chart (Gateway API Inference Extension v1.5.0) creates the
  InferencePool `<model>` over the model's predictor pods and its endpoint picker `<model>-epp`
  in the models namespace; a ReferenceGrant there lets the routes in `rtip-system` name the pools.
- Routing by model is by path: `/models/<model>/v1/...` is rewritten to `/v1/...`, so a client
  sets its OpenAI SDK's base URL to `https://<gateway>/models/<model>/v1`. No body parser sits in
  front of route selection (the body-based-routing chart's ext_proc would be one more hop with its
  own failure mode), and vLLM still refuses a body naming another model than it serves.
- Auth: one SecurityPolicy per route whose `apiKeyAuth` lists only the Secrets of the tenants
  allowed that model (a Secret per tenant, its one key the tenant's name, the value its API key),
  so a key of another tenant is refused on that route. The verified client id is forwarded as
  TENANT_HEADER; a ClientTrafficPolicy strips any client-set header of that name before any filter
  runs (`earlyRequestHeaders`), so the rate limiter keys on the credential, never on the client.
- Limits: one BackendTrafficPolicy over every route, a Global rule per tenant on TENANT_HEADER
  with `shared: true` (one bucket per tenant across routes). Tokens per minute are NOT enforced:
  Envoy Gateway counts requests; token costs need an AIGatewayRoute (Envoy AI Gateway), not used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from serving.deployments import MODEL_LABEL
from serving.hardware import Cloud
from serving.manifests import MANAGED
from serving.netpol import GATEWAY_NAMESPACE, MODELS

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_API_BETA = "gateway.networking.k8s.io/v1beta1"
ENVOY_API = "gateway.envoyproxy.io/v1alpha1"
INFERENCE_API = "inference.networking.k8s.io"
CERT_API = "cert-manager.io/v1"
# Envoy Gateway's controller name (gateway-helm values config.envoyGateway.gateway.controllerName).
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
GATEWAY_CLASS = "rtip"
GATEWAY = "rtip-gateway"
PROXY_CONFIG = "rtip-gateway-proxy"
LISTENER = "https"
HTTPS_PORT = 443
# Proxy pods carry app.kubernetes.io/name=envoy (Envoy Gateway's infrastructure labels).
PROXY_LABEL = ("app.kubernetes.io/name", "envoy")
TENANT_HEADER = "x-rtip-tenant"
API_KEY_HEADER = "authorization"
TLS_SECRET = "rtip-gateway-tls"
CA_SECRET = "rtip-gateway-ca"
# The AI Gateway controller's Service (ai-gateway-helm fullnameOverride) and gRPC port for the
# extension manager (its values: controller.service.ports grpc 1063).
EXTENSION_SERVICE = "ai-gateway-controller"
EXTENSION_PORT = 1063
REDIS = "rtip-ratelimit-redis"
REDIS_PORT = 6379
# The endpoint picker's ext_proc port (inferencepool values inferenceExtension.extProcPort).
EPP_PORT = 9002
POOL_PREFIX = "/models"

# How a Service of type LoadBalancer asks each cloud for an internal load balancer: AWS (the
# in-tree provider and the AWS Load Balancer Controller both honour it), GKE (internal passthrough
# Network Load Balancer), AKS (internal Azure Load Balancer). Public is each cloud's default.
INTERNAL_LB: dict[Cloud, dict[str, str]] = {
    Cloud.AWS: {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
    Cloud.GCP: {"networking.gke.io/load-balancer-type": "Internal"},
    Cloud.AZURE: {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"},
}


class Tenant(Protocol):
    """The parts of stacks.schema.TenantSpec read here."""

    @property
    def name(self) -> str: ...
    @property
    def requests_per_minute(self) -> int: ...
    @property
    def tokens_per_minute(self) -> int | None: ...
    @property
    def models(self) -> list[str]: ...


def _meta(name: str, namespace: str | None = GATEWAY_NAMESPACE, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def allowed(tenants: Iterable[Tenant], model: str) -> list[str]:
    """Names of the tenants that may call `model` (its name listed, or "*")."""
    return [t.name for t in tenants if model in t.models or "*" in t.models]


def secret_name(tenant: str) -> str:
    return f"rtip-tenant-{tenant}"


def route_name(model: str) -> str:
    return f"model-{model}"


def tenant_secret(tenant: str) -> dict[str, Any]:
    """The Opaque Secret `apiKeyAuth` reads: each key a client id, its value that client's API
    key (SecurityPolicy CRD, apiKeyAuth.credentialRefs). The value is filled from the Pulumi
    secret by the component; the body carries only the shape."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _meta(secret_name(tenant), **{"rtip.dev/tenant": tenant}),
    }


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "GatewayClass",
        "metadata": _meta(GATEWAY_CLASS, None),
        "spec": {
            "controllerName": CONTROLLER_NAME,
            "parametersRef": {
                "group": "gateway.envoyproxy.io",
                "kind": "EnvoyProxy",
                "name": PROXY_CONFIG,
                "namespace": GATEWAY_NAMESPACE,
            },
        },
    }


def envoy_proxy(cloud: Cloud, public: bool, replicas: int) -> dict[str, Any]:
    """The proxies' Deployment and Service: replicas from the posture, the load balancer internal
    unless the posture says public."""
    service: dict[str, Any] = {
        "type": "LoadBalancer",
        # Keep the client's address (and skip a second hop between nodes).
        "externalTrafficPolicy": "Local",
    }
    if not public:
        service["annotations"] = dict(INTERNAL_LB[cloud])
    return {
        "apiVersion": ENVOY_API,
        "kind": "EnvoyProxy",
        "metadata": _meta(PROXY_CONFIG),
        "spec": {
            "provider": {
                "type": "Kubernetes",
                "kubernetes": {
                    "envoyService": service,
                    "envoyDeployment": {
                        "replicas": replicas,
                        "container": {
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                "limits": {"cpu": "2", "memory": "1Gi"},
                            }
                        },
                        "pod": {
                            "topologySpreadConstraints": [
                                {
                                    "maxSkew": 1,
                                    "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "ScheduleAnyway",
                                    "labelSelector": {"matchLabels": dict([PROXY_LABEL])},
                                }
                            ]
                        },
                    },
                    "envoyPDB": {"minAvailable": max(replicas - 1, 0)} if replicas > 1 else {},
                },
            }
        },
    }


def gateway() -> dict[str, Any]:
    """One HTTPS listener terminating TLS with the cert-manager certificate; routes only from
    this namespace (the per-model routes live beside it)."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": _meta(GATEWAY),
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "listeners": [
                {
                    "name": LISTENER,
                    "protocol": "HTTPS",
                    "port": HTTPS_PORT,
                    "tls": {
                        "mode": "Terminate",
                        "certificateRefs": [{"kind": "Secret", "name": TLS_SECRET}],
                    },
                    "allowedRoutes": {"namespaces": {"from": "Same"}, "kinds": [{"kind": "HTTPRoute"}]},
                }
            ],
        },
    }


def client_traffic_policy() -> dict[str, Any]:
    """Drop a client-set tenant header before any filter runs (Envoy's early header mutation),
    so only apiKeyAuth's forwarded client id reaches the rate limiter and the model servers."""
    return {
        "apiVersion": ENVOY_API,
        "kind": "ClientTrafficPolicy",
        "metadata": _meta(GATEWAY),
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY}],
            "headers": {"earlyRequestHeaders": {"remove": [TENANT_HEADER]}},
        },
    }


def reference_grant() -> dict[str, Any]:
    """Lets HTTPRoutes in the gateway's namespace name InferencePools in the models namespace."""
    return {
        "apiVersion": GATEWAY_API_BETA,
        "kind": "ReferenceGrant",
        "metadata": _meta(GATEWAY, MODELS),
        "spec": {
            "from": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "HTTPRoute",
                    "namespace": GATEWAY_NAMESPACE,
                }
            ],
            "to": [{"group": INFERENCE_API, "kind": "InferencePool"}],
        },
    }


def http_route(model: str) -> dict[str, Any]:
    """`/models/<model>/v1/...` to the model's InferencePool, rewritten to vLLM's `/v1/...`."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": _meta(route_name(model), **{MODEL_LABEL: model}),
        "spec": {
            "parentRefs": [{"name": GATEWAY, "sectionName": LISTENER}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"{POOL_PREFIX}/{model}/v1"}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v1"}
                            },
                        }
                    ],
                    "backendRefs": [
                        {
                            "group": INFERENCE_API,
                            "kind": "InferencePool",
                            "name": model,
                            "namespace": MODELS,
                        }
                    ],
                    # Long generations: the chart's own route uses 300 s.
                    "timeouts": {"request": "300s"},
                }
            ],
        },
    }


def security_policy(model: str, tenants: Sequence[str]) -> dict[str, Any]:
    """API keys on the model's route: only the listed tenants' Secrets are credentials there."""
    if not tenants:
        raise ValueError(f"model {model}: no tenant may call it, so its route would accept no key")
    return {
        "apiVersion": ENVOY_API,
        "kind": "SecurityPolicy",
        "metadata": _meta(route_name(model), **{MODEL_LABEL: model}),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route_name(model)}
            ],
            "apiKeyAuth": {
                "credentialRefs": [{"kind": "Secret", "name": secret_name(t)} for t in tenants],
                # OpenAI clients send `Authorization: Bearer <key>`; Envoy's api_key_auth
                # strips the Bearer prefix of this header.
                "extractFrom": [{"headers": [API_KEY_HEADER]}],
                "forwardClientIDHeader": TENANT_HEADER,
                # The key never reaches the model servers or their logs.
                "sanitize": True,
            },
        },
    }


def rate_limit_policy(models: Sequence[str], tenants: Sequence[Tenant]) -> dict[str, Any]:
    """Each tenant's requests per minute over every route, in one shared bucket per tenant."""
    rules = [
        {
            "clientSelectors": [
                {"headers": [{"name": TENANT_HEADER, "type": "Exact", "value": t.name}]}
            ],
            "limit": {"requests": t.requests_per_minute, "unit": "Minute"},
            "shared": True,
        }
        for t in tenants
    ]
    return {
        "apiVersion": ENVOY_API,
        "kind": "BackendTrafficPolicy",
        "metadata": _meta("rtip-tenant-limits"),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route_name(m)}
                for m in models
            ],
            "rateLimit": {"type": "Global", "global": {"rules": rules}},
        },
    }


def unenforced_token_limits(tenants: Iterable[Tenant]) -> list[str]:
    """Plan notes for tenants whose token limit nothing enforces yet."""
    return [
        f"tenant {t.name}: tokens_per_minute {t.tokens_per_minute} is NOT enforced (Envoy "
        f"Gateway counts requests; token costs need Envoy AI Gateway's AIGatewayRoute); only "
        f"requests_per_minute {t.requests_per_minute} is"
        for t in tenants
        if t.tokens_per_minute
    ]


__all__ = [
    "CONTROLLER_NAME",
    "EPP_PORT",
    "EXTENSION_PORT",
    "GATEWAY",
    "GATEWAY_CLASS",
    "INTERNAL_LB",
    "PROXY_LABEL",
    "REDIS",
    "REDIS_PORT",
    "TENANT_HEADER",
    "Tenant",
    "allowed",
    "client_traffic_policy",
    "envoy_proxy",
    "gateway",
    "gateway_class",
    "http_route",
    "rate_limit_policy",
    "reference_grant",
    "route_name",
    "secret_name",
    "security_policy",
    "tenant_secret",
    "unenforced_token_limits",
]
