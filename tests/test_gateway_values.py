"""The front door's Helm values: every key the toolkit sets is one its pinned chart reads, checked
against the chart's own values.yaml in ../shared/charts (a key it documents only in a comment at
its place counts; under a map values.yaml leaves empty any key goes). gateway-helm hands
`config.envoyGateway` to Envoy Gateway whole as its EnvoyGateway configuration (its values.yaml
says so), so keys there are checked against that API's fields instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from serving import gateway as gw
from serving import gateway_charts as charts
from serving.charts import UnpinnedError
from serving.hardware import Cloud
from serving.images import RegionalRegistry
from tests.conftest import SHARED

CHARTS = SHARED / "charts"
REGISTRY = RegionalRegistry("123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip", Cloud.AWS)

# The EnvoyGateway API's fields (json tags) along the paths the toolkit sets, from
# envoyproxy/gateway v1.9.0 api/v1alpha1/envoygateway_types.go (EnvoyGatewaySpec, RateLimit,
# RateLimitDatabaseBackend, RateLimitRedisSettings, ExtensionManager, ExtensionHooks,
# XDSTranslatorHooks, TranslationConfig, ExtensionService with BackendEndpoint inline) and
# backend_types.go (BackendEndpoint, FQDNEndpoint).
ENVOY_GATEWAY_API: dict[tuple[str, ...], set[str]] = {
    (): {"gateway", "provider", "logging", "admin", "telemetry", "xdsServer", "rateLimit",
         "extensionManager", "extensionManagers", "extensionApis", "gatewayAPI", "runtimeFlags",
         "envoyProxy"},
    ("rateLimit",): {"backend", "timeout", "failClosed", "telemetry"},
    ("rateLimit", "backend"): {"type", "redis"},
    ("rateLimit", "backend", "redis"): {"url", "urlRef", "tls"},
    ("extensionManager",): {"name", "resources", "policyResources", "backendResources", "hooks",
                            "service", "failOpen", "maxMessageSize"},
    ("extensionManager", "hooks"): {"xdsTranslator"},
    ("extensionManager", "hooks", "xdsTranslator"): {"pre", "post", "translation"},
    ("extensionManager", "hooks", "xdsTranslator", "translation"): {"listener", "route", "cluster", "secret"},
    ("extensionManager", "service"): {"hostname", "fqdn", "ip", "unix", "zone", "host", "port", "tls",
                                      "retry"},
    ("extensionManager", "service", "fqdn"): {"hostname", "port"},
}
for _kind in ("listener", "route", "cluster", "secret"):
    ENVOY_GATEWAY_API[("extensionManager", "hooks", "xdsTranslator", "translation", _kind)] = {"includeAll"}


def upstream(chart: str, version: str) -> tuple[dict[str, Any], str]:
    path = CHARTS / chart / version / "values.yaml"
    text = path.read_text()
    return yaml.safe_load(text), text


def unknown(values: Any, defaults: Any, text: str, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Key paths of `values` the chart's values.yaml neither has nor documents in a comment."""
    if not isinstance(values, dict):
        return
    if path == ("config", "envoyGateway"):
        yield from unknown_api(values, ())
        return
    for key, value in values.items():
        here = (*path, key)
        if isinstance(defaults, dict) and key in defaults:
            if isinstance(defaults[key], dict) and defaults[key]:
                yield from unknown(value, defaults[key], text, here)
        elif defaults in ({}, None):
            continue  # a map values.yaml leaves free-form
        elif not re.search(rf"^\s*#\s*{re.escape(key)}:", text, re.M):
            yield ".".join(here)


def unknown_api(values: Any, path: tuple[str, ...]) -> Iterator[str]:
    fields = ENVOY_GATEWAY_API.get(path)
    if fields is None or not isinstance(values, dict):
        return
    for key, value in values.items():
        if key not in fields:
            yield ".".join(("config", "envoyGateway", *path, key))
        else:
            yield from unknown_api(value, (*path, key))


CASES = {
    "gateway-helm": ("v1.9.0", lambda: charts.gateway_values(REGISTRY, 2)),
    "gateway-crds-helm": ("v1.9.0", charts.gateway_crds_values),
    "ai-gateway-helm": ("v1.1.0", lambda: charts.ai_gateway_values(REGISTRY, 2)),
    "inferencepool": ("v1.5.0", lambda: charts.inference_pool_values("m", REGISTRY, 2)),
}


@pytest.mark.parametrize("chart", sorted(CASES))
def test_every_values_key_is_one_the_chart_reads(chart: str) -> None:
    version, build = CASES[chart]
    defaults, text = upstream(chart, version)
    assert list(unknown(build(), defaults, text)) == []


def test_a_misspelt_key_is_caught() -> None:
    defaults, text = upstream("inferencepool", "v1.5.0")
    values = charts.inference_pool_values("m", REGISTRY, 2)
    values["inferenceExtension"]["replica"] = 2
    values["inferencePool"]["modelServers"] = {"matchLabels": {"a": "b"}}  # documented in a comment
    assert list(unknown(values, defaults, text)) == ["inferenceExtension.replica"]
    gateway, text = upstream("gateway-helm", "v1.9.0")
    eg = charts.gateway_values(REGISTRY, 2)
    eg["config"]["envoyGateway"]["rateLimit"]["backend"]["redis"]["uri"] = "x"
    assert list(unknown(eg, gateway, text)) == ["config.envoyGateway.rateLimit.backend.redis.uri"]


def test_ports_and_names_the_toolkit_relies_on_are_the_charts() -> None:
    ip, _ = upstream("inferencepool", "v1.5.0")
    assert ip["inferenceExtension"]["extProcPort"] == gw.EPP_PORT
    ai, _ = upstream("ai-gateway-helm", "v1.1.0")
    grpc = [p for p in ai["controller"]["service"]["ports"] if p["name"] == "grpc"]
    assert grpc[0]["port"] == gw.EXTENSION_PORT
    assert ai["controller"]["fullnameOverride"] == gw.EXTENSION_SERVICE


def test_repository_and_tag_charts_refuse_a_digest() -> None:
    """The AI Gateway and inferencepool charts join repository and tag with ':' (their
    values.yaml give both), so a stack pinning those images by digest fails plainly."""
    ai = charts.ai_gateway_values(REGISTRY, 1)
    assert ai["controller"]["image"]["repository"].startswith(REGISTRY.root)
    assert ai["controller"]["image"]["tag"] and "@" not in ai["controller"]["image"]["tag"]
    pinned = RegionalRegistry(REGISTRY.root, Cloud.AWS, {"epp": "sha256:" + "a" * 64})
    with pytest.raises(UnpinnedError, match="digest"):
        charts.inference_pool_values("m", pinned, 1)
