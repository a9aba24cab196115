"""A model's latency SLO as Prometheus rules: error-ratio recordings and burn-rate alerts.

The SLO is the tier's latency promise: at most `TierSpec.tail` of requests (1 % at p99) get their
first token after the TTFT target or their output slower than the TPOT target. Failed requests
are the availability SLO's, which these rules do not measure (see below). Alerts are the Google
SRE workbook's multiwindow, multi-burn-rate set over a 30-day budget (FACTS.md section 7): page at
14.4x over 1 h and 5 m, page at 6x over 6 h and 30 m, ticket at 1x over 3 d and 6 h; both windows
must burn, so an alert ends within the short window of the burn's end. A burn needs traffic to
mean anything: an alert also needs MIN_MISSES misses' worth of requests in its long window, so two
slow requests of ten in a quiet hour do not page. Recording names follow Sloth's
(`slo:sli_error:ratio_rate5m` ...), labelled by model.

What the SLI reads is what vLLM 0.11 exports (serving.simulator.metrics names the source lines):
- TTFT from `vllm:time_to_first_token_seconds` (one observation a request, at its first token);
- TPOT from `vllm:request_time_per_output_token_seconds` (one a finished request, its mean time
  per output token: the per-request figure the tier targets, not the per-token
  `vllm:inter_token_latency_seconds`).
vLLM's bucket bounds are fixed in code, and where a target falls between two (standard's 2 s TTFT
between 1.0 and 2.5, the interactive 30 ms TPOT between 0.025 and 0.05) no reading of the
histogram is exact: a fleet near its sized rate puts most requests just under the target, and a
decode-overloaded one just over it, inside the same bucket. A request is counted a miss past the
bound below the target, so the ratio never reads low: it errs towards paging. Measured on the
prod 8B (interactive) at its floor of 11 replicas, 10 minutes of Poisson traffic at 1.0 / 1.2 /
1.3 / 1.4 / 1.6x its sized rate: the requests really missing a target are 0.01 / 0.17 / 0.56 /
11.1 / 96 %; this ratio reads 0.14 / 8.4 / 50 / 91 / 99 % (the whole run, at 585 s). The bound
above the target reads 0 % at every one of those loads (TPOT stays under 50 ms), so it would never
page on the 8B's decode overload; interpolating inside the bucket reads 6.5 % at 1.2x and 40 % at 1.3x,
neither bound (benchmarks/alert_reading.py measures all three). The plan's tier table shows where
each target is read. `le` is matched as
prometheus_client writes it (`1.0`), which Prometheus 2 keeps and Prometheus 3 normalises to.
The request-level SLI (a request is good when it meets both targets) cannot be joined from two
histograms; the error ratio adds the TTFT misses' share (over first tokens) and the TPOT misses'
share (over finished requests), which is high by the requests that miss both: an upper bound too.
These alerts watch latency, not availability: vLLM records no latency for a request aborted before
its first token (`v1/engine/output_processor.py` `abort_requests`), so a fleet that answers
nothing shows no misses, and with no request in a window the ratio is NaN and nothing fires.
A model whose metrics vanish (every pod gone, or none scraped) would silence them too; it has an
alert of its own, `RtipModelMetricsAbsent`, a page after ABSENT_FOR without a single pod's
`vllm:num_requests_running` while a predictor pod is Ready (kube-state-metrics: its readiness probe
is vLLM's own health, so a Ready pod serves and exports; none scraped is a broken scrape, paged
however long it lasts and from the model's first day) or the model was scraped within ABSENT_SEEN
(every pod gone: `OVERDUE_ALERT` pages for the replacements that do not serve, and keeps paging
after this one resolves). A model still on its first cold start (16 minutes end to end in the
report FACTS.md section 7 cites) has no Ready pod and pages no one. Its replica floor is never
zero (the planner's is at least one a zone; a stack that states 0 is refused) and its
PodDisruptionBudget lets one pod go at a time, so no rollout
or drain empties it.
An alert's long window must also hold requests from before its short window began: otherwise a
new deployment's first minutes, all its windows hold, would read as a 3-day burn.
"""

from __future__ import annotations

from typing import Any

