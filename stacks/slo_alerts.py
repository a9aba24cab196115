"""A model's alerts (serving/slo_rules.py) over a simulated run: what would have paged.

Prometheus evaluates a rule group every `evaluationInterval`: kube-prometheus-stack 88.5.3 leaves
it empty, so the Prometheus CRD's default of 30 s applies (`crds/crd-prometheuses.yaml`). Each
alert is evaluated the same way on the simulator's Prometheus. The burn-rate alerts from the
very recording expressions the PrometheusRule holds, the conditions their `and` joins (both
windows' ratios over the threshold, enough requests in the long window, requests from before the
short window) done here, as the simulated PromQL has no `offset`. The replicas-overdue page from
the rule's own expression and `for`, each series pending on its own clock. Windows longer than
the run read what the run has, as a Prometheus would over a new deployment.
"""

from __future__ import annotations

import math

from serving.deployments import overdue
from serving.simulator.promql import Store, duration_s
from serving.simulator.promql import evaluate as promql
from serving.slo_rules import (
    alerts_that_can_fire,
    error_ratio,
    min_requests,
    overdue_rule,
    requests_in,
    threshold,
    windows,
)
from serving.tiers import TierSpec
from stacks.model_plan import ModelRegionPlan

EVALUATION_INTERVAL_S = 30.0  # the Prometheus CRD's default `evaluationInterval`


def _ratio(query: str, store: Store, t: float) -> float:
    value = promql(query, store, t)
    if isinstance(value, dict):
        return next(iter(value.values())) if value else math.nan
    return float(value)


def burn_alerts(store: Store, model: str, namespace: str, tier: TierSpec, end_s: float,
                every_s: float = EVALUATION_INTERVAL_S) -> list[dict[str, object]]:
    """Each alert the rule holds: its threshold, when it first fired and for how many
    evaluations (None and 0 when it never did)."""
    kept, _ = alerts_that_can_fire(tier)
    grid = _grid(end_s, every_s)
    ratios = {w: [_ratio(error_ratio(model, namespace, tier, w), store, t) for t in grid]
              for w in windows(kept)}
    counts = {w: [_ratio(requests_in(model, namespace, w), store, t) for t in grid]
              for w in {a.long_window for a in kept}}
    # `offset` as the rule writes it: the long window, ending a short window ago.
    history = {(a.long_window, a.short_window): [
        _ratio(requests_in(model, namespace, a.long_window), store, t - duration_s(a.short_window))
        for t in grid] for a in kept}
    out: list[dict[str, object]] = []
    for a in kept:
        at, least = threshold(tier, a), min_requests(tier, a)
        # NaN (no requests in a window) compares false, as in PromQL.
        before = history[a.long_window, a.short_window]
        firing = [t for i, t in enumerate(grid)
                  if ratios[a.long_window][i] > at and ratios[a.short_window][i] > at
                  and counts[a.long_window][i] >= least and before[i] > 0]
        out.append({"severity": a.severity, "burn_rate": a.burn_rate, "long_window": a.long_window,
                    "short_window": a.short_window, "threshold": at, "min_requests": least,
                    "first_fired_s": firing[0] if firing else None, "evaluations_firing": len(firing)})
    return out


def _grid(end_s: float, every_s: float) -> list[float]:
    """The rule evaluations of a run: one each `every_s`, the first one `every_s` in."""
    return [every_s * i for i in range(1, int(end_s // every_s) + 1)]


def first_fired_s(store: Store, expr: str, held_s: float, end_s: float,
                  every_s: float = EVALUATION_INTERVAL_S) -> float | None:
    """When an alert of `expr` held for `held_s` first fires, evaluated as Prometheus's rule
    manager does: each series the expression returns is pending from the first evaluation that
    returns it (its label set's own `activeAt`), and fires at the first one at least `held_s`
    later that still returns it; a series the expression stops returning starts over. None if
    nothing fires."""
    since: dict[object, float] = {}
    for t in _grid(end_s, every_s):
        value = promql(expr, store, t)
        active = value if isinstance(value, dict) else {}
        since = {labels: since.get(labels, t) for labels in active}
        if any(t - start >= held_s for start in since.values()):
            return t
    return None


def overdue_page(store: Store, mp: ModelRegionPlan, namespace: str, end_s: float) -> dict[str, object]:
    """The model's replicas-overdue page over the run: the rule its PrometheusRule holds
    (serving/slo_rules.py `overdue_rule`, with the arguments serving/deployments.py gives it)."""
    deployment, overdue_s = overdue(mp)
    rule = overdue_rule(mp.model, namespace, deployment, overdue_s, {})
    return {"alert": rule["alert"], "not_ready_window_s": overdue_s,
            "first_fired_s": first_fired_s(store, rule["expr"], duration_s(rule["for"]), end_s)}


__all__ = ["EVALUATION_INTERVAL_S", "burn_alerts", "first_fired_s", "overdue_page"]
