"""A model's latency SLO as Prometheus rules: error-ratio recordings and burn-rate alerts.

The SLO is the tier's: at least percentile x availability of requests get their first token
within the TTFT target and their output at the TPOT target (the budget
`TierSpec.request_error_budget`, the zone-loss item of `rtip simulate` judges against the same).
Alerts are the Google SRE workbook's multiwindow, multi-burn-rate set over a 30-day budget
(FACTS.md section 7): page at 14.4x over 1 h and 5 m, page at 6x over 6 h and 30 m, ticket at 1x
over 3 d and 6 h; both windows must burn, so an alert ends within the short window of the burn's
end. Recording names follow Sloth's (`slo:sli_error:ratio_rate5m` ...), labelled by model.

What the SLI reads is what vLLM 0.11 exports (serving.simulator.metrics names the source lines):
- TTFT from `vllm:time_to_first_token_seconds` (one observation a request, at its first token);
- TPOT from `vllm:request_time_per_output_token_seconds` (one a finished request, its mean time
  per output token: the per-request figure the tier targets, not the per-token
  `vllm:inter_token_latency_seconds`).
A histogram counts requests at or below its bucket bounds only, and vLLM's bounds are fixed in
code: where a target falls between two (standard's 2 s TTFT lies between 1.0 and 2.5), the SLI
counts a request good only at or below the bound under the target. The error ratio therefore
never reads low for want of a bucket; `bucket_bound` says how much stricter it is.
The request-level SLI (a request is good when it meets both targets) cannot be joined from two
histograms, so the error ratio is the TTFT misses' share plus the TPOT misses' share: an upper
bound, exact when no request misses both. Requests still waiting for a first token are not
counted until they get one, so a stalled fleet shows in the ratio as its requests complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from serving.simulator.metrics import REQUEST_TPOT, REQUEST_TPOT_BUCKETS, TTFT, TTFT_BUCKETS
from serving.tiers import BUDGET_WINDOW_DAYS, TierSpec

PROMETHEUS_RULE = ("monitoring.coreos.com/v1", "PrometheusRule")
ALERT = "RtipLatencyBudgetBurn"
RECORD = "slo:sli_error:ratio_rate{window}"


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
WINDOW_S = {"5m": 300, "30m": 1800, "1h": 3600, "6h": 21600, "3d": 259200}


class UnmeasurableTarget(ValueError):
    """A latency target below the smallest bucket vLLM's histogram has."""


def bucket_bound(target_s: float, buckets: tuple[float, ...], what: str) -> float:
    """The largest bucket bound at or below `target_s`: the strictest reading of the target the
    histogram allows (a tolerance of a microsecond for targets given in milliseconds)."""
    below = [b for b in buckets if b <= target_s + 1e-9]
    if not below:
        raise UnmeasurableTarget(f"{what} target {target_s * 1000:g} ms is below vLLM's smallest "
                                 f"histogram bucket ({buckets[0] * 1000:g} ms), so no rule can measure it")
    return below[-1]


def _le(bound: float) -> str:
    """A matcher for the bucket whichever way the bound is spelled: prometheus_client writes
    `1.0`, Go and Prometheus 3's normalisation of classic-histogram `le` write `1`."""
    python, go = repr(float(bound)), f"{bound:g}"
    return f'le="{python}"' if python == go else f'le=~"{go}|{python}"'


def _miss_share(metric: str, bound: float, selector: str, window: str) -> str:
    return (f"(1 - sum(rate({metric}_bucket{{{selector},{_le(bound)}}}[{window}])) "
            f"/ sum(rate({metric}_count{{{selector}}}[{window}])))")


def error_ratio(model: str, namespace: str, tier: TierSpec, window: str) -> str:
    """The share of the model's requests that missed the TTFT or the TPOT target over `window`
    (an upper bound: see the module docstring)."""
    selector = f'namespace="{namespace}",model_name="{model}"'
    ttft = bucket_bound(tier.ttft_ms / 1000, TTFT_BUCKETS, "TTFT")
    tpot = bucket_bound(tier.tpot_ms / 1000, REQUEST_TPOT_BUCKETS, "TPOT")
    return (f"{_miss_share(TTFT, ttft, selector, window)} + "
            f"{_miss_share(REQUEST_TPOT, tpot, selector, window)}")


