"""The front door: every route behind API keys and the tenant limits the stack file states, keys
only ever as secrets, pools over the model servers KServe runs, the load balancer as the posture
says. Expected values come from the stack files themselves (read as YAML here), the upstream CRDs
and chart values in ../shared, and the InferenceService bodies in the record."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components.gateway import CRD_DIR, CRD_FILES
from rtip.offline import SECRET_MARK, Record, Resource
from serving import gateway as gw
from serving import gateway_tenants as tenants_gw
from serving.hardware import Cloud
from tests.conftest import PROJECT_DIR, SHARED, record_of
from tests.test_crds import check

HELM = "kubernetes:helm.sh/v3:Release"
_AI_CRDS = SHARED / "charts/ai-gateway-crds-helm/v1.1.0/crds"
_AI_ROUTE_CRD = yaml.safe_load((_AI_CRDS / "aigateway.envoyproxy.io_aigatewayroutes.yaml").read_text())
# What the pinned AIGatewayRoute CRD says of llmRequestCosts (where the filter writes the costs).
COSTS_DOC = next(v for v in _AI_ROUTE_CRD["spec"]["versions"] if v["name"] == "v1beta1")[
    "schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["llmRequestCosts"]["description"]


def stack_tenants(stack: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return list(doc["config"]["rtip:platform"].get("tenants") or [])


def stack_doc(stack: str) -> dict[str, Any]:
    return yaml.safe_load((PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml").read_text())


def kind(record: Record, k: str) -> list[Resource]:
    return [
        r
        for r in record.resources
        if r.inputs.get("kind") == k
        and r.type.startswith("kubernetes:")
        and not r.type.startswith("kubernetes:helm")
    ]


def cluster_of(record: Record, r: Resource) -> str:
    return r.urn.split("::")[-1].split("-gateway")[0]


STACKS = ["dev", "staging", "prod"]


def routes(record: Record) -> list[Resource]:
    return kind(record, "AIGatewayRoute")


def targeting(record: Record, k: str, route: Resource) -> list[Resource]:
    """Policies of kind `k` on the route's cluster aimed at the HTTPRoute the AI Gateway
    controller generates from it: same name, same namespace (ai-gateway v1.1.0
    internal/controller/ai_gateway_route.go syncAIGatewayRoute)."""
    name, ns = route.inputs["metadata"]["name"], route.inputs["metadata"]["namespace"]
    return [
        p for p in kind(record, k)
        if cluster_of(record, p) == cluster_of(record, route) and p.inputs["metadata"]["namespace"] == ns
        and {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": name}
        in p.inputs["spec"]["targetRefs"]
    ]


def served_name(isvc: Resource) -> str:
    """vLLM's --served-model-name: the `model` an OpenAI body must name for this server."""
    args = isvc.inputs["spec"]["predictor"]["model"]["args"]
    return next(a.split("=", 1)[1] for a in args if a.startswith("--served-model-name="))


@pytest.mark.parametrize("stack", STACKS)
def test_every_route_has_auth_and_a_rate_limit(stack: str) -> None:
    record = record_of(stack)
    assert routes(record), f"{stack}: no routes"
    # The AI Gateway generates the model routes; the only plain one refuses paths, forwarding none.
    assert {r.inputs["metadata"]["name"] for r in kind(record, "HTTPRoute")} == {gw.REFUSED}
    plain_rules = [rule for r in kind(record, "HTTPRoute") for rule in r.inputs["spec"]["rules"]]
    assert plain_rules and all("backendRefs" not in rule for rule in plain_rules)
    for route in routes(record):
        policies = targeting(record, "SecurityPolicy", route)
        assert len(policies) == 1 and policies[0].inputs["spec"]["apiKeyAuth"]["credentialRefs"]
        assert policies[0].inputs["spec"]["authorization"]["defaultAction"] == "Deny"
        limits = targeting(record, "BackendTrafficPolicy", route)
        assert len(limits) == 1 and limits[0].inputs["spec"]["rateLimit"]["type"] == "Global"


