"""Every Alertmanager route the plan writes matches alerts that a rule of its cluster really fires
(rtip/deploycheck/alerts.py): the plan's PrometheusRules, or the chart's default rules, read from
the chart's templates at its tag (rtip/chartfacts/rules.py) and rendered under the release's values.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from rtip.chartfacts import rules
from rtip.chartfacts.conditions import parse
from rtip.deploycheck import alert_match, alerts
from rtip.deploycheck.findings import Severity
from rtip.deploycheck.graph import cluster_of
from rtip.offline import Record
from serving import gateway_slo, slo_rules
from tests.conftest import SHARED, record_of

RELEASE = "kubernetes:helm.sh/v3:Release"
KINDS = SHARED / "charts" / "kube-prometheus-stack" / "88.5.3" / "KINDS.txt"


def _first_release(record: Record) -> Any:
    return next(r for r in record.by_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack")


def _with_values(change: Callable[[dict[str, Any]], None]) -> tuple[Record, Any]:
    """prod's record with the first cluster's kube-prometheus-stack values changed."""
    record = record_of("prod")
    release = _first_release(record)
    values = copy.deepcopy(release.inputs["values"])
    change(values)
    changed = replace(release, inputs={**release.inputs, "values": values})
    return Record(record.stack, [changed if r is release else r for r in record.resources]), changed


def test_the_alerts_the_routes_name_are_read_from_the_chart_templates_at_its_tag() -> None:
    """As read by hand in the chart's templates/prometheus/rules-1.14 at tag
    kube-prometheus-stack-88.5.3: Watchdog in general.rules.yaml (severity none), the delivery
    alerts in alertmanager.rules.yaml, AlertmanagerClusterFailedToSendAlerts twice (critical and
    warning integrations); each off by its own `defaultRules.disabled` key."""
    table = rules.for_chart("kube-prometheus-stack", "88.5.3")
    assert table is not None
    by = {(a.alert, a.severity): a for a in table}
    watchdog = by[("Watchdog", "none")]

    def value(path: str) -> list:
        return ["value", path.split(".")]

    def gate(group: str, name: str) -> list:
        # The file's `if and .Values.defaultRules.create .Values.defaultRules.rules.<group>` and
        # the alert's own `if not (.Values.defaultRules.disabled.<name> | default false)`.
        return ["and", ["and", value("defaultRules.create"), value(f"defaultRules.rules.{group}")],
                ["not", value(f"defaultRules.disabled.{name}")]]

    assert (watchdog.file, watchdog.condition) == ("general.rules.yaml", gate("general", "Watchdog"))
    for name, severity in (("AlertmanagerFailedToSendAlerts", "warning"),
                           ("AlertmanagerClusterFailedToSendAlerts", "critical"),
                           ("AlertmanagerClusterFailedToSendAlerts", "warning")):
        a = by[(name, severity)]
        assert (a.file, a.condition) == ("alertmanager.rules.yaml", gate("alertmanager", name))


def test_each_templates_gate_agrees_with_kinds_txt() -> None:
    """A second reading: shared/charts' KINDS.txt gives each rule template's `if`; every alert of
    that template is rendered under it (its first conjunct), the Kubernetes version gate aside."""
    line = next(x for x in KINDS.read_text().splitlines() if " PrometheusRule " in x)
    gates = dict(re.findall(r"templates/prometheus/rules-1\.14/([\w.-]+\.yaml) \[if ([^\]]*)\]", line))
    table = rules.for_chart("kube-prometheus-stack", "88.5.3")
    assert table and {a.file for a in table} <= set(gates)
    for a in table:
        gate = parse("if " + re.sub(r'\(semverCompare "[^"]*" \$kubeTargetVersion\) ', "", gates[a.file]))
        assert gate[0] == "and" and a.condition[0] == "and" and a.condition[1] == gate, (a, gate)


TEMPLATE = ('{{- if and (semverCompare ">=1.14.0-0" $kubeTargetVersion) .Values.defaultRules.create '
            '.Values.defaultRules.rules.x }}\n') + """\
