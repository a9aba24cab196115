"""The front door's Helm values and the rate-limit Redis (serving/gateway.py's module doc says why
each piece exists); split from it to keep each module small. Pure: plain values in, dicts out."""

from __future__ import annotations

from typing import Any, Protocol

from serving import failover
from serving._model_pod import VLLM_PORT
from serving.deployments import MODEL_LABEL
from serving.gateway import (
    CA_SECRET,
    CERT_API,
    EXTENSION_PORT,
    EXTENSION_SERVICE,
    GATEWAY,
    INFERENCE_API,
    REDIS,
    REDIS_PORT,
    TLS_SECRET,
    _meta,
)
from serving.kube_names import ZONE_KEY
from serving.manifests import MANAGED
from serving.netpol import GATEWAY_NAMESPACE, PICKER_LABEL


def hostnames(cluster: str) -> list[str]:
    """Names the serving certificate covers: the stack-named host clients are given (pointed at the
    load balancer by whoever owns the zone) and the in-cluster Service names."""
    return [
        f"{cluster}.gateway.rtip.internal",
        f"{GATEWAY}.{GATEWAY_NAMESPACE}.svc",
        f"{GATEWAY}.{GATEWAY_NAMESPACE}.svc.cluster.local",
    ]


def certificates(cluster: str) -> list[dict[str, Any]]:
    """A private CA per cluster (self-signed root, then a CA issuer) and the listener's
    certificate from it: the stack names no public domain, so no ACME issuer can prove one;
    clients trust the CA in Secret CA_SECRET (ca.crt)."""
    root, ca = "rtip-gateway-selfsigned", "rtip-gateway-ca"
    return [
        {"apiVersion": CERT_API, "kind": "Issuer", "metadata": _meta(root), "spec": {"selfSigned": {}}},
        {
            "apiVersion": CERT_API,
            "kind": "Certificate",
            "metadata": _meta(ca),
            "spec": {
                "isCA": True,
                "commonName": f"rtip gateway CA {cluster}",
                "secretName": CA_SECRET,
                "duration": "87600h",
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"name": root, "kind": "Issuer", "group": "cert-manager.io"},
            },
        },
        {
            "apiVersion": CERT_API,
            "kind": "Issuer",
            "metadata": _meta(ca),
            "spec": {"ca": {"secretName": CA_SECRET}},
        },
        {
            "apiVersion": CERT_API,
            "kind": "Certificate",
            "metadata": _meta(GATEWAY),
            "spec": {
                "secretName": TLS_SECRET,
                "dnsNames": hostnames(cluster),
                "duration": "2160h",
                "renewBefore": "720h",
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"name": ca, "kind": "Issuer", "group": "cert-manager.io"},
            },
        },
    ]


class Images(Protocol):
    """Where the cluster pulls each pinned toolkit image from (serving.images.RegionalRegistry):
    a whole reference, or a repository and tag for charts that take the two apart."""

    def ref(self, key: str, what: str) -> str: ...

    def repository_and_tag(self, key: str, what: str) -> tuple[str, str]: ...


