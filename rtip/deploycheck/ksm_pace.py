"""Is kube-state-metrics scraped as often as the model servers whose pods it reports? The
simulator the plan's zone-loss and alert verdicts come from writes kube-state-metrics' pod series
at the models' scrape pace (serving/simulator/sim.py `_ksm_samples`): the lost-pod term stops
counting an evicted pod when its deletion timestamp arrives, and the pages read pods' creation and
Ready condition. Scraped less often, the deployed fleet replaces and pages later than measured.

Intervals as the release's Prometheus gets them: kube-state-metrics' http endpoint from chart
8.4.0's `prometheus.monitor.http.interval`, else `prometheus.monitor.interval`
(templates/servicemonitor.yaml renders neither when unset); a PodMonitor endpoint from its own
`interval`; either else at the Prometheus's `scrapeInterval` (kube-prometheus-stack 88.5.3 writes
`prometheus.prometheusSpec.scrapeInterval` only when set, templates/prometheus/prometheus.yaml),
else the Prometheus CRD's default, 30s. The model servers are the namespace's PodMonitors that
select pods by the model label; other monitors there (the gateway's) are not simulated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtip.deploycheck.findings import Severity
from rtip.deploycheck.graph import in_namespace
from rtip.offline import Record, Resource
from serving._model_pod import MODEL_LABEL
from serving.simulator.promql import PromQLError, duration_s

KSM = "kube-state-metrics"
# The Prometheus CRD's default `scrapeInterval` (kube-prometheus-stack 88.5.3 crd-prometheuses.yaml).
PROMETHEUS_DEFAULT_INTERVAL_S = 30.0


def _interval_s(value: Any) -> float | None:
    """A set scrape interval in seconds; None for one left unset (absent, "" or 0, which no
    scrape can run at)."""
    seconds = duration_s(str(value)) if value else 0.0
    return seconds or None


def global_interval_s(values: Mapping[str, Any]) -> tuple[float, str]:
    """The release's Prometheus's own scrape interval, and which value says so."""
    spec = (values.get("prometheus") or {}).get("prometheusSpec") or {}
    every = _interval_s(spec.get("scrapeInterval"))
    if every is not None:
        return every, "prometheus.prometheusSpec.scrapeInterval"
    return PROMETHEUS_DEFAULT_INTERVAL_S, "the Prometheus CRD's default"


def ksm_interval_s(values: Mapping[str, Any]) -> tuple[float, str]:
    """How often the release's Prometheus scrapes kube-state-metrics' series, and which value
    says so."""
    monitor = ((values.get(KSM) or {}).get("prometheus") or {}).get("monitor") or {}
    http = monitor.get("http") or {}
    for key, value in ((f"{KSM}.prometheus.monitor.http.interval", http.get("interval")),
                       (f"{KSM}.prometheus.monitor.interval", monitor.get("interval"))):
        every = _interval_s(value)
        if every is not None:
            return every, key
    return global_interval_s(values)


def model_pace_s(record: Record, cluster: Resource | None, namespace: str, global_s: float) -> float | None:
    """The shortest interval the model servers of `namespace` are scraped at (None: no PodMonitor
    there selects pods by the model label)."""
    paces = []
    for monitor in in_namespace(record, cluster, "PodMonitor", namespace):
        spec = monitor.inputs.get("spec") or {}
        if MODEL_LABEL in ((spec.get("selector") or {}).get("matchLabels") or {}):
            endpoints = spec.get("podMetricsEndpoints") or []
            paces += [_interval_s(e.get("interval")) or global_s for e in endpoints]
    return min(paces) if paces else None


def ksm_pace_problem(record: Record, cluster: Resource | None, values: Mapping[str, Any],
                     namespace: str) -> tuple[Severity, str] | None:
    """kube-state-metrics, under a kube-prometheus-stack release's `values` (coalesced over the
    chart's), scraped less often than the model servers of `namespace` on `cluster`."""
    try:
        global_s, _ = global_interval_s(values)
        pace = model_pace_s(record, cluster, namespace, global_s)
        every, key = ksm_interval_s(values)
    except PromQLError as err:
        return Severity.ERROR, f"a scrape interval cannot be read ({err}): is {KSM} kept at the models' pace?"
    if pace is None or every <= pace:
        return None
    return (Severity.ERROR, f"{KSM} is scraped every {every:g}s ({key}), less often than the model servers "
                            f"of {namespace} ({pace:g}s), the pace the simulated zone-loss and alert "
                            f"verdicts read it at: deployed, evicted pods stay counted and pages come later "
                            f"than measured")


__all__ = ["KSM", "PROMETHEUS_DEFAULT_INTERVAL_S", "global_interval_s", "ksm_interval_s", "ksm_pace_problem",
           "model_pace_s"]
