"""Multiwindow, multi-burn-rate alerting on an SLO's error ratio, whatever the SLI: the Google SRE
workbook's set (FACTS.md section 7) with the toolkit's two guards, and the absent-metrics page
that keeps the alerts from going blind. serving/slo_rules.py (each model's latency) and
serving/gateway_slo.py (the front door's availability) build their PrometheusRules from these.

- A burn alert fires when the error ratio recorded over both its long and its short window
  exceeds burn rate x budget; both must burn, so it ends within the short window of the burn.
- Traffic guard: the long window must hold MIN_MISSES misses' worth of requests, so two bad
  requests of ten in a quiet hour page no one.
- History guard: the long window must hold requests from before the short window began
  (`offset`), or a new deployment's first minutes, all its windows hold, would read as a
  3-day burn.
- An alert whose threshold is 1 or more could never fire on the share it stands for; a wide
  budget keeps fewer (`can_fire`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from serving.simulator.promql import duration_s

PROMETHEUS_RULE = ("monitoring.coreos.com/v1", "PrometheusRule")
MIN_MISSES = 10  # an alert's long window must hold this many misses' worth of requests
ABSENT_FOR = "10m"
ABSENT_SEVERITY = "page"  # metrics gone is no slow burn: someone must look now
ABSENT_SEEN = "6h"  # `seen_within`: how recently a series must have been scraped for its absence to page


@dataclass(frozen=True)
class BurnAlert:
    severity: str
    burn_rate: float  # times the rate that spends the whole budget in BUDGET_WINDOW_DAYS
    long_window: str
    short_window: str


# FACTS.md section 7 (Google SRE workbook, "Alerting on SLOs", multiwindow multi-burn-rate).
BURN_ALERTS: tuple[BurnAlert, ...] = (
    BurnAlert("page", 14.4, "1h", "5m"),
    BurnAlert("page", 6.0, "6h", "30m"),
    BurnAlert("ticket", 1.0, "3d", "6h"),
)


def burn_threshold(budget: float, alert: BurnAlert) -> float:
    """The error ratio past which `alert` burns a budget of `budget` (a share of requests)."""
    return round(alert.burn_rate * budget, 10)


def least_requests(budget: float, alert: BurnAlert) -> int:
    """The traffic guard: requests the long window must hold."""
    return math.ceil(MIN_MISSES / burn_threshold(budget, alert) - 1e-9)


def can_fire(budget: float) -> tuple[tuple[BurnAlert, ...], tuple[BurnAlert, ...]]:
    """(kept, dropped) of BURN_ALERTS for `budget`."""
    kept = tuple(a for a in BURN_ALERTS if burn_threshold(budget, a) < 1)
    return kept, tuple(a for a in BURN_ALERTS if a not in kept)


def windows(alerts: tuple[BurnAlert, ...]) -> list[str]:
    """Every window `alerts` read, shortest first: the error ratios to record."""
    return sorted({w for a in alerts for w in (a.long_window, a.short_window)}, key=duration_s)


def burn_rule(name: str, alert: BurnAlert, budget: float, ratio: Callable[[str], str],
              requests: Callable[[str, str | None], str], labels: dict[str, str],
              annotations: Callable[[BurnAlert, float], dict[str, str]]) -> dict[str, Any]:
    """One alerting rule: `ratio(window)` is the recorded ratio's series, `requests(window,
    offset)` the requests over a window ending `offset` ago, `annotations(alert, threshold)` the
    words a notification carries."""
    at = burn_threshold(budget, alert)
    traffic = f"{requests(alert.long_window, None)} >= {least_requests(budget, alert)}"
    history = f"{requests(alert.long_window, alert.short_window)} > 0"
    return {
        "alert": name,
        "expr": (f"{ratio(alert.long_window)} > {at:g} and {ratio(alert.short_window)} > {at:g} "
                 f"and on() {traffic} and on() {history}"),
        "labels": {"severity": alert.severity, **labels,
                   "long_window": alert.long_window, "short_window": alert.short_window},
        "annotations": annotations(alert, at),
    }


def page_rule(name: str, expr: str, held: str, labels: dict[str, str], summary: str,
              description: str) -> dict[str, Any]:
    """A page (ABSENT_SEVERITY) once `expr` has held for `held`."""
    return {"alert": name, "expr": expr, "for": held, "labels": {"severity": ABSENT_SEVERITY, **labels},
            "annotations": {"summary": summary, "description": description}}


def seen_within(series: str) -> str:
    """True (a one-element vector) while `series` has been scraped within ABSENT_SEEN."""
    return f"count(present_over_time({series}[{ABSENT_SEEN}]))"


def absent_rule(name: str, series: str, labels: dict[str, str], summary: str, description: str, *,
                expected: str | None) -> dict[str, Any]:
    """A page ABSENT_FOR after no sample of `series` (a selector) is left, while `expected` (a
    vector expression, joined `on()`) says the series should be there. `seen_within(series)`
    pages for a series scraped within ABSENT_SEEN only (one never scraped, e.g. on its first cold
    start, pages no one), and so resolves ABSENT_SEEN into an outage however long it lasts. None:
    whenever it is absent, for a series that exists from the moment the rule does."""
    expr = f"absent({series})" + (f" and on() ({expected})" if expected is not None else "")
    return page_rule(name, expr, ABSENT_FOR, labels, summary, description)


def rule_body(metadata: dict[str, Any], group: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A PrometheusRule of one group."""
    return {"apiVersion": PROMETHEUS_RULE[0], "kind": PROMETHEUS_RULE[1], "metadata": metadata,
            "spec": {"groups": [{"name": group, "rules": rules}]}}


__all__ = ["ABSENT_FOR", "ABSENT_SEEN", "ABSENT_SEVERITY", "BURN_ALERTS", "MIN_MISSES", "PROMETHEUS_RULE",
           "BurnAlert", "absent_rule", "burn_rule", "burn_threshold", "can_fire", "least_requests",
           "page_rule", "rule_body", "seen_within", "windows"]
