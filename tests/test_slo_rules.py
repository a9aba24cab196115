"""The SLO rules every model gets (serving/slo_rules.py), checked by what reads them:
Prometheus's own parser and rule engine (promtool), and the simulator's vLLM metrics.

Expected firing times are hand calculations of the Google SRE workbook's burn-rate conditions
over the series each test feeds in; bucket bounds are vLLM 0.11.0's, read off
`vllm/v1/metrics/loggers.py` (TTFT: ... 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5 ...; per-request
TPOT: 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2 ...).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rtip.cli import main
from serving.deployments import WATCH_RULE
from serving.simulator import StaticPolicy, Trace
from serving.simulator.promql import evaluate as sim_evaluate
from serving.simulator.sim import Simulation
from serving.slo_rules import (
    ABSENT_ALERT,
    ALERT,
    BLIND_ALERT,
    BURN_ALERTS,
    FALLBACK_ALERT,
    RECORD,
    UnmeasurableTarget,
    alerts_that_can_fire,
    error_ratio,
    min_requests,
    prometheus_rule,
    rule_notes,
    threshold,
)
from serving.tiers import TIERS, TierSpec
from stacks.simulation import deployment, select
from stacks.slo_alerts import burn_alerts
from tests import promtool
from tests.conftest import STACKS, plan_of, record_of

NS = "rtip-models"


def _rule(model: str, tier: TierSpec) -> dict[str, Any]:
    return prometheus_rule(model, NS, tier, {"name": f"{model}-slo", "namespace": NS},
                           f"{model}-predictor", 900)


def _groups(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return rule["spec"]["groups"]


@pytest.mark.parametrize(("tier", "ttft_le", "tpot_le"), [
    ("interactive", 'le="0.5"', 'le="0.025"'),  # 500 ms and 30 ms: 0.5 is a bucket, 30 ms is not
    ("standard", 'le="1.0"', 'le="0.1"'),  # 2000 ms lies between 1.0 and 2.5
    ("batch", 'le="5.0"', 'le="0.15"'),  # 6000 ms between 5.0 and 7.5; 175 ms between 0.15 and 0.2
])
def test_each_target_is_read_at_the_bucket_at_or_below_it(tier: str, ttft_le: str, tpot_le: str) -> None:
    expr = error_ratio("m", NS, TIERS[tier], "5m")
    sel = f'namespace="{NS}",model_name="m"'
    assert f"vllm:time_to_first_token_seconds_bucket{{{sel},{ttft_le}}}" in expr
    assert f"vllm:request_time_per_output_token_seconds_bucket{{{sel},{tpot_le}}}" in expr


def test_the_plan_shows_where_each_tier_s_targets_are_read(capsys) -> None:
    """dev's tiers as `rtip plan --json` gives them: each target at vLLM's bucket at or below it."""
    assert main(["plan", "dev", "--json"]) == 0
    tiers = {t["name"]: t["alert_bounds_ms"] for t in json.loads(capsys.readouterr().out)["tiers"]}
    assert tiers["interactive"] == {"ttft": 500, "tpot": 25}
    assert tiers["standard"] == {"ttft": 1000, "tpot": 100}
    assert tiers["batch"] == {"ttft": 5000, "tpot": 150}


def test_a_target_below_the_smallest_bucket_is_refused() -> None:
    with pytest.raises(UnmeasurableTarget, match="TPOT target 5 ms is below vLLM's smallest"):
        error_ratio("m", NS, replace(TIERS["standard"], tpot_ms=5), "5m")


def test_a_wide_budget_drops_the_alerts_that_could_never_fire() -> None:
    # p90: 10 % of requests may miss; 14.4 x that is 144 %, 6 x is 60 %.
    wide = replace(TIERS["standard"], percentile=90)
    kept, dropped = alerts_that_can_fire(wide)
    assert [a.burn_rate for a in dropped] == [14.4] and [a.burn_rate for a in kept] == [6.0, 1.0]
    assert any("no 14.4x page alert" in n for n in rule_notes("m", wide))


def test_every_stack_emits_one_rule_per_model_and_cluster_that_promtool_accepts(tmp_path: Path) -> None:
    for stack in STACKS:
        record = record_of(stack)
        # The models' rules, and one a cluster watching their pods; the gateway's own
        # (rtip-system) is tests/test_gateway_slo.py's.
        in_ns = [r.inputs for r in record.resources if r.inputs.get("kind") == "PrometheusRule"
                 and r.inputs["metadata"]["namespace"] == NS]
        watches = [r for r in in_ns if r["metadata"]["name"] == WATCH_RULE]
        models = [r for r in record.resources if r.type == "rtip:k8s:ModelDeployment"]
        clusters = {m.inputs["cluster"] for m in models}
        assert len(in_ns) - len(watches) == len(models) > 0 and len(watches) == len(clusters), stack
        rules = in_ns
        groups = [g for rule in rules for g in rule["spec"]["groups"]]
        # A model's rules repeat per cluster; one differing by region is checked under its own name.
        distinct = {json.dumps(g, sort_keys=True): g for g in groups}.values()
        # promtool refuses two groups of one name in a file
        unique = [{**g, "name": f"{g['name']}-{i}"} for i, g in enumerate(distinct)]
        done = promtool.check_rules(unique, tmp_path)
        assert done.returncode == 0 and "SUCCESS" in done.stdout, (stack, done.stdout, done.stderr)


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """The check above can fail: a query Prometheus cannot parse."""
    groups = _groups(_rule("m", TIERS["interactive"]))
    groups[0]["rules"][0]["expr"] = groups[0]["rules"][0]["expr"].replace("sum(rate(", "sum(rate((", 1)
    assert promtool.check_rules(groups, tmp_path).returncode != 0


# --- alerts firing in Prometheus's rule engine -----------------------------------------------------
PER_MIN = 100  # requests a minute in the fed series


def _series(tier_le: tuple[str, str], good_ttft: str, good_tpot: str, minutes: int,
            model: str = "m") -> list[dict[str, str]]:
    sel = f'namespace="{NS}",model_name="{model}",pod="{model}-predictor-0"'
    total = f"0+{PER_MIN}x{minutes}"
    ttft, tpot = "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"
    return [
        {"series": f"{ttft}_count{{{sel}}}", "values": total},
        {"series": f'{ttft}_bucket{{{sel},le="{tier_le[0]}"}}', "values": good_ttft},
        {"series": f"{tpot}_count{{{sel}}}", "values": total},
        {"series": f'{tpot}_bucket{{{sel},le="{tier_le[1]}"}}', "values": good_tpot},
    ]


# The SRE workbook's multiwindow set (FACTS.md section 7), by long window: severity, burn rate,
# short window. Written out here, not read from the rule under test.
WORKBOOK = {"1h": ("page", 14.4, "5m"), "6h": ("page", 6.0, "30m"), "3d": ("ticket", 1.0, "6h")}
# The tiers' targets and tails, by hand (serving/tiers.py states them; MLPerf's, FACTS.md).
BY_HAND = {"interactive": (500, 30, "1.00%"), "standard": (2000, 100, "1.00%")}


def _expected(rule: dict[str, Any], firing: set[str]) -> list[dict[str, Any]]:
    """The alerts `firing` (by long window) as promtool lists them, written from the workbook and
    the tier by hand: the labels and annotations a page or ticket must carry."""
    tier = rule["spec"]["groups"][0]["rules"][0]["labels"]["tier"]
    ttft, tpot, tail = BY_HAND[tier]
    out = []
    for long in sorted(firing):
        severity, burn, short = WORKBOOK[long]
        labels = {"severity": severity, "model": "m", "tier": tier,
                  "long_window": long, "short_window": short}
        share = f"{burn:.2f}%"  # the burn rate times the tiers' 1 % tail
        annotations = {
            "summary": f"m spends its 30-day latency error budget {burn:g}x too fast",
            "description": (f"Over {long} and {short}, more than {share} of m's requests missed "
                            f"TTFT {ttft} ms or TPOT {tpot} ms (the tier allows {tail} at p99)."),
        }
        out.append({"exp_labels": labels, "exp_annotations": annotations})
    return out


def _alert_test(rule: dict[str, Any], series: list[dict[str, str]],
                at: dict[str, set[str]]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": t, "alertname": ALERT, "exp_alerts": _expected(rule, firing)}
                                for t, firing in at.items()]}


def test_a_burn_pages_and_tickets_when_the_workbook_says(tmp_path: Path) -> None:
    """Interactive tier (p99): 1 % of requests may miss. An hour of good traffic, then 20 % of
    requests miss TTFT from minute 60. With t the minutes since, every window holding the onset
    reads 20t / (100 x its minutes of data) (100 requests a minute: past every traffic guard):
    - 1h window: t / 300 > 14.4 x 1 % from t = 43.2 (the 5m window reads 20 % by then);
    - 6h window (all data so far, 60 + t minutes): 0.2 t / (60 + t) > 6 % from t = 25.7;
    - 3d window, and the 6h window as the ticket's short one: > 1 % from t = 3.2, but the ticket
      also needs requests from before its 6h short window, which this 3-hour feed never has.
    Each eval time below is at least 3 % of its threshold away from it, whether the window's left
    edge counts (promtool 2.42) or not (Prometheus 3: the 1h threshold moves to t = 42.5)."""
    rule = _rule("m", TIERS["interactive"])
    # promtool's `a+bxn` writes n + 1 values: minute 61 is the first of the second run
    good = f"0+{PER_MIN}x60 {60 * PER_MIN + 80}+80x119"
    series = _series(("0.5", "0.025"), good, f"0+{PER_MIN}x180", 180)
    at = {"62m": set(), "84m": set(), "88m": {"6h"}, "101m": {"6h"}, "106m": {"6h", "1h"}}
    done = promtool.run_rule_tests(_groups(rule), [_alert_test(rule, series, at)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_misses_within_the_budget_raise_nothing_and_a_slow_leak_only_a_ticket(tmp_path: Path) -> None:
    """0.8 % of requests missing TPOT for three days is within the 1 % budget: no alert. 1.5 %
    spends the budget 1.5x too fast: the 1x ticket fires once its long window holds requests from
    before its 6h short window (at 7 h, not at 30 minutes), neither page (6x is 6 %)."""
    rule = _rule("m", TIERS["interactive"])
    minutes = 3 * 24 * 60 + 10
    within = _series(("0.5", "0.025"), f"0+{PER_MIN}x{minutes}", f"0+99.2x{minutes}", minutes)
    leak = _series(("0.5", "0.025"), f"0+{PER_MIN}x{minutes}", "0+98.5x" + str(minutes), minutes)
    tests = [_alert_test(rule, within, {"30m": set(), "7h": set(), "3d": set()}),
             _alert_test(rule, leak, {"30m": set(), "7h": {"3d"}, "3d": {"3d"}})]
    done = promtool.run_rule_tests(_groups(rule), tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_standard_ttft_misses_are_read_at_the_bucket_below_the_target(tmp_path: Path) -> None:
    """Standard's 2 s TTFT is read at the 1.0 s bucket (`le="1.0"`, as prometheus_client writes
    it): 10 % of requests over 1 s (and under 2.5 s, the next bucket) count as misses from the
    start, so the 14.4x page (14.4 %) stays quiet and the 6x one (6 %) fires once the feed is
    older than its 30m short window (the ticket would need 6 h). The other buckets are fed too,
    `le="160"` among them, which a loose `1|1.0` regex took for 1.0 (reading -90 %)."""
    rule = _rule("m", TIERS["standard"])
    series = _series(("1.0", "0.1"), "0+90x60", f"0+{PER_MIN}x60", 60)
    for le in ("2.5", "160", "+Inf"):
        series.append({"series": series[1]["series"].replace('le="1.0"', f'le="{le}"'),
                       "values": f"0+{PER_MIN}x60"})
    tests = [_alert_test(rule, series, {"20m": set(), "45m": {"6h"}})]
    done = promtool.run_rule_tests(_groups(rule), tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_quiet_hour_does_not_page_on_a_few_slow_requests(tmp_path: Path) -> None:
    """One request every 6 minutes for ten hours, every fifth one slow: after each slow one the
    5m window reads 100 % and the longer ones about 20 %, past every threshold, but an alert needs
    10 misses' worth of requests in its long window (70 in 1h at 14.4 %, 167 in 6h at 6 %, 1,000
    in 3d at 1 %), and ten hours hold 100. Without that guard the 14.4x and 6x pages would fire:
    Prometheus evaluates the two window conditions alone to a sample at those times."""
    rule = _rule("m", TIERS["interactive"])
    sel = f'namespace="{NS}",model_name="m",pod="m-predictor-0"'
    ttft, tpot = "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"
    minutes = 600
    done_by = [m // 6 for m in range(minutes + 1)]  # requests so far, minute by minute
    fast_by = [n - n // 5 for n in done_by]  # every fifth request slow
    series = [{"series": f"{ttft}_count{{{sel}}}", "values": " ".join(map(str, done_by))},
              {"series": f'{ttft}_bucket{{{sel},le="0.5"}}', "values": " ".join(map(str, fast_by))},
              {"series": f"{tpot}_count{{{sel}}}", "values": " ".join(map(str, done_by))},
              {"series": f'{tpot}_bucket{{{sel},le="0.025"}}', "values": " ".join(map(str, done_by))}]
    at = ["7h2m", "9h2m"]  # two minutes after the 70th and 90th requests, both slow
    test = {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": t, "alertname": ALERT, "exp_alerts": []} for t in at]}
    done = promtool.run_rule_tests(_groups(rule), [test], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [min_requests(TIERS["interactive"], a) for a in BURN_ALERTS] == [70, 167, 1000]
    bare = [f'{RECORD.format(window=a.long_window)} > {threshold(TIERS["interactive"], a):g} and '
            f'{RECORD.format(window=a.short_window)} > {threshold(TIERS["interactive"], a):g}'
            for a in BURN_ALERTS[:2]]
    asked = [(q, t) for q in bare for t in at]
    got = promtool.evaluate({s["series"]: s["values"] for s in series}, asked, tmp_path, "1m",
                            rules=_groups(rule))
    assert all(got), dict(zip(asked, got, strict=True))


def test_a_model_whose_metrics_vanish_pages_after_ten_minutes(tmp_path: Path) -> None:
    """Twenty minutes of scrapes, then none: Prometheus's 5-minute lookback keeps the last sample
    until minute 25, `absent` holds from then, and the alert pages 10 minutes later, at 35. With
    no predictor pod Ready (kube-state-metrics' readiness series) it resolves once the last scrape
    is 6 hours old (the replicas-overdue page carries on); with a pod Ready it keeps paging (a
    broken scrape, not a model down), and a model whose Ready pods were never scraped pages at
    10 minutes. A model first scraped at minute 30 (its first cold start: not Ready before) pages
    no one before."""
    rule = _rule("m", TIERS["interactive"])
    sel = f'namespace="{NS}",model_name="m"'
    series = [{"series": f'vllm:num_requests_running{{{sel},pod="m-predictor-0"}}', "values": "3x20"}]
    # By hand: a page for the model and its tier, with the selector's labels `absent` keeps.
    firing = [{"exp_labels": {"severity": "page", "model": "m", "tier": "interactive",
                              "namespace": NS, "model_name": "m"},
               "exp_annotations": {
                   "summary": "m reports no metrics",
                   "description": ("No pod of m has been scraped for 10m: it serves nothing, or "
                                   "Prometheus cannot see it, and its latency alerts are blind.")}}]
    test = {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": t, "alertname": ABSENT_ALERT, "exp_alerts": fired}
                                for t, fired in (("24m", []), ("33m", []), ("37m", firing), ("60m", firing))]}
    # A name the predictor's ReplicaSet could give (Kubernetes' name alphabet), Ready or not.
    ready = f'kube_pod_status_ready{{namespace="{NS}",pod="m-predictor-7d9f8-bvc24",condition="true"}}'

    def case(running: str, readiness: str, expected: tuple[tuple[str, list], ...]) -> dict[str, Any]:
        inputs = [{**series[0], "values": running}] if running else []
        return {"interval": "1m", "input_series": [*inputs, {"series": ready, "values": readiness}],
                "alert_rule_test": [{"eval_time": t, "alertname": ABSENT_ALERT, "exp_alerts": fired}
                                    for t, fired in expected]}
    down = case("3x20", "1x20 0x480", (("37m", firing), ("6h15m", firing), ("6h30m", [])))
    blind = case("3x20", "1x480", (("37m", firing), ("6h30m", firing), ("7h", firing)))
    never = case("", "1x60", (("9m", []), ("10m", firing), ("50m", firing)))
    late = case("_x29 3x30", "0x29 1x30", (("15m", []), ("29m", []), ("45m", [])))
    done = promtool.run_rule_tests(_groups(rule), [test, down, blind, never, late], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_model_whose_hpa_cannot_read_its_metric_pages_after_five_minutes(tmp_path: Path) -> None:
    """kube-state-metrics' ScalingActive condition of the model's HPA, one sample a minute: true
    for 10 minutes, false from minute 10 (KEDA's metrics API unreachable). The page holds from
    minute 15 (5 minutes false), not before, and not for another model's HPA, a true status, or
    another condition. The HPA's name is the one KEDA gives the ScaledObject the plan emits."""
    rule = _rule("m", TIERS["interactive"])
    # In the dev record, each model's rule names the HPA of the ScaledObject beside it.
    objects = [r.inputs for r in record_of("dev").resources if r.inputs.get("kind") in ("ScaledObject",
                                                                                       "PrometheusRule")]
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert scaled
    for so in scaled:
        name, ns = so["metadata"]["name"], so["metadata"]["namespace"]
        (slo,) = [o for o in objects if o["kind"] == "PrometheusRule" and o["metadata"]["namespace"] == ns
                  and any(g["name"] == f"{name}-latency-slo" for g in o["spec"]["groups"])]
        (blind,) = [a for g in slo["spec"]["groups"] for a in g["rules"] if a.get("alert") == BLIND_ALERT]
        assert f'namespace="{ns}",horizontalpodautoscaler="keda-hpa-{name}"' in blind["expr"]

    def cond(hpa: str, condition: str, status: str) -> str:
        return (f'kube_horizontalpodautoscaler_status_condition{{namespace="{NS}",horizontalpodautoscaler='
                f'"{hpa}",condition="{condition}",status="{status}"}}')
    series = [
        {"series": cond("keda-hpa-m", "ScalingActive", "false"), "values": "0x9 1x30"},
        {"series": cond("keda-hpa-m", "ScalingActive", "true"), "values": "1x9 0x30"},
        {"series": cond("keda-hpa-other", "ScalingActive", "false"), "values": "1x40"},
        {"series": cond("keda-hpa-m", "AbleToScale", "false"), "values": "1x40"},
    ]
    # By hand: the condition's labels, the model's and its tier, a page.
    firing = [{"exp_labels": {"severity": "page", "model": "m", "tier": "interactive", "namespace": NS,
                              "horizontalpodautoscaler": "keda-hpa-m", "condition": "ScalingActive",
                              "status": "false"},
               "exp_annotations": {
                   "summary": "m cannot autoscale",
                   "description": ("The HPA of m has not read its metric for 5m (ScalingActive false): "
                                   "it holds its replicas whatever the load. Check KEDA's metrics API "
                                   "server and operator.")}}]
    test = {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": t, "alertname": BLIND_ALERT, "exp_alerts": fired}
                                for t, fired in (("9m", []), ("14m", []), ("15m", firing), ("30m", firing))]}
    done = promtool.run_rule_tests(_groups(rule), [test], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_model_whose_trigger_keeps_failing_pages_after_five_minutes(tmp_path: Path) -> None:
    """KEDA's error counter for the model's ScaledObject, one sample a minute as scraped (KEDA's
    own namespace label renamed exported_namespace): four failed polls a minute after minute 10.
    The increase over two minutes is above 0 from minute 11, so the page holds from minute 16; a
    burst of four minutes, another model's errors and another namespace's page no one."""
    rule = _rule("m", TIERS["interactive"])

    def errors(namespace: str, scaled_object: str) -> str:
        return (f'keda_scaled_object_errors_total{{namespace="keda",exported_namespace="{namespace}",'
                f'scaledObject="{scaled_object}",job="keda-operator"}}')
    failing = {"interval": "1m", "input_series": [
        {"series": errors(NS, "m"), "values": "0x10 4+4x30"},
        {"series": errors(NS, "other"), "values": "0+4x40"},
        {"series": errors("elsewhere", "m"), "values": "0+4x40"}]}
    firing = [{"exp_labels": {"severity": "page", "model": "m", "tier": "interactive"},
               "exp_annotations": {
                   "summary": "m's autoscaling query is failing",
                   "description": ("KEDA has failed to read m's trigger in every minute for 5m: its "
                                   "fallback holds the replicas whatever the load. Check that KEDA "
                                   "reaches Prometheus and that the model's pods are scraped.")}}]
    at = (("10m", []), ("15m", []), ("16m", firing), ("40m", firing))
    failing["alert_rule_test"] = [{"eval_time": t, "alertname": FALLBACK_ALERT, "exp_alerts": fired}
                                  for t, fired in at]
    burst = {"interval": "1m", "input_series": [{"series": errors(NS, "m"), "values": "0x10 4+4x3 16x30"}],
             "alert_rule_test": [{"eval_time": t, "alertname": FALLBACK_ALERT, "exp_alerts": []}
                                 for t in ("13m", "16m", "20m", "40m")]}
    done = promtool.run_rule_tests(_groups(rule), [failing, burst], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the KEDA query: the simulator's PromQL against Prometheus's ----------------------------------
def test_the_simulator_evaluates_the_emitted_keda_query_as_prometheus_does(tmp_path: Path) -> None:
    """The plan's ScaledObject query for the 70B (both branches: in flight and the completion
    rate's zone branch), and its SLO rule's error ratio over 5 m and 1 h, over three pods scraped
    every 15 s: one starts late, one's counters reset (a restart). Eval times sit between scrapes
    and on them, where the simulator polls and a window's left edge is a sample: Prometheus 3
    (promtool 3.5, tools.lock) leaves it out as the simulator does; Prometheus 2 counted it."""
    from serving.simulator.prometheus import Store

    plan = plan_of("prod")
    (mp,) = select(plan, "llama-70b")
    query = deployment(plan, mp).scaled_object["triggers"][0]["metadata"]["query"]
    assert "clamp_min(" in query and "rate(" in query
    n, nan = 41, float("nan")  # ten minutes at 15 s; NaN: no sample (not yet started)
    pods: dict[str, dict[str, list[float]]] = {
        "p0": {"running": [3 + (i % 5) for i in range(n)], "waiting": [float(i % 3 == 0) for i in range(n)],
               "success": [2.0 * i for i in range(n)]},
        "p1": {"running": [6 - (i % 4) for i in range(n)], "waiting": [0.0] * n,
               "success": [1.5 * i if i < 20 else 1.5 * (i - 20) for i in range(n)]},  # reset at 5 min
        "p2": {"running": [nan] * 12 + [2.0] * (n - 12), "waiting": [nan] * 12 + [1.0] * (n - 12),
               "success": [nan] * 12 + [3.0 * (i - 12) for i in range(12, n)]},  # from 3 min
    }
    # The 70B's SLO rule reads its standard tier's TTFT at the 1.0 s bucket and TPOT at 0.1 s.
    for k, pod in enumerate(pods):
        seen = [v for v in pods[pod]["success"]]
        pods[pod]["ttft_count"] = [v * 2 for v in seen]
        pods[pod]["ttft_fast"] = [v * (1.9 - 0.1 * k) for v in seen]
        pods[pod]["tpot_count"] = [v * 2 for v in seen]
        pods[pod]["tpot_fast"] = [v * 2 if i < 25 else v * 2 - (i - 25) * k for i, v in enumerate(seen)]
    metric = {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
              "success": "vllm:request_success_total",
              "ttft_count": "vllm:time_to_first_token_seconds_count",
              "ttft_fast": "vllm:time_to_first_token_seconds_bucket",
              "tpot_count": "vllm:request_time_per_output_token_seconds_count",
              "tpot_fast": "vllm:request_time_per_output_token_seconds_bucket"}
    le = {"ttft_fast": "1.0", "tpot_fast": "0.1"}
    series: dict[str, str] = {}
    store = Store()
    for pod, values in pods.items():
        for key, vs in values.items():
            labels = (("model_name", mp.model), ("namespace", NS), ("pod", pod),
                      *((("le", le[key]),) if key in le else ()))
            sel = ",".join(f'{k}="{v}"' for k, v in labels)
            series[f"{metric[key]}{{{sel}}}"] = " ".join("_" if np.isnan(v) else f"{v:g}" for v in vs)
            for i, v in enumerate(vs):
                if not np.isnan(v):
                    store.add(15.0 * i, metric[key], labels, v)
    times = [97, 187, 247, 322, 397, 592, 180, 300, 465, 600]  # seconds; the last four on the 15 s grid
    slo = [error_ratio(mp.model, NS, mp.tier_spec, w) for w in ("5m", "1h")]
    asked = [(q, t) for q in (query, *slo) for t in times]
    got = promtool.evaluate(series, [(q, f"{t // 60}m{f'{t % 60}s' if t % 60 else ''}") for q, t in asked],
                            tmp_path)
    for (q, t), prom in zip(asked, got, strict=True):
        ours = sim_evaluate(q, store, float(t))
        assert isinstance(ours, dict) and len(prom) == len(ours) == 1, (t, prom, ours)
        (p,), (o,) = prom.values(), ours.values()
        assert o == pytest.approx(p, rel=1e-12), (t, p, o)


# --- the SLI on what vLLM exports, against the requests themselves --------------------------------
@pytest.fixture(scope="module")
def overloaded() -> tuple[Any, Any, Any]:
    """The prod 8B (interactive) in one region at 1.6x its fleet's sized rate for eight minutes,
    its floor of replicas fixed: requests miss their targets as the backlog grows."""
    plan = plan_of("prod")
    mp = select(plan, "llama-8b")[0]
    dep = deployment(plan, mp)
    rng = np.random.default_rng(7)
    replicas = mp.min_replicas
    rate = 1.6 * mp.capacity.qps * replicas
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * 480)))
    trace = Trace(arrivals, rng.integers(200, 2000, len(arrivals)), rng.integers(20, 400, len(arrivals)),
                  source="poisson")
    sim = Simulation(trace, dep.sim_config(), "least-loaded", StaticPolicy(replicas))
    return sim, sim.run(), dep


