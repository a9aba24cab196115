"""What happens to a lost zone's replicas, second by second, and the endpoint picker's
configuration that shortens it.

A zone lost abruptly (its nodes and pod addresses stop answering) is noticed by three parties at
different times. With Kubernetes 1.33's defaults, which EKS, GKE and AKS do not let a user change:

- the node lifecycle controller marks a node Unknown once its lease is older than
  `--node-monitor-grace-period` (50 s since v1.32, kubernetes PR #126287), checked every
  `--node-monitor-period` (5 s), and marks its pods NotReady in the same pass;
- it then taints the node `node.kubernetes.io/unreachable:NoExecute`, one node of the zone at a
  time at `--node-eviction-rate` (0.1 node/s); a pod tolerates the taint for the
  DefaultTolerationSeconds admission plugin's 300 s unless its own toleration says otherwise,
  and is then deleted. Until then the ReplicaSet counts it (`status.replicas` counts every pod
  without a deletion timestamp), so it is not replaced;
- the endpoint picker (gateway-api-inference-extension v1.5.0) keeps a pod as a candidate until
  its pod watch says NotReady (`pkg/epp/util/pod/pod.go` IsPodReady), and a pod whose metrics
  scrape fails keeps its last metrics (`datalayer/collector.go`: it polls every 50 ms with a 1 s
  timeout; `UpdateTime` moves only on success). Its default profile (queue, KV-cache and prefix
  scorers: the inferencepool chart's `default-plugins.yaml`) has no filter, so for the 50-55 s
  until the API marks the pod NotReady the picker keeps choosing it on its frozen, pre-loss
  load, and every request sent there fails (Envoy's connect timeout, 10 s, is set by the AI
  Gateway's extension server for InferencePool clusters, and retries would go to the same
  address: the picked endpoint travels in a header).

Simulated on the prod plan with the conversation trace and a zone lost as its busiest minute
began (the checklist's zone-loss item; benchmarks/failover.py, results/failover.json), those 56 s
cost every model 2.2-3.9x its error budget: the 70B 5.15 % of the window's requests against
1.5 %, the 8B 4.15 % against 1.1 %, the VL model 5.75 % against 1.5 %, the 3B 4.49 % against
2.0 % (0.41, 0.12, 0.17 and 0.12 % with the lost pods gone and replaced at once, as the
simulator first had it), and on the code trace 7.5-9.3 %. So the picker's profile here filters
first with the picker's own `utilization-detector` plugin, which also implements `Filter`
(`saturationdetector/utilization/detector.go`): an endpoint whose metrics are older than
`metricsStalenessThreshold` is dropped, failing open when every one is.
Its load limits are set out of reach (queue depth 10^6, KV-cache use 1.0 with 1 % headroom), so it
filters on staleness alone and the scorers balance as before. The threshold is the picker's
poll timeout, 1 s (`datalayer/collector.go`): an endpoint is dropped once a whole poll timeout has
passed without one good scrape. A live pod's metrics are up to a poll timeout plus the collector's
50 ms tick and the candidates' 50 ms cache old, so one whose `/metrics` takes 0.9 s or more can be
dropped now and then (it only sheds load to its peers, and the filter fails open).
The plugin's own default, 200 ms, would drop a live pod on one slow scrape. Each second of the
window counts: the picker keeps choosing a lost pod on its frozen metrics while the live pods'
queues grow, so it gets more than its share. At the code trace's busiest minute the 70B lost
1.31 % of the window's requests with a 2 s threshold and 0.76 % with 1 s (budget 1.50 %).

A lost pod then leaves the candidates at most 1 s after the loss, and the same four runs lose
0.48, 0.18, 0.36 and 0.26 %. The predictors tolerate the unreachable taint for 30 s, not 300
(serving/_model_pod.py), so the ReplicaSet replaces them at most 90 s after the loss (one node of
the zone each 10 s after that), in the surviving zones: the zone spread honours node taints, so
the lost zone, its nodes tainted, stops counting. Sooner where the fleet is below its maximum:
the autoscaling query (serving/autoscaling.py `lost_pods`) counts a pod of the model whose
scrape timed out and that is not being deleted as one more replica wanted, from the first poll
after its first failed scrape until its eviction. Since that term, the eviction's timing changes at
most two requests of a zone-loss window in benchmarks/failover.py's seven cases, none for the
worse (and three after it, either way), also with the HPA's reads failing for the first 55 s
and with max cut so that only the eviction replaces (then at 90 s against 360 s). A replacement
started at 90 s is ready only near the window's end, a cold start later, after the requests
that fail; the zone surplus carries the window meanwhile. The 30 s stay for what the term cannot do: add
replicas to a fleet at its maximum, or count anything while the metrics path is lost with the
zone; their cost is the eviction of every pod on a node unreachable for 90 s that comes back.

`failover` gives the simulator those times for a plan's pods and picker configuration
(stacks/simulation.py adds that on EKS Karpenter launches no node while the zone is down, unless
the stack lists it in `zones_down`, which takes it out of the NodePools). Not
modelled, each optimistic: the node eviction queue is per zone, shared with every other node
there (other models' pools, the system pool), so a model's first node may wait its turn; for
the first 55 s, before the lost zone's nodes are tainted, the zone spread still counts its pods
and lets each surviving zone take one more replica only (the simulator places freely in the
zones up); an Envoy proxy in the lost zone (the proxies leave the load balancer only when its
health checks fail); and the model's picker leader in the lost zone, the worst of them (outside
the plan's runs; `Failover.picker_stall_s` measures it in benchmarks/failover.py). Only the
leader is Ready (epplib v1.5.0, `--ha-enable-leader-election` with two replicas), and the
standby takes the lease and is a Ready endpoint 17-22 s after the loss (controller-runtime's 15
s lease), so even a clean handover fails the model's requests for about 21 s: 3.5-12.1 % of the
zone-loss window in benchmarks/failover.py's seven cases, against budgets of 1.1-2 %. And it is
not clean: the AI Gateway (v1.1.0 `inferencepool.go`) reaches the picker over one STRICT_DNS
cluster on its ClusterIP Service, HTTP/2 without keepalive, and its ext_proc filter runs in
full-duplex mode, where the 300 s message timeout is never armed. kube-proxy keeps established
TCP flows on the dead pod (it flushes conntrack for UDP only), so every request Envoy writes on
those connections hangs until the kernel gives up, about 15 minutes, and fails (fail-open is
hard-coded off, ai-gateway#2502). No Envoy Gateway policy reaches that cluster (it is added
after EnvoyPatchPolicy runs); a bootstrap-wide TCP_USER_TIMEOUT in the EnvoyProxy could, but
whether Envoy skips it on the AI Gateway's Unix-socket clusters was not verifiable here, and a
wrong guess fails every request.
"""

