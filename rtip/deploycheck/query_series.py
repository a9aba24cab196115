"""Will the series each ScaledObject's query selects exist, labelled as it selects them? A query
that selects nothing reads as no load (KEDA's prometheus scaler takes an empty answer as 0), so
a label the scrape never writes silences a term without a word. The plan's PrometheusRules are
asked the same (reported as `alerts`): an alert on a series that never arrives never fires.

- a target label on `up` or `scrape_duration_seconds` other than those Prometheus's pod discovery
  gives every target (`namespace`, `pod`, `job`, ...) must come from a PodMonitor in that
  namespace: its `podTargetLabels` copy the pod label whose name, made a label name
  (prometheus-operator `sanitizeLabelName`: every character outside [a-zA-Z0-9_] becomes '_'),
  is the one matched, and its selector requires that pod label at the matched value;
- `kube_pod_*`, `kube_deployment_*` and `kube_horizontalpodautoscaler_*` series (the lost-pod
  term's deletion timestamps; the pages' pod, Deployment and HPA states) come from kube-state-metrics as
  the cluster's kube-prometheus-stack release runs it: enabled; its ServiceMonitor on, loaded by
  the release's Prometheus (its labels as chart 8.4.0's template writes them, `releaseLabel`
  included, against the selectors monitor_select.py reads) and honouring the exporter's
  `namespace` and `pod` (else the scrape's own labels, kube-state-metrics' namespace and pod, win,
  and `on(namespace, pod)` matches nothing); the family's collector active; the query's namespace
  watched (`namespaces`, `releaseNamespace`, `namespacesDenylist`); and the series neither outside
  `metricAllowlist` nor in `metricDenylist`, never both set (kube-state-metrics v2.20.0
  `pkg/allowdenylist`: unanchored ECMAScript regexes, mutually exclusive lists; a pattern Python
  cannot read is a warning). Chart 8.4.0 is the version kube-prometheus-stack 88.5.3 pins; its
  `prometheus.monitor.http.honorLabels` is set true there, and its own default `collectors`
  include `pods`. And scraped at least as often as the namespace's model servers
  (ksm_pace.py);
- a `pod=~` pattern on kube-state-metrics' pod series must match every name Kubernetes can give
  the pods of a Deployment in that namespace (pod_names.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from rtip.chartfacts.conditions import truthy
from rtip.deploycheck import pod_names
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import api_kind, cluster_of, in_namespace, object_name, string_map
from rtip.deploycheck.ksm_pace import KSM, ksm_pace_problem
from rtip.deploycheck.monitor_select import CHART, Loader, stack_releases
from rtip.deploycheck.promql_text import matchers
from rtip.offline import Record, Resource
from serving.simulator.prometheus import TARGET_SERIES, monitor_target_labels

CHECK = "autoscaling"
RULES_CHECK = "alerts"  # the same question of the plan's own alert and recording rules
# What Prometheus's pod discovery and the operator's relabelling put on every PodMonitor target.
DISCOVERY_LABELS = frozenset({"namespace", "pod", "job", "instance", "container", "endpoint", "service"})
def selectors(query: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each `metric{...}` of `query` with its equality matchers (label: value)."""
    for metric, found in matchers(query):
        yield metric, {label: value for label, op, value in found if op == "="}


def target_label_problem(record: Record, cluster: Resource | None, namespace: str, label: str,
                         value: str) -> str | None:
    """Why no PodMonitor in `namespace` writes target label `label`=`value` (None: one does)."""
    for monitor in in_namespace(record, cluster, "PodMonitor", namespace):
        if monitor_target_labels(monitor.inputs.get("spec") or {}).get(label) == value:
            return None
    return (f"no PodMonitor in namespace {namespace} copies a pod label onto its targets as {label} "
            f"(podTargetLabels) while selecting pods where it is {value!r}")


# The kube-state-metrics chart version whose templates and defaults this check reads (helm-charts
# cf408a2), and its `collectors`.
KSM_CHART_VERSION = "8.4.0"
# The kube-state-metrics families the plan's queries and rules read, by metric prefix, and the
# collector (`--resources` entry) that exports each (v2.20.0 internal/store/builder.go).
KSM_FAMILIES = {"kube_pod_": "pods", "kube_deployment_": "deployments",
                "kube_horizontalpodautoscaler_": "horizontalpodautoscalers"}
KSM_DEFAULT_COLLECTORS = (
    "certificatesigningrequests", "configmaps", "cronjobs", "daemonsets", "deployments", "endpointslices",
    "horizontalpodautoscalers", "ingresses", "jobs", "leases", "limitranges",
    "mutatingwebhookconfigurations", "namespaces", "networkpolicies", "nodes", "persistentvolumeclaims",
    "persistentvolumes", "poddisruptionbudgets", "pods", "replicasets", "replicationcontrollers",
    "resourcequotas", "secrets", "services", "statefulsets", "storageclasses",
    "validatingwebhookconfigurations", "volumeattachments",
)


