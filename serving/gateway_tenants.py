"""The front door's tenant side as plain bodies (no Pulumi): each tenant's API-key Secret, the
SecurityPolicy that checks the key and lets a verified tenant call only its listed models, and the
BackendTrafficPolicy with its requests and tokens per minute. serving/gateway.py's module doc
says why these sit on the one route `rtip-models` and how the tenant header is kept honest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from serving.gateway import (
    API_KEY_HEADER,
    COST_NAMESPACE,
    ENVOY_API,
    MODEL_HEADER,
    ROUTE,
    TENANT_HEADER,
    TOKEN_COST_KEY,
    _meta,
    _route_ref,
)


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


def allowed(tenants: Iterable[Tenant], model: str) -> list[str]:
    """Names of the tenants that may call `model` (its name listed, or "*")."""
    return [t.name for t in tenants if model in t.models or "*" in t.models]


def secret_name(tenant: str) -> str:
    return f"rtip-tenant-{tenant}"


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


def security_policy(routed: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """API keys of every calling tenant on the route, then RBAC: a request passes only if its
    verified tenant is listed for the model its body names. `routed`: model -> its tenants."""
    empty = sorted(m for m, tenants in routed.items() if not tenants)
    if not routed or empty:
        raise ValueError(f"models {', '.join(empty) or '(none)'}: no tenant may call them, so "
                         "the route would accept no key")
    callers = sorted({t for tenants in routed.values() for t in tenants})
    return {
        "apiVersion": ENVOY_API,
        "kind": "SecurityPolicy",
        "metadata": _meta(ROUTE),
        "spec": {
            "targetRefs": [_route_ref()],
            "apiKeyAuth": {
                "credentialRefs": [{"kind": "Secret", "name": secret_name(t)} for t in callers],
                # OpenAI clients send `Authorization: Bearer <key>`; Envoy's api_key_auth
                # strips the Bearer prefix of this header.
                "extractFrom": [{"headers": [API_KEY_HEADER]}],
                "forwardClientIDHeader": TENANT_HEADER,
                # The key never reaches the model servers or their logs.
                "sanitize": True,
            },
            "authorization": {
                "defaultAction": "Deny",
                "rules": [
                    {
                        "name": f"model-{m}",
                        "action": "Allow",
                        "principal": {
                            "headers": [
                                {"name": TENANT_HEADER, "values": sorted(tenants)},
                                {"name": MODEL_HEADER, "values": [m]},
                            ]
                        },
                    }
                    for m, tenants in sorted(routed.items())
                ],
            },
        },
    }


def _tenant(name: str) -> list[dict[str, Any]]:
    return [{"headers": [{"name": TENANT_HEADER, "type": "Exact", "value": name}]}]


def rate_limit_policy(tenants: Sequence[Tenant]) -> dict[str, Any]:
    """Each tenant's requests per minute and, where set, tokens per minute on the route."""
    rules: list[dict[str, Any]] = []
    for t in tenants:
        rules.append({
            "clientSelectors": _tenant(t.name),
            "limit": {"requests": t.requests_per_minute, "unit": "Minute"},
            "shared": True,
        })
        if t.tokens_per_minute:
            rules.append({
                "clientSelectors": _tenant(t.name),
                # The bucket counts tokens: a request only checks it (cost 0) and its response
                # charges the total tokens the AI Gateway filter read from the usage.
                "limit": {"requests": t.tokens_per_minute, "unit": "Minute"},
                "cost": {
                    "request": {"from": "Number", "number": 0},
                    "response": {
                        "from": "Metadata",
                        "metadata": {"namespace": COST_NAMESPACE, "key": TOKEN_COST_KEY},
                    },
                },
                "shared": True,
            })
    if not rules:
        raise ValueError("no tenant calls the route, so it would have no rate limit")
    return {
        "apiVersion": ENVOY_API,
        "kind": "BackendTrafficPolicy",
        "metadata": _meta("rtip-tenant-limits"),
        "spec": {
            "targetRefs": [_route_ref()],
            "rateLimit": {"type": "Global", "global": {"rules": rules}},
        },
    }


__all__ = [
    "Tenant",
    "allowed",
    "rate_limit_policy",
    "secret_name",
    "security_policy",
    "tenant_secret",
]
