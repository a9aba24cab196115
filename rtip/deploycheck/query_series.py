"""Will the series each ScaledObject's query selects exist, labelled as it selects them? A query
that selects nothing reads as no load (KEDA's prometheus scaler takes an empty answer as 0), so
a label the scrape never writes silences a term without a word.

- a target label on `up` or `scrape_duration_seconds` other than those Prometheus's pod discovery
  gives every target (`namespace`, `pod`, `job`, ...) must come from a PodMonitor in that
  namespace: its `podTargetLabels` copy the pod label whose name, made a label name
  (prometheus-operator `sanitizeLabelName`: every character outside [a-zA-Z0-9_] becomes '_'),
  is the one matched, and its selector requires that pod label at the matched value;
- `kube_pod_*` series (the lost-pod term's deletion timestamps) come from kube-state-metrics as
  the cluster's kube-prometheus-stack release runs it: enabled, its ServiceMonitor on and
  honouring the exporter's `namespace` and `pod` (else the scrape's own labels, kube-state-
  metrics' namespace and pod, win, and `on(namespace, pod)` matches nothing), the `pods` collector
  active, and the series neither outside `metricAllowlist` nor in `metricDenylist` (kube-state-
  metrics v2.20.0 `pkg/allowdenylist`: unanchored regexes; chart 8.4.0 `collectors`,
  `collectorsExclude`, `collectorsExtra`, and `prometheus.monitor.http.honorLabels`, which
  kube-prometheus-stack 88.5.3 sets true). The subchart's own default `collectors` (chart 8.4.0,
  the version kube-prometheus-stack 88.5.3 pins) include `pods`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from rtip import chartfacts
from rtip.chartfacts.conditions import truthy
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import HELM_RELEASE, api_kind, cluster_of, object_name, string_map
from rtip.deploycheck.monitor_select import CHART
from rtip.offline import Record, Resource
from serving.simulator.prometheus import SCRAPE_DURATION, UP, pod_target_label

CHECK = "autoscaling"
KSM = "kube-state-metrics"
# What Prometheus's pod discovery and the operator's relabelling put on every PodMonitor target.
DISCOVERY_LABELS = frozenset({"namespace", "pod", "job", "instance", "container", "endpoint", "service"})
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)"\s*')


def selectors(query: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each `metric{...}` of `query` with its equality matchers (label: value)."""
    for metric, body in _SELECTOR.findall(query):
        matchers = {}
        for part in body.split(","):
            m = _MATCHER.fullmatch(part)
            if m and m.group(2) == "=":
                matchers[m.group(1)] = m.group(3)
        yield metric, matchers


def _in_namespace(record: Record, cluster: Resource | None, kind: str, namespace: str) -> list[Resource]:
    out = []
    for res in record.resources:
        k = api_kind(res)
        if k and k.kind == kind and cluster_of(record, res) == cluster \
                and str((res.inputs.get("metadata") or {}).get("namespace") or "default") == namespace:
            out.append(res)
    return out


def target_label_problem(record: Record, cluster: Resource | None, namespace: str, label: str,
                         value: str) -> str | None:
    """Why no PodMonitor in `namespace` writes target label `label`=`value` (None: one does)."""
    for monitor in _in_namespace(record, cluster, "PodMonitor", namespace):
        spec = monitor.inputs.get("spec") or {}
        required = string_map((spec.get("selector") or {}).get("matchLabels"))
        for pod_label in spec.get("podTargetLabels") or []:
            if pod_target_label(str(pod_label)) == label and required.get(str(pod_label)) == value:
                return None
    return (f"no PodMonitor in namespace {namespace} copies a pod label onto its targets as {label} "
            f"(podTargetLabels) while selecting pods where it is {value!r}")


# The kube-state-metrics chart's `collectors` (8.4.0 values.yaml, helm-charts cf408a2).
KSM_DEFAULT_COLLECTORS = (
    "certificatesigningrequests", "configmaps", "cronjobs", "daemonsets", "deployments", "endpointslices",
    "horizontalpodautoscalers", "ingresses", "jobs", "leases", "limitranges",
    "mutatingwebhookconfigurations", "namespaces", "networkpolicies", "nodes", "persistentvolumeclaims",
    "persistentvolumes", "poddisruptionbudgets", "pods", "replicasets", "replicationcontrollers",
    "resourcequotas", "secrets", "services", "statefulsets", "storageclasses",
    "validatingwebhookconfigurations", "volumeattachments",
)


