"""The gateway's availability SLO (serving/gateway_slo.py): scraped from the Envoy proxies, read
by Prometheus's own promtool, routed by amtool, reachable through the network policies."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from rtip import offline
from rtip.stackfile import load
from serving import gateway_slo
from tests import promtool
from tests.conftest import record_of, spec_of, stack_doc, write_stack
from tests.test_alert_routes import _alertmanager_config, _route
from tests.test_netpol import Endpoint, cluster_policies, reach

NS = "rtip-system"
PROXY = Endpoint("10.20.2.20", NS, {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                                   "app.kubernetes.io/managed-by": "envoy-gateway"})
PROMETHEUS = Endpoint("10.20.1.10", "monitoring", {"app.kubernetes.io/name": "prometheus"})
KEDA = Endpoint("10.20.3.30", "keda", {"app": "keda-operator"})
# Tier availabilities, by hand (serving/tiers.py states them): interactive 99.9 %, standard
# 99.5 %, batch 99 %.
AVAILABILITY = {"interactive": 0.999, "standard": 0.995, "batch": 0.99}


def _bodies(stack: str, kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in record_of(stack).by_type(f"kubernetes:monitoring.coreos.com/v1:{kind}")
            if r.inputs["metadata"]["namespace"] == NS]


def test_every_cluster_scrapes_its_proxies_and_judges_them_by_its_strictest_tier() -> None:
    """One PodMonitor and one rule per prod cluster; the page over 1 h fires past 14.4 x the
    budget of the strictest tier among the region's models, read off the stack file."""
    spec = spec_of("prod")
    monitors, rules = _bodies("prod", "PodMonitor"), _bodies("prod", "PrometheusRule")
    assert len(monitors) == len(rules) == len(spec.regions)
    (endpoint,) = monitors[0]["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/stats/prometheus")
    assert monitors[0]["spec"]["selector"]["matchLabels"]["gateway.envoyproxy.io/owning-gateway-name"] \
        == "rtip-gateway"
    tier_of = {m.name: m.tier or spec.default_tier for m in spec.models}
    wanted = sorted(round(14.4 * (1 - max(AVAILABILITY[tier_of[m.name]] for m in spec.models
                                          if m.regions is None or r.region in m.regions)), 6)
                    for r in spec.regions)
    got = []
    for rule in rules:
        (page,) = [x for x in rule["spec"]["groups"][0]["rules"]
                   if x.get("alert") == gateway_slo.ALERT and x["labels"]["long_window"] == "1h"]
        got.append(float(re.search(r"ratio_rate1h > ([0-9.e-]+)", page["expr"]).group(1)))
    assert sorted(got) == wanted


def test_a_model_no_tenant_may_call_does_not_set_the_budget(tmp_path: Path) -> None:
    """dev with llama-1b moved to the standard tier (99.5 %) and the only tenant calling llama-3b
    (batch, 99 %): the gateway serves llama-3b alone, so it pages past 14.4 x 1 %, not x 0.5 %."""
    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    (one_b,) = [m for m in platform["models"] if m["name"] == "llama-1b"]
    one_b["tier"] = "standard"
    platform["tenants"][0]["models"] = ["llama-3b"]
    for region in platform["regions"]:  # room for the standard tier's replicas
        for pool in region.get("gpu_pools", []):
            pool["max_nodes"] *= 4
    record = offline.run(load(str(write_stack(tmp_path, platform))))
    (rule,) = [r.inputs for r in record.by_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
               if r.inputs["metadata"]["namespace"] == NS]
    (page,) = [x for x in rule["spec"]["groups"][0]["rules"]
               if x.get("alert") == gateway_slo.ALERT and x["labels"]["long_window"] == "1h"]
    assert float(re.search(r"ratio_rate1h > ([0-9.e-]+)", page["expr"]).group(1)) == \
        pytest.approx(14.4 * (1 - AVAILABILITY["batch"]))


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    for rule in _bodies("prod", "PrometheusRule"):
        done = promtool.check_rules(rule["spec"]["groups"], tmp_path)
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def _series(minutes: int) -> list[dict[str, str]]:
    """100 answers a minute on the HTTPS listener: all 2xx for an hour, then 5 % 5xx. Beside them,
    1,000 rate-limited 429s a minute and the stats listener's 10,000 scrapes a minute, neither of
    which may count (either would dilute the ratio below every threshold)."""
    base = 'namespace="rtip-system",pod="proxy-0"'
    https = f'{base},envoy_http_conn_manager_prefix="https-10443"'
    stats = f'{base},envoy_http_conn_manager_prefix="eg-stats-http"'
    rest = minutes - 60
    return [
        {"series": f'envoy_http_downstream_rq_xx{{{https},envoy_response_code_class="2"}}',
         "values": f"0+100x60 {6000 + 95}+95x{rest - 1}"},
        {"series": f'envoy_http_downstream_rq_xx{{{https},envoy_response_code_class="5"}}',
         "values": f"0x60 5+5x{rest - 1}"},
        {"series": f'envoy_http_downstream_rq_xx{{{https},envoy_response_code_class="4"}}',
         "values": f"0+1000x{minutes}"},
        {"series": f'envoy_http_downstream_rq_xx{{{stats},envoy_response_code_class="2"}}',
         "values": f"0+10000x{minutes}"},
        {"series": f'envoy_http_downstream_rq_total{{{https}}}', "values": f"0+1100x{minutes}"},
    ]


