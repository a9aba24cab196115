"""The gateway's metrics-absence page (serving/gateway_slo.py) asks kube-state-metrics for the
proxies' Deployment by name, but Envoy Gateway creates that Deployment at run time, so the record
never holds it: the name is the one Envoy Gateway v1.9.0 generates (serving/gateway.py
`proxy_deployment`), which holds only while what it rests on holds on the rule's cluster:

- a Gateway of that namespace and name, whose key `<namespace>/<name>` the name hashes;
- no EnvoyProxy naming the Deployment (`provider.kubernetes.envoyDeployment.name` replaces the
  generated name: proxy/resource_provider.go) or merging gateways (`mergeGateways` keys the
  proxies by the GatewayClass: gatewayapi/translator.go `IRKey`);
- the gateway-helm release not in GatewayNamespace mode
  (`config.envoyGateway.provider.kubernetes.deploy.type`, api/v1alpha1 `GatewayNamespaceMode`;
  the chart's default config sets no deploy type), so the proxies run in its own namespace,
  which the rule must ask (gatewayapi/translator.go `buildIR`: the controller's namespace);
- a rule on the same cluster that pages when kube-state-metrics is gone (serving/slo_rules.py
  `UNWATCHED_ALERT`: an absence of the exporter's pod series at page severity): the series the
  page reads is the exporter's too, so without it the page reads nothing and says nothing.

A rule whose name no longer matches reads an absent series and never pages: nothing else would say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rtip.chartfacts.conditions import lookup, truthy
from rtip.deploycheck.alert_match import alerting_rules
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import HELM_RELEASE, cluster_of, string_map
from rtip.offline import Record, Resource
from serving.burn_alerts import ABSENT_SEVERITY
from serving.gateway import proxy_deployment
from serving.kube_names import DEPLOYMENT_REPLICAS, POD_CREATED
from serving.slo_rules import UNWATCHED_ALERT

CHECK = "alerts"
CHART = "gateway-helm"
ASKED = re.compile(DEPLOYMENT_REPLICAS + r'\{namespace="([^"]+)",deployment="(envoy-[^"]+)"\}')


def _watches(alert: Mapping[str, Any]) -> bool:
    """Whether `alert` is the page for kube-state-metrics gone (serving/slo_rules.py `watch_rule`):
    its name, the page severity, and an absence of the exporter's pod series."""
    return (alert.get("alert") == UNWATCHED_ALERT
            and string_map(alert.get("labels")).get("severity") == ABSENT_SEVERITY
            and str(alert.get("expr", "")).startswith(f"absent({POD_CREATED}{{"))


def _rules(resource: Resource) -> list[Mapping[str, Any]]:
    return alerting_rules((resource.inputs.get("spec") or {}).get("groups"))


def problems(namespace: str, deployment: str, on_cluster: list[Resource]) -> list[str]:
    """Why `deployment` in `namespace` is not the proxies' Deployment among `on_cluster`."""
    kinds = {k: [r.inputs for r in on_cluster if r.inputs.get("kind") == k]
             for k in ("Gateway", "EnvoyProxy")}
    releases = [r.inputs for r in on_cluster if r.type == HELM_RELEASE and r.inputs.get("name") == CHART]
    if not releases:
        return [f"no {CHART} release on the cluster runs the proxies {deployment} is asked for"]
    out: list[str] = []
    for release in releases:
        mode = lookup(release.get("values") or {},
                      ["config", "envoyGateway", "provider", "kubernetes", "deploy", "type"])
        if mode == "GatewayNamespace":
            out.append(f"{CHART} runs in GatewayNamespace mode: its proxies are named after the Gateway "
                       f"alone, not {deployment}")
        if release.get("namespace") != namespace:
            out.append(f"the proxies run in {CHART}'s namespace {release.get('namespace')}, the rule asks "
                       f"{namespace}")
    for proxy in kinds["EnvoyProxy"]:
        spec = proxy.get("spec") or {}
        if spec.get("mergeGateways"):
            out.append("an EnvoyProxy merges gateways: the proxies are keyed by the GatewayClass")
        named = lookup(spec, ["provider", "kubernetes", "envoyDeployment", "name"])
        if truthy(named):
            out.append(f"an EnvoyProxy names the proxies' Deployment {named!r}")
    if not any(_watches(a) for r in on_cluster if r.inputs.get("kind") == "PrometheusRule"
               for a in _rules(r)):
        out.append(f"no rule on the cluster pages ({UNWATCHED_ALERT}, severity {ABSENT_SEVERITY}) when "
                   f"kube-state-metrics' pod series are absent: with the exporter gone the page reads no "
                   f"{DEPLOYMENT_REPLICAS} of {deployment} and nobody is told")
    generated = {proxy_deployment(g["metadata"]["namespace"], g["metadata"]["name"])
                 for g in kinds["Gateway"]}
    if deployment not in generated:
        out.append(f"no Gateway on the cluster gets a proxy Deployment named {deployment} "
                   f"(its Gateways' are {', '.join(sorted(generated)) or 'none'})")
    return out


def check_proxy_name(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for rule in (r for r in record.resources if r.inputs.get("kind") == "PrometheusRule"):
        asked = {m.groups() for a in _rules(rule) for m in ASKED.finditer(str(a.get("expr", "")))}
        if not asked:
            continue
        cluster = cluster_of(record, rule)
        on_cluster = [r for r in record.resources if cluster is not None
                      and (c := cluster_of(record, r)) is not None and c.urn == cluster.urn]
        for namespace, deployment in sorted(asked):
            for message in problems(namespace, deployment, on_cluster):
                findings.append(Finding(CHECK, rule.urn, f"PrometheusRule {rule.name}: {message}",
                                        Severity.ERROR))
    return findings


__all__ = ["CHECK", "check_proxy_name", "problems"]
