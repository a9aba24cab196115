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
Prometheus (`prometheus.agentMode`) evaluates no rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtip.chartfacts.rules import truthy
from rtip.deploycheck.graph import api_kind, cluster_of, object_name
from rtip.offline import Record, Resource

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
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        have = labels.get(key)
        ok = {"In": have in values, "NotIn": have not in values, "Exists": key in labels,
              "DoesNotExist": key not in labels}.get(op)
        if not ok:
            return False
    return True


def _namespace_labels(record: Record, cluster: Resource | None, namespace: str) -> dict[str, str]:
    """The namespace's labels as the API server holds them (it adds kubernetes.io/metadata.name)."""
    for res in record.resources:
        kind = api_kind(res)
        if kind and kind.kind == "Namespace" and kind.group == "" and object_name(res) == namespace \
                and cluster_of(record, res) == cluster:
            labels = (res.inputs.get("metadata") or {}).get("labels") or {}
            return {**{str(k): str(v) for k, v in labels.items()}, "kubernetes.io/metadata.name": namespace}
    return {"kubernetes.io/metadata.name": namespace}


def selection_problems(record: Record, release: Resource, values: Mapping[str, Any]) -> list[str]:
    """What the release's Prometheus would not load of the plan's monitoring objects on its
    cluster (`values`: the release's values coalesced over the chart's)."""
    prometheus = values.get("prometheus") or {}
    spec = prometheus.get("prometheusSpec") or {}
    cluster = cluster_of(record, release)
    name = str(release.inputs.get("name") or release.name)
    out: list[str] = []
    for res in record.resources:
        kind = api_kind(res)
        if kind is None or kind.group != GROUP or kind.kind not in SELECTORS:
            continue
        if cluster_of(record, res) != cluster:
            continue
        meta = res.inputs.get("metadata") or {}
        what = f"{kind.kind} {meta.get('namespace')}/{object_name(res)}"
        if not truthy(prometheus.get("enabled")):
            out.append(f"{what}: the release runs no Prometheus (prometheus.enabled is off)")
            continue
        if kind.kind == "PrometheusRule" and truthy(prometheus.get("agentMode")):
            out.append(f"{what}: prometheus.agentMode runs a PrometheusAgent, which evaluates no rules")
            continue
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        selector = rendered_selector(spec, kind.kind, name)
        if not selects(selector, labels):
            key = SELECTORS[kind.kind][0]
            out.append(f"{what} is not loaded: the Prometheus's {key} is "
                       f"{'null (matches nothing)' if selector is None else dict(selector)} and the object's "
                       f"labels are {labels}")
            continue
        ns_key = SELECTORS[kind.kind][2]
        ns_selector = spec.get(ns_key) if truthy(spec.get(ns_key)) else {}
        ns = str(meta.get("namespace") or "default")
        if not selects(ns_selector, _namespace_labels(record, cluster, ns)):
            out.append(f"{what} is not loaded: the Prometheus's {ns_key} {dict(ns_selector)} does not "
                       f"match namespace {ns}")
    return out


__all__ = ["SELECTORS", "rendered_selector", "selection_problems", "selects"]
