"""The front door: every route behind API keys and the tenant limits the stack file states, keys
only ever as secrets, pools over the model servers KServe runs, the load balancer as the posture
says. Expected values come from the stack files themselves (read as YAML here), the upstream CRDs
and chart values in ../shared, and the InferenceService bodies in the record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gateway import CRD_DIR, CRD_FILES
from rtip.offline import SECRET_MARK, Record, Resource
from serving import gateway as gw
from serving import gateway_charts as charts
from serving.hardware import Cloud
from tests.conftest import PROJECT_DIR, SHARED, record_of
from tests.test_crds import check

HELM = "kubernetes:helm.sh/v3:Release"


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


@pytest.mark.parametrize("stack", STACKS)
def test_every_route_has_auth_and_a_rate_limit(stack: str) -> None:
    record = record_of(stack)
    routes = kind(record, "HTTPRoute")
    assert routes, f"{stack}: no routes"
    for route in routes:
        where, name = cluster_of(record, route), route.inputs["metadata"]["name"]
        policies = [
            p
            for p in kind(record, "SecurityPolicy")
            if cluster_of(record, p) == where
            and {"kind": "HTTPRoute", "name": name}
            in [{k: t[k] for k in ("kind", "name")} for t in p.inputs["spec"]["targetRefs"]]
        ]
        assert len(policies) == 1 and policies[0].inputs["spec"]["apiKeyAuth"]["credentialRefs"]
        limits = [
            p
            for p in kind(record, "BackendTrafficPolicy")
            if cluster_of(record, p) == where
            and name in [t["name"] for t in p.inputs["spec"]["targetRefs"]]
        ]
        assert len(limits) == 1 and limits[0].inputs["spec"]["rateLimit"]["type"] == "Global"


@pytest.mark.parametrize("stack", STACKS)
def test_route_tenants_and_limits_are_the_stack_files(stack: str) -> None:
    record = record_of(stack)
    tenants = stack_tenants(stack)
    for policy in kind(record, "SecurityPolicy"):
        model = policy.inputs["metadata"]["labels"]["rtip.dev/model"]
        want = {
            f"rtip-tenant-{t['name']}" for t in tenants if model in t["models"] or "*" in t["models"]
        }
        got = {c["name"] for c in policy.inputs["spec"]["apiKeyAuth"]["credentialRefs"]}
        assert got == want, f"{stack} {model}"
    for btp in kind(record, "BackendTrafficPolicy"):
        rules = btp.inputs["spec"]["rateLimit"]["global"]["rules"]
        got = {r["clientSelectors"][0]["headers"][0]["value"]: r["limit"] for r in rules}
        assert got == {
            t["name"]: {"requests": t["requests_per_minute"], "unit": "Minute"} for t in tenants
        }
        assert all(r["shared"] for r in rules)


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


def test_a_model_no_tenant_may_call_has_no_route_and_policies_refuse_empty() -> None:
    class T:
        name, requests_per_minute, tokens_per_minute, models = "a", 10, None, ["m1"]

    assert gw.allowed([T()], "m2") == []
    with pytest.raises(ValueError, match="no tenant"):
        gw.security_policy("m2", [])


def test_token_limits_are_reported_not_enforced() -> None:
    class T:
        name, requests_per_minute, tokens_per_minute, models = "search", 6000, 20_000_000, ["*"]

    notes = gw.unenforced_token_limits([T()])
    assert len(notes) == 1 and "NOT enforced" in notes[0]
    assert "tokens" not in json.dumps(gw.rate_limit_policy(["m"], [T()]))


def test_routes_rewrite_the_model_prefix_to_the_openai_path() -> None:
    route = gw.http_route("llama-8b")
    check(route)
    rule = route["spec"]["rules"][0]
    assert rule["matches"][0]["path"]["value"] == "/models/llama-8b/v1"
    assert rule["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] == "/v1"
    assert rule["backendRefs"][0]["kind"] == "InferencePool"


def test_bodies_validate_against_their_crds() -> None:
    class T:
        name, requests_per_minute, tokens_per_minute, models = "a", 10, None, ["*"]

    for body in [
        gw.gateway_class(),
        gw.gateway(),
        gw.client_traffic_policy(),
        gw.reference_grant(),
        gw.security_policy("m", ["a"]),
        gw.rate_limit_policy(["m"], [T()]),
    ]:
        check(body)


def test_charts_values_keys_exist_upstream() -> None:
    """Keys set under charts' values.yaml maps that exist upstream (others only where documented)."""
    ip = yaml.safe_load((SHARED / "charts/inferencepool/v1.5.0/values.yaml").read_text())
    values = charts.inference_pool_values(
        "m", lambda k: f"r.example/k8s/gateway-api-inference-extension/{k}:v1", 1
    )
    assert ip["inferenceExtension"]["extProcPort"] == gw.EPP_PORT
    assert set(values["inferenceExtension"]) <= set(ip["inferenceExtension"])
    ai = yaml.safe_load((SHARED / "charts/ai-gateway-helm/v1.1.0/values.yaml").read_text())
    grpc = [p for p in ai["controller"]["service"]["ports"] if p["name"] == "grpc"]
    assert (
        grpc[0]["port"] == gw.EXTENSION_PORT
        and ai["controller"]["fullnameOverride"] == "ai-gateway-controller"
    )
    assert Path(CRD_DIR).is_dir()