def collectors(ksm: Mapping[str, Any]) -> list[str]:
    """The collectors kube-state-metrics runs under the chart's values: `collectors` less
    `collectorsExclude` plus `collectorsExtra` (templates/_helpers.tpl); an empty list passes no
    --resources, and kube-state-metrics then runs its own defaults (which include pods)."""
    listed = ksm.get("collectors")
    base = list(KSM_DEFAULT_COLLECTORS) if listed is None else [str(c) for c in listed]
    exclude = {str(c) for c in ksm.get("collectorsExclude") or []}
    active = [c for c in base if c not in exclude]
    active += [str(c) for c in ksm.get("collectorsExtra") or [] if str(c) not in active]
    return active or list(KSM_DEFAULT_COLLECTORS)


def ksm_problems(values: Mapping[str, Any], metric: str) -> list[str]:
    """What keeps kube-state-metrics' `metric` (a pod family) from the release's Prometheus with
    its own namespace and pod labels; `values` the release's, coalesced over the chart's."""
    if not truthy((values.get("kubeStateMetrics") or {}).get("enabled")):
        return ["kubeStateMetrics.enabled is off: no kube-state-metrics"]
    ksm = values.get(KSM) or {}
    monitor = (ksm.get("prometheus") or {}).get("monitor") or {}
    out = []
    if not truthy(monitor.get("enabled")):
        out.append(f"{KSM}.prometheus.monitor.enabled is off: nothing scrapes kube-state-metrics")
    if not (truthy((monitor.get("http") or {}).get("honorLabels")) or truthy(monitor.get("honorLabels"))):
        out.append(f"{KSM}.prometheus.monitor.http.honorLabels is off: the scrape's namespace and pod "
                   f"(kube-state-metrics' own) replace the pods' on {metric}")
    if "pods" not in collectors(ksm):
        out.append(f"the pods collector is off ({KSM}.collectors / collectorsExclude), so no {metric}")
    allow = [str(r) for r in ksm.get("metricAllowlist") or []]
    if allow and not any(re.search(r, metric) for r in allow):
        out.append(f"{KSM}.metricAllowlist {allow} leaves out {metric}")
    deny = [str(r) for r in ksm.get("metricDenylist") or []]
    if any(re.search(r, metric) for r in deny):
        out.append(f"{KSM}.metricDenylist {deny} drops {metric}")
    return out


def _stack_values(record: Record, cluster: Resource | None) -> list[tuple[Resource, dict[str, Any]]]:
    out = []
    for release in record.by_type(HELM_RELEASE):
        chart, version = str(release.inputs.get("chart", "")), str(release.inputs.get("version", ""))
        if cluster_of(record, release) != cluster or chartfacts.chart_name(chart) != CHART:
            continue
        facts = chartfacts.for_release(chart, version)
        if facts is not None:  # else the values check says the chart is not vendored
            out.append((release, facts.values(release.inputs.get("values") or {})))
    return out


def query_problems(record: Record, scaled: Resource) -> list[str]:
    """What the ScaledObject's Prometheus queries select that its cluster would not have."""
    cluster = cluster_of(record, scaled)
    out: list[str] = []
    for trigger in (scaled.inputs.get("spec") or {}).get("triggers") or []:
        if trigger.get("type") != "prometheus":
            continue
        query = str((trigger.get("metadata") or {}).get("query") or "")
        for metric, matchers in selectors(query):
            namespace = matchers.get("namespace")
            if metric in (UP, SCRAPE_DURATION) and namespace is not None:
                for label, value in matchers.items():
                    if label in DISCOVERY_LABELS:
                        continue
                    why = target_label_problem(record, cluster, namespace, label, value)
                    if why:
                        out.append(f"its query selects {metric}{{{label}=\"{value}\"}}, but {why}")
            elif metric.startswith("kube_pod_"):
                stacks = _stack_values(record, cluster)
                if not stacks:
                    out.append(f"its query selects {metric}, but no {CHART} release on its cluster "
                               f"runs kube-state-metrics")
                for release, values in stacks:
                    out += [f"its query selects {metric}, but release {release.name}: {m}"
                            for m in ksm_problems(values, metric)]
    return sorted(set(out))


def check_query_series(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for res in record.resources:
        kind = api_kind(res)
        if kind is None or kind.group != "keda.sh" or kind.kind != "ScaledObject":
            continue
        namespace = (res.inputs.get("metadata") or {}).get("namespace") or "default"
        for message in query_problems(record, res):
            findings.append(Finding(CHECK, res.urn, f"ScaledObject {namespace}/{object_name(res)}: {message}",
                                    Severity.ERROR))
    return findings


__all__ = ["CHECK", "DISCOVERY_LABELS", "KSM_DEFAULT_COLLECTORS", "check_query_series", "collectors",
           "ksm_problems", "query_problems", "selectors", "target_label_problem"]