@pytest.mark.parametrize("stack", STACKS)
def test_each_model_routes_on_its_served_name_to_its_pool(stack: str) -> None:
    record = record_of(stack)
    # One Kubernetes provider per cluster: what the route, the pools and the servers share.
    isvcs = {(r.provider, r.inputs["metadata"]["name"]): r for r in kind(record, "InferenceService")}
    pools = {(r.provider, r.inputs["name"]) for r in record.by_type(HELM)
             if r.inputs["chart"].endswith("/inferencepool")}
    for route in routes(record):
        where = route.provider
        for rule in route.inputs["spec"]["rules"]:
            (pool,) = rule["backendRefs"]
            assert (where, pool["name"]) in pools
            header = rule["matches"][0]["headers"][0]
            assert header["name"] == "x-ai-eg-model"
            assert header["value"] == served_name(isvcs[(where, pool["name"])])


def _precedence(match: dict[str, Any]) -> tuple[int, int, int]:
    """A rule match's rank among a listener's routes, higher first, as the Gateway API orders
    them (HTTPRoute spec, rules: "Exact path match", then "Prefix path match with largest number
    of characters", then "Largest number of header matches"); Envoy Gateway counts a "/" prefix
    as no characters. A match without a path is the controller's "/" (ai-gateway v1.1.0
    newHTTPRoute sets every generated rule's path to it)."""
    path = match.get("path", {"type": "PathPrefix", "value": "/"})
    chars = 0 if path["value"] == "/" else len(path["value"])
    return ({"Exact": 2, "PathPrefix": 0}[path["type"]], chars, len(match.get("headers", [])))


@pytest.mark.parametrize("stack", STACKS)
def test_responses_are_answered_by_the_gateway_ahead_of_every_model_rule(stack: str) -> None:
    """vLLM 0.11 ignores the output cap on /v1/responses, which the AI Gateway forwards: every
    cluster with a model route answers that prefix itself, a 4xx direct response on the model
    route's own listener and hostnames, matched before any model rule (even one whose header a
    client set) and with no backend."""
    record = record_of(stack)
    for route in routes(record):
        (refusal,) = [r for r in kind(record, "HTTPRoute") if r.provider == route.provider]
        assert refusal.inputs["metadata"]["namespace"] == route.inputs["metadata"]["namespace"]
        assert refusal.inputs["spec"]["parentRefs"] == route.inputs["spec"]["parentRefs"]
        assert refusal.inputs["spec"].get("hostnames") == route.inputs["spec"].get("hostnames")
        (rule,) = refusal.inputs["spec"]["rules"]
        assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1/responses"}}]
        (ref,) = [f["extensionRef"] for f in rule["filters"] if f["type"] == "ExtensionRef"]
        (answer,) = [f for f in kind(record, "HTTPRouteFilter") if f.provider == route.provider
                     and f.inputs["metadata"]["name"] == ref["name"]]
        assert answer.inputs["metadata"]["namespace"] == refusal.inputs["metadata"]["namespace"]
        direct = answer.inputs["spec"]["directResponse"]
        assert 400 <= direct["statusCode"] < 500 and "%" not in direct["body"]["inline"]
        assert "/v1/responses" in json.loads(direct["body"]["inline"])["error"]["message"]
        model_matches = [m for r in route.inputs["spec"]["rules"] for m in r["matches"]]
        generated = [{}, {"headers": [{"type": "Exact", "name": "x", "value": "y"}] * 3}]
        assert all(_precedence(rule["matches"][0]) > _precedence(m) for m in [*model_matches, *generated])
        # Envoy Gateway skips that sort where the EnvoyProxy asks it to keep routes in order.
        for proxy in kind(record, "EnvoyProxy"):
            assert not proxy.inputs["spec"].get("preserveRouteOrder")
        # The policies still name the model route alone.
        for k in ("SecurityPolicy", "BackendTrafficPolicy"):
            assert all(t["name"] == gw.ROUTE for p in kind(record, k) for t in p.inputs["spec"]["targetRefs"])


