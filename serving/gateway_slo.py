"""The gateway's availability SLO: the share of requests the front door answers with a server
error, scraped from its Envoy proxies, with the same multiwindow burn-rate alerts as the models'
latency SLO (serving/slo_rules.py), both built by serving/burn_alerts.py.

Why here and not per model: vLLM records no latency, and no failure, for a request that never
reaches it, and the failures that matter most never do (no ready pod: Envoy's 503; a timeout:
504; the endpoint picker or the AI Gateway's filter failing: 500). Envoy's downstream counters on
the HTTPS listener see the status of every answer a client gets; a streamed answer that breaks
after its 200 (a pod or zone lost mid-stream) counts as a 2xx or a reset, never a 5xx. They do
not tell the models apart: the route is one AIGatewayRoute for every model (serving/gateway.py
says why), and the cluster a rule's InferencePool backend becomes is named by the rule or by the
backend depending on Envoy Gateway's merging of backends (v1.9.0 internal/gatewayapi/route.go
`shouldMergeBackend`), which the plan cannot pin. So the budget is the strictest of the served
models' tiers: an error ratio any of them would call a burn pages.

Facts the bodies rest on (Envoy Gateway v1.9.0, Envoy):
- every proxy pod exposes Envoy's Prometheus stats on container port `metrics`, 19001, at
  /stats/prometheus (`internal/infrastructure/kubernetes/proxy/resource.go`, `bootstrap.go`
  EnvoyStatsPort), unless the EnvoyProxy disables them (serving/gateway.py's does not), and
  (the network policy opens it to the monitoring namespace: serving/netpol.py
  PROXY_METRICS_PORT), and
  carries `app.kubernetes.io/component: proxy`, `app.kubernetes.io/managed-by: envoy-gateway`
  (EnvoyAppLabel) and `gateway.envoyproxy.io/owning-gateway-name`;
- the HTTPS listener's connection manager counts under stat prefix `https-<port>`
  (`internal/xds/translator/listener.go` hcmStatPrefix), which Envoy's default tags turn into
  `envoy_http_downstream_rq_xx{envoy_http_conn_manager_prefix="https-10443",
  envoy_response_code_class="5"}`; the stats listener (`eg-stats-http`) and the readiness one
  (`eg-ready-http`) count apart, so scrapes and probes never dilute the ratio.

An error is a 5xx; a request is any answer but 1xx and 4xx (bad keys, forbidden models and rate
limits are the client's, and would otherwise let one tenant's retries dilute everyone's ratio).
"""

from __future__ import annotations

from typing import Any

from serving.burn_alerts import (
    ABSENT_FOR,
    BurnAlert,
    absent_rule,
    burn_rule,
    can_fire,
    rule_body,
    windows,
)
from serving.gateway import proxy_deployment
from serving.kube_names import DEPLOYMENT_REPLICAS
from serving.manifests import MANAGED
from serving.netpol import GATEWAY_NAMESPACE

POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")
METRICS_PATH = "/stats/prometheus"
PROXY_SELECTOR = {"app.kubernetes.io/component": "proxy", "app.kubernetes.io/managed-by": "envoy-gateway"}
OWNING_GATEWAY = "gateway.envoyproxy.io/owning-gateway-name"
LISTENER = "https-.*"  # hcmStatPrefix: https-<port>, the container port or, with v2 names, 443
DOWNSTREAM = "envoy_http_downstream_rq_xx"
ALERT = "RtipGatewayAvailabilityBurn"
ABSENT_ALERT = "RtipGatewayMetricsAbsent"
RECORD = "slo:gateway_error:ratio_rate{window}"
SLO_LABEL = {"slo": "gateway-availability"}
SCRAPE_INTERVAL = "15s"


def _selector(classes: str) -> str:
    return (f'namespace="{GATEWAY_NAMESPACE}",envoy_http_conn_manager_prefix=~"{LISTENER}",'
            f'envoy_response_code_class=~"{classes}"')


