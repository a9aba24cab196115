"""The front door of every cluster as plain bodies (no Pulumi): Envoy Gateway with TLS, one
inference-aware route over every model, API-key auth per tenant, and per-tenant limits on
requests and tokens per minute.

Shape (components/gateway.py applies it):
- Envoy Gateway (gateway-helm v1.9.0) runs in `rtip-system` with its proxies, its rate-limit
  service and the Redis-protocol store it counts in; the Envoy AI Gateway controller (v1.1.0)
  is its extension server (InferencePool a backend resource: ai-gateway v1.1.0 manifests/
  envoy-gateway-values.yaml, examples/inference-pool/envoy-gateway-values-addon.yaml).
- Per model, the `inferencepool` chart (Gateway API Inference Extension v1.5.0) creates the
  InferencePool `<model>` over the model's predictor pods and its endpoint picker `<model>-epp`
  in the models namespace; a ReferenceGrant there lets the route in `rtip-system` name the pools.

Why an AIGatewayRoute: tokens can only be counted where the response's usage is read. The AI
Gateway's ext_proc reads it (forcing `stream_options.include_usage` on streams, internal/
endpointspec), writes it to dynamic metadata `io.envoy.ai_gateway/<metadataKey>` per
`llmRequestCosts` entry, and Envoy Gateway's global rate limit charges a bucket with it after the
response (AIGatewayRoute CRD v1.1.0 `llmRequestCosts`; examples/token_ratelimit). That filter
runs only on routes generated from an AIGatewayRoute.

Why ONE AIGatewayRoute (`rtip-models`) for every model, routed on the model named in the body:
- An AIGatewayRoute matches on headers only (the controller sets every generated path match to
  its root prefix "/": internal/controller/ai_gateway_route.go newHTTPRoute). The filter copies
  the body's `model` into `x-ai-eg-model`, overwriting a client-set value (internal/extproc/
  processor_impl.go), and clears the route cache; each rule matches it on vLLM's
  `--served-model-name`, so clients use the plain OpenAI base URL `https://<gateway>/v1`.
- Envoy Gateway orders api_key_auth (7) before every ext_proc (100+), RBAC (301) and rate limit
  (303) (gateway v1.9.0 internal/xds/translator/httpfilters.go), and the AI Gateway inserts its
  filter before the first ext_proc (insertAIGatewayExtProcFilter). So the key is verified on
  the route the request matched BEFORE the body was read (typically the generated
  `route-not-found` rule), and RBAC and the rate limit run on the model's rule afterwards. With
  a route per model, a key valid on whichever route matched first would pass, then the request
  would move to a model its tenant may not call. With one route, every rule it can match, first
  or last, carries the same SecurityPolicy and BackendTrafficPolicy, and Envoy builds the filter
  chain from the first match (ai-gateway quota_ratelimit.go notes this), so nothing is skipped.
- Auth (bodies in serving/gateway_tenants.py, as the limits'): the SecurityPolicy's
  `apiKeyAuth` takes every calling tenant's Secret (one key: the tenant's name, its value the
  API key) and forwards the verified client id as TENANT_HEADER,
  whose client-set copy a ClientTrafficPolicy strips first (`earlyRequestHeaders`). Its RBAC
  (default Deny) allows a request only when TENANT_HEADER names a tenant listed for the model AND
  `x-ai-eg-model` names that model: tenant from the credential, model from the body.
- Limits: one BackendTrafficPolicy, per tenant a Global rule on TENANT_HEADER counting requests
  and, with tokens_per_minute, one whose request costs 0 (only checks the bucket) and whose
  response costs the total tokens (`llm_total_token`, TotalToken: prompt plus output, as the
  stack's tokens_per_minute says). The request that crosses the limit completes; the next waits.
- Paths other than the OpenAI/Anthropic endpoints the filter registers (cmd/extproc/mainlib/
  main.go) get its 404: vLLM's other endpoints are unreachable. `GET /v1/models` is answered by
  the filter itself, to any valid key, with the route's model names (names only).
- The Responses API (`/v1/responses`, which the filter registers and forwards) is refused with
  a 404 of the gateway's own: vLLM 0.11 sizes a Responses request's output from the request and
  the context alone (protocol.py ResponsesRequest.to_sampling_params), not from the generation
  config that caps chat and completions (`models[].max_output_tokens`, serving/drain.py), so one
  response there could outlast the drain. No flag of vLLM 0.11 or the AI Gateway v1.1.0 turns
  the endpoint off, and the AIGatewayRoute cannot match paths (its controller sets every rule's
  to "/"), so a plain HTTPRoute on the same listener answers the prefix with a direct response
  (an HTTPRouteFilter, Envoy Gateway v1.9.0 internal/gatewayapi/filters.go). It sorts ahead of
  every rule of the model route: Envoy Gateway orders a listener's routes by path match type,
  then path length with "/" counting 0, and only then by header matches (internal/gatewayapi/
  sort.go), so the match is made before the AI Gateway's filter runs, which stays off on a
  route it did not generate (internal/extensionserver/post_translate_modify.go). No backend is
  reached; a caller gets the 404 with or without a key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from serving.hardware import Cloud
from serving.manifests import MANAGED
from serving.netpol import EPP_PORT, GATEWAY_NAMESPACE, HTTPS_PORT, MODELS, PROXY_LABEL

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_API_BETA = "gateway.networking.k8s.io/v1beta1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
ENVOY_API = "gateway.envoyproxy.io/v1alpha1"
AI_API = "aigateway.envoyproxy.io/v1beta1"
INFERENCE_API = "inference.networking.k8s.io"
CERT_API = "cert-manager.io/v1"
# Envoy Gateway's controller name (gateway-helm values config.envoyGateway.gateway.controllerName).
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
GATEWAY_CLASS = "rtip"
GATEWAY = "rtip-gateway"
PROXY_CONFIG = "rtip-gateway-proxy"
LISTENER = "https"
# The AIGatewayRoute; the controller names the HTTPRoute it generates the same, in the same
# namespace (ai_gateway_route.go syncAIGatewayRoute), which is what the policies target.
ROUTE = "rtip-models"
TENANT_HEADER = "x-rtip-tenant"
# The AI Gateway's own examples (examples/basic/basic.yaml, v1.1.0) set 50Mi: a full 131k-token
# context as JSON text is a few MB, a base64 image for the VL model tens of MB.
REQUEST_BUFFER = "50Mi"
API_KEY_HEADER = "authorization"
# The header the AI Gateway filter sets from the body's model (api/v1beta1 AIModelHeaderKey).
MODEL_HEADER = "x-ai-eg-model"
# Where the filter writes request costs (api/v1beta1 AIGatewayFilterMetadataNamespace) and the
# key this toolkit gives the total-token cost.
COST_NAMESPACE = "io.envoy.ai_gateway"
TOKEN_COST_KEY = "llm_total_token"
TLS_SECRET = "rtip-gateway-tls"
CA_SECRET = "rtip-gateway-ca"
# The AI Gateway controller's Service (ai-gateway-helm fullnameOverride) and gRPC port for the
# extension manager (its values: controller.service.ports grpc 1063).
EXTENSION_SERVICE = "ai-gateway-controller"
EXTENSION_PORT = 1063
REDIS = "rtip-ratelimit-redis"
REDIS_PORT = 6379
# Long generations: the inferencepool chart's own route uses 300 s (the AI Gateway's default 60 s).
REQUEST_TIMEOUT = "300s"
# Paths the gateway answers itself instead of forwarding (see the module doc), and the route and
# filter that do it. A PathPrefix becomes Envoy's path_separated_prefix: `/v1/responses/{id}`
# and `/v1/responses/input_tokens` too, not `/v1/responsesX`.
REFUSED_PATHS = ("/v1/responses",)
REFUSED = "rtip-refused-paths"
REFUSED_STATUS = 404

# How a Service of type LoadBalancer asks each cloud for an internal load balancer: AWS (the
# in-tree provider and the AWS Load Balancer Controller both honour it), GKE (internal passthrough
# Network Load Balancer), AKS (internal Azure Load Balancer). Public is each cloud's default.
INTERNAL_LB: dict[Cloud, dict[str, str]] = {
    Cloud.AWS: {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
    Cloud.GCP: {"networking.gke.io/load-balancer-type": "Internal"},
    Cloud.AZURE: {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"},
}


def _meta(name: str, namespace: str | None = GATEWAY_NAMESPACE, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def hashed_name(ns_name: str, length: int) -> str:
    """Envoy Gateway's partly hashed name for a `<namespace>/<name>` key (v1.9.0 `utils/misc.go`
    GetHashedName): the key with '/' as '-', cut to `length` characters without a trailing '-'
    where longer, then '-' and the first 8 hex digits of the whole key's SHA-256."""
    name = ns_name.replace("/", "-")
    if 0 < length < len(name):
        name = name[:length].removesuffix("-")
    return f"{name}-{hashlib.sha256(ns_name.encode()).hexdigest()[:8]}"