def test_the_pools_grant_the_route_and_its_generated_httproute() -> None:
    """Both controllers check the cross-namespace pool reference: the AI Gateway's from an
    AIGatewayRoute (ai-gateway v1.1.0 internal/controller/referencegrant.go matchesFrom: group
    aigateway.envoyproxy.io, kind AIGatewayRoute, the route's namespace), Envoy Gateway's from
    the HTTPRoute generated beside it."""
    record = record_of("prod")
    for route in routes(record):
        ns = route.inputs["metadata"]["namespace"]
        pools_ns = {r["backendRefs"][0]["namespace"] for r in route.inputs["spec"]["rules"]}
        grants = [g for g in kind(record, "ReferenceGrant") if g.provider == route.provider
                  and g.inputs["metadata"]["namespace"] in pools_ns]
        assert len(grants) == len(pools_ns) == 1
        spec = grants[0].inputs["spec"]
        assert {"group": "aigateway.envoyproxy.io", "kind": "AIGatewayRoute", "namespace": ns} in spec["from"]
        assert {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": ns} in spec["from"]
        assert spec["to"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool"}]


@pytest.mark.parametrize("stack", STACKS)
def test_route_tenants_and_limits_are_the_stack_files(stack: str) -> None:
    record = record_of(stack)
    tenants = stack_tenants(stack)
    for route in routes(record):
        (policy,) = targeting(record, "SecurityPolicy", route)
        models = [r["backendRefs"][0]["name"] for r in route.inputs["spec"]["rules"]]
        may = {m: {t["name"] for t in tenants if m in t["models"] or "*" in t["models"]} for m in models}
        got = {}
        for rule in policy.inputs["spec"]["authorization"]["rules"]:
            headers = {h["name"]: h["values"] for h in rule["principal"]["headers"]}
            assert rule["action"] == "Allow"
            (model,) = headers["x-ai-eg-model"]
            got[model] = set(headers[gw.TENANT_HEADER])
        assert got == may, f"{stack}: which tenant may call which model"
        keys = {c["name"] for c in policy.inputs["spec"]["apiKeyAuth"]["credentialRefs"]}
        assert keys == {f"rtip-tenant-{t}" for ts in may.values() for t in ts}
        (btp,) = targeting(record, "BackendTrafficPolicy", route)
        rules = btp.inputs["spec"]["rateLimit"]["global"]["rules"]
        assert all(r["shared"] for r in rules)
        by_tenant = [(r["clientSelectors"][0]["headers"][0]["value"], r) for r in rules]
        requests = {n: r["limit"] for n, r in by_tenant if "cost" not in r}
        tokens = {n: r for n, r in by_tenant if "cost" in r}
        callers = [t for t in tenants if f"rtip-tenant-{t['name']}" in keys]
        assert requests == {
            t["name"]: {"requests": t["requests_per_minute"], "unit": "Minute"} for t in callers}
        assert {n: r["limit"] for n, r in tokens.items()} == {
            t["name"]: {"requests": t["tokens_per_minute"], "unit": "Minute"}
            for t in callers if t.get("tokens_per_minute")}
        costs = {c["metadataKey"]: c["type"] for c in route.inputs["spec"].get("llmRequestCosts", [])}
        for rule in tokens.values():
            assert rule["cost"]["request"] == {"from": "Number", "number": 0}
            charged = rule["cost"]["response"]["metadata"]
            # Prompt plus output, as stacks/schema.py describes tokens_per_minute, in the namespace
            # the AIGatewayRoute CRD names for the filter's metadata.
            assert costs[charged["key"]] == "TotalToken"
            assert f'The namespaced key is "{charged["namespace"]}"' in COSTS_DOC


def test_tenant_keys_are_secrets_only() -> None:
    record = record_of("prod")
    names = [t["api_key_secret"] for t in stack_tenants("prod")]
    secure = stack_doc("prod")["config"]
    for n in names:
        assert set(secure[f"rtip:{n}"]) == {"secure"}, "keys are `secure:` values in the stack file"
    secrets = [r for r in kind(record, "Secret") if "rtip.dev/tenant" in r.inputs["metadata"]["labels"]]
    assert secrets
    for s in secrets:
        # The whole map is a secret (it holds the key); the record hides it.
        assert s.inputs["stringData"] == SECRET_MARK
    # The offline placeholder of a secure value never appears in plain anywhere in the record.
    everything = json.dumps([r.inputs for r in record.resources], default=str)
    assert "[offline secret" not in everything


def test_client_set_tenant_header_is_stripped_and_the_key_sanitized() -> None:
    record = record_of("prod")
    for ctp in kind(record, "ClientTrafficPolicy"):
        assert gw.TENANT_HEADER in ctp.inputs["spec"]["headers"]["earlyRequestHeaders"]["remove"]
    for sp in kind(record, "SecurityPolicy"):
        auth = sp.inputs["spec"]["apiKeyAuth"]
        assert auth["forwardClientIDHeader"] == gw.TENANT_HEADER and auth["sanitize"] is True


def test_request_buffer_holds_the_largest_served_request() -> None:
    # The AI Gateway buffers whole request bodies; Envoy Gateway's default buffer is 32768 bytes
    # (v1.9.0 connection_types.go). The buffer must hold the longest prompt prod serves: its
    # largest served context in tokens x 4 characters a token (English text), JSON-escaped at
    # worst 6 bytes a character (\uXXXX), plus headroom for an image.
    record = record_of("prod")
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    longest = max(mp.max_model_len for mp in record.plan.models)
    ctps = kind(record, "ClientTrafficPolicy")
    assert ctps
    for ctp in ctps:
        limit = ctp.inputs["spec"]["connection"]["bufferLimit"]
        number, unit = int(limit[:-2]), limit[-2:]
        assert number * units[unit] > 32768
        assert number * units[unit] >= longest * 4 * 6


def test_pools_select_the_predictor_pods_on_the_serving_port() -> None:
    record = record_of("prod")
    pools = [r for r in record.by_type(HELM) if r.inputs["chart"].endswith("/inferencepool")]
    isvcs = {r.inputs["metadata"]["name"]: r for r in kind(record, "InferenceService")}
    runtimes = {r.inputs["metadata"]["name"]: r for r in kind(record, "ClusterServingRuntime")}
    assert pools
    for pool in pools:
        model = pool.inputs["name"]
        values = pool.inputs["values"]
        predictor = isvcs[model].inputs["spec"]["predictor"]
        labels = values["inferencePool"]["modelServers"]["matchLabels"]
        assert labels.items() <= predictor["labels"].items()
        port = runtimes[predictor["model"]["runtime"]].inputs["spec"]["containers"][0]["ports"][0][
            "containerPort"
        ]
        assert values["inferencePool"]["targetPorts"] == [{"number": port}]
        image = values["inferenceExtension"]["image"]
        assert not image["registry"].startswith("registry.k8s.io"), "the picker comes from the region"


def test_gateway_releases_pull_from_the_region_and_count_in_our_redis() -> None:
    record = record_of("prod")
    upstream = yaml.safe_load((SHARED / "charts/gateway-helm/v1.9.0/values.yaml").read_text())
    redis = {r.inputs["metadata"]["name"]: r for r in kind(record, "Service")}[gw.REDIS]
    for rel in [r for r in record.by_type(HELM) if r.inputs["chart"].endswith("/gateway-helm")]:
        values = rel.inputs["values"]
        for key, img in values["global"]["images"].items():
            assert (
                ("docker.io" not in img["image"] and "amazonaws.com" in img["image"])
                or "azurecr.io" in img["image"]
                or "docker.pkg.dev" in img["image"]
            ), key
            if upstream["global"]["images"][key]["image"]:
                assert img["image"].endswith(
                    upstream["global"]["images"][key]["image"].split("/", 2)[-1]
                )
        url = values["config"]["envoyGateway"]["rateLimit"]["backend"]["redis"]["url"]
        port = redis.inputs["spec"]["ports"][0]["port"]
        assert url == f"{gw.REDIS}.{redis.inputs['metadata']['namespace']}.svc.cluster.local:{port}"
        assert values["crds"] == {"enabled": False}


@pytest.mark.parametrize(("stack", "internal"), [("dev", False), ("staging", True), ("prod", True)])
def test_load_balancer_exposure_follows_the_posture(stack: str, internal: bool) -> None:
    record = record_of(stack)
    proxies = kind(record, "EnvoyProxy")
    assert proxies
    for proxy in proxies:
        service = proxy.inputs["spec"]["provider"]["kubernetes"]["envoyService"]
        assert service["type"] == "LoadBalancer"
        assert bool(service.get("annotations")) is internal


def test_internal_annotations_per_cloud_validate() -> None:
    for cloud in Cloud:
        body = gw.envoy_proxy(cloud, public=False, replicas=2)
        check(body)
        assert (
            body["spec"]["provider"]["kubernetes"]["envoyService"]["annotations"]
            == gw.INTERNAL_LB[cloud]
        )


def test_vendored_inference_crds_are_the_upstream_copies() -> None:
    for name in CRD_FILES:
        assert (CRD_DIR / name).read_bytes() == (
            SHARED / "crds/gateway-api-inference-extension" / name
        ).read_bytes()


class T:
    def __init__(self, name: str, rpm: int, tpm: int | None, models: list[str]) -> None:
        self.name, self.requests_per_minute, self.tokens_per_minute, self.models = name, rpm, tpm, models


def test_a_model_no_tenant_may_call_has_no_route_and_policies_refuse_empty() -> None:
    assert tenants_gw.allowed([T("a", 10, None, ["m1"])], "m2") == []
    with pytest.raises(ValueError, match="no tenant"):
        tenants_gw.security_policy({"m1": ["a"], "m2": []})
    with pytest.raises(ValueError, match="no tenant"):
        tenants_gw.rate_limit_policy([])


def test_token_limits_are_charged_by_the_response() -> None:
    """A tenant with tokens_per_minute gets a bucket of that many tokens a minute that requests
    only check and responses charge; one without gets none. The route records total tokens only
    when some tenant has a token limit (nothing would read them otherwise)."""
    search, chat = T("search", 6000, 20_000_000, ["*"]), T("chat", 60, None, ["m"])
    rules = tenants_gw.rate_limit_policy([search, chat])["spec"]["rateLimit"]["global"]["rules"]
    charged = [r for r in rules if "cost" in r]
    assert len(rules) == 3 and len(charged) == 1
    assert charged[0]["clientSelectors"][0]["headers"][0]["value"] == "search"
    assert charged[0]["limit"] == {"requests": 20_000_000, "unit": "Minute"}
    assert "llmRequestCosts" in gw.ai_gateway_route(["m"], True)["spec"]
    assert "llmRequestCosts" not in gw.ai_gateway_route(["m"], False)["spec"]


def test_bodies_validate_against_their_crds() -> None:
    tenants = [T("a", 10, 1000, ["*"]), T("b", 5, None, ["m"])]
    for body in [
        gw.gateway_class(),
        gw.gateway(),
        gw.client_traffic_policy(),
        gw.reference_grant(),
        gw.ai_gateway_route(["m", "n"], True),
        gw.ai_gateway_route(["m"], False),
        tenants_gw.security_policy({"m": ["a", "b"], "n": ["a"]}),
        tenants_gw.rate_limit_policy(tenants),
        gw.refused_paths_filter(),
        gw.refused_paths_route(gw.ai_gateway_route(["m"], False)),
    ]:
        check(body)
