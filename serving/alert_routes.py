"""Where the SLO burn-rate alerts go: Alertmanager's routes and receivers, as kube-prometheus-stack
values, for the severities a stack names a webhook for (`alert_webhooks`).

kube-prometheus-stack 88.5.3 ships `alertmanager.config` routing every alert to its `null`
receiver (only `Watchdog` has a route, to `null` too), so without this the alerts reach
Alertmanager and notify no one. Helm merges maps and replaces lists, so the `routes` and
`receivers` lists here restate the chart's (the `null` receiver, Watchdog's route) before adding
one route and receiver per severity; `inhibit_rules` and the route's timings stay the chart's.
The chart's alerts for notifications that failed to send go to every SLO receiver, so while one
still works a failing webhook is reported (they name the integration, `webhook`, not which one).

A stack may also name a heartbeat webhook per region (`heartbeat_webhooks`, the key HEARTBEAT
here): that cluster's `Watchdog` alert (`vector(1)`, always firing while Prometheus evaluates
rules and Alertmanager delivers: chart `general.rules`, on by default) then goes there about every
two minutes instead of to `null`, for an outside dead man's switch that pages when the pings stop.
Without it, a dead Prometheus or Alertmanager silences every alert with nothing to say so. Each
cluster runs its own Alertmanager, so each needs its own switch (stacks/checks.py refuses one
shared), or the others' pings would hide its silence. It is sent without `send_resolved`:
when Prometheus stops, Alertmanager resolves Watchdog once its last `EndsAt` passes (Prometheus
sets it 4 x max(evaluation interval, 1 m) ahead), about 4 minutes later, and a "resolved" post
would read as one more ping. The pings go on until then: the switch pages about 4 minutes plus
its period after Prometheus stops.

The URLs are secrets: each receiver reads its URL from a file (`url_file`, Alertmanager >= 0.26,
which the Prometheus Operator keeps only for such versions: `pkg/alertmanager/amcfg.go`
`webhookConfig.sanitize`; the chart runs v0.34.0), a key of one Secret in the monitoring namespace
that `alertmanagerSpec.secrets` mounts at /etc/alertmanager/secrets/<secret>/ (operator v0.93.0
`pkg/alertmanager/statefulset.go`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from serving import gateway_slo, slo_rules
from serving.burn_alerts import ABSENT_SEVERITY, BURN_ALERTS

T = TypeVar("T")
# The toolkit's own alerts: each model's latency SLO and the gateway's availability SLO, their
# burn alerts at every severity BURN_ALERTS has, and the pages at ABSENT_SEVERITY: metrics gone,
# and a model's autoscaler blind or its query failing.
BURN_NAMES = (slo_rules.ALERT, gateway_slo.ALERT)
PAGE_NAMES = (slo_rules.ABSENT_ALERT, gateway_slo.ABSENT_ALERT, slo_rules.BLIND_ALERT,
              slo_rules.FALLBACK_ALERT, slo_rules.OVERDUE_ALERT, slo_rules.REFUSED_ALERT,
              slo_rules.UNWATCHED_ALERT)


def slo_alerts(severity: str) -> tuple[str, ...]:
    """The toolkit's alerts that fire at `severity`: what its route names, and no more (the plan's
    deploy check finds a route naming an alert that never fires with the route's severity)."""
    return ((BURN_NAMES if severity in {a.severity for a in BURN_ALERTS} else ())
            + (PAGE_NAMES if severity == ABSENT_SEVERITY else ()))


RECEIVER_SECRET = "rtip-slo-alert-receivers"
SECRETS_DIR = "/etc/alertmanager/secrets"
# The SLO alerts' severities, in the routes' order: every one some toolkit alert fires at, so no
# route is written for a severity whose alert list would be empty.
SEVERITIES = tuple(dict.fromkeys([*(a.severity for a in BURN_ALERTS), ABSENT_SEVERITY]))
HEARTBEAT = "heartbeat"  # the chart's Watchdog, for a dead man's switch
WEBHOOKS = (*SEVERITIES, HEARTBEAT)  # every key a stack's `alert_webhooks` may name
# The chart's own entries the lists replace (values.yaml `alertmanager.config`).
NULL_RECEIVER = "null"
WATCHDOG_MATCHERS = ['alertname = "Watchdog"']
WATCHDOG_ROUTE = {"receiver": NULL_RECEIVER, "matchers": WATCHDOG_MATCHERS}
# A page repeats hourly while it fires; a ticket twice a day (the chart's default repeat).
REPEAT = {"page": "1h", "ticket": "12h"}
# The heartbeat: sent at once, then re-sent at a group flush (every group_interval) once
# repeat_interval has passed since the last send. Alertmanager logs a send when the POST returns,
# so the flush exactly one interval later finds a little less than repeat_interval gone and skips
# (alertmanager#676: 5m and 5m mailed every 10 minutes): a ping about every 2 minutes. Give the
# dead man's switch a period of at least five.
HEARTBEAT_TIMING = {"group_wait": "0s", "group_interval": "1m", "repeat_interval": "1m"}
# The chart's alerts for notifications Alertmanager failed to send (templates/prometheus/rules-1.14/
# alertmanager.rules.yaml at tag kube-prometheus-stack-88.5.3, from the Alertmanager mixin; on by
# default), which it routes to `null` like the rest.
DELIVERY_ALERTS = ("AlertmanagerFailedToSendAlerts", "AlertmanagerClusterFailedToSendAlerts")