def proxy_deployment(namespace: str, gateway: str) -> str:
    """The name Envoy Gateway v1.9.0 gives a Gateway's proxy Deployment where the EnvoyProxy
    names none (ours does not: renaming it would make Envoy Gateway delete the running proxies
    before the new ones serve, `infra_client.go` DeleteAllExcept): `envoy-` and the hashed name
    of `<namespace>/<name>` cut at 48 characters (`proxy/resource.go` ExpectedResourceHashedName),
    in the controller's namespace (gateways not merged, the chart's ControllerNamespace mode)."""
    return f"envoy-{hashed_name(f'{namespace}/{gateway}', 48)}"


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
    this namespace (where the AI Gateway generates its HTTPRoute)."""
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
    so only apiKeyAuth's forwarded client id reaches RBAC, the rate limiter and the models; and
    raise the per-connection buffer: the AI Gateway's ext_proc buffers the whole request body
    (ai-gateway v1.1.0 internal/extensionserver/post_translate_modify.go), and Envoy Gateway's
    default of 32 KiB (v1.9.0 api/v1alpha1/connection_types.go) answers 413 to any prompt past a
    few thousand tokens or any image for the VL model."""
    return {
        "apiVersion": ENVOY_API,
        "kind": "ClientTrafficPolicy",
        "metadata": _meta(GATEWAY),
        "spec": {
            "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY}],
            "headers": {"earlyRequestHeaders": {"remove": [TENANT_HEADER]}},
            "connection": {"bufferLimit": REQUEST_BUFFER},
        },
    }