from serving.burn_alerts import (
    ABSENT_FOR,
    ABSENT_SEEN,
    BURN_ALERTS,
    MIN_MISSES,
    PROMETHEUS_RULE,
    BurnAlert,
    absent_rule,
    burn_rule,
    burn_threshold,
    can_fire,
    least_requests,
    page_rule,
    rule_body,
    seen_within,
    windows,
)
from serving.kube_names import NAME_ALPHABET, POD_CREATED, POD_DELETION, POD_PHASE, POD_READY
from serving.simulator.metrics import REQUEST_TPOT, REQUEST_TPOT_BUCKETS, RUNNING, TTFT, TTFT_BUCKETS
from serving.tiers import BUDGET_WINDOW_DAYS, TierSpec

ALERT = "RtipLatencyBudgetBurn"
ABSENT_ALERT = "RtipModelMetricsAbsent"
BLIND_ALERT = "RtipAutoscalerBlind"
BLIND_FOR = "5m"
# kube-state-metrics' HPA condition (internal/store/hpa.go, stable; the kube-prometheus-stack
# scrape keeps its namespace label: honorLabels) and the HPA KEDA makes for a ScaledObject
# (controllers/keda/hpa.go getDefaultHpaName).
HPA_CONDITION = "kube_horizontalpodautoscaler_status_condition"
FALLBACK_ALERT = "RtipAutoscalerQueryFailing"
# KEDA's operator counts every failed read of a ScaledObject's trigger
# (pkg/metricscollector/prommetrics.go `keda_scaled_object_errors_total{namespace, scaledObject}`);
# the chart's ServiceMonitor keeps the target's own `namespace`, so Prometheus renames KEDA's to
# `exported_namespace` (honor_labels false).
SCALED_OBJECT_ERRORS = "keda_scaled_object_errors_total"
OVERDUE_ALERT = "RtipReplicasOverdue"
# Its series' absence: kube-state-metrics runs one replica, and without it the overdue page and
# the blind-HPA page both stay silent.
UNWATCHED_ALERT = "RtipKubeStateMetricsAbsent"
REFUSED_ALERT = "RtipReplicasNotCreated"  # pods the ReplicaSet cannot create
# kube-state-metrics v2.20.0 deployment.go: one series per condition and status, labelled
# namespace, deployment, reason, condition, status.
DEPLOYMENT_CONDITION = "kube_deployment_status_condition"
REPLICA_FAILURE_FOR = "5m"  # refused for longer than KServe's webhook takes to restart
# Four of kube-state-metrics' 30 s scrapes (the chart's ServiceMonitor takes Prometheus's default
# interval): a pod that turns Ready just past its window, or a scrape the exporter misses, pages no one.
OVERDUE_FOR = "2m"


RECORD = "slo:sli_error:ratio_rate{window}"


def keda_hpa(scaled_object: str) -> str:
    """The HPA KEDA makes for a ScaledObject (KEDA controllers/keda/hpa.go getDefaultHpaName)."""
    return f"keda-hpa-{scaled_object}"


class UnmeasurableTarget(ValueError):
    """A latency target below the smallest bucket of vLLM's histogram."""


def bound(target_s: float, buckets: tuple[float, ...], what: str) -> float:
    """The largest bucket bound at or below `target_s` (a microsecond's tolerance for targets
    given in milliseconds): a request under it certainly met the target."""
    if target_s < buckets[0] - 1e-9:
        raise UnmeasurableTarget(f"{what} target {target_s * 1000:g} ms is below vLLM's smallest "
                                 f"histogram bucket ({buckets[0] * 1000:g} ms), so no rule can measure it")
    return [b for b in buckets if b <= target_s + 1e-9][-1]


def threshold(tier: TierSpec, alert: BurnAlert) -> float:
    """The latency budget is the tier's tail (1 % at p99)."""
    return burn_threshold(tier.tail, alert)


def min_requests(tier: TierSpec, alert: BurnAlert) -> int:
    return least_requests(tier.tail, alert)


def _miss_share(metric: str, le: float, selector: str, window: str) -> str:
    good = f'sum(rate({metric}_bucket{{{selector},le="{float(le)!r}"}}[{window}]))'
    return f"(1 - {good} / sum(rate({metric}_count{{{selector}}}[{window}])))"


def _selector(model: str, namespace: str) -> str:
    return f'namespace="{namespace}",model_name="{model}"'


def bounds(tier: TierSpec) -> tuple[float, float]:
    """The (TTFT, TPOT) bucket bounds the tier's targets are read at."""
    return (bound(tier.ttft_s, TTFT_BUCKETS, "TTFT"), bound(tier.tpot_s, REQUEST_TPOT_BUCKETS, "TPOT"))