def receiver(webhook: str) -> str:
    return "rtip-heartbeat" if webhook == HEARTBEAT else f"rtip-slo-{webhook}"


def cluster_webhooks(shared: Mapping[str, T], heartbeats: Mapping[str, T], region: str) -> dict[str, T]:
    """What one region's Alertmanager posts to, keyed as WEBHOOKS: the stack's SLO webhooks and
    that region's heartbeat alone."""
    return {**shared, **({HEARTBEAT: heartbeats[region]} if region in heartbeats else {})}


def alertmanager_values(webhooks: list[str]) -> dict[str, Any]:
    """The `alertmanager` values for receivers of `webhooks` (a subset of WEBHOOKS, each a key of
    RECEIVER_SECRET holding its webhook URL); {} for none: the chart's routing stays."""
    unknown = sorted(set(webhooks) - set(WEBHOOKS))
    if unknown:
        raise ValueError(f"alert webhooks {unknown}: expected some of {list(WEBHOOKS)}")
    if not webhooks:
        return {}
    ordered = [s for s in SEVERITIES if s in webhooks]
    heartbeat = HEARTBEAT in webhooks
    watchdog = ({"receiver": receiver(HEARTBEAT), "matchers": WATCHDOG_MATCHERS, **HEARTBEAT_TIMING}
                if heartbeat else WATCHDOG_ROUTE)
    # A webhook Alertmanager cannot deliver to (a wrong URL, a port the network policy closes, a
    # service down) raises the chart's own delivery alerts; each goes to every SLO receiver, so
    # while one still works, failed deliveries reach someone. The alerts are per integration
    # (page, ticket and heartbeat are all `webhook`), so they say that a webhook fails, not which;
    # with one SLO receiver they go to that one, failing or not.
    failures = [{
        "receiver": receiver(s),
        "matchers": [f'alertname =~ "{"|".join(DELIVERY_ALERTS)}"'],
        "group_by": ["cluster", "alertname", "integration"],
        "repeat_interval": REPEAT["ticket"],
        **({"continue": True} if i < len(ordered) - 1 else {}),
    } for i, s in enumerate(ordered)]
    routes = [watchdog, *failures, *({
        "receiver": receiver(s),
        "matchers": [f'alertname =~ "{"|".join(slo_alerts(s))}"', f'severity = "{s}"'],
        # The burn alerts carry no namespace label (the chart groups by namespace): one
        # notification per cluster (Prometheus's external label), alert, model and severity
        # (the gateway's alerts have no model: one per cluster, alert and severity).
        "group_by": ["cluster", "alertname", "model", "severity"],
        "repeat_interval": REPEAT[s],
    } for s in ordered)]
    receivers = [{"name": NULL_RECEIVER}, *({
        "name": receiver(s),
        "webhook_configs": [{"url_file": f"{SECRETS_DIR}/{RECEIVER_SECRET}/{s}",
                             "send_resolved": s != HEARTBEAT}],
    } for s in [*ordered, *([HEARTBEAT] if heartbeat else [])])]
    return {"config": {"route": {"routes": routes}, "receivers": receivers},
            "alertmanagerSpec": {"secrets": [RECEIVER_SECRET]}}


__all__ = ["BURN_NAMES", "DELIVERY_ALERTS", "HEARTBEAT", "HEARTBEAT_TIMING", "NULL_RECEIVER",
           "PAGE_NAMES", "RECEIVER_SECRET", "REPEAT", "SECRETS_DIR", "SEVERITIES",
           "WATCHDOG_MATCHERS", "WATCHDOG_ROUTE", "WEBHOOKS", "alertmanager_values",
           "cluster_webhooks", "receiver", "slo_alerts"]