def reference_grant() -> dict[str, Any]:
    """Lets the route in the gateway's namespace name InferencePools in the models namespace: the
    AI Gateway controller checks the AIGatewayRoute's reference (internal/controller/
    referencegrant.go: from group aigateway.envoyproxy.io, kind AIGatewayRoute), Envoy Gateway
    the generated HTTPRoute's."""
    return {
        "apiVersion": GATEWAY_API_BETA,
        "kind": "ReferenceGrant",
        "metadata": _meta(GATEWAY, MODELS),
        "spec": {
            "from": [
                {"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": GATEWAY_NAMESPACE},
                {"group": "aigateway.envoyproxy.io", "kind": "AIGatewayRoute",
                 "namespace": GATEWAY_NAMESPACE},
            ],
            "to": [{"group": INFERENCE_API, "kind": "InferencePool"}],
        },
    }


def ai_gateway_route(models: Sequence[str], token_costs: bool) -> dict[str, Any]:
    """One rule per model: the body's model (as `x-ai-eg-model`) to the model's InferencePool.
    `token_costs`: have the filter record each response's total tokens for the token limits."""
    if not models:
        raise ValueError("an AIGatewayRoute needs at least one model to route")
    spec: dict[str, Any] = {
        "parentRefs": [
            {"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY, "sectionName": LISTENER}
        ],
        "rules": [
            {
                "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": m}]}],
                "backendRefs": [
                    {"group": INFERENCE_API, "kind": "InferencePool", "name": m, "namespace": MODELS}
                ],
                "timeouts": {"request": REQUEST_TIMEOUT},
            }
            for m in models
        ],
    }
    if token_costs:
        spec["llmRequestCosts"] = [{"metadataKey": TOKEN_COST_KEY, "type": "TotalToken"}]
    return {"apiVersion": AI_API, "kind": "AIGatewayRoute", "metadata": _meta(ROUTE), "spec": spec}


def refused_paths_filter() -> dict[str, Any]:
    """The direct response for REFUSED_PATHS, an OpenAI-shaped error. The body is an Envoy
    format string (xds/translator route.go buildXdsDirectResponseAction): no `%` in it."""
    message = (f"{', '.join(REFUSED_PATHS)} is not served by this gateway: "
               "use /v1/chat/completions or /v1/completions")
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "code": "unsupported_endpoint"}}, separators=(",", ":"))
    return {
        "apiVersion": ENVOY_API,
        "kind": "HTTPRouteFilter",
        "metadata": _meta(REFUSED),
        "spec": {"directResponse": {"statusCode": REFUSED_STATUS, "contentType": "application/json",
                                    "body": {"type": "Inline", "inline": body}}},
    }


def refused_paths_route(model_route: dict[str, Any]) -> dict[str, Any]:
    """A plain HTTPRoute answering REFUSED_PATHS with `refused_paths_filter`, on the parents
    and hostnames of `model_route` (the AIGatewayRoute): Envoy Gateway builds a virtual host per
    hostname, so a route on other hostnames would never be consulted for the model route's. In
    the filter's namespace, where Envoy Gateway looks an ExtensionRef up (filters.go)."""
    spec: dict[str, Any] = {
        "parentRefs": model_route["spec"]["parentRefs"],
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": p}} for p in REFUSED_PATHS],
            "filters": [{"type": "ExtensionRef", "extensionRef": {
                "group": ENVOY_API.split("/")[0], "kind": "HTTPRouteFilter", "name": REFUSED}}],
        }],
    }
    if "hostnames" in model_route["spec"]:
        spec["hostnames"] = model_route["spec"]["hostnames"]
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": _meta(REFUSED), "spec": spec}


def _route_ref() -> dict[str, str]:
    return {"group": GATEWAY_GROUP, "kind": "HTTPRoute", "name": ROUTE}


__all__ = [
    "AI_API",
    "CONTROLLER_NAME",
    "COST_NAMESPACE",
    "EPP_PORT",
    "EXTENSION_PORT",
    "GATEWAY",
    "GATEWAY_CLASS",
    "INTERNAL_LB",
    "MODEL_HEADER",
    "PROXY_LABEL",
    "REDIS",
    "REDIS_PORT",
    "REFUSED",
    "REFUSED_PATHS",
    "REFUSED_STATUS",
    "ROUTE",
    "TENANT_HEADER",
    "TOKEN_COST_KEY",
    "ai_gateway_route",
    "client_traffic_policy",
    "envoy_proxy",
    "gateway",
    "gateway_class",
    "reference_grant",
    "refused_paths_filter",
    "refused_paths_route",
]