def test_the_recorded_error_ratio_is_the_requests_share_past_each_bucket(overloaded) -> None:
    """Second method: from the requests themselves, the share whose first token (by the last
    scrape) came after the TTFT bucket plus the share of finished ones whose mean TPOT exceeded
    the TPOT bucket equals what the recording rule reads off the histograms; it is at least the
    share of requests that missed a target, and above the fast page's 14.4x burn."""
    sim, result, dep = overloaded
    tier = dep.plan.tier_spec
    at = 225.0  # a scrape instant (every 15 s), while requests still arrive
    value = sim_evaluate(error_ratio(dep.plan.model, NS, tier, "30m"), sim.store, at)
    assert isinstance(value, dict) and len(value) == 1
    (got,) = value.values()
    first = result.arrival_s + result.ttft_s
    done = result.arrival_s + result.e2e_s
    started, finished = first <= at, done <= at
    ttft_miss = np.mean(result.ttft_s[started] > 0.5)  # interactive's 500 ms: the 0.5 bucket
    tpot = np.nan_to_num(result.tpot_s[finished], nan=0.0)  # one output token: vLLM observes 0
    tpot_miss = np.mean(tpot > 0.025)  # 30 ms read at the 25 ms bucket
    assert got == pytest.approx(ttft_miss + tpot_miss, rel=1e-9)
    missed = ~result.attained()[finished]
    assert got >= float(np.mean(missed)) > 0
    assert got > 14.4 * tier.tail