def error_ratio(model: str, namespace: str, tier: TierSpec, window: str) -> str:
    """At most this share of the model's requests missed the TTFT or the TPOT target over
    `window` (see the module docstring)."""
    sel = _selector(model, namespace)
    ttft, tpot = bounds(tier)
    return f"{_miss_share(TTFT, ttft, sel, window)} + {_miss_share(REQUEST_TPOT, tpot, sel, window)}"


def requests_in(model: str, namespace: str, window: str, offset: str | None = None) -> str:
    """Requests that had a first token over `window` (ending `offset` ago)."""
    shift = f" offset {offset}" if offset else ""
    return f"sum(increase({TTFT}_count{{{_selector(model, namespace)}}}[{window}]{shift}))"


def alerts_that_can_fire(tier: TierSpec) -> tuple[tuple[BurnAlert, ...], tuple[BurnAlert, ...]]:
    """(kept, dropped) for the tier's tail (serving.burn_alerts.can_fire)."""
    return can_fire(tier.tail)


def prometheus_rule(model: str, namespace: str, tier: TierSpec, metadata: dict[str, Any],
                    deployment: str, overdue_s: int) -> dict[str, Any]:
    """The PrometheusRule body of one model's latency SLO; its series are the model's pods in
    `namespace`, those of its predictor `deployment` in kube-state-metrics' series. `overdue_s`:
    how long a replica may take to serve, for `overdue_rule`."""
    kept, _ = alerts_that_can_fire(tier)
    series = {"model": model, "tier": str(tier.tier)}
    records = [{"record": RECORD.format(window=w), "expr": error_ratio(model, namespace, tier, w),
                "labels": series} for w in windows(kept)]

    def words(a: BurnAlert, at: float) -> dict[str, str]:
        return {"summary": f"{model} spends its {BUDGET_WINDOW_DAYS}-day latency error budget "
                           f"{a.burn_rate:g}x too fast",
                "description": (
                    f"Over {a.long_window} and {a.short_window}, more than {at:.2%} of {model}'s "
                    f"requests missed TTFT {tier.ttft_ms:g} ms or TPOT {tier.tpot_ms:g} ms (the tier "
                    f"allows {tier.tail:.2%} at p{tier.percentile:g}).")}

    alerts = [burn_rule(ALERT, a, tier.tail, lambda w: f'{RECORD.format(window=w)}{{model="{model}"}}',
                        lambda w, offset: requests_in(model, namespace, w, offset), series, words)
              for a in kept]
    running = f"{RUNNING}{{{_selector(model, namespace)}}}"
    ready = f'count({POD_READY}{{{_pods(namespace, deployment)},condition="true"}} == 1)'
    alerts.append(absent_rule(
        ABSENT_ALERT, running, series, f"{model} reports no metrics",
        f"No pod of {model} has been scraped for {ABSENT_FOR}: it serves nothing, or Prometheus "
        f"cannot see it, and its latency alerts are blind.",
        expected=f"{ready} or {seen_within(running)}"))
    alerts.append(blind_rule(model, namespace, series))
    alerts.append(query_failing_rule(model, namespace, series))
    alerts.append(overdue_rule(model, namespace, deployment, overdue_s, series))
    alerts.append(replica_failure_rule(model, namespace, deployment, series))
    return rule_body(metadata, f"{model}-latency-slo", [*records, *alerts])