spec:
  groups:
  - name: x.rules
    rules:
{{- if not (.Values.defaultRules.disabled.First | default false) }}
    - alert: First
      annotations:
{{- if .Values.defaultRules.additionalRuleAnnotations }}
        extra: yes
{{- end }}
      labels:
        severity: {{ dig "First" "severity" "warning" .Values.customRules }}
{{- end }}
{{- if .Values.kubeThing.enabled }}
    - alert: Second
      labels:
        severity: {{ dig "Second" "severity" "critical" .Values.customRules }}
{{- end }}
{{- end }}
"""


def test_the_template_reader_follows_nested_ifs_and_refuses_what_it_does_not_model() -> None:
    first, second = rules.read_template(TEMPLATE, "x.yaml")
    file_gate = ["and", ["value", ["defaultRules", "create"]], ["value", ["defaultRules", "rules", "x"]]]
    assert first == rules.ChartAlert("First", "x.yaml", ["and", file_gate, [
        "not", ["value", ["defaultRules", "disabled", "First"]]]], "warning")
    assert second == rules.ChartAlert("Second", "x.yaml", ["and", file_gate, [
        "value", ["kubeThing", "enabled"]]], "critical")
    values = {"defaultRules": {"create": True, "rules": {"x": True}, "disabled": {"First": True}},
              "customRules": {"Second": {"severity": "page"}}, "kubeThing": {"enabled": True}}
    assert not first.renders(values) and first.why_not(values) == (
        "its template renders it only if (defaultRules.create and defaultRules.rules.x) and not "
        "defaultRules.disabled.First (defaultRules.create is true, defaultRules.rules.x is true, "
        "defaultRules.disabled.First is true)")
    assert second.renders(values) and second.labels(values) == {"alertname": "Second", "severity": "page"}
    severity = '        severity: {{ dig "Second" "severity" "critical" .Values.customRules }}\n'
    thing = "{{- if .Values.kubeThing.enabled }}"
    for broken, said in (
            (TEMPLATE.replace(f"{{{{- end }}}}\n{thing}", f"{{{{- else }}}}\n{thing}"), "`else`"),
            (TEMPLATE.replace(thing, "{{- range .Values.things }}"), "`range`"),
            (TEMPLATE.replace(severity, ""), "no severity"),
            (TEMPLATE.rsplit("{{- end }}", 1)[0], "left open"),
            (TEMPLATE.replace(thing, '{{- if hasKey .Values "things" }}'), "outside the grammar")):
        with pytest.raises(ValueError, match=said):
            rules.read_template(broken, "x.yaml")


def test_the_plans_own_alerts_are_read_per_cluster() -> None:
    record = record_of("prod")
    release = _first_release(record)
    fired = alert_match.plan_alerts(record, cluster_of(record, release))
    assert {a["alertname"] for a in fired} == {slo_rules.ALERT, slo_rules.ABSENT_ALERT, slo_rules.BLIND_ALERT,
                                               slo_rules.FALLBACK_ALERT, slo_rules.OVERDUE_ALERT,
                                               slo_rules.REFUSED_ALERT, slo_rules.UNWATCHED_ALERT,
                                               gateway_slo.ALERT, gateway_slo.ABSENT_ALERT}
    assert {a["severity"] for a in fired} == {"page", "ticket"}
    # Another cluster's rules are not this one's: none at all for a cluster no resource names.
    assert alert_match.plan_alerts(record, release) == []


def test_prod_routes_match_what_fires_and_a_rule_group_turned_off_is_found() -> None:
    assert alerts.check_alerts(record_of("prod")) == []
    # The chart's alertmanager rules off: both delivery alerts named by both SLO routes (page,
    # ticket) are missing, and each of those two routes then matches nothing: 2 x 2 + 2.
    record, release = _with_values(lambda v: v.setdefault("defaultRules", {}).setdefault(
        "rules", {}).update(alertmanager=False))
    found = [f.message for f in alerts.check_alerts(record)]
    assert len(found) == 6 and all(f.startswith(f"release {release.name} on cluster") for f in found)
    assert sum("names alert AlertmanagerFailedToSendAlerts" in f and
               "defaultRules.rules.alertmanager is false" in f for f in found) == 2
    assert sum("names alert AlertmanagerClusterFailedToSendAlerts" in f for f in found) == 2
    assert sum("matches no alert" in f for f in found) == 2
    # Watchdog disabled by name: its heartbeat route names it and matches nothing.
    record, _ = _with_values(lambda v: v.setdefault("defaultRules", {}).update(disabled={"Watchdog": True}))
    found = [f.message for f in alerts.check_alerts(record)]
    assert len(found) == 2 and all("'rtip-heartbeat'" in f for f in found)
    assert "defaultRules.disabled.Watchdog is true" in found[0]


def test_a_route_is_checked_by_its_names_and_by_all_its_matchers() -> None:
    def problems(routes: list[dict], fired: list[dict], why_not: dict) -> list[str]:
        return [m for _, m in alert_match.route_problems(routes, fired, why_not)]

    def levels(route: dict, chart: frozenset = frozenset()) -> list[Severity]:
        return [lv for lv, _ in alert_match.route_problems([route], fired, {}, chart)]

    error, warning = Severity.ERROR, Severity.WARNING
    fired = [{"alertname": "Up", "severity": "page"}, {"alertname": "Down", "severity": "ticket"},
             {"alertname": "Up", "severity": "ticket"}]
    assert problems([{"receiver": "r", "matchers": ['alertname =~ "Up|Down"', 'severity = "ticket"']}],
                    fired, {}) == []
    # Down never fires at page: naming it in a page route is a finding, though Up matches.
    (down,) = problems([{"receiver": "r", "matchers": ['alertname =~ "Up|Down"', 'severity = "page"']}],
                       fired, {})
    assert down == ('route to \'r\' (alertname =~ "Up|Down", severity = "page") names alert Down, which '
                    'fires, but never with severity = "page"')
    (said, nothing) = problems([{"receiver": "r", "matchers": ['alertname = "Upp"']}], fired, {})
    assert "names alert Upp" in said and "neither a PrometheusRule" in said and "matches no alert" in nothing
    # Alertmanager's other spellings: bare values, several in braces, `match` / `match_re`, child
    # routes (which match only what their parent does), escapes in a quoted regex (`A\.B`).
    assert problems([{"receiver": "r", "matchers": ["{alertname=Up, severity=page}"]},
                     {"receiver": "r", "match": {"alertname": "Down"}, "match_re": {"severity": "tick.*"}},
                     {"receiver": "r", "matchers": ['alertname =~ "A\\\\.B"']}],
                    [*fired, {"alertname": "A.B"}], {}) == []
    (child, child_nothing) = problems([{"receiver": "r", "matchers": ['severity = "page"'],
                                        "routes": [{"receiver": "c", "match": {"alertname": "Down"}}]}],
                                       fired, {})
    assert child.startswith("route to 'c'") and "never with severity" in child
    assert "matches no" in child_nothing
    # Labels the plan cannot know (external labels, additionalRuleLabels) are not judged.
    assert problems([{"receiver": "r", "matchers": ['cluster = "rtip-prod-eastus"', 'alertname = "Up"']}],
                    fired, {}) == []
    for bad, said in (("alertname ~ Up", "not `name op value`"), ('alertname =~ "("', "not RE2"),
                      ('alertname = "Up', "unterminated")):
        (found,) = problems([{"receiver": "r", "matchers": [bad]}], fired, {})
        assert found.startswith("route to 'r': matcher") and said in found
    # A dead name among live ones is a warning (no alert is lost); an error where the name is a
    # chart alert the plan relies on, or where the route then matches nothing it could rely on.
    page = {"receiver": "r", "matchers": ['alertname =~ "Up|Gone"']}
    assert levels(page) == [warning] and levels(page, frozenset({"Gone"})) == [error]
    dead = {"receiver": "r", "matchers": ['alertname = "Gone"']}
    assert levels(dead) == [warning, warning] and levels(dead, frozenset({"Gone"})) == [error, error]
    assert levels({"receiver": "r", "matchers": ['severity = "critical"']}) == [error]


def test_a_route_every_alert_of_which_an_earlier_sibling_catches_is_found() -> None:
    """Alertmanager delivers an alert to the first sibling route that matches it, and goes on only
    past one that says `continue` (its routing tree; amtool checks prod's order)."""
    fired = [{"alertname": "Up", "severity": "page"}, {"alertname": "Down", "severity": "page"}]
    both = {"receiver": "a", "matchers": ['alertname =~ "Up|Down"']}
    up = {"receiver": "b", "matchers": ['alertname = "Up"']}
    (level, said), = alert_match.route_problems([both, up], fired, {})
    assert level == Severity.WARNING and said == (
        "route to 'b' (alertname = \"Up\") never receives an alert: every one it matches stops first "
        "at the route to 'a' (no `continue`)")
    assert alert_match.route_problems([both, up], fired, {}, frozenset({"Up"}))[0][0] == Severity.ERROR
    assert alert_match.route_problems([{**both, "continue": True}, up], fired, {}) == []
    assert alert_match.route_problems([up, both], fired, {}) == []  # Down still reaches 'a'
    # A sibling with a matcher the check cannot judge (a cluster label) may not catch: not counted.
    assert alert_match.route_problems([{**both, "matchers": [*both["matchers"], 'cluster = "x"']}, up],
                                      fired, {}) == []
    # A child route is tried only after its parent matched: siblings are counted per level.
    parent = {"receiver": "p", "matchers": ['severity = "page"'], "routes": [both, up]}
    assert [m for _, m in alert_match.route_problems([parent], fired, {})] == [
        "route to 'b' (alertname = \"Up\") never receives an alert: every one it matches stops first "
        "at the route to 'a' (no `continue`)"]


def test_the_values_turn_chart_alerts_off_and_add_alerts_as_helm_reads_them() -> None:
    table = rules.for_chart("kube-prometheus-stack", "88.5.3")
    assert table is not None
    (watchdog,) = [a for a in table if a.alert == "Watchdog"]
    on = {"defaultRules": {"create": True, "rules": {"general": True}}}
    assert watchdog.renders(on)
    # Go template truth: any non-empty value disables, not only `true`; an empty map does not.
    def disabled(value: object) -> dict[str, object]:
        return {"defaultRules": {**on["defaultRules"], "disabled": {"Watchdog": value}}}

    assert not any(watchdog.renders(disabled(off)) for off in (True, "true", 1, {"x": 1}))
    assert watchdog.renders(disabled({})) and watchdog.renders(disabled(""))
    assert not watchdog.renders({"defaultRules": {"create": True, "rules": {"general": {}}}})
    # sprig's dig: a customRules severity that is there, even empty, replaces the default.
    assert watchdog.labels({"customRules": {"Watchdog": {"severity": ""}}}) == {"alertname": "Watchdog"}
    assert watchdog.labels({}) == {"alertname": "Watchdog", "severity": "none"}
    groups = [{"name": "g", "rules": [{"alert": "Extra", "labels": {"severity": "page"}}, {"record": "r"}]}]
    assert alert_match.release_alerts({"additionalPrometheusRulesMap": {"x": {"groups": groups}},
                                       "additionalPrometheusRules": [{"name": "y", "groups": [
                                           {"name": "h", "rules": [{"alert": "Ignored"}]}]}]}) == [
        {"alertname": "Extra", "severity": "page"}]
    assert alert_match.release_alerts({"additionalPrometheusRules": [{"name": "y", "groups": groups}]}) == [
        {"alertname": "Extra", "severity": "page"}]


def test_a_chart_version_without_rule_facts_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "for_chart", lambda folder, version: None)
    found = alerts.check_alerts(record_of("prod"))
    assert found and all("no vendored default-rule facts for kube-prometheus-stack 88.5.3" in f.message
                         for f in found)