def test_a_fleet_within_its_sized_rate_burns_no_budget(overloaded) -> None:
    """The same replicas at half their sized rate for 8 minutes, as long as the overloaded run
    below, where the 14.4x page fires from 330 s: here the recorded ratio stays under the 1x
    ticket and nothing fires."""
    _, _, dep = overloaded
    mp = dep.plan
    rng = np.random.default_rng(8)
    rate = 0.5 * mp.capacity.qps * mp.min_replicas
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * 480)))
    trace = Trace(arrivals, rng.integers(200, 2000, len(arrivals)), rng.integers(20, 400, len(arrivals)),
                  source="poisson")
    sim = Simulation(trace, dep.sim_config(), "least-loaded", StaticPolicy(mp.min_replicas))
    result = sim.run()
    assert result.end_s > 360  # long enough for the 14.4x page's history guard to pass
    value = sim_evaluate(error_ratio(mp.model, NS, mp.tier_spec, "30m"), sim.store, 465.0)
    assert isinstance(value, dict) and len(value) == 1
    assert next(iter(value.values())) < mp.tier_spec.tail
    quiet = burn_alerts(sim.store, mp.model, NS, mp.tier_spec, result.end_s)
    assert len(quiet) == 3 and all(a["first_fired_s"] is None for a in quiet)


