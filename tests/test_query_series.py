"""The series each ScaledObject's query selects exist with the labels it selects them by
(rtip/deploycheck/query_series.py): the model label the lost-pod term finds its pods by is one a
PodMonitor writes onto its targets, and kube-state-metrics' deletion timestamps reach the
release's Prometheus with the pods' namespace and name."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import yaml

from rtip.deploycheck import run_checks
from rtip.deploycheck.findings import Finding
from rtip.deploycheck.graph import api_kind, cluster_of
from rtip.deploycheck.query_series import check_query_series, collectors, selectors
from rtip.offline import Record
from tests.conftest import SHARED, record_of
from tests.test_alert_rules_facts import _first_release, _with_values

KSM = "kube-state-metrics"


def _ksm(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda v: change(v.setdefault(KSM, {}))


def _first_cluster_findings(record: Record, check: str = "autoscaling") -> list[str]:
    """The first cluster's findings about its ScaledObjects' queries (`check` "alerts": about its
    PrometheusRules' expressions)."""
    cluster = cluster_of(record, _first_release(record))
    index = {r.urn: r for r in record.resources}
    return [f.message for f in check_query_series(record)
            if f.check == check and cluster_of(record, index[f.urn]) == cluster]


def _with_pod_monitors(change: Callable[[dict[str, Any]], None]) -> Record:
    """prod's record with every model PodMonitor's spec changed."""
    record = record_of("prod")
    out = []
    for res in record.resources:
        kind = api_kind(res)
        if kind and kind.kind == "PodMonitor" and "rtip.dev/model" in str(res.inputs["spec"].get("selector")):
            inputs = copy.deepcopy(res.inputs)
            change(inputs["spec"])
            res = replace(res, inputs=inputs)
        out.append(res)
    return Record(record.stack, out)


def _scaled_objects(record: Record) -> int:
    return sum(1 for r in record.resources if (k := api_kind(r)) and k.kind == "ScaledObject")


def test_selectors_read_each_metric_and_its_equality_matchers() -> None:
    query = ('count((up{namespace="m",rtip_dev_model="x"} == 0) unless on(namespace, pod) '
             'kube_pod_deletion_timestamp{namespace="m", pod=~"a.*"}) '
             '+ sum(vllm:num_requests_running{a="1"})')
    assert list(selectors(query)) == [("up", {"namespace": "m", "rtip_dev_model": "x"}),
                                      ("kube_pod_deletion_timestamp", {"namespace": "m"}),
                                      ("vllm:num_requests_running", {"a": "1"})]


def test_prod_queries_select_series_that_exist() -> None:
    record = record_of("prod")
    assert _scaled_objects(record) >= 4
    assert check_query_series(record) == []
    assert not [f for f in run_checks(record) if f.check == "autoscaling"]


def test_a_pod_monitor_without_the_model_target_label_leaves_the_lost_pod_term_blind() -> None:
    """Every model's ScaledObject selects `up{rtip_dev_model=...}` twice (up and its scrape
    duration): one finding each, on every cluster."""
    scaled = _scaled_objects(record_of("prod"))
    for change in (lambda s: s.pop("podTargetLabels"),
                   lambda s: s.update(podTargetLabels=["app"]),
                   lambda s: s["selector"]["matchLabels"].update({"rtip.dev/model": "other"})):
        found = [f.message for f in check_query_series(_with_pod_monitors(change))]
        assert len(found) == 2 * scaled, found[:2]
        assert all("rtip_dev_model" in f and "podTargetLabels" in f for f in found)


def test_kube_state_metrics_values_that_drop_the_deletion_timestamps_are_reported() -> None:
    cases: list[tuple[Callable[[dict[str, Any]], None], str]] = [
        (lambda v: v.setdefault("kubeStateMetrics", {}).update(enabled=False), "kubeStateMetrics.enabled"),
        (_ksm(lambda k: k.update(metricDenylist=["kube_pod_deletion"])), "metricDenylist"),
        (_ksm(lambda k: k.update(metricAllowlist=["kube_node_.*"])), "metricAllowlist"),
        (_ksm(lambda k: k.update(collectorsExclude=["pods"])), "pods collector"),
        (_ksm(lambda k: k.update(collectors=["nodes", "deployments"])), "pods collector"),
        (_ksm(lambda k: k.setdefault("prometheus", {}).setdefault("monitor", {}).setdefault(
            "http", {}).update(honorLabels=False)), "honorLabels"),
        (_ksm(lambda k: k.setdefault("prometheus", {}).setdefault("monitor", {}).update(enabled=False)),
         "monitor.enabled"),
    ]
    for change, words in cases:
        record, _ = _with_values(change)
        found = _first_cluster_findings(record)
        assert found and all(words in f and "kube_pod_deletion_timestamp" in f for f in found), (words, found)
    # Allowed by a pattern, the collectors emptied (kube-state-metrics' own defaults then run) or
    # given as the chart's comma-separated string, the models' namespace watched, the ServiceMonitor
    # carrying the label a Prometheus selector asks for.
    for change in (_ksm(lambda k: k.update(metricAllowlist=["kube_pod_.*", "kube_node_info"])),
                   _ksm(lambda k: k.update(collectors=[])),
                   _ksm(lambda k: k.update(collectors="nodes,pods")),
                   _ksm(lambda k: k.update(collectors=["nodes"], collectorsExtra=["pods"])),
                   _ksm(lambda k: k.update(namespaces="kube-system,rtip-models")),
                   _selector_and_monitor_labels({"team": "x"})):
        record, _ = _with_values(change)
        assert _first_cluster_findings(record) == []


def _selector_and_monitor_labels(labels: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    def change(values: dict[str, Any]) -> None:
        spec = values.setdefault("prometheus", {}).setdefault("prometheusSpec", {})
        spec["serviceMonitorSelector"] = {"matchLabels": {"team": "x"}}
        values.setdefault("kube-state-metrics", {}).setdefault("prometheus", {}).setdefault(
            "monitor", {})["additionalLabels"] = labels
    return change


def test_an_alert_on_kube_state_metrics_series_that_never_arrive_is_reported() -> None:
    """The replicas-overdue page reads each pod's creation and Ready condition: a deny list that
    drops either leaves it silent, and the plan says which rule of which PrometheusRule."""
    assert _first_cluster_findings(record_of("prod"), "alerts") == []
    for dropped in ("kube_pod_created", "kube_pod_status_ready"):
        record, _ = _with_values(_ksm(lambda k, d=dropped: k.update(metricDenylist=[d])))
        found = _first_cluster_findings(record, "alerts")
        assert any(f"its rule RtipReplicasOverdue selects {dropped}, but" in f for f in found)
        # The page for the exporter's absence reads the creation series too.
        assert all(f"selects {dropped}, but" in f and "metricDenylist" in f
                   and f.startswith("PrometheusRule rtip-models/") for f in found)
        assert _first_cluster_findings(record) == []  # no ScaledObject reads it


def test_kube_state_metrics_that_does_not_watch_start_or_load_is_reported() -> None:
    """Namespaces it does not watch (read by hand from chart 8.4.0's deployment template: the
    `namespaces` list, plus its own with `releaseNamespace`, less `namespacesDenylist`), both metric
    lists set (kube-state-metrics v2.20.0 refuses to start), and a ServiceMonitor the release's
    Prometheus does not select; a pattern this check cannot read is a warning, not an error."""
    cases: list[tuple[Callable[[dict[str, Any]], None], str]] = [
        (_ksm(lambda k: k.update(namespaces=["kube-system"])), "watches only namespaces"),
        (_ksm(lambda k: k.update(releaseNamespace=True)), "watches only namespaces"),
        (_ksm(lambda k: k.update(namespacesDenylist="rtip-models")), "namespacesDenylist"),
        (_ksm(lambda k: k.update(metricAllowlist=["kube_pod_.*"], metricDenylist=["kube_node_.*"])),
         "refuses to start"),
        (_selector_and_monitor_labels({}), "ServiceMonitor is not loaded"),
    ]
    for change, words in cases:
        record, _ = _with_values(change)
        found = _first_cluster_findings(record)
        assert found and any(words in f for f in found), (words, found)
    record, _ = _with_values(_ksm(lambda k: k.update(metricDenylist=["(?<x>kube_node)"])))
    cluster = cluster_of(record, _first_release(record))
    index = {r.urn: r for r in record.resources}
    mine = [f for f in check_query_series(record) if cluster_of(record, index[f.urn]) == cluster]
    assert mine and all(f.severity == "warning" and "not a pattern" in f.message for f in mine)


def test_collectors_follow_the_charts_helper() -> None:
    # The chart's list less the excluded, plus the extra (by hand from templates/_helpers.tpl).
    assert collectors({"collectors": ["a", "b"], "collectorsExclude": ["b"], "collectorsExtra": ["c", "a"]}) \
        == ["a", "c"]
    assert "pods" in collectors({}) and "pods" not in collectors({"collectorsExclude": ["pods"]})


def test_the_kube_state_metrics_facts_are_read_at_the_version_the_stack_pins(monkeypatch: Any) -> None:
    """The check's kube-state-metrics facts come from chart 8.4.0, the version the vendored
    kube-prometheus-stack Chart.yaml pins; read at another version, every query that needs the
    exporter is warned about, not passed silently."""
    from rtip.deploycheck import query_series

    stack_chart = SHARED / "charts" / "kube-prometheus-stack" / "88.5.3" / "Chart.yaml"
    chart = yaml.safe_load(stack_chart.read_text())
    (pinned,) = [d["version"] for d in chart["dependencies"] if d["name"] == "kube-state-metrics"]
    assert pinned == query_series.KSM_CHART_VERSION
    record = record_of("prod")
    monkeypatch.setattr(query_series, "KSM_CHART_VERSION", "0.0.0")
    found = check_query_series(record)
    # One warning a ScaledObject (its query's deletion timestamps) and one a model's
    # PrometheusRule, however many kube-state-metrics series its rules select (five: the pods'
    # Ready condition, phase and creation, the Deployment's and the HPA's conditions), one a
    # cluster's watch rule (the pods' creation) and one a cluster's gateway rule (the proxies'
    # Deployment's replicas).
    from serving.deployments import WATCH_RULE

    rules = [r for r in record.resources if r.inputs.get("kind") == "PrometheusRule"]
    watches = [r for r in rules if r.inputs["metadata"]["name"] == WATCH_RULE]
    gateways = [r for r in rules if any(a.get("alert") == "RtipGatewayMetricsAbsent"
                                        for g in r.inputs["spec"]["groups"] for a in g["rules"])]
    assert watches and len(gateways) == len(watches)
    assert len([f for f in found if f.check == "autoscaling"]) == _scaled_objects(record)
    assert len([f for f in found if f.check == "alerts"]) == (_scaled_objects(record) + len(watches)
                                                              + len(gateways))
    assert all(f.severity == "warning" and "not the 0.0.0" in f.message for f in found)


def _ksm_interval(http: str | None = None, monitor: str | None = None,
                  prometheus: str | None = None) -> Callable[[dict[str, Any]], None]:
    """Values with kube-state-metrics' http endpoint interval `http` (None: unset), its
    endpoint-wide `monitor` interval and the Prometheus's `scrapeInterval` (None: as they were)."""
    def change(values: dict[str, Any]) -> None:
        mon = values.setdefault(KSM, {}).setdefault("prometheus", {}).setdefault("monitor", {})
        mon.setdefault("http", {}).pop("interval", None)
        if http is not None:
            mon["http"]["interval"] = http
        if monitor is not None:
            mon["interval"] = monitor
        if prometheus is not None:
            spec = values.setdefault("prometheus", {}).setdefault("prometheusSpec", {})
            spec["scrapeInterval"] = prometheus
    return change


def _pace_findings(record: Record, check: str) -> list[Finding]:
    """The first cluster's findings of `check` about kube-state-metrics' scrape pace."""
    cluster = cluster_of(record, _first_release(record))
    index = {r.urn: r for r in record.resources}
    return [f for f in check_query_series(record)
            if f.check == check and cluster_of(record, index[f.urn]) == cluster
            and ("scraped every" in f.message or "cannot be read" in f.message)]


def test_kube_state_metrics_scraped_slower_than_the_models_is_reported() -> None:
    """The plan scrapes kube-state-metrics as often as the model servers (15 s), the pace the
    simulator reads it at. Without the plan's interval the chart's ServiceMonitor names none
    (chart 8.4.0 templates/servicemonitor.yaml: `http.interval`, else `interval`) and Prometheus
    scrapes at its own `scrapeInterval`, whose default is read here from the vendored Prometheus
    CRD (the chart writes none for its "")."""
    crd = yaml.safe_load((SHARED / "charts" / "kube-prometheus-stack" / "88.5.3" / "crds"
                          / "crd-prometheuses.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    default = spec["scrapeInterval"]["default"]
    assert default.endswith("s") and default[:-1].isdigit()
    record, release = _with_values(lambda v: None)
    ksm_monitor = release.inputs["values"][KSM]["prometheus"]["monitor"]
    model_pace = {e["interval"] for m in _model_pod_monitors(record)
                  for e in m.inputs["spec"]["podMetricsEndpoints"]}
    assert model_pace == {ksm_monitor["http"]["interval"]} == {"15s"}  # emitted at the models' pace
    endpoint_wide = f"every 20s ({KSM}.prometheus.monitor.interval)"
    cases = [(_ksm_interval(), f"every {default} (the Prometheus CRD's default)"),
             (_ksm_interval(http="1m"), f"every 60s ({KSM}.prometheus.monitor.http.interval)"),
             (_ksm_interval(monitor="20s"), endpoint_wide),
             (_ksm_interval(monitor="20s", prometheus="5s"), endpoint_wide),
             (_ksm_interval(http="0", prometheus="1m30s"),
              "every 90s (prometheus.prometheusSpec.scrapeInterval)")]
    for change, words in cases:
        record, _ = _with_values(change)
        for check in ("autoscaling", "alerts"):
            found = [f for f in _pace_findings(record, check) if words in f.message]
            assert found and all(f.severity == "error" for f in found), (words, check)
            # Once an object, not once a series it selects; only where the model servers run (the
            # gateway's rules read kube-state-metrics too, in a namespace no model is served from).
            assert len(found) == len({f.urn for f in found})
            assert all("less often than the model servers of rtip-models (15s)" in f.message for f in found)
    # As often as the models or faster, by whichever key says it; the endpoint's own key wins.
    for change in (_ksm_interval(monitor="15s"), _ksm_interval(prometheus="10s"), _ksm_interval(http="5s"),
                   _ksm_interval(http="15s", monitor="1m", prometheus="1m")):
        record, _ = _with_values(change)
        assert _first_cluster_findings(record) == [] and _first_cluster_findings(record, "alerts") == []


def _model_pod_monitors(record: Record) -> list[Any]:
    return [r for r in record.resources if (k := api_kind(r)) and k.kind == "PodMonitor"
            and "rtip.dev/model" in str(r.inputs["spec"].get("selector"))]


def test_a_model_pod_monitor_left_to_the_global_interval_is_read_at_it() -> None:
    """A model PodMonitor endpoint without an interval is scraped at the Prometheus's: a global
    10 s against kube-state-metrics' 15 s leaves kube-state-metrics behind; an interval no one can
    read is reported, not raised."""
    def no_interval(spec: dict[str, Any]) -> None:
        for endpoint in spec["podMetricsEndpoints"]:
            endpoint.pop("interval")

    base = _with_pod_monitors(no_interval)
    release = _first_release(base)
    values = copy.deepcopy(release.inputs["values"])
    values.setdefault("prometheus", {}).setdefault("prometheusSpec", {})["scrapeInterval"] = "10s"
    record = Record(base.stack, [replace(r, inputs={**r.inputs, "values": values}) if r is release else r
                                 for r in base.resources])
    found = _pace_findings(record, "autoscaling")
    assert any("every 15s" in f.message and "(10s)" in f.message for f in found)
    assert _pace_findings(base, "autoscaling") == []  # at the default 30 s, slower than kube-state-metrics
    bad = _with_pod_monitors(lambda spec: spec["podMetricsEndpoints"][0].update(interval="15 s"))
    found = _pace_findings(bad, "autoscaling")
    assert found and all("cannot be read" in f.message for f in found)