from __future__ import annotations

import yaml

from serving._model_pod import UNREACHABLE_TAINT
from serving._model_pod import tolerations as pod_tolerations
from serving.simulator import Failover
from serving.simulator.promql import duration_s

NODE_MONITOR_GRACE_S = 50.0  # kube-controller-manager --node-monitor-grace-period, Kubernetes >= 1.32
NODE_MONITOR_PERIOD_S = 5.0  # --node-monitor-period: the grace is checked this often
NODE_EVICTION_EVERY_S = 10.0  # --node-eviction-rate 0.1: one node of a zone tainted each 10 s
DEFAULT_TOLERATION_S = 300.0  # DefaultTolerationSeconds: not-ready and unreachable, NoExecute
WATCH_S = 1.0  # a pod's NotReady reaching the picker's informer
STALE_AFTER = "1s"  # the picker's poll timeout (datalayer/collector.go)
PLUGINS_FILE = "rtip-plugins.yaml"
STALE_FILTER = "stale-endpoint-filter"
DETECTOR_TYPE = "utilization-detector"
# The model's picker leader lost with the zone (not in the plan's runs: the leader's zone is not
# the plan's to choose). Its standby is a Ready endpoint at most this long after the loss:
# controller-runtime v0.23.3's 15 s lease, its 2 s retry with 1.2 jitter, about 1 s for the
# picker's controllers to start and sync, the readiness probe's 2 s period (GIE v1.5.0, epplib
# `_deployment.yaml`) and about 1 s for the endpoints to reach kube-proxy.
PICKER_HANDOVER_S = 15.0 + 2.0 * 1.2 + 1.0 + 2.0 + 1.0
# Until then, and on connections already open to the dead leader until the kernel gives up on
# them (Linux's tcp_retries2 of 15 at the 200 ms minimum RTO: 924.6 s, ip-sysctl.rst), every
# request of the model fails: nothing else ends the gateway's stream to the picker.
STUCK_CONNECTION_S = 924.6


def picker_config() -> dict[str, object]:
    """The EndpointPickerConfig: the inferencepool chart's default plugins and profile (queue
    and KV-cache scorers at weight 2, prefix-cache at 3, vLLM's metrics over http), with the
    staleness filter first."""
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "prefix-cache-scorer"},
            {"type": "metrics-data-source",
             "parameters": {"scheme": "http", "path": "/metrics", "insecureSkipVerify": True}},
            {"type": "core-metrics-extractor"},
            # Named, so the picker's default saturation detector (a `utilization-detector` of its
            # own, config/loader/defaults.go ensureSaturationDetector) keeps its defaults.
            {"name": STALE_FILTER, "type": DETECTOR_TYPE,
             "parameters": {"metricsStalenessThreshold": STALE_AFTER, "queueDepthThreshold": 1_000_000,
                            "kvCacheUtilThreshold": 1.0, "headroom": 0.01}},
        ],
        "schedulingProfiles": [{"name": "default", "plugins": [
            {"pluginRef": STALE_FILTER},
            {"pluginRef": "queue-scorer", "weight": 2},
            {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
            {"pluginRef": "prefix-cache-scorer", "weight": 3},
        ]}],
    }