Problem = tuple[Severity, str]


def collectors(ksm: Mapping[str, Any]) -> list[str]:
    """The collectors kube-state-metrics runs under the chart's values: `collectors` less
    `collectorsExclude` plus `collectorsExtra` (templates/_helpers.tpl); an empty list passes no
    --resources, and kube-state-metrics then runs its own defaults (which include pods)."""
    listed = ksm.get("collectors")
    base = list(KSM_DEFAULT_COLLECTORS) if listed is None else _names(listed)
    exclude = set(_names(ksm.get("collectorsExclude")))
    active = [c for c in base if c not in exclude]
    active += [c for c in _names(ksm.get("collectorsExtra")) if c not in active]
    return active or list(KSM_DEFAULT_COLLECTORS)


def _names(value: Any) -> list[str]:
    """A chart value given as a list or as a comma-separated string (the chart joins and splits)."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value or []]
    return [v.strip() for v in items if v.strip()]


def _matches(patterns: list[str], metric: str, key: str) -> tuple[bool, list[Problem]]:
    """Whether any of `patterns` finds `metric` (kube-state-metrics' unanchored regexes), and a
    warning for each pattern Python's `re` cannot read (kube-state-metrics reads ECMAScript)."""
    found, unread = False, []
    for pattern in patterns:
        try:
            found = found or re.search(pattern, metric) is not None
        except re.error as err:
            unread.append((Severity.WARNING, f"{KSM}.{key} entry {pattern!r} is not a pattern this check "
                                             f"can read ({err}); whether it matches {metric} is not checked"))
    return found, unread


def ksm_collector(metric: str) -> str | None:
    """The kube-state-metrics collector that exports `metric`, if it is one of KSM_FAMILIES'."""
    return next((c for prefix, c in KSM_FAMILIES.items() if metric.startswith(prefix)), None)


def ksm_problems(loader: Loader, metric: str, namespace: str) -> list[Problem]:
    """What keeps kube-state-metrics' `metric` (of a KSM_FAMILIES family) of objects in
    `namespace` from the release's Prometheus with the objects' own namespace and name labels
    (`loader.values`: the release's values, coalesced over the chart's)."""
    collector = ksm_collector(metric)
    values = loader.values
    if not truthy((values.get("kubeStateMetrics") or {}).get("enabled")):
        return [(Severity.ERROR, "kubeStateMetrics.enabled is off: no kube-state-metrics")]
    ksm = values.get(KSM) or {}
    monitor = (ksm.get("prometheus") or {}).get("monitor") or {}
    out: list[Problem] = []
    if not truthy(monitor.get("enabled")):
        out.append((Severity.ERROR, f"{KSM}.prometheus.monitor.enabled is off: nothing scrapes it"))
    else:
        # The ServiceMonitor's labels (chart 8.4.0 templates/servicemonitor.yaml and the
        # `kube-state-metrics.labels` helper), which the Prometheus's selector must match.
        name = str(ksm.get("nameOverride") or KSM)
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": loader.name,
                  "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/component": "metrics",
                  "app.kubernetes.io/part-of": name, **string_map(ksm.get("customLabels")),
                  **({"release": loader.name} if truthy(ksm.get("releaseLabel")) else {}),
                  **string_map(monitor.get("additionalLabels"))}
        where = str(ksm.get("namespaceOverride") or loader.namespace)
        why = loader.why_not("ServiceMonitor", labels, where)
        if why:
            out.append((Severity.ERROR, f"its ServiceMonitor is not loaded: {why}"))
    if not (truthy((monitor.get("http") or {}).get("honorLabels")) or truthy(monitor.get("honorLabels"))):
        out.append((Severity.ERROR, f"{KSM}.prometheus.monitor.http.honorLabels is off: the scrape's "
                                    f"namespace and pod (kube-state-metrics' own) replace the objects' "
                                    f"on {metric}"))
    if collector not in collectors(ksm):
        out.append((Severity.ERROR, f"the {collector} collector is off ({KSM}.collectors / "
                                    f"collectorsExclude), so no {metric}"))
    watched = _names(ksm.get("namespaces"))
    if truthy(ksm.get("releaseNamespace")):
        watched.append(str(ksm.get("namespaceOverride") or loader.namespace))
    if watched and namespace not in watched:
        out.append((Severity.ERROR, f"{KSM} watches only namespaces {watched}, not {namespace}"))
    if namespace in _names(ksm.get("namespacesDenylist")):
        out.append((Severity.ERROR, f"{KSM}.namespacesDenylist leaves out {namespace}"))
    allow, deny = _names(ksm.get("metricAllowlist")), _names(ksm.get("metricDenylist"))
    if allow and deny:
        out.append((Severity.ERROR, f"{KSM}.metricAllowlist and metricDenylist are both set: "
                                    f"kube-state-metrics refuses to start (v2.20.0 pkg/allowdenylist)"))
    allowed, unread = _matches(allow, metric, "metricAllowlist")
    out += unread
    if allow and not allowed and not unread:
        out.append((Severity.ERROR, f"{KSM}.metricAllowlist {allow} leaves out {metric}"))
    denied, unread = _matches(deny, metric, "metricDenylist")
    out += unread
    if denied:
        out.append((Severity.ERROR, f"{KSM}.metricDenylist {deny} drops {metric}"))
    return out