def watch_rule(namespace: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule of one page a cluster for kube-state-metrics gone from the models'
    `namespace`: without its pod series every model's `OVERDUE_ALERT` and `BLIND_ALERT` stay
    silent. One rule for the namespace, not one a model: the exporter runs one replica, so its
    loss takes every model's series at once, and a rule a model paged once for each (four pages
    for one outage in prod). A model whose own pods alone are gone is `ABSENT_ALERT`'s. No
    history condition: the rule is applied after the cluster's models (components/platform.py),
    whose floors (at least 1: the stack refuses 0) keep a pod in the namespace, so the series
    exists from its first evaluations on, and the page lasts as long as the exporter stays gone."""
    return rule_body(metadata, "models-watched", [absent_rule(
        UNWATCHED_ALERT, f'{POD_CREATED}{{namespace="{namespace}"}}', {},
        f"the pods of {namespace} are not watched",
        f"kube-state-metrics has exported no pod of namespace {namespace} for {ABSENT_FOR}: no model's "
        f"{OVERDUE_ALERT} or {BLIND_ALERT} can fire. Check the kube-state-metrics Deployment (one "
        f"replica) and its scrape.", expected=None)])


def query_failing_rule(model: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """A page once KEDA has failed to read the model's trigger in every minute of BLIND_FOR: its
    fallback then holds the replicas (serving/autoscaling.py), so the HPA still has a metric and
    `blind_rule` stays quiet, but the fleet no longer follows the load (Prometheus unreachable
    from KEDA, or the query answering nothing)."""
    errors = f'{SCALED_OBJECT_ERRORS}{{exported_namespace="{namespace}",scaledObject="{model}"}}'
    # Two minutes: four of the 30 s scrapes KEDA's metrics get (the chart sets no interval,
    # kube-prometheus-stack's default is 30 s), so a rate always has two samples.
    return page_rule(FALLBACK_ALERT, f"sum(increase({errors}[2m])) > 0", BLIND_FOR, labels,
                 f"{model}'s autoscaling query is failing",
                 f"KEDA has failed to read {model}'s trigger in every minute for {BLIND_FOR}: its fallback "
                 f"holds the replicas whatever the load. Check that KEDA reaches Prometheus and that the "
                 f"model's pods are scraped.")


def blind_rule(model: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """A page once the model's HPA has failed to read its metric for BLIND_FOR: KEDA's metrics
    API server unreachable (a zone lost with it; kedacore/keda#8211, an adapter Ready without its
    link to the operator), so the fleet holds its replicas whatever the load, the zone branch and
    the lost-pod term included. KEDA's own fallback (Prometheus unreachable) still hands the HPA
    a metric and does not show here: `query_failing_rule` pages for that."""
    condition = (f'{HPA_CONDITION}{{namespace="{namespace}",horizontalpodautoscaler="{keda_hpa(model)}",'
                 f'condition="ScalingActive",status="false"}}')
    return page_rule(BLIND_ALERT, f"{condition} == 1", BLIND_FOR, labels, f"{model} cannot autoscale",
                 f"The HPA of {model} has not read its metric for {BLIND_FOR} (ScalingActive false): it "
                 f"holds its replicas whatever the load. Check KEDA's metrics API server and operator.")


def _pods(namespace: str, deployment: str) -> str:
    """The matchers of a Deployment's pods in kube-state-metrics' pod series. A ReplicaSet asks
    for `<deployment>-<template hash>-` plus five random characters, but the API server cuts a
    generated name's base to 58 characters first (apiserver storage/names generate.go), so past
    that the hash, or the '-' after it, is cut and the suffix joins it: one segment after the
    Deployment's name, not two. A 40-character model's predictor (50) meets it with any hash of
    seven characters or more. Both segments are written in Kubernetes' name alphabet, which has no
    vowels, so no other Deployment's name (`<other model>-predictor`, `<model>-epp`) can stand in
    for them, cut or not. Model names are lowercase letters, digits and '-': nothing to escape.
    The deploy check `alerts` generates such names and asks the pattern of every Deployment."""
    chars = f"[{NAME_ALPHABET}]+"
    return f'namespace="{namespace}",pod=~"{deployment}-{chars}(-{chars})?"'


def overdue_expr(namespace: str, deployment: str, overdue_s: int) -> str:
    """The predictor pods older than `overdue_s` that were not Ready at any scrape of the last
    `overdue_s`, are not being deleted and have not ended (kube-state-metrics' pod series, by
    name: `_pods`). Each pod has its own clock: a replacement, a rollout's new pod or a pod of a
    scale-up counts from its creation, so a pod that serves within a cold start never counts,
    while an unscheduled pod (no Ready condition at all) or one stuck not Ready does. A pod being
    drained or evicted by the API has a deletion timestamp; one the kubelet evicted under node
    pressure, rejected at admission or stopped in a node shutdown is Failed and stays an object,
    not Ready and not being deleted, until the pod garbage collector's threshold (12,500 pods by
    default): the ReplicaSet has replaced it, so it is left out by its phase, as the chart's own
    KubePodNotReady leaves out every phase but Pending, Unknown and Running. One series a pod
    (`max by`): kube-state-metrics' scrape labels would otherwise restart the alert whenever the
    exporter moves."""
    pods = _pods(namespace, deployment)
    ready = f'max_over_time({POD_READY}{{{pods},condition="true"}}[{overdue_s}s])'
    ended = f'{POD_PHASE}{{{pods},phase=~"Failed|Succeeded"}} == 1'
    return (f"max by (namespace, pod) ({POD_CREATED}{{{pods}}}) < time() - {overdue_s} "
            f"unless on(namespace, pod) {ready} == 1 "
            f"unless on(namespace, pod) {ended} "
            f'unless on(namespace, pod) {POD_DELETION}{{namespace="{namespace}"}}')


def overdue_rule(model: str, namespace: str, deployment: str, overdue_s: int,
                 labels: dict[str, str]) -> dict[str, Any]:
    """A page once a predictor pod of the model has gone longer without serving than any cold
    start takes: a new node, the image, the weights and the engine with the startup probe's margin
    (`overdue_s`). The fleet is then short of what the plan sized for its tier and a zone loss. On
    EKS a zone outage does this: Karpenter launches the replacements' nodes only in the lost zone
    until it is listed in `zones_down`. So do exhausted GPU capacity, a failing image pull, a
    replica the startup probe keeps restarting, and a lost pod never evicted (a zone partially
    disrupted, where the node lifecycle controller stops evicting). Pods that cannot be created
    page as REFUSED_ALERT (`replica_failure_rule`)."""
    return page_rule(OVERDUE_ALERT, overdue_expr(namespace, deployment, overdue_s), OVERDUE_FOR,
                     labels, f"{model} has a replica that has not served for {overdue_s / 60:.0f} minutes",
                     f"A predictor pod of {model} has not been Ready for over {overdue_s:.0f} s, longer than "
                     f"a cold start with a new node: the fleet is short of its sizing. If it is Pending, "
                     f"look at GPU capacity and quota; on EKS, during a zone outage, list the zone in the "
                     f"region's zones_down and run pulumi up. Otherwise look at its image pull and its "
                     f"startup-probe restarts.")


def replica_failure_rule(model: str, namespace: str, deployment: str,
                         labels: dict[str, str]) -> dict[str, Any]:
    """A page for pods the predictor's ReplicaSet cannot create (a namespace quota, an
    admission webhook down), which are no pods for `overdue_rule` to count: the Deployment's
    ReplicaFailure condition (the Deployment controller copies its ReplicaSets': progress.go)
    held for REPLICA_FAILURE_FOR."""
    condition = (f'{DEPLOYMENT_CONDITION}{{namespace="{namespace}",deployment="{deployment}",'
                 f'condition="ReplicaFailure",status="true"}}')
    return page_rule(REFUSED_ALERT, f"{condition} == 1", REPLICA_FAILURE_FOR, labels,
                     f"{model} cannot create its replicas",
                     f"The predictor Deployment of {model} has failed to create pods for "
                     f"{REPLICA_FAILURE_FOR} (ReplicaFailure): look at the namespace's quota and at "
                     f"KServe's admission webhook.")


def rule_notes(model: str, tier: TierSpec) -> list[str]:
    """What the plan should say about a model's rules: the alerts a wide tail drops. (Where each
    tier's targets are read is in the plan's tier table: `bounds`.)"""
    _, dropped = alerts_that_can_fire(tier)
    return [f"model {model}: no {a.burn_rate:g}x {a.severity} alert over {a.long_window}: "
            f"{a.burn_rate:g} x its {tier.tail:.1%} tail is 100 % or more" for a in dropped]


__all__ = ["ABSENT_ALERT", "ABSENT_FOR", "ABSENT_SEEN", "ALERT", "BLIND_ALERT", "BLIND_FOR", "BURN_ALERTS",
           "DEPLOYMENT_CONDITION", "FALLBACK_ALERT", "HPA_CONDITION", "MIN_MISSES", "OVERDUE_ALERT",
           "OVERDUE_FOR", "PROMETHEUS_RULE", "RECORD", "REFUSED_ALERT", "REPLICA_FAILURE_FOR",
           "SCALED_OBJECT_ERRORS", "UNWATCHED_ALERT", "BurnAlert", "UnmeasurableTarget",
           "alerts_that_can_fire", "blind_rule", "bound", "bounds", "error_ratio", "keda_hpa",
           "min_requests", "overdue_expr", "overdue_rule", "prometheus_rule", "query_failing_rule",
           "replica_failure_rule", "requests_in", "rule_notes", "threshold", "watch_rule", "windows"]