def redis(image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rate-limit service's counter store: one replica, memory only. Counters live for a
    minute, so losing them on a restart resets at most one window; sized for a few thousand keys."""
    labels = {"app.kubernetes.io/name": REDIS}
    container = {
        "name": "redis",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            "96mb",
            # Every rate-limit key has a TTL; evict the nearest to expiry under pressure.
            "--maxmemory-policy",
            "volatile-ttl",
            "--protected-mode",
            "no",
        ],
        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"},
        },
        "readinessProbe": {"tcpSocket": {"port": REDIS_PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": REDIS_PORT}, "periodSeconds": 10},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(REDIS, **labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**MANAGED, **labels}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(REDIS, **labels),
        "spec": {
            "selector": labels,
            "ports": [
                {"name": "redis", "port": REDIS_PORT, "targetPort": REDIS_PORT, "protocol": "TCP"}
            ],
        },
    }
    return deployment, service


def gateway_values(images: Images, replicas: int) -> dict[str, Any]:
    """gateway-helm: CRDs come from gateway-crds-helm (installed first), so the subchart is off."""
    svc = f"{EXTENSION_SERVICE}.{GATEWAY_NAMESPACE}.svc.cluster.local"
    return {
        "crds": {"enabled": False},
        "global": {
            "images": {
                key: {"image": images.ref(image, f"gateway-helm global.images.{key}")}
                for key, image in (("envoyGateway", "envoy-gateway"),
                                   ("ratelimit", "envoy-ratelimit"),
                                   ("envoyProxy", "envoy-proxy"))
            }
        },
        "deployment": {"replicas": replicas},
        "podDisruptionBudget": {"minAvailable": 1 if replicas > 1 else 0},
        "config": {
            "envoyGateway": {
                # The rate-limit service Envoy Gateway deploys counts in this Redis
                # (EnvoyGateway API: rateLimit.backend type Redis, redis.url host:port).
                "rateLimit": {
                    "backend": {
                        "type": "Redis",
                        "redis": {"url": f"{REDIS}.{GATEWAY_NAMESPACE}.svc.cluster.local:{REDIS_PORT}"},
                    }
                },
                # InferencePool backends are translated by the AI Gateway controller (see module doc).
                "extensionManager": {
                    "backendResources": [
                        {"group": INFERENCE_API, "kind": "InferencePool", "version": "v1"}
                    ],
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                k: {"includeAll": True}
                                for k in ("listener", "route", "cluster", "secret")
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {"fqdn": {"hostname": svc, "port": EXTENSION_PORT}},
                },
            }
        },
    }


def gateway_crds_values() -> dict[str, Any]:
    # Standard channel: every Gateway API kind used here is GA; experimental CRDs can change shape.
    return {
        "crds": {
            "gatewayAPI": {"enabled": True, "channel": "standard"},
            "envoyGateway": {"enabled": True},
        }
    }


def ai_gateway_values(images: Images, replicas: int) -> dict[str, Any]:
    controller, controller_tag = images.repository_and_tag(
        "ai-gateway-controller", "ai-gateway-helm controller.image")
    extproc, extproc_tag = images.repository_and_tag("ai-gateway-extproc", "ai-gateway-helm extProc.image")
    return {
        "controller": {
            "image": {"repository": controller, "tag": controller_tag},
            "replicaCount": replicas,
            "resources": {
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        },
        "extProc": {"image": {"repository": extproc, "tag": extproc_tag}},
        # Its ClusterRoleBinding lets Envoy Gateway's service account (in our namespace) read pools.
        "envoyGateway": {"namespace": GATEWAY_NAMESPACE},
    }


def picker_name(release: str) -> str:
    """The endpoint picker's name, and its pods' `inferencepool` label, in an inferencepool
    release (epplib `_helpers.tpl`: the release name, lower-cased, trimmed, cut at 40, + `-epp`)."""
    return f"{release.lower().strip()[:40]}-epp"


def inference_pool_values(model: str, images: Images, replicas: int) -> dict[str, Any]:
    """The `inferencepool` chart for one model: the pool selects the model's predictor pods (the
    label serving/deployments.py puts on them) on vLLM's port; the picker pulls from the region."""
    repository, tag = images.repository_and_tag("epp", f"inferencepool {model} inferenceExtension.image")
    registry, _, path = repository.partition("/gateway-api-inference-extension/")
    return {
        "inferencePool": {
            "modelServers": {"matchLabels": {MODEL_LABEL: model}},
            "targetPorts": [{"number": VLLM_PORT}],
            "modelServerType": "vllm",
        },
        "inferenceExtension": {
            "replicas": replicas,
            "image": {
                "registry": registry,
                "repository": f"gateway-api-inference-extension/{path}",
                "tag": tag,
                "pullPolicy": "IfNotPresent",
            },
            # Smaller than the chart's scale-test default (4 CPU, 8 GiB) for one model's pool;
            # memory limit kept so a leak cannot take the node.
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
            # What the gateway does anyway: the AI Gateway v1.1.0 builds the InferencePool's
            # ext_proc filter with FailureModeAllow false whatever the pool says
            # (internal/extensionserver/inferencepool.go); the chart's default, FailOpen, would
            # have the object claim the opposite (inferencepool v1.5.0 templates/inferencepool.yaml).
            "failureMode": "FailClose",
            # The chart's scorers behind a filter that drops an endpoint whose metrics stopped
            # coming: a lost zone's pods leave the picks in 1 s, not the 50-55 s until the API
            # marks them NotReady (serving/failover.py).
            **failover.picker_values(),
            # The pickers (a leader and its standby) in different zones where the nodes allow:
            # a zone lost with both would leave the model with no picker until they are
            # rescheduled, and the ext_proc filter fails closed. The label is the chart's pod
            # selector (epplib `_helpers.tpl` selectorLabels: `inferencepool: <release>-epp`, the
            # release named after the model, components/gateway.py).
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"topologyKey": ZONE_KEY,
                                    "labelSelector": {"matchLabels": {PICKER_LABEL: picker_name(model)}}},
            }]}},
        },
        "provider": {"name": "none"},
    }


__all__ = [
    "Images",
    "ai_gateway_values",
    "certificates",
    "gateway_crds_values",
    "gateway_values",
    "hostnames",
    "inference_pool_values",
    "picker_name",
    "redis",
]