def error_ratio(window: str) -> str:
    """5xx answers over every answer but 1xx and 4xx, on the HTTPS listener, over `window`."""
    return (f"sum(rate({DOWNSTREAM}{{{_selector('5')}}}[{window}])) / "
            f"sum(rate({DOWNSTREAM}{{{_selector('2|3|5')}}}[{window}]))")


def requests_in(window: str, offset: str | None = None) -> str:
    shift = f" offset {offset}" if offset else ""
    return f"sum(increase({DOWNSTREAM}{{{_selector('2|3|5')}}}[{window}]{shift}))"


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": GATEWAY_NAMESPACE, "labels": dict(MANAGED)}


def pod_monitor(gateway: str) -> dict[str, Any]:
    """Prometheus scrapes every proxy of `gateway` on its stats port."""
    return {
        "apiVersion": POD_MONITOR[0], "kind": POD_MONITOR[1], "metadata": _meta(gateway),
        "spec": {
            "selector": {"matchLabels": {**PROXY_SELECTOR, OWNING_GATEWAY: gateway}},
            "podMetricsEndpoints": [{"port": "metrics", "path": METRICS_PATH,
                                     "interval": SCRAPE_INTERVAL, "scrapeTimeout": "10s"}],
        },
    }


def proxies_wanted(gateway: str) -> str:
    """While the proxies' Deployment of Gateway `gateway` asks for a replica (kube-state-metrics):
    the condition of the metrics-absence page (its name checked by rtip/deploycheck/proxy_name.py).
    Envoy serves its stats within seconds of starting, so ten minutes
    without them while a proxy is wanted is the front door down or its scrape broken, paged for
    as long as either lasts, from the first day; a removed gateway pages no one. (A condition on
    the stats' own history would resolve the page 6 hours into an outage.)"""
    deployment = proxy_deployment(GATEWAY_NAMESPACE, gateway)
    return f'{DEPLOYMENT_REPLICAS}{{namespace="{GATEWAY_NAMESPACE}",deployment="{deployment}"}} > 0'


def prometheus_rule(gateway: str, availability: float) -> dict[str, Any]:
    """The gateway's availability SLO against `availability` (the strictest served tier's)."""
    budget = round(1.0 - availability, 10)
    if not 0 < budget < 1:
        raise ValueError(f"availability {availability} leaves no error budget to burn")
    kept, _ = can_fire(budget)
    records = [{"record": RECORD.format(window=w), "expr": error_ratio(w), "labels": SLO_LABEL}
               for w in windows(kept)]

    def words(a: BurnAlert, at: float) -> dict[str, str]:
        return {"summary": f"the gateway spends its availability error budget {a.burn_rate:g}x too fast",
                "description": (f"Over {a.long_window} and {a.short_window}, more than {at:.2%} of the "
                                f"gateway's answers were server errors (5xx); the strictest tier it "
                                f"serves allows {budget:.2%}.")}

    alerts = [burn_rule(ALERT, a, budget, lambda w: RECORD.format(window=w), requests_in, SLO_LABEL, words)
              for a in kept]
    present = (f'envoy_http_downstream_rq_total{{namespace="{GATEWAY_NAMESPACE}",'
               f'envoy_http_conn_manager_prefix=~"{LISTENER}"}}')
    alerts.append(absent_rule(
        ABSENT_ALERT, present, SLO_LABEL, "the gateway reports no metrics",
        f"No gateway proxy has been scraped for {ABSENT_FOR}: the front door is down, or Prometheus "
        "cannot see it, and its availability alerts are blind.", expected=proxies_wanted(gateway)))
    return rule_body(_meta(f"{gateway}-slo"), "gateway-availability-slo", [*records, *alerts])


__all__ = ["ABSENT_ALERT", "ALERT", "LISTENER", "METRICS_PATH", "POD_MONITOR", "RECORD", "error_ratio",
           "pod_monitor", "prometheus_rule", "requests_in"]
