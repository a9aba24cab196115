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


def _split(found: list[str]) -> tuple[list[str], list[str]]:
    """(the objects not loaded, the route findings)."""
    unloaded = [f for f in found if " is not loaded: " in f.split(": ", 1)[1][:120]
                and f.split(": ", 1)[1].split(" ", 1)[0] in monitor_select.SELECTORS]
    return unloaded, [f for f in found if f not in unloaded]


# prod's routes on a cluster with a page and a ticket webhook and a heartbeat (serving/alert_routes.py):
# the heartbeat names Watchdog; two delivery routes name the two delivery alerts; the page route
# names the two burn alerts, the two absent alerts and the model's five autoscaler pages (blind,
# query failing, replicas overdue, replicas not created, kube-state-metrics absent), the ticket
# route the two burn alerts. A route whose every name is gone gives one finding a name and one
# for matching nothing.
PLAN_ROUTE_FINDINGS = (9 + 1) + (2 + 1)  # page, ticket
CHART_ROUTE_FINDINGS = (1 + 1) + 2 * (2 + 1)  # heartbeat, the two delivery routes


def test_prod_loads_every_rule_and_monitor_and_the_chart_default_would_load_none() -> None:
    assert check_alerts(record_of("prod")) == []
    objects = _objects_on_first_cluster()
    rules = sum(n for (k, _), n in objects.items() if k == "PrometheusRule")
    monitors = sum(n for (k, _), n in objects.items() if k == "PodMonitor")
    assert rules >= 2 and monitors >= 2  # a model's and the gateway's, at least
    # The chart's default (`...NilUsesHelmValues: true`) selects `release: <release name>` only,
    # a label the plan's objects do not carry: nothing of theirs would load, so none of their
    # alerts fires and the SLO routes match nothing; the chart's own rules carry it and load.
    record, _ = _with_values(_spec(lambda s: s.update(ruleSelectorNilUsesHelmValues=True,
                                                      podMonitorSelectorNilUsesHelmValues=True)))
    unloaded, routes = _split([f.message for f in check_alerts(record)])
    assert len(unloaded) == rules + monitors and len(routes) == PLAN_ROUTE_FINDINGS
    assert sum(" PrometheusRule " in f for f in unloaded) == rules
    assert all("{'matchLabels': {'release': 'kube-prometheus-stack'}}" in f for f in unloaded)
    assert all("'rtip-slo-page'" in f or "'rtip-slo-ticket'" in f for f in routes)
    # A selector that is set wins over the switch: one matching the plan's label loads its objects
    # and not the chart's, whose Watchdog and delivery alerts then fire nowhere.
    ours = {"matchLabels": {"app.kubernetes.io/managed-by": "rtip"}}
    record, _ = _with_values(_spec(lambda s: s.update(ruleSelectorNilUsesHelmValues=True, ruleSelector=ours)))
    unloaded, routes = _split([f.message for f in check_alerts(record)])
    assert unloaded == [] and len(routes) == CHART_ROUTE_FINDINGS
    assert all("its PrometheusRule is not loaded" in f for f in routes if "names alert" in f)


def test_the_chart_labels_its_own_rules_with_its_whole_label_helper() -> None:
    """A rule selector on any label of the chart's `kube-prometheus-stack.labels` helper (88.5.3
    templates/_helpers.tpl: managed-by and heritage `Helm`, chart `<name>-<version>`, version)
    loads the chart's own rules, so its Watchdog and delivery routes keep matching; the plan's
    rules, which carry none of these, do not load."""
    rules = sum(n for (k, _), n in _objects_on_first_cluster().items() if k == "PrometheusRule")
    for labels in ({"heritage": "Helm"}, {"app.kubernetes.io/managed-by": "Helm"},
                   {"chart": "kube-prometheus-stack-88.5.3", "app.kubernetes.io/version": "88.5.3"}):
        record, _ = _with_values(_spec(lambda s, m=labels: s.update(ruleSelector={"matchLabels": m})))
        unloaded, routes = _split([f.message for f in check_alerts(record)])
        assert len(unloaded) == rules and len(routes) == PLAN_ROUTE_FINDINGS, (labels, routes)


def test_a_null_rule_selector_matches_nothing_and_agent_mode_evaluates_no_rules() -> None:
    objects = _objects_on_first_cluster()
    rules = sum(n for (k, _), n in objects.items() if k == "PrometheusRule")
    # `ruleSelector: null` with the switch off renders no selector (`kindIs "invalid"`): no rule
    # loads, the chart's included, and every route matches nothing.
    record, _ = _with_values(_spec(lambda s: s.update(ruleSelector=None)))
    unloaded, routes = _split([f.message for f in check_alerts(record)])
    assert len(unloaded) == rules and all("null (matches nothing)" in f for f in unloaded)
    assert len(routes) == PLAN_ROUTE_FINDINGS + CHART_ROUTE_FINDINGS
    # The switch for PodMonitors has no such branch: a null podMonitorSelector renders {}.
    record, _ = _with_values(_spec(lambda s: s.update(podMonitorSelector=None)))
    assert check_alerts(record) == []
    record, _ = _with_values(lambda v: v.setdefault("prometheus", {}).update(agentMode=True))
    unloaded, routes = _split([f.message for f in check_alerts(record)])
    assert len(unloaded) == rules and all("evaluates no rules" in f for f in unloaded)
    assert len(routes) == PLAN_ROUTE_FINDINGS + CHART_ROUTE_FINDINGS


def test_the_operator_sees_only_the_namespaces_it_watches() -> None:
    objects = _objects_on_first_cluster()
    total = sum(objects.values())
    in_models = sum(n for (_, ns), n in objects.items() if ns == "rtip-models")
    record, _ = _with_values(lambda v: v.setdefault("prometheusOperator", {}).update(
        namespaces={"releaseNamespace": True, "additional": ["rtip-models"]}))
    unloaded, _ = _split([f.message for f in check_alerts(record)])
    assert len(unloaded) == total - in_models and all("watches only namespaces" in f for f in unloaded)
    record, _ = _with_values(lambda v: v.setdefault("prometheusOperator", {}).update(
        denyNamespaces=["rtip-models"]))
    unloaded, _ = _split([f.message for f in check_alerts(record)])
    assert len(unloaded) == in_models


def test_a_namespace_selector_loads_only_the_namespaces_it_matches() -> None:
    objects = _objects_on_first_cluster()
    outside = sum(n for (k, ns), n in objects.items() if k == "PodMonitor" and ns != "rtip-models")
    assert outside and objects[("PodMonitor", "rtip-models")]
    # The API server labels every namespace with its name.
    record, _ = _with_values(_spec(lambda s: s.update(podMonitorNamespaceSelector={
        "matchLabels": {"kubernetes.io/metadata.name": "rtip-models"}})))
    found, routes = _split([f.message for f in check_alerts(record)])
    assert len(found) == outside and all("does not match namespace" in f for f in found) and not routes
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