def test_the_overloaded_fleet_pages_once_prometheus_holds_five_minutes_of_it(overloaded) -> None:
    """Every alert the rule holds, evaluated every 30 s over the overloaded run. Checked first
    from the requests: by 30 s the requests finished already ran past the TPOT bucket far more
    often than the fastest burn allows (decode overload: TTFT holds while every admitted sequence
    slows the others). The 14.4x page also needs requests in its 1h window ending 5 minutes ago:
    two scrapes (0 and 15 s) by then, so from 315 s, the 330 s evaluation, to the end. The 6x
    page and the ticket need 30 minutes and 6 hours of history: never in an 8-minute run."""
    sim, result, dep = overloaded
    tier = dep.plan.tier_spec
    finished = result.arrival_s + result.e2e_s <= 30
    tpot = np.nan_to_num(result.tpot_s[finished], nan=0.0)
    assert np.mean(tpot > 0.025) > 14.4 * tier.tail
    fired = {a["burn_rate"]: a for a in burn_alerts(sim.store, dep.plan.model, NS, tier, result.end_s)}
    assert set(fired) == {14.4, 6.0, 1.0}
    evaluations = int(result.end_s // 30) - 330 // 30 + 1
    assert fired[14.4]["first_fired_s"] == 330 and fired[14.4]["evaluations_firing"] == evaluations
    assert fired[6.0]["first_fired_s"] is None and fired[1.0]["first_fired_s"] is None
