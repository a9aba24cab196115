"""The front door: every route the stack emits is behind auth and a per-tenant rate limit.

A route is an HTTPRoute, or an Envoy AI Gateway AIGatewayRoute, from which the AI Gateway
controller generates an HTTPRoute of the same name in the same namespace (ai-gateway v1.1.0
internal/controller/ai_gateway_route.go): Envoy Gateway policies can target only that HTTPRoute.

Which policy applies (Envoy Gateway v1.9.0 site/content/en/latest/concepts/gateway_api_extensions/
security-policy.md and backend-traffic-policy.md): one targeting the route overrides one targeting
its Gateway, and one targeting a rule (`sectionName`) overrides both for that rule, unless it sets
`mergeType`, which merges it into its parent's. So the route-wide policies (or, without any, the
Gateway's) must carry the requirement, and so must every rule-level one that does not merge.
Policies count on the same cluster only: the same Kubernetes provider.

The requirement: a SecurityPolicy with `apiKeyAuth` credentials or `jwt` providers, and a
BackendTrafficPolicy with a rate limit whose request-counting rules each select a client (per
tenant, not one bucket for everyone). A rule charged by response metadata (a token limit) must
read a key the route's AI Gateway filter writes (`llmRequestCosts[].metadataKey` in namespace
io.envoy.ai_gateway): on a plain HTTPRoute or another key nothing charges the bucket, so the
limit would silently never apply.

A plain HTTPRoute that forwards nothing (no rule names a backend, mirrors to one or hands the
request to an extension server) needs neither: Envoy Gateway answers its requests itself, with
a filter's direct response or a 500 (Gateway API: a rule without backendRefs; envoyproxy/gateway
v1.9.0 internal/gatewayapi/route.go), as the front door's refusal of `/v1/responses` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.rules.base import Config, StackResource, get

HTTPROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
AI_ROUTE_KIND = "AIGatewayRoute"
SECURITY_POLICY = "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy"
TRAFFIC_POLICY = "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy"
# api/v1beta1 AIGatewayFilterMetadataNamespace of envoyproxy/ai-gateway v1.1.0.
AI_COST_NAMESPACE = "io.envoy.ai_gateway"
ENVOY_GATEWAY_GROUP = "gateway.envoyproxy.io"


def _is_route(r: StackResource) -> bool:
    return r.type == HTTPROUTE or (
        r.type.startswith("kubernetes:aigateway.envoyproxy.io/") and r.type.endswith(f":{AI_ROUTE_KIND}")
    )


def _may_forward(rule_filter: dict[str, Any]) -> bool:
    """A RequestMirror copies the request to a backend; an ExtensionRef to anything but Envoy
    Gateway's own HTTPRouteFilter is handed to an extension server, which may route it anywhere.
    Redirects and header or URL rewrites answer or change the request, and reach nothing alone."""
    if rule_filter.get("type") == "RequestMirror":
        return True
    ref = rule_filter.get("extensionRef") or {}
    return rule_filter.get("type") == "ExtensionRef" and (
        ref.get("group"), ref.get("kind")) != (ENVOY_GATEWAY_GROUP, "HTTPRouteFilter")


def _forwards(route: StackResource) -> bool:
    """Whether any rule may send a request to a backend: its backendRefs, or a filter that may
    (`_may_forward`). An AIGatewayRoute's rules always route to their backends."""
    if route.type != HTTPROUTE:
        return True
    rules = get(route.props, "spec", "rules", default=[])
    return any(rule.get("backendRefs") or any(_may_forward(f) for f in rule.get("filters") or [])
               for rule in rules)


def _targets(policy: StackResource) -> list[dict[str, Any]]:
    spec = get(policy.props, "spec", default={})
    refs = list(spec.get("targetRefs") or [])
    if spec.get("targetRef"):
        refs.append(spec["targetRef"])
    return refs


def _namespace(r: StackResource) -> str | None:
    return get(r.props, "metadata", "namespace")


