"""Does the Prometheus a kube-prometheus-stack release runs pick up the plan's PrometheusRules,
PodMonitors and ServiceMonitors? The operator loads only the objects its Prometheus's selectors
match, and says nothing of the rest: a model's SLO alerts that never load page no one, and a
PodMonitor it ignores leaves KEDA's query empty.

The chart renders each selector from its values (templates/prometheus/prometheus.yaml at tag
kube-prometheus-stack-88.5.3): the value itself when it is set; else, with
`<kind>SelectorNilUsesHelmValues` (true by default), `matchLabels: {release: <release name>}`;
else `{}`, which matches every object; except that a `ruleSelector` set to null renders no
selector at all, which matches none (the Prometheus CRD: "A null label selector matches no
objects"). A namespace selector is the value when set, else `{}`: every namespace. An agent-mode
Prometheus (`prometheus.agentMode`) evaluates no rules; the operator sees only the namespaces
`prometheusOperator.namespaces` lists, never `denyNamespaces`. The route check
(alert_match.py) counts only the rules a Loader says load.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rtip import chartfacts
from rtip.chartfacts import ChartFacts
from rtip.chartfacts.conditions import truthy
from rtip.deploycheck.graph import (
    HELM_RELEASE,
    LABEL_OPERATORS,
    api_kind,
    cluster_of,
    object_name,
    string_map,
)
from rtip.offline import Record, Resource
from serving.netpol import NS_LABEL

CHART = "kube-prometheus-stack"

GROUP = "monitoring.coreos.com"
# kind: (selector, its NilUsesHelmValues switch, namespace selector)
SELECTORS = {
    "PrometheusRule": ("ruleSelector", "ruleSelectorNilUsesHelmValues", "ruleNamespaceSelector"),
    "PodMonitor": ("podMonitorSelector", "podMonitorSelectorNilUsesHelmValues",
                   "podMonitorNamespaceSelector"),
    "ServiceMonitor": ("serviceMonitorSelector", "serviceMonitorSelectorNilUsesHelmValues",
                       "serviceMonitorNamespaceSelector"),
    "Probe": ("probeSelector", "probeSelectorNilUsesHelmValues", "probeNamespaceSelector"),
}


def rendered_selector(spec: Mapping[str, Any], kind: str, release: str) -> Mapping[str, Any] | None:
    """The selector the chart writes into the Prometheus for `kind` (None: matches nothing)."""
    key, nil_uses_helm, _ = SELECTORS[kind]
    if truthy(spec.get(key)):
        return spec[key]
    if truthy(spec.get(nil_uses_helm)):
        return {"matchLabels": {"release": release}}
    if kind == "PrometheusRule" and spec.get(key) is None:
        return None
    return {}


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector against `labels` (None selects nothing; {} everything)."""
    if selector is None:
        return False
    if any(labels.get(k) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        test = LABEL_OPERATORS.get(str(expr.get("operator")))
        if test is None or not test(labels.get(expr.get("key")), [str(v) for v in expr.get("values") or []]):
            return False
    return True


def _namespace_labels(record: Record, cluster: Resource | None, namespace: str) -> dict[str, str] | None:
    """The namespace's labels as the API server holds them (it adds NS_LABEL, its name);
    None for a namespace the plan does not declare, whose labels it cannot know."""
    for res in record.resources:
        kind = api_kind(res)
        if kind and kind.kind == "Namespace" and kind.group == "" and object_name(res) == namespace \
                and cluster_of(record, res) == cluster:
            labels = (res.inputs.get("metadata") or {}).get("labels") or {}
            return {**string_map(labels), NS_LABEL: namespace}
    return None


@dataclass
class Loader:
    """What one kube-prometheus-stack release's Prometheus loads (`values`: the release's values
    coalesced over the chart's; `name` and `namespace`: the Helm release's)."""

    record: Record
    cluster: Resource | None
    values: Mapping[str, Any]
    name: str
    namespace: str
    version: str = ""  # the chart's version, as the release pins it

    @classmethod
    def of(cls, record: Record, release: Resource, values: Mapping[str, Any]) -> Loader:
        return cls(record, cluster_of(record, release), values,
                   str(release.inputs.get("name") or release.name),
                   str(release.inputs.get("namespace") or "default"),
                   str(release.inputs.get("version") or ""))

    def chart_labels(self) -> dict[str, str]:
        """The labels the chart puts on the PrometheusRules it renders: `app` and the
        `kube-prometheus-stack.labels` helper (88.5.3 templates/_helpers.tpl: managed-by, instance,
        version, part-of, chart, release, heritage, then `commonLabels`); Helm's
        `.Release.Service` is `Helm`, the name `nameOverride` or the chart's, cut at 50 and
        without a trailing '-'."""
        app = str(self.values.get("nameOverride") or CHART)[:50].rstrip("-")
        version = self.version.replace("+", "_")
        common = string_map(self.values.get("commonLabels"))
        return {"app": app, "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": self.name,
                "app.kubernetes.io/version": version, "app.kubernetes.io/part-of": app,
                "chart": f"{CHART}-{version}", "release": self.name, "heritage": "Helm", **common}

    def why_not(self, kind: str, labels: Mapping[str, str], namespace: str) -> str | None:
        """Why the Prometheus would not load an object of `kind` (None: it would)."""
        prometheus = self.values.get("prometheus") or {}
        operator = self.values.get("prometheusOperator") or {}
        spec = prometheus.get("prometheusSpec") or {}
        if not truthy(prometheus.get("enabled")):
            return "the release runs no Prometheus (prometheus.enabled is off)"
        if not truthy(operator.get("enabled")):
            return "the release runs no Prometheus operator (prometheusOperator.enabled is off)"
        if kind == "PrometheusRule" and truthy(prometheus.get("agentMode")):
            return "prometheus.agentMode runs a PrometheusAgent, which evaluates no rules"
        # The operator watches only `--namespaces` (prometheus-operator/deployment.yaml: the
        # release's namespace if `releaseNamespace`, and `additional`) and never `--deny-namespaces`.
        watched = operator.get("namespaces")
        if truthy(watched):
            allowed = ([self.namespace] if truthy(watched.get("releaseNamespace")) else []) + [
                str(n) for n in watched.get("additional") or []]
            if namespace not in allowed:
                return f"the operator watches only namespaces {allowed} (prometheusOperator.namespaces)"
        if namespace in [str(n) for n in operator.get("denyNamespaces") or []]:
            return f"the operator does not watch namespace {namespace} (prometheusOperator.denyNamespaces)"
        selector = rendered_selector(spec, kind, self.name)
        if not selects(selector, labels):
            return (f"the Prometheus's {SELECTORS[kind][0]} is "
                    f"{'null (matches nothing)' if selector is None else dict(selector)} and the object's "
                    f"labels are {dict(labels)}")
        ns_key = SELECTORS[kind][2]
        ns_selector = spec.get(ns_key) if truthy(spec.get(ns_key)) else {}
        if ns_selector:
            ns_labels = _namespace_labels(self.record, self.cluster, namespace)
            if ns_labels is None:
                return (f"the Prometheus's {ns_key} {dict(ns_selector)} selects namespaces by label, and "
                        f"namespace {namespace} is not the plan's, so its labels are unknown")
            if not selects(ns_selector, ns_labels):
                return f"the Prometheus's {ns_key} {dict(ns_selector)} does not match namespace {namespace}"
        return None


def selection_problems(loader: Loader) -> list[str]:
    """What the release's Prometheus would not load of the plan's PrometheusRules, PodMonitors,
    ServiceMonitors and Probes on its cluster (the plan declares rules and PodMonitors; the
    exporters' ServiceMonitors come from their own charts and are not the plan's objects)."""
    record = loader.record
    out: list[str] = []
    for res in record.resources:
        kind = api_kind(res)
        if kind is None or kind.group != GROUP or kind.kind not in SELECTORS:
            continue
        if cluster_of(record, res) != loader.cluster:
            continue
        meta = res.inputs.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        labels = string_map(meta.get("labels"))
        reason = loader.why_not(kind.kind, labels, ns)
        if reason:
            out.append(f"{kind.kind} {ns}/{object_name(res)} is not loaded: {reason}")
    return out


def stack_releases(record: Record) -> Iterator[tuple[Resource, ChartFacts, dict[str, Any]]]:
    """The record's kube-prometheus-stack releases whose chart is vendored, each with its facts
    and its values coalesced over the chart's (an unvendored one is the values check's to name)."""
    for release in record.by_type(HELM_RELEASE):
        chart, version = str(release.inputs.get("chart", "")), str(release.inputs.get("version", ""))
        if chartfacts.chart_name(chart) != CHART:
            continue
        facts = chartfacts.for_release(chart, version)
        if facts is not None:
            yield release, facts, facts.values(release.inputs.get("values") or {})


__all__ = ["CHART", "SELECTORS", "Loader", "rendered_selector", "selection_problems", "selects",
           "stack_releases"]
