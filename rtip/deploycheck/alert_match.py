"""Does each Alertmanager route match an alert that a rule of its cluster really fires?

Alertmanager never reports a route that matches nothing, so a renamed alert, a rule group a
release turns off, or a severity an alert never carries would silence a heartbeat, the delivery
alerts or a page without a word. The alerts a cluster fires, as label sets:

- the plan's own PrometheusRules on that cluster, with each rule's labels;
- the kube-prometheus-stack release's default rules that its values render
  (rtip/chartfacts/rules.py, read from the chart's templates at its tag), and the rules its
  `additionalPrometheusRules` / `additionalPrometheusRulesMap` values add;

each only where the release's Prometheus loads its PrometheusRule (monitor_select.Loader: a
Prometheus that runs, not in agent mode, an operator that watches the namespace, selectors that
match the object's labels).

Only `alertname` and `severity` are judged: they are what every alert here states. Other labels
(Prometheus's external labels, `additionalRuleLabels`, what an expression outputs) are not known
to the plan, so a matcher on them is not evaluated. Rules other charts install are not counted
either: a route naming one would be reported, and none of the plan's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

from rtip.chartfacts.rules import ChartAlert
from rtip.deploycheck import am_matchers
from rtip.deploycheck.findings import Severity
from rtip.deploycheck.graph import api_kind, cluster_of, string_map
from rtip.deploycheck.monitor_select import Loader
from rtip.offline import Record, Resource

JUDGED = ("alertname", "severity")


def alerting_rules(groups: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The alerting rules (those with an `alert`) of a PrometheusRule's or a chart's rule groups."""
    return [rule for group in groups or [] if isinstance(group, Mapping)
            for rule in group.get("rules") or [] if isinstance(rule, Mapping) and rule.get("alert")]


def _rule_alerts(groups: Iterable[Any]) -> list[dict[str, str]]:
    return [{"alertname": str(rule["alert"]), **string_map(rule.get("labels"))}
            for rule in alerting_rules(groups)]


def plan_alerts(record: Record, cluster: Resource | None,
                loader: Loader | None = None) -> list[dict[str, str]]:
    """The label sets of the alerts the plan's PrometheusRules on `cluster` fire (with `loader`,
    only those its Prometheus loads)."""
    out = []
    for res in record.resources:
        kind = api_kind(res)
        if kind is None or (kind.group, kind.kind) != ("monitoring.coreos.com", "PrometheusRule"):
            continue
        if cluster_of(record, res) != cluster:
            continue
        meta = res.inputs.get("metadata") or {}
        labels = string_map(meta.get("labels"))
        if loader and loader.why_not("PrometheusRule", labels, str(meta.get("namespace") or "default")):
            continue
        out += _rule_alerts((res.inputs.get("spec") or {}).get("groups"))
    return out


def release_alerts(values: Mapping[str, Any], loader: Loader | None = None) -> list[dict[str, str]]:
    """The alerts a release adds through `additionalPrometheusRulesMap` (which, when set, the
    chart renders instead of `additionalPrometheusRules`: templates/prometheus/
    additionalPrometheusRules.yaml, KINDS.txt); with `loader`, those its Prometheus loads (each
    object carries the chart's labels and its own `additionalLabels`)."""
    by_map = values.get("additionalPrometheusRulesMap") or {}
    listed = by_map.values() if by_map else values.get("additionalPrometheusRules") or []
    out = []
    for rule in listed:
        if not isinstance(rule, Mapping):
            continue
        labels = {**(loader.chart_labels() if loader else {}),
                  **string_map(rule.get("additionalLabels"))}
        if loader and loader.why_not("PrometheusRule", labels, loader.namespace):
            continue
        out += _rule_alerts(rule.get("groups"))
    return out


