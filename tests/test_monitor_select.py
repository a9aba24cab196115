"""The Prometheus each kube-prometheus-stack release runs loads the plan's PrometheusRules and
PodMonitors (rtip/deploycheck/monitor_select.py): its selectors as the chart's prometheus.yaml
renders them at tag 88.5.3, against each object's labels and namespace."""

from __future__ import annotations

from collections import Counter

from rtip.deploycheck import monitor_select
from rtip.deploycheck.alerts import check_alerts
from rtip.deploycheck.graph import api_kind, cluster_of
from tests.conftest import record_of
from tests.test_alert_rules_facts import _first_release, _with_values


def _spec(change):  # a change to the first cluster's prometheusSpec values
    return lambda v: change(v.setdefault("prometheus", {}).setdefault("prometheusSpec", {}))


def _objects_on_first_cluster() -> Counter[tuple[str, str]]:
    """(kind, namespace) of the plan's monitoring objects on prod's first cluster, counted apart
    from the check."""
    record = record_of("prod")
    cluster = cluster_of(record, _first_release(record))
    out: Counter[tuple[str, str]] = Counter()
    for res in record.resources:
        kind = api_kind(res)
        if kind and kind.group == "monitoring.coreos.com" and cluster_of(record, res) == cluster:
            out[(kind.kind, res.inputs["metadata"]["namespace"])] += 1
    return out


def test_prod_loads_every_rule_and_monitor_and_the_chart_default_would_load_none() -> None:
    assert check_alerts(record_of("prod")) == []
    objects = _objects_on_first_cluster()
    rules = sum(n for (k, _), n in objects.items() if k == "PrometheusRule")
    monitors = sum(n for (k, _), n in objects.items() if k == "PodMonitor")
    assert rules >= 2 and monitors >= 2  # a model's and the gateway's, at least
    # The chart's default (`...NilUsesHelmValues: true`) selects `release: <release name>` only,
    # a label the plan's objects do not carry: nothing of theirs would load.
    record, _ = _with_values(_spec(lambda s: s.update(ruleSelectorNilUsesHelmValues=True,
                                                            podMonitorSelectorNilUsesHelmValues=True)))
    found = [f.message for f in check_alerts(record)]
    assert len(found) == rules + monitors
    assert sum(f.split(": ", 1)[1].startswith("PrometheusRule ") for f in found) == rules
    assert all("{'matchLabels': {'release': 'kube-prometheus-stack'}}" in f for f in found)


def test_a_null_rule_selector_matches_nothing_and_agent_mode_evaluates_no_rules() -> None:
    objects = _objects_on_first_cluster()
    rules = sum(n for (k, _), n in objects.items() if k == "PrometheusRule")
    # `ruleSelector: null` with the switch off renders no selector (`kindIs "invalid"`).
    record, _ = _with_values(_spec(lambda s: s.update(ruleSelector=None)))
    found = [f.message for f in check_alerts(record)]
    assert len(found) == rules and all("null (matches nothing)" in f for f in found)
    record, _ = _with_values(lambda v: v.setdefault("prometheus", {}).update(agentMode=True))
    found = [f.message for f in check_alerts(record)]
    assert len(found) == rules and all("evaluates no rules" in f for f in found)


def test_a_namespace_selector_loads_only_the_namespaces_it_matches() -> None:
    objects = _objects_on_first_cluster()
    outside = sum(n for (k, ns), n in objects.items() if k == "PodMonitor" and ns != "rtip-models")
    assert outside and objects[("PodMonitor", "rtip-models")]
    # The API server labels every namespace with its name.
    record, _ = _with_values(_spec(lambda s: s.update(podMonitorNamespaceSelector={
        "matchLabels": {"kubernetes.io/metadata.name": "rtip-models"}})))
    found = [f.message for f in check_alerts(record)]
    assert len(found) == outside and all("does not match namespace" in f for f in found)
    assert not any("rtip-models/" in f for f in found)


def test_label_selectors_follow_kubernetes() -> None:
    selects = monitor_select.selects
    labels = {"app": "vllm", "tier": "gold"}
    assert selects({}, labels) and not selects(None, labels)
    assert selects({"matchLabels": {"app": "vllm"}}, labels)
    assert not selects({"matchLabels": {"app": "vllm", "team": "x"}}, labels)
    assert selects({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "x"]},
                                         {"key": "team", "operator": "NotIn", "values": ["a"]},
                                         {"key": "app", "operator": "Exists"},
                                         {"key": "team", "operator": "DoesNotExist"}]}, labels)
    not_gold = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}
    assert not selects(not_gold, labels)
    assert not selects({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, labels)
