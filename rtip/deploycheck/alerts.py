"""Alertmanager's configuration as a kube-prometheus-stack release renders it: the facts the SLO
alerts' delivery (serving/alert_routes.py) rests on.

- Helm replaces a list whole, so a release that sets `alertmanager.config.route.routes` or
  `alertmanager.config.receivers` must restate the chart's own entries (its `null` receiver,
  Watchdog's route, whose receiver a heartbeat may replace), or every other alert of the chart
  loses its route;
- a webhook's `url_file` must lie in a Secret `alertmanagerSpec.secrets` mounts: the Prometheus
  Operator mounts each at /etc/alertmanager/secrets/<name>/ (v0.93.0 `pkg/alertmanager/
  statefulset.go`, `secretsDir`);
- `url_file` needs Alertmanager 0.26 or newer: the operator drops it for older versions
  (`pkg/alertmanager/amcfg.go`, `webhookConfig.sanitize`), leaving a receiver with no URL;
- every route matches an alert some rule of that cluster fires, and every alert name a route
  names is one: the plan's PrometheusRules, or the chart's default rules the release's values
  render (rtip/chartfacts/rules.py, read from the chart's templates at its tag). Alertmanager
  never reports a route that matches nothing, so a renamed alert or a rule group turned off
  would silence a heartbeat or the delivery alerts without a word (alert_match.py);
- the release's Prometheus loads the plan's PrometheusRules and PodMonitors on its cluster (and
  any ServiceMonitor or Probe it declares): a Prometheus and an operator that run, the operator
  watching their namespaces, selectors as the chart renders them matching their labels and
  namespaces, rules not handed to an agent (monitor_select.py); and the route check counts only
  rules that load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rtip.chartfacts import rules as chart_rules
from rtip.deploycheck.alert_match import fired_alerts, route_problems
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import cluster_of
from rtip.deploycheck.monitor_select import CHART, Loader, selection_problems, stack_releases
from rtip.offline import Record

CHECK = "alerts"
OPERATOR_SECRETS_DIR = "/etc/alertmanager/secrets"
URL_FILE_SINCE = (0, 26)


def problems(alertmanager: Mapping[str, Any], chart_config: Mapping[str, Any]) -> list[str]:
    """What is wrong with `alertmanager` (the release's values coalesced over the chart's) given
    the chart's own `alertmanager.config`."""
    config = alertmanager.get("config") or {}
    out: list[str] = []
    # A chart route may change receiver (Watchdog's goes to a heartbeat), not what it matches.
    matched = [r.get("matchers") for r in (config.get("route") or {}).get("routes") or []]
    for route in (chart_config.get("route") or {}).get("routes") or []:
        if route.get("matchers") not in matched:
            out.append(f"alertmanager.config.route.routes drops the chart's route {route}")
    names = [r.get("name") for r in config.get("receivers") or []]
    for receiver in chart_config.get("receivers") or []:
        if receiver.get("name") not in names:
            out.append(f"alertmanager.config.receivers drops the chart's receiver {receiver.get('name')!r}")
    spec = alertmanager.get("alertmanagerSpec") or {}
    mounted = [f"{OPERATOR_SECRETS_DIR}/{s}/" for s in spec.get("secrets") or []]
    files = [(r.get("name"), hook["url_file"]) for r in config.get("receivers") or []
             for hook in r.get("webhook_configs") or [] if hook.get("url_file")]
    for name, path in files:
        if not any(path.startswith(m) for m in mounted):
            out.append(f"receiver {name!r} reads its URL from {path}, in no Secret alertmanagerSpec.secrets "
                       f"mounts ({', '.join(mounted) or 'none'})")
    tag = str((spec.get("image") or {}).get("tag") or "")
    version = re.match(r"v?(\d+)\.(\d+)", tag)
    if files and (version is None or tuple(int(x) for x in version.groups()) < URL_FILE_SINCE):
        out.append(f"webhook url_file needs Alertmanager 0.26 or newer; the release runs "
                   f"{tag or 'an unknown tag'}")
    return out


def check_alerts(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for release, facts, merged in stack_releases(record):
        cluster = cluster_of(record, release)
        where = f"release {release.name}{f' on cluster {cluster.name}' if cluster else ''}"
        messages = [(Severity.ERROR, m) for m in problems(
            merged.get("alertmanager") or {}, (facts.defaults.get("alertmanager") or {}).get("config") or {})]
        config = (merged.get("alertmanager") or {}).get("config") or {}
        routes = (config.get("route") or {}).get("routes") or []
        chart_alerts = chart_rules.for_chart(facts.folder, facts.version)
        loader = Loader.of(record, release, merged)
        if routes and chart_alerts is None:
            messages.append((Severity.ERROR, f"no vendored default-rule facts for {CHART} "
                             f"{facts.version}, so its routes cannot be checked: run python -m "
                             "rtip.chartfacts.rules on the chart at its tag"))
        elif routes:
            fired, why_not = fired_alerts(record, loader, chart_alerts)
            messages += route_problems(routes, fired, why_not, {a.alert for a in chart_alerts})
        messages += [(Severity.ERROR, m) for m in selection_problems(loader)]
        for severity, message in messages:
            findings.append(Finding(CHECK, release.urn, f"{where}: {message}", severity))
    return findings


__all__ = ["CHECK", "OPERATOR_SECRETS_DIR", "check_alerts", "problems"]