def picker_values() -> dict[str, object]:
    """The `inferenceExtension` keys of the inferencepool chart that load `picker_config`: the
    chart adds `pluginsCustomConfig` to the picker's ConfigMap and starts it with
    `--config-file /config/<pluginsConfigFile>` (epplib templates `_config.yaml`, `_deployment.yaml`)."""
    return {"pluginsConfigFile": PLUGINS_FILE,
            "pluginsCustomConfig": {PLUGINS_FILE: yaml.safe_dump(picker_config(), sort_keys=False)}}


def stale_filter_s(values: dict[str, object]) -> float | None:
    """The staleness after which the picker configured by these `inferenceExtension` values drops
    an endpoint: the first plugin of its `default` profile, if that is a `utilization-detector`;
    None when nothing filters first (the chart's default profile)."""
    files = values.get("pluginsCustomConfig") or {}
    text = files.get(str(values.get("pluginsConfigFile")))  # type: ignore[union-attr]
    if text is None:
        return None
    config = yaml.safe_load(text)
    plugins = {p.get("name", p["type"]): p for p in config.get("plugins", [])}
    profile = next((p for p in config.get("schedulingProfiles", []) if p["name"] == "default"), None)
    if not profile or not profile["plugins"]:
        return None
    first = plugins.get(profile["plugins"][0]["pluginRef"], {})
    if first.get("type") != DETECTOR_TYPE:
        return None
    # A Go duration; the one-unit forms this config uses ("1s", "200ms") read as PromQL's do.
    return duration_s(str((first.get("parameters") or {}).get("metricsStalenessThreshold", "200ms")))


def _tolerates(t: dict[str, object], key: str, effect: str) -> bool:
    """Whether toleration `t` tolerates a taint `key`:`effect` with no value (Kubernetes'
    Toleration.ToleratesTaint: an empty effect or key with Exists matches any)."""
    if t.get("effect") not in (None, "", effect):
        return False
    if t.get("operator", "Equal") == "Exists":
        return t.get("key") in (None, "", key)
    return t.get("key") == key and t.get("value") in (None, "")


def unreachable_toleration_s(tolerations: list[dict[str, object]]) -> float:
    """How long pods with these tolerations stay bound to an unreachable node once it is tainted:
    the shortest `tolerationSeconds` of the tolerations that match the NoExecute unreachable
    taint (none: forever; negative: at once), or the admission plugin's default when none matches."""
    seconds = [t.get("tolerationSeconds") for t in tolerations
               if _tolerates(t, UNREACHABLE_TAINT, "NoExecute")]
    if not seconds:
        return DEFAULT_TOLERATION_S
    return min(float("inf") if s is None else max(0.0, float(s)) for s in seconds)  # type: ignore[arg-type]


def failover(picker: dict[str, object], tolerations: list[dict[str, object]]) -> Failover:
    """The simulator's failover for pods with `tolerations` behind a picker configured by the
    `inferenceExtension` values `picker`, each time at its latest: the router stops choosing a
    lost pod once its metrics are stale (its last good scrape came at the loss or before, so the
    threshold after it) or, without that filter, once the API's NotReady reaches the picker; the
    API marks it NotReady at the grace period plus at most one monitor period, taints its node a
    period later and deletes its pods a toleration after that."""
    not_ready = NODE_MONITOR_GRACE_S + NODE_MONITOR_PERIOD_S
    stale = stale_filter_s(picker)
    route = stale if stale is not None else not_ready + WATCH_S
    # The NoExecute taint comes on the controller's next pass after Unknown (one more period).
    tainted = not_ready + NODE_MONITOR_PERIOD_S
    return Failover(route_s=min(route, not_ready + WATCH_S), not_ready_s=not_ready,
                    evict_s=tainted + unreachable_toleration_s(tolerations),
                    evict_every_s=NODE_EVICTION_EVERY_S)


def predictor_failover() -> Failover:
    """`failover` for the predictors as emitted: the picker's values and the pods' tolerations (a
    pool's own taints add none for the unreachable one)."""
    return failover(picker_values(), pod_tolerations(()))


__all__ = ["DEFAULT_TOLERATION_S", "NODE_EVICTION_EVERY_S", "NODE_MONITOR_GRACE_S", "NODE_MONITOR_PERIOD_S",
           "PICKER_HANDOVER_S", "PLUGINS_FILE", "STALE_AFTER", "STUCK_CONNECTION_S", "failover",
           "picker_config", "picker_values", "predictor_failover", "stale_filter_s",
           "unreachable_toleration_s"]