def alerts_that_can_fire(tier: TierSpec) -> tuple[tuple[BurnAlert, ...], tuple[BurnAlert, ...]]:
    """(kept, dropped): an alert whose threshold, burn rate x budget, is 1 or more could never
    fire (a share of requests is at most 1), so a tier with a wide budget keeps fewer."""
    budget = tier.request_error_budget
    kept = tuple(a for a in BURN_ALERTS if a.burn_rate * budget < 1)
    return kept, tuple(a for a in BURN_ALERTS if a not in kept)


def prometheus_rule(model: str, namespace: str, tier: TierSpec, metadata: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule body of one model's latency SLO; its series are the model's pods in
    `namespace`."""
    budget = tier.request_error_budget
    kept, _ = alerts_that_can_fire(tier)
    windows = sorted({w for a in kept for w in (a.long_window, a.short_window)}, key=WINDOW_S.__getitem__)
    series = {"model": model, "tier": str(tier.tier)}
    ttft = bucket_bound(tier.ttft_ms / 1000, TTFT_BUCKETS, "TTFT")
    tpot = bucket_bound(tier.tpot_ms / 1000, REQUEST_TPOT_BUCKETS, "TPOT")
    records = [{"record": RECORD.format(window=w), "expr": error_ratio(model, namespace, tier, w),
                "labels": series} for w in windows]
    alerts = []
    for a in kept:
        threshold = round(a.burn_rate * budget, 10)
        long, short = (f'{RECORD.format(window=w)}{{model="{model}"}}'
                       for w in (a.long_window, a.short_window))
        alerts.append({
            "alert": ALERT,
            "expr": f"{long} > {threshold:g} and {short} > {threshold:g}",
            "labels": {"severity": a.severity, **series,
                       "long_window": a.long_window, "short_window": a.short_window},
            "annotations": {
                "summary": f"{model} spends its {BUDGET_WINDOW_DAYS}-day latency error budget "
                           f"{a.burn_rate:g}x too fast",
                "description": (
                    f"Over {a.long_window} and {a.short_window}, more than {threshold:.2%} of {model}'s "
                    f"requests missed TTFT {tier.ttft_ms:g} ms or TPOT {tier.tpot_ms:g} ms (budget "
                    f"{budget:.3%}; read at vLLM's buckets {ttft:g} s and {tpot:g} s)."),
            },
        })
    return {
        "apiVersion": PROMETHEUS_RULE[0],
        "kind": PROMETHEUS_RULE[1],
        "metadata": metadata,
        "spec": {"groups": [{"name": f"{model}-latency-slo", "rules": [*records, *alerts]}]},
    }


def rule_notes(model: str, tier: TierSpec) -> list[str]:
    """What the plan should say about the rules: a target read at a stricter bucket, an alert a
    wide budget drops."""
    notes = []
    for what, target_ms, buckets in (("TTFT", tier.ttft_ms, TTFT_BUCKETS),
                                      ("TPOT", tier.tpot_ms, REQUEST_TPOT_BUCKETS)):
        bound = bucket_bound(target_ms / 1000, buckets, what)
        if abs(bound * 1000 - target_ms) > 1e-6:
            notes.append(f"model {model}: its SLO alerts read the {what} target {target_ms:g} ms at vLLM's "
                         f"{bound * 1000:g} ms bucket (the nearest below), so they count requests between "
                         f"the two as misses")
    _, dropped = alerts_that_can_fire(tier)
    for a in dropped:
        notes.append(f"model {model}: no {a.burn_rate:g}x {a.severity} alert over {a.long_window}: "
                     f"{a.burn_rate:g} x its {tier.request_error_budget:.1%} budget is 100 % or more")
    return notes


__all__ = ["ALERT", "BURN_ALERTS", "PROMETHEUS_RULE", "RECORD", "WINDOW_S", "BurnAlert", "UnmeasurableTarget",
           "alerts_that_can_fire", "bucket_bound", "error_ratio", "prometheus_rule", "rule_notes"]
