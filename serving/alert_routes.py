"""Where the SLO burn-rate alerts go: Alertmanager's routes and receivers, as kube-prometheus-stack
values, for the severities a stack names a webhook for (`alert_webhooks`).

kube-prometheus-stack 88.5.3 ships `alertmanager.config` routing every alert to its `null`
receiver (only `Watchdog` has a route, to `null` too), so without this the alerts reach
Alertmanager and notify no one. Helm merges maps and replaces lists, so the `routes` and
`receivers` lists here restate the chart's (the `null` receiver, Watchdog's route) before adding
one route and receiver per severity; `inhibit_rules` and the route's timings stay the chart's.

The URLs are secrets: each receiver reads its URL from a file (`url_file`, Alertmanager >= 0.26,
which the Prometheus Operator keeps only for such versions: `pkg/alertmanager/amcfg.go`
`webhookConfig.sanitize`; the chart runs v0.34.0), a key of one Secret in the monitoring namespace
that `alertmanagerSpec.secrets` mounts at /etc/alertmanager/secrets/<secret>/ (operator v0.93.0
`pkg/alertmanager/statefulset.go`).
"""

from __future__ import annotations

from typing import Any

from serving.slo_rules import ABSENT_ALERT, ALERT

RECEIVER_SECRET = "rtip-slo-alert-receivers"
SECRETS_DIR = "/etc/alertmanager/secrets"
SEVERITIES = ("page", "ticket")
# The chart's own entries the lists replace (values.yaml `alertmanager.config`).
NULL_RECEIVER = "null"
WATCHDOG_ROUTE = {"receiver": NULL_RECEIVER, "matchers": ['alertname = "Watchdog"']}
# A page repeats hourly while it fires; a ticket twice a day (the chart's default repeat).
REPEAT = {"page": "1h", "ticket": "12h"}


def receiver(severity: str) -> str:
    return f"rtip-slo-{severity}"


def alertmanager_values(severities: list[str]) -> dict[str, Any]:
    """The `alertmanager` values for receivers of `severities` (a subset of SEVERITIES, each
    a key of RECEIVER_SECRET holding its webhook URL); {} for none: the chart's routing stays."""
    unknown = sorted(set(severities) - set(SEVERITIES))
    if unknown:
        raise ValueError(f"alert severities {unknown}: expected some of {list(SEVERITIES)}")
    if not severities:
        return {}
    ordered = [s for s in SEVERITIES if s in severities]
    routes = [WATCHDOG_ROUTE, *({
        "receiver": receiver(s),
        "matchers": [f'alertname =~ "{ALERT}|{ABSENT_ALERT}"', f'severity = "{s}"'],
        # The burn alerts carry no namespace label (the chart groups by namespace): one
        # notification per cluster (Prometheus's external label), alert, model and severity.
        "group_by": ["cluster", "alertname", "model", "severity"],
        "repeat_interval": REPEAT[s],
    } for s in ordered)]
    receivers = [{"name": NULL_RECEIVER}, *({
        "name": receiver(s),
        "webhook_configs": [{"url_file": f"{SECRETS_DIR}/{RECEIVER_SECRET}/{s}", "send_resolved": True}],
    } for s in ordered)]
    return {"config": {"route": {"routes": routes}, "receivers": receivers},
            "alertmanagerSpec": {"secrets": [RECEIVER_SECRET]}}


__all__ = ["NULL_RECEIVER", "RECEIVER_SECRET", "REPEAT", "SECRETS_DIR", "SEVERITIES", "WATCHDOG_ROUTE",
           "alertmanager_values", "receiver"]
