"""`routes-behind-auth-and-limits` through the analyzer the Pulumi CLI uses: the front door's own
bodies pass, and each way of leaving a route open or a limit uncharged is caught. Which policy
applies follows Envoy Gateway's documented precedence (route over Gateway, rule over route unless
`mergeType`; envoyproxy/gateway v1.9.0 site/.../security-policy.md, backend-traffic-policy.md)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from rtip.offline import Record
from serving import gateway as gw
from serving import gateway_tenants as tenants_gw
from tests.conftest import record_of
from tests.test_policies import found, res

POLICY = "routes-behind-auth-and-limits"
PROVIDER = "pulumi:providers:kubernetes"
# Two clusters: each Kubernetes object names its cluster's provider.
CLUSTERS = [res(PROVIDER, name, {}) for name in ("c1", "c2")]
HERE, OTHER_CLUSTER = (c.urn for c in CLUSTERS)


class T:
    def __init__(self, name: str, rpm: int, tpm: int | None, models: list[str]) -> None:
        self.name, self.requests_per_minute, self.tokens_per_minute, self.models = name, rpm, tpm, models


TENANTS = [T("search", 600, 2_000_000, ["*"]), T("chat", 60, None, ["m1"])]


def k8s(body: dict[str, Any], name: str | None = None, cluster: str = HERE) -> Any:
    group, _, version = body["apiVersion"].rpartition("/")
    type_ = f"kubernetes:{group}/{version}:{body['kind']}"
    made = res(type_, name or f"{body['kind'].lower()}-{body['metadata']['name']}", body)
    return dataclasses.replace(made, provider=cluster)


def route(tokens: bool = True) -> dict[str, Any]:
    return gw.ai_gateway_route(["m1", "m2"], tokens)


def security() -> dict[str, Any]:
    return tenants_gw.security_policy({"m1": ["chat", "search"], "m2": ["search"]})


def limits() -> dict[str, Any]:
    return tenants_gw.rate_limit_policy(TENANTS)


def flagged(*resources: Any) -> set[str]:
    return {name for policy, name in found(*CLUSTERS, *resources) if policy == POLICY}


def test_the_front_doors_bodies_pass() -> None:
    assert flagged(k8s(route()), k8s(security()), k8s(limits())) == set()


def test_a_route_that_forwards_nothing_needs_no_policies_and_one_that_does_needs_both() -> None:
    """The front door's refusal route is answered by Envoy itself: no key or limit to enforce.
    The same route with a backend, or mirroring to one, reaches a server and must have both."""
    refusal = gw.refused_paths_route(route())
    assert flagged(k8s(route()), k8s(security()), k8s(limits()), k8s(refusal)) == set()
    name = f"httproute-{gw.REFUSED}"
    backend = {"name": "vllm", "port": 8000}
    forwarding = copy.deepcopy(refusal)
    forwarding["spec"]["rules"][0]["backendRefs"] = [backend]
    assert flagged(k8s(forwarding)) == {name}
    mirroring = copy.deepcopy(refusal)
    mirror = {"type": "RequestMirror", "requestMirror": {"backendRef": backend}}
    mirroring["spec"]["rules"][0]["filters"].append(mirror)
    assert flagged(k8s(mirroring)) == {name}
    # An ExtensionRef to a kind some extension server handles may route anywhere.
    extended = copy.deepcopy(refusal)
    extended["spec"]["rules"][0]["filters"][0]["extensionRef"] = {
        "group": "example.com", "kind": "Router", "name": "r"}
    assert flagged(k8s(extended)) == {name}


def test_a_route_without_auth_fails() -> None:
    assert flagged(k8s(route()), k8s(limits())) == {"aigatewayroute-rtip-models"}
    no_auth = security()
    del no_auth["spec"]["apiKeyAuth"]  # RBAC alone proves no identity
    assert flagged(k8s(route()), k8s(no_auth), k8s(limits())) == {"aigatewayroute-rtip-models"}


def test_a_route_without_a_tenant_limit_fails() -> None:
    assert flagged(k8s(route()), k8s(security())) == {"aigatewayroute-rtip-models"}
    shared = limits()
    for rule in shared["spec"]["rateLimit"]["global"]["rules"]:
        del rule["clientSelectors"]  # one bucket for every tenant
    assert flagged(k8s(route()), k8s(security()), k8s(shared)) == {"aigatewayroute-rtip-models"}


def test_a_token_limit_nothing_charges_fails() -> None:
    # The route writes no token cost: the token rules read a key nobody sets.
    assert flagged(k8s(route(tokens=False)), k8s(security()), k8s(limits())) == {
        "aigatewayroute-rtip-models"}
    wrong = limits()
    for rule in wrong["spec"]["rateLimit"]["global"]["rules"]:
        if "cost" in rule:
            rule["cost"]["response"]["metadata"]["key"] = "llm_output_token"
    assert flagged(k8s(route()), k8s(security()), k8s(wrong)) == {"aigatewayroute-rtip-models"}
    # A plain HTTPRoute runs no AI Gateway filter, so a token rule on it never charges.
    plain = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": gw.ROUTE, "namespace": "rtip-system"},
             "spec": {"parentRefs": [{"name": gw.GATEWAY}],
                      "rules": [{"backendRefs": [{"name": "vllm", "port": 8000}]}]}}
    assert flagged(k8s(plain), k8s(security()), k8s(limits())) == {"httproute-rtip-models"}


def test_policies_must_be_on_the_routes_cluster_and_namespace() -> None:
    assert flagged(k8s(route()), k8s(security(), cluster=OTHER_CLUSTER), k8s(limits())) == {
        "aigatewayroute-rtip-models"}
    elsewhere = security()
    elsewhere["metadata"]["namespace"] = "default"
    assert flagged(k8s(route()), k8s(elsewhere), k8s(limits())) == {"aigatewayroute-rtip-models"}


def gateway_wide(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["metadata"]["name"] += "-gw"
    body["spec"]["targetRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                   "name": gw.GATEWAY}]
    return body


def test_gateway_wide_policies_cover_unless_the_route_overrides_them() -> None:
    assert flagged(k8s(route()), k8s(gateway_wide(security())), k8s(gateway_wide(limits()))) == set()
    # A route-level SecurityPolicy without auth replaces the Gateway's: the route is open.
    cors_only = {**security(), "spec": {"targetRefs": security()["spec"]["targetRefs"],
                                        "cors": {"allowOrigins": ["https://a.example"]}}}
    assert flagged(k8s(route()), k8s(gateway_wide(security())), k8s(cors_only),
                   k8s(limits())) == {"aigatewayroute-rtip-models"}
    # ... unless it merges into the Gateway's.
    merged = {**cors_only, "spec": {**cors_only["spec"], "mergeType": "StrategicMerge"}}
    assert flagged(k8s(route()), k8s(gateway_wide(security())), k8s(merged), k8s(limits())) == set()


def test_a_rule_level_policy_without_auth_opens_its_rule() -> None:
    rule = {**security(), "metadata": {**security()["metadata"], "name": "one-rule"},
            "spec": {"targetRefs": [{**security()["spec"]["targetRefs"][0], "sectionName": "r0"}],
                     "cors": {"allowOrigins": ["https://a.example"]}}}
    assert flagged(k8s(route()), k8s(security()), k8s(rule), k8s(limits())) == {
        "aigatewayroute-rtip-models"}


def without(record: Record, kind: str) -> Record:
    return Record(stack=record.stack, resources=[r for r in record.resources
                                                 if r.inputs.get("kind") != kind])


def test_prod_passes_and_dropping_a_policy_is_caught() -> None:
    record = record_of("prod")
    routes = {r.name for r in record.resources if r.inputs.get("kind") == "AIGatewayRoute"}
    assert routes  # one per cluster
    assert flagged(*record.resources) == set()
    for kind in ("SecurityPolicy", "BackendTrafficPolicy"):
        assert flagged(*without(record, kind).resources) == routes, kind