def fired_alerts(record: Record, loader: Loader,
                 chart: Iterable[ChartAlert]) -> tuple[list[dict[str, str]], dict[str, str]]:
    """(the label sets of every alert the release's Prometheus loads a rule for, and for each
    chart alert it does not fire, why)."""
    values = loader.values
    labels = {**loader.chart_labels(),
              **string_map((values.get("defaultRules") or {}).get("labels"))}
    unloaded = loader.why_not("PrometheusRule", labels, loader.namespace)
    chart = list(chart)
    rendered = [a.labels(values) for a in chart if a.renders(values)] if not unloaded else []
    why_not: dict[str, str] = {}
    for a in chart:
        if not a.renders(values):
            why_not[a.alert] = a.why_not(values)
        elif unloaded:
            why_not[a.alert] = f"its PrometheusRule is not loaded: {unloaded}"
    return [*plan_alerts(record, loader.cluster, loader), *release_alerts(values, loader), *rendered], why_not


def route_problems(routes: list[Mapping[str, Any]], fired: list[dict[str, str]],
                   why_not: Mapping[str, str], chart_names: Set[str] = frozenset()
                   ) -> list[tuple[Severity, str]]:
    """What is wrong with `routes` (and their child routes, which match only what their parent
    does) given the alerts the cluster fires. An error where a chart alert the plan relies on
    (`chart_names`: the chart's default alerts) never fires, or a route matches nothing it could
    rely on; a warning for a dead name among live ones, such as a gateway alert on a cluster that
    serves no tenant, which loses no alert."""
    out: list[tuple[Severity, str]] = []
    names = {a["alertname"] for a in fired}

    def one(route: Mapping[str, Any], inherited: list[am_matchers.Matcher],
            earlier: list[tuple[str, list[am_matchers.Matcher]]]) -> list[am_matchers.Matcher] | None:
        """Check one route; its matchers (None when unreadable or judged only in part)."""
        receiver = route.get("receiver")
        try:
            own = am_matchers.of_route(route)
        except ValueError as err:
            out.append((Severity.ERROR, f"route to {receiver!r}: {err}"))
            return None
        where = f"route to {receiver!r} ({', '.join(str(m) for m in own)})"
        judged = [m for m in [*inherited, *own] if m.name in JUDGED]
        rest = [m for m in judged if m.name != "alertname"]
        named = [name for m in own for name in m.names() or []]
        relied = not named or any(n in chart_names for n in named)
        for alert in named:
            if any(a["alertname"] == alert and all(m.matches(a) for m in rest) for a in fired):
                continue
            level = Severity.ERROR if alert in chart_names else Severity.WARNING
            if alert in names:
                out.append((level, f"{where} names alert {alert}, which fires, but never with "
                                   f"{', '.join(str(m) for m in rest)}"))
            else:
                reason = why_not.get(alert)
                out.append((level, f"{where} names alert {alert}, which no rule of the cluster fires" + (
                    f" (the chart's rule does not fire: {reason})" if reason else
                    " (neither a PrometheusRule of the plan nor the chart's rules has it)")))
        reached = [a for a in fired if all(m.matches(a) for m in judged)]
        if judged and not reached:
            out.append((Severity.ERROR if relied else Severity.WARNING,
                        f"{where} matches no alert a rule of the cluster fires"))
        elif reached:
            # Alertmanager stops at the first sibling that matches, unless it says `continue`.
            first = [next((r for r, ms in earlier if all(m.matches(a) for m in ms)), None) for a in reached]
            if all(first):
                out.append((Severity.ERROR if relied else Severity.WARNING,
                            f"{where} never receives an alert: every one it matches stops first at "
                            f"the route to {', '.join(repr(r) for r in sorted(set(first)))} "
                            "(no `continue`)"))
        mine = [*inherited, *own]
        walk(route.get("routes") or [], mine)
        return mine if all(m.name in JUDGED for m in mine) else None

    def walk(routes: list[Mapping[str, Any]], inherited: list[am_matchers.Matcher]) -> None:
        earlier: list[tuple[str, list[am_matchers.Matcher]]] = []
        for route in routes:
            mine = one(route, inherited, earlier)
            # A sibling stops the search only without `continue`, and only where every one of its
            # matchers can be judged here.
            if mine is not None and not route.get("continue"):
                earlier.append((str(route.get("receiver")), mine))

    walk(routes, [])
    return out


__all__ = ["JUDGED", "alerting_rules", "fired_alerts", "plan_alerts", "release_alerts", "route_problems"]