def _fired(long: str) -> dict[str, Any]:
    """What a firing burn alert carries, by hand (the workbook's windows, FACTS.md section 7)."""
    severity, burn, short = {"1h": ("page", 14.4, "5m"), "6h": ("page", 6.0, "30m")}[long]
    at = burn * 0.001
    return {"exp_labels": {"severity": severity, "slo": "gateway-availability",
                           "long_window": long, "short_window": short},
            "exp_annotations": {
                "summary": f"the gateway spends its availability error budget {burn:g}x too fast",
                "description": (f"Over {long} and {short}, more than {at:.2%} of the gateway's answers "
                                "were server errors (5xx); the strictest tier it serves allows 0.10%.")}}


def test_five_percent_server_errors_page_when_the_workbook_says(tmp_path: Path) -> None:
    """Budget 0.1 % (an interactive model behind the gateway). From minute 60, t minutes in:
    - 1h window: 5t errors of 6,000 answers > 1.44 % from t = 17.3;
    - 6h window (all 60 + t minutes): 5t / (100 (60 + t)) > 0.6 % from t = 8.2 (its 30m short
      window reads t / 600 > 0.6 % from t = 3.6);
    - the ticket (3d / 6h) needs answers from before its 6-hour short window: never in 3 hours.
    Checked at t = 6, 10, 15, 20 and 60, each well clear of a threshold."""
    rule = gateway_slo.prometheus_rule("rtip-gateway", AVAILABILITY["interactive"])
    groups = rule["spec"]["groups"]
    at = {"66m": [], "70m": [_fired("6h")], "75m": [_fired("6h")],
          "80m": [_fired("1h"), _fired("6h")], "120m": [_fired("1h"), _fired("6h")]}
    test = {"interval": "1m", "input_series": _series(180),
            "alert_rule_test": [{"eval_time": t, "alertname": gateway_slo.ALERT, "exp_alerts": fired}
                                for t, fired in at.items()]}
    done = promtool.run_rule_tests(groups, [test], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_gateway_that_stops_reporting_pages(tmp_path: Path) -> None:
    """Scraped for 20 minutes, then nothing while the proxies' Deployment asks for 3 replicas:
    absent from minute 25 (the 5-minute lookback), paged 10 minutes later and still 7 hours on;
    never scraped at all: paged at 10 minutes; a gateway whose Deployment is gone (or asks for
    none) pages no one."""
    rule = gateway_slo.prometheus_rule("rtip-gateway", AVAILABILITY["standard"])
    series = [{"series": 'envoy_http_downstream_rq_total{namespace="rtip-system",pod="proxy-0",'
                         'envoy_http_conn_manager_prefix="https-10443"}', "values": "0+100x20"}]
    # absent() keeps the selector's equality matchers as labels (namespace).
    fired = [{"exp_labels": {"severity": "page", "slo": "gateway-availability", "namespace": NS},
              "exp_annotations": {
                  "summary": "the gateway reports no metrics",
                  "description": ("No gateway proxy has been scraped for 10m: the front door is down, "
                                  "or Prometheus cannot see it, and its availability alerts are blind.")}}]
    # Envoy Gateway's name for the proxies of Gateway rtip-system/rtip-gateway: envoy-, the key
    # with '-' for '/', and sha256("rtip-system/rtip-gateway")[:8] = 1b2d4c45, by hand.
    wanted = ('kube_deployment_spec_replicas{namespace="rtip-system",'
              'deployment="envoy-rtip-system-rtip-gateway-1b2d4c45"}')

    def case(stats: str, replicas: str, expected: tuple[tuple[str, list], ...]) -> dict[str, Any]:
        inputs = [{**series[0], "values": stats}] if stats else []
        return {"interval": "1m", "input_series": [*inputs, {"series": wanted, "values": replicas}],
                "alert_rule_test": [{"eval_time": t, "alertname": gateway_slo.ABSENT_ALERT, "exp_alerts": f}
                                    for t, f in expected]}
    tests = [case("0+100x20", "3x480", (("24m", []), ("33m", []), ("37m", fired), ("7h", fired))),
             case("", "3x60", (("9m", []), ("10m", fired), ("50m", fired))),
             case("0+100x20", "3x20", (("37m", []), ("2h", []))),
             case("", "0x60", (("10m", []), ("50m", [])))]
    done = promtool.run_rule_tests(rule["spec"]["groups"], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_proxy_deployment_is_named_as_envoy_gateway_names_it() -> None:
    """Envoy Gateway v1.9.0's own docs list the proxies of Gateway default/eg as
    `envoy-default-eg-e41e7b31` (site/content/en/latest/tasks/operations/deployment-mode.md);
    a key past 48 characters is cut there, without a trailing '-'; and the EnvoyProxy names no
    Deployment, so the running proxies keep theirs."""
    from serving.gateway import envoy_proxy, proxy_deployment
    from serving.hardware import Cloud

    assert proxy_deployment("default", "eg") == "envoy-default-eg-e41e7b31"
    long = proxy_deployment("n" * 30, "g" * 30)
    assert long.startswith("envoy-" + "n" * 30 + "-" + "g" * 17 + "-") and len(long) == 6 + 48 + 9
    assert "name" not in envoy_proxy(Cloud.AWS, False, 2)["spec"]["provider"]["kubernetes"]["envoyDeployment"]


@pytest.mark.parametrize(("key", "length", "expected"), [
    ("http", 6, "http-e0603c49"),
    ("namespace/name", 10, "namespace-18a6500f"),
    ("envoy-gateway-system/eg/http", 6, "envoy-2ecf157b"),
])
def test_hashed_names_match_envoy_gateways_own_cases(key: str, length: int, expected: str) -> None:
    """The cases of Envoy Gateway's `internal/utils/misc_test.go` TestGetHashedName: a key no
    longer than the cut; one whose cut ends on its '/' (a '-' in the name); and one whose cut
    ends on a '-' of the name itself. Each cut drops that trailing '-'."""
    from serving.gateway import hashed_name

    assert hashed_name(key, length) == expected


def test_gateway_pages_reach_the_page_webhook(tmp_path: Path) -> None:
    config = _alertmanager_config("prod")
    page = {"alertname": gateway_slo.ALERT, "severity": "page", "slo": "gateway-availability"}
    assert _route(config, tmp_path, page) == "rtip-slo-page"
    assert _route(config, tmp_path, {**page, "alertname": gateway_slo.ABSENT_ALERT}) == "rtip-slo-page"


def test_the_monitoring_namespace_reaches_the_proxies_stats_port_and_keda_does_not() -> None:
    """Envoy Gateway v1.9.0 serves the stats on container port `metrics`, 19001 (bootstrap.go
    EnvoyStatsPort)."""
    policies = cluster_policies(record_of("prod"), "aws")
    assert reach(policies, PROMETHEUS, PROXY, 19001)
    assert not reach(policies, KEDA, PROXY, 19001)