def _applying(route: StackResource, policies: list[StackResource]) -> list[tuple[list[StackResource], bool]]:
    """The sets of policies of one kind that decide for the route's requests, each with whether
    its members merge: the route-wide (else Gateway-wide) set, and each rule-level policy that
    does not merge into it."""
    name = get(route.props, "metadata", "name")
    gateways = {get(p, "name") for p in get(route.props, "spec", "parentRefs", default=[])}
    here = [p for p in policies if p.provider == route.provider and _namespace(p) == _namespace(route)]

    def aimed(p: StackResource, kind: str, names: set[Any], whole: bool) -> bool:
        return any(t.get("kind") == kind and t.get("name") in names
                   and (not t.get("sectionName")) == whole for t in _targets(p))

    route_wide = [p for p in here if aimed(p, "HTTPRoute", {name}, True)]
    gateway_wide = [p for p in here if aimed(p, "Gateway", gateways, True)]
    merging = any(get(p.props, "spec", "mergeType") for p in route_wide)
    base = (route_wide + gateway_wide, True) if merging else (route_wide or gateway_wide, False)
    rules = [([p], False) for p in here if aimed(p, "HTTPRoute", {name}, False)
             and not get(p.props, "spec", "mergeType")]
    return [base, *rules]


def _has_auth(policy: StackResource) -> bool:
    spec = get(policy.props, "spec", default={})
    return bool(get(spec, "apiKeyAuth", "credentialRefs", default=[])
                or get(spec, "jwt", "providers", default=[]))


def _limit_rules(policy: StackResource) -> list[dict[str, Any]]:
    limit = get(policy.props, "spec", "rateLimit", default={})
    return list(get(limit, "global", "rules", default=[])) + list(get(limit, "local", "rules", default=[]))


def _charged_by_response(rule: dict[str, Any]) -> bool:
    return get(rule, "cost", "response", "from") == "Metadata"


def _token_problems(route: StackResource, rules: list[dict[str, Any]]) -> Iterator[str]:
    written = {get(c, "metadataKey") for c in get(route.props, "spec", "llmRequestCosts", default=[])}
    ai_route = route.type != HTTPROUTE
    for rule in (r for r in rules if _charged_by_response(r)):
        namespace = get(rule, "cost", "response", "metadata", "namespace")
        key = get(rule, "cost", "response", "metadata", "key")
        if not ai_route or namespace != AI_COST_NAMESPACE or key not in written:
            yield (f"a token limit reads response metadata {namespace}/{key}, which the route's "
                   f"AI Gateway filter never writes (llmRequestCosts keys: "
                   f"{', '.join(sorted(written)) or 'none'}), so it never charges")


def _limit_problems(route: StackResource, chosen: list[StackResource]) -> Iterator[str]:
    rules = [r for p in chosen for r in _limit_rules(p)]
    counting = [r for r in rules if not _charged_by_response(r)]
    if not counting:
        yield "no BackendTrafficPolicy rate-limits its requests"
    elif any(not r.get("clientSelectors") for r in counting):
        yield "a request limit selects no client, so every tenant shares one bucket"
    yield from _token_problems(route, rules)


def routes_behind_auth_and_limits(resources: list[StackResource],
                                  config: Config) -> Iterator[tuple[str, str]]:
    security = [r for r in resources if r.type == SECURITY_POLICY]
    traffic = [r for r in resources if r.type == TRAFFIC_POLICY]
    for route in (r for r in resources if _is_route(r) and _forwards(r)):
        what = f"{route.type.rsplit(':', 1)[-1]} {get(route.props, 'metadata', 'name')}"
        for chosen, merged in _applying(route, security):
            # Merged policies combine; of several that do not, any one may be the one applied.
            authed = [_has_auth(p) for p in chosen]
            if not (any(authed) if merged else authed and all(authed)):
                yield route.urn, f"{what}: no SecurityPolicy with apiKeyAuth or JWT covers it"
                break
        for chosen, _ in _applying(route, traffic):
            problems = list(_limit_problems(route, chosen))
            if problems:
                yield route.urn, f"{what}: {'; '.join(problems)}"
                break


__all__ = ["routes_behind_auth_and_limits"]