def _loaders(record: Record, cluster: Resource | None) -> list[tuple[Resource, Loader, str | None]]:
    """The cluster's kube-prometheus-stack releases: each with what its Prometheus loads and the
    kube-state-metrics chart version it pins."""
    out = []
    for release, facts, merged in stack_releases(record):
        if cluster_of(record, release) == cluster:
            pinned = facts.dependency(KSM)
            out.append((release, Loader.of(record, release, merged), pinned.version if pinned else None))
    return out


def series_problems(record: Record, cluster: Resource | None, query: str, what: str) -> list[Problem]:
    """What `query` selects that `cluster` would not have, each said as `what` selects it."""
    out: list[Problem] = [(Severity.ERROR, m)
                          for m in pod_names.pattern_problems(record, cluster, query, what)]
    for metric, equal in selectors(query):
        namespace = equal.get("namespace")
        if metric in TARGET_SERIES and namespace is not None:
            for label, value in equal.items():
                if label in DISCOVERY_LABELS:
                    continue
                why = target_label_problem(record, cluster, namespace, label, value)
                if why:
                    out.append((Severity.ERROR, f'{what} selects {metric}{{{label}="{value}"}}, but {why}'))
        elif ksm_collector(metric) is not None and namespace is not None:
            loaders = _loaders(record, cluster)
            if not loaders:
                out.append((Severity.ERROR, f"{what} selects {metric}, but no {CHART} release on its "
                                            f"cluster runs kube-state-metrics"))
            for release, loader, version in loaders:
                out += [(sev, f"{what} selects {metric}, but release {release.name}: {m}")
                        for sev, m in ksm_problems(loader, metric, namespace)]
                pace = ksm_pace_problem(record, cluster, loader.values, namespace)
                if pace:  # said once an object, as the version warning below
                    out.append((pace[0], f"release {release.name}: {pace[1]}"))
                if version != KSM_CHART_VERSION:
                    # Said once an object however many series it selects (problems are a set).
                    out.append((Severity.WARNING, f"release {release.name} pins {KSM} chart {version}, "
                                                  f"not the {KSM_CHART_VERSION} this check was read "
                                                  f"from: its kube-state-metrics conditions are unchecked "
                                                  f"there"))
    return out


def query_problems(record: Record, scaled: Resource) -> list[Problem]:
    """What the ScaledObject's Prometheus queries select that its cluster would not have."""
    cluster = cluster_of(record, scaled)
    out: list[Problem] = []
    for trigger in (scaled.inputs.get("spec") or {}).get("triggers") or []:
        if trigger.get("type") == "prometheus":
            query = str((trigger.get("metadata") or {}).get("query") or "")
            out += series_problems(record, cluster, query, "its query")
    return sorted(set(out))


def rule_problems(record: Record, rule: Resource) -> list[Problem]:
    """What the PrometheusRule's expressions select that its cluster would not have: an alert on
    a series that never arrives stays silent."""
    cluster = cluster_of(record, rule)
    out: list[Problem] = []
    for group in (rule.inputs.get("spec") or {}).get("groups") or []:
        for r in group.get("rules") or []:
            name = r.get("alert") or r.get("record")
            out += series_problems(record, cluster, str(r.get("expr") or ""), f"its rule {name}")
    return sorted(set(out))


def check_query_series(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for res in record.resources:
        kind = api_kind(res)
        if kind is None:
            continue
        namespace = (res.inputs.get("metadata") or {}).get("namespace") or "default"
        if kind.group == "keda.sh" and kind.kind == "ScaledObject":
            findings += [Finding(CHECK, res.urn, f"ScaledObject {namespace}/{object_name(res)}: {message}",
                                 severity) for severity, message in query_problems(record, res)]
        elif kind.group == "monitoring.coreos.com" and kind.kind == "PrometheusRule":
            findings += [Finding(RULES_CHECK, res.urn, f"PrometheusRule {namespace}/{object_name(res)}: "
                                 f"{message}", severity) for severity, message in rule_problems(record, res)]
    return findings


__all__ = ["CHECK", "KSM_CHART_VERSION", "check_query_series", "collectors", "selectors"]