def test_the_reader_writes_the_facts_file_the_check_loads(
        tmp_path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m rtip.chartfacts.rules` on a chart folder holding the template above writes a file
    that `for_chart` reads back as the same alerts; a template it cannot model exits 2."""
    chart = tmp_path / "charts" / "demo"
    (chart / rules.RULES_DIR).mkdir(parents=True)
    (chart / rules.RULES_DIR / "x.yaml").write_text(TEMPLATE)
    assert rules.main([str(chart), "1.0.0", "by hand", "--out", str(tmp_path)]) == 0
    assert "2 alerts from 1 templates" in capsys.readouterr().out
    monkeypatch.setattr(rules, "FACTS_DIR", tmp_path)
    rules.for_chart.cache_clear()
    assert rules.for_chart("demo", "1.0.0") == tuple(rules.read_template(TEMPLATE, "x.yaml"))
    rules.for_chart.cache_clear()
    (chart / rules.RULES_DIR / "x.yaml").write_text(TEMPLATE.replace("{{- end }}\n", "", 1))
    assert rules.main([str(chart), "1.0.0", "by hand", "--out", str(tmp_path)]) == 2
    assert "left open" in capsys.readouterr().err


def test_matchers_are_read_as_alertmanagers_classic_parser_reads_them() -> None:
    """Cases worked from prometheus/alertmanager pkg/labels/parse.go by hand."""
    from rtip.deploycheck.am_matchers import Matcher, parse

    assert parse('a="x\\"y"') == [Matcher("a", "=", 'x"y')]
    assert parse('a=x\\"y') == [Matcher("a", "=", 'x"y')]  # bare values are unescaped too
    assert parse("alertname=~Foo\\\\.Bar") == [Matcher("alertname", "=~", "Foo\\.Bar")]
    assert parse('a="x\\,"') == [Matcher("a", "=", "x\\,")]  # an unknown escape keeps its backslash
    assert parse("{a=b") == parse("a=b}") == [Matcher("a", "=", "b")]  # each brace trimmed alone
    assert parse('{a="b,c", d!~"e|f"}') == [Matcher("a", "=", "b,c"), Matcher("d", "!~", "e|f")]
    for bad in ('a="x\\"', 'a="x', "a=b,,c=d", ",a=b", "1a=b", 'a=x"y', 'a=~"("'):
        with pytest.raises(ValueError):
            parse(bad)
    assert Matcher("alertname", "=~", "Foo\\.Bar").matches({"alertname": "Foo.Bar"})
    assert not Matcher("alertname", "=~", "Foo\\.Bar").matches({"alertname": "FooxBar"})
