"""The deploy check that the gateway's absence page asks kube-state-metrics for the Deployment
Envoy Gateway will really create: silent on the shipped stacks, and one finding for each fact the
generated name rests on when a copy of prod's record breaks it."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import pytest

from rtip.deploycheck import Severity, run_checks
from rtip.deploycheck.proxy_name import check_proxy_name
from rtip.offline import Record, Resource
from tests.conftest import record_of

RELEASE = "kubernetes:helm.sh/v3:Release"


def _is_gateway_release(r: Resource) -> bool:
    return r.type == RELEASE and r.inputs.get("name") == "gateway-helm"


def _edited(record: Record, pick: Callable[[Resource], bool], change: Callable[[dict], None]) -> Record:
    """A copy of `record` with `change` applied to the inputs of every resource `pick` accepts."""
    def edit(r: Resource) -> Resource:
        if not pick(r):
            return r
        inputs = copy.deepcopy(r.inputs)
        change(inputs)
        return dataclasses.replace(r, inputs=inputs)
    return Record(record.stack, [edit(r) for r in record.resources], record.outputs, record.warnings,
                  record.plan)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_shipped_stacks_ask_for_the_deployment_envoy_gateway_creates(stack: str) -> None:
    record = record_of(stack)
    asking = [r for r in record.resources if r.inputs.get("kind") == "PrometheusRule"
              and "kube_deployment_spec_replicas" in str(r.inputs)]
    assert asking  # every cluster's gateway rule asks
    assert check_proxy_name(record) == []


def _set(path: list[str], value: object) -> Callable[[dict], None]:
    def change(inputs: dict) -> None:
        node = inputs
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return change


def _fires_unwatched(r: Resource) -> bool:
    return r.inputs.get("kind") == "PrometheusRule" and "RtipKubeStateMetricsAbsent" in str(r.inputs)


def _unwatched(change: Callable[[dict], None]) -> Callable[[dict], None]:
    def edit(inputs: dict) -> None:
        for group in inputs["spec"]["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == "RtipKubeStateMetricsAbsent":
                    change(rule)
    return edit


def _rename(rule: dict) -> None:
    rule["alert"] = "SomethingElse"


def _ticket(rule: dict) -> None:
    rule["labels"]["severity"] = "ticket"


def _present(rule: dict) -> None:
    rule["expr"] = rule["expr"].replace("absent(", "present_over_time(", 1)


BROKEN = [
    ("a Gateway renamed", lambda r: r.inputs.get("kind") == "Gateway",
     _set(["metadata", "name"], "front-door"), "no Gateway on the cluster gets a proxy Deployment named"),
    ("the EnvoyProxy naming the Deployment", lambda r: r.inputs.get("kind") == "EnvoyProxy",
     _set(["spec", "provider", "kubernetes", "envoyDeployment", "name"], "proxies"),
     "an EnvoyProxy names the proxies' Deployment 'proxies'"),
    ("merged gateways", lambda r: r.inputs.get("kind") == "EnvoyProxy", _set(["spec", "mergeGateways"], True),
     "merges gateways"),
    ("GatewayNamespace mode", _is_gateway_release,
     _set(["values", "config", "envoyGateway", "provider", "kubernetes", "deploy", "type"],
          "GatewayNamespace"),
     "runs in GatewayNamespace mode"),
    ("the controller in another namespace", _is_gateway_release, _set(["namespace"], "envoy-gateway-system"),
     "the proxies run in gateway-helm's namespace envoy-gateway-system, the rule asks rtip-system"),
    ("no page for kube-state-metrics gone", _fires_unwatched, _unwatched(_rename),
     "no rule on the cluster pages (RtipKubeStateMetricsAbsent, severity page)"),
    ("that page only a ticket", _fires_unwatched, _unwatched(_ticket),
     "no rule on the cluster pages (RtipKubeStateMetricsAbsent, severity page)"),
    ("that page on the series' presence", _fires_unwatched, _unwatched(_present),
     "no rule on the cluster pages (RtipKubeStateMetricsAbsent, severity page)"),
]


@pytest.mark.parametrize(("pick", "change", "words"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_fact_is_an_error_on_every_cluster_s_rule(pick, change, words) -> None:
    record = record_of("prod")
    broken = _edited(record, pick, change)
    found = [f for f in run_checks(broken) if f.check == "alerts" and words in f.message]
    rules = {r.urn for r in record.resources if r.inputs.get("kind") == "PrometheusRule"
             and "kube_deployment_spec_replicas" in str(r.inputs)}
    assert {f.urn for f in found} == rules and all(f.severity is Severity.ERROR for f in found)
