"""KEDA autoscaling parameters per model, from its measured capacity, tier and replica bounds.

Baselines (FACTS.md sections 6 and 7): KEDA polls every 30 s and cools down 300 s; the HPA
scales up by max(4 pods, 100%) per 15 s and stabilises scale-down over 300 s; the vLLM
production-stack tutorial scales on `vllm:num_requests_waiting` at threshold 5 with 15 s polling.
KServe's own KEDA path drops pollingInterval, fallback and behavior (FACTS.md section 6), so the
body here is for a ScaledObject the toolkit owns, targeting Deployment `<isvc>-predictor`
(`serving.kserve.io/autoscalerClass: external`).

The trigger: requests in flight (running + waiting), summed over the model's pods, against the
in-flight count of one replica at its latency-limited rate, less the burst headroom:

- waiting alone is blind to decode overload: vLLM admits requests straight into the running
  batch while the KV cache has room, so an overloaded replica's TPOT passes the tier while almost
  nothing waits (issue 11: the waiting trigger fired in about 3 % of polls with 99 % of requests
  missing the tier). Running + waiting grows with every admitted request and, past the
  latency-limited rate, faster than the load (every sequence then takes longer);
- the per-replica target is the simulator's mean in-flight at the replica's sized rate divided by
  (1 + headroom) (serving.measured records in-flight against rate; Little's law on the closed
  form's figures where a test sized it that way): the HPA then keeps each replica's load that far
  below its limit, which is the traffic growth a cold start lets through
  (capacity.region_replicas). In-flight grows faster than load (every admitted sequence slows the
  others), so the target is read off the curve, not scaled down from the limit;
- a zone lost takes ceil(R / Z) of R replicas spread over Z zones, and its replacements come a
  cold start later: the survivors must carry the load and its growth meanwhile. The query's
  second branch asks for the fewest R whose survivors, R - ceil(R / Z), are S = ceil(L / q):
  R = ceil(S Z / (Z - 1)) (serving/zone_branch.py), L the load a cold start ahead as a 5-minute
  fit of the completion rate predicts it, held between the rate now and the stated growth
  rate x (1 + h) (without any growth term a zone lost as the conversation trace's
  busiest minute began still cost the 70B 3.2 % of its requests, its budget 1.5 %), the load read as the
  completion rate (`sum(rate(vllm:request_success_total[1m]))`: in flight under-counts a lightly
  loaded fleet, the curve being convex), the grown load held at most at the stated peak plus the
  tier's burst headroom (`clamp_max`: the stack sizes for its busiest minute), and the HPA
  follows the larger of the two (`clamp_min(branch2, scalar(branch1))`, valid PromQL that the
  simulator evaluates).
  Without it the plan's fleet at the conversation trace's peak lost 3 % of the 70B's requests to
  a zone loss, twice its error budget (benchmarks/autoscaling.py);
- R leaves S only while the zones hold it evenly, and ready replicas can drift (the ReplicaSet
  scales in by node and age, not zone). A drift term, at least S plus the most pods serving in
  one zone (`fullest_zone`), was built and measured, and is not in the query: it changed no
  checklist verdict on three draws of the eight Azure runs for 0-13.3 % more slice GPU-hours
  (serving/zone_branch.py, benchmarks/zone_skew.py), 0-11.1 % with the persistence below, with
  which no run drifts;
- a pod whose node is lost still counts for the ReplicaSet until it is evicted (90 s after the
  loss with the predictors' 30 s toleration: serving.failover), so neither branch gets it
  replaced sooner: desired = in-flight or zone branch, the lost pod included, is already met.
  The query, held at the floor's worth (a fleet at its floor needs its lost pods replaced too),
  adds one replica a pod of the model whose scrape timed out (`up == 0` after the scrape's
  timeout: its address answers nothing) and that has no deletion timestamp (kube-state-metrics'
  `kube_pod_deletion_timestamp`): the ReplicaSet counts exactly the pods not being deleted, so
  the term counts a lost pod for as long as the ReplicaSet does, and stops when its eviction
  lets the ReplicaSet replace it. The model's pods are its targets by the label the PodMonitor
  copies from the pod (`rtip_dev_model`), so a pod lost while loading its model, which never
  served, counts too, and so does one of a partially disrupted zone, whose eviction may never
  come. A pod loading its model or being scaled in on a live node refuses the scrape at once
  and does not count (`lost_pods`). Its replacement
  then starts with the first poll after the first failed scrape (16-30 s after the loss in the
  simulator, which makes a failed scrape known a whole interval after it began, where the
  PodMonitor's timeout is 10 s) instead of the eviction. It cannot pass max,
  so a fleet at max gains nothing. The HPA holds the raised count for its scale-down window, so
  once the eviction frees the lost pods the ReplicaSet starts as many again, and they go after
  about a warm start: 0 to +3.9 % slice GPU-hours in a run that loses a zone over the cases of
  benchmarks/lost_pods.py (on EKS the extra replicas only take free slots), the price of
  replacements a minute sooner. A zone
  lost at 600 s of the code trace had cost the VL model 2.21 % of the window's requests (budget
  1.5 %): its replacements came at 901 s, after the trace's sharpest burst (855-865 s, 3.4x its
  busiest minute's rate); with the term two are ready at 840 s and it loses 0.77 % (4.62 %
  without it, since the in-flight branch below no longer starts a replacement on the survivors'
  first burst);
- both branches count only load that has held for a minute, their lowest over the last
  four scrapes (serving/persistence.py): a scrape's burst gone at the next had started replicas
  that were ready minutes after it ended (the 3B's code run: 12 replicas, none needed). The
  lost-pod term is added after, read at once;
- AverageValue (the prometheus scaler's default metric type): desired = ceil(sum / target).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from serving._model_pod import MODEL_LABEL
from serving.capacity import RegionReplicas, ReplicaCapacity, lost_zone_room
from serving.kube_names import POD_DELETION
from serving.persistence import PERSIST_S, persistent
from serving.profiles import Profile
from serving.scale_down import scale_down_window_s
from serving.simulator.prometheus import SCRAPE_DURATION, UP, pod_target_label
from serving.zone_branch import PREDICT_WINDOW, predicted_load, zone_query

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
SUCCESS = "vllm:request_success_total"  # finished requests, a counter per pod (vLLM PrometheusStatLogger)
RATE_WINDOW = "1m"  # four 15 s scrapes
POLLING_INTERVAL_S = 15  # vLLM production-stack tutorial; the ServiceMonitor must scrape as often
SCRAPE_TIMEOUT_S = 10  # the PodMonitor's scrapeTimeout
# A failed scrape that took this long timed out (Prometheus records its duration, up to the
# timeout, in scrape_duration_seconds); a refused one fails in milliseconds.
LOST_SCRAPE_S = 0.9 * SCRAPE_TIMEOUT_S
# How long a pod's deletion timestamp keeps it out of the lost-pod term after kube-state-metrics
# last exported it: longer than the exporter is away when it restarts or is rescheduled (its own
# unreachable toleration is 30 s: serving/_model_pod.py).
DELETION_MEMORY = "10m"
# The target label a PodMonitor that relabels its targets' node zone would write it into: what
# `fullest_zone` groups by (not emitted: the plan's PodMonitor writes no zone).
ZONE_TARGET_LABEL = "zone"
COOLDOWN_S = 300  # KEDA default; only applies to scaling to zero, which min >= zones rules out
FALLBACK_FAILURES = 3  # failed metric reads before KEDA holds the fallback replica count
FALLBACK_BEHAVIOR = "currentReplicas"  # what the fallback holds: the replicas running (see below)
HPA_PERIOD_S = 15  # HPA sync period
HPA_MIN_STEP_PODS = 4  # the HPA default scale-up step, kept as a floor


@dataclass(frozen=True)
class Autoscaling:
    model: str
    query: str
    threshold: float  # requests in flight (running + waiting) per replica
    polling_interval_s: int
    cooldown_s: int
    min_replicas: int
    max_replicas: int
    fallback_replicas: int
    behavior: dict[str, object] = field(hash=False)
    rationale: str = ""
    # The zone branch's terms (None with one zone): the rate q a survivor carries, the zones Z,
    # the growth held over a cold start, and the most load it holds survivors for.
    survivor_qps: float | None = None
    zones: int = 1
    headroom: float = 0.0
    ceiling_qps: float | None = None
    selector: str = ""  # the label matchers of the model's own series, as the query writes them
    lost: str = ""  # the count of its lost pods the query adds (`lost_pods`)
    notes: tuple[str, ...] = ()  # what the plan should say about these bounds

    def zone_replicas(self, rate: float) -> int | None:
        """Replicas the zone branch asks for at a completion rate of `rate` req/s grown by the
        stated growth, the most its fit holds and what an empty fit falls back to (a replay's
        first minute): ceil(S Z / (Z - 1)) for S = ceil(min(rate x (1 + headroom), ceiling) / q)
        survivors (the query writes the same, its factor and cap rounded); None with one zone."""
        if self.survivor_qps is None or self.ceiling_qps is None:
            return None
        survivors = math.ceil(min(rate * (1 + self.headroom), self.ceiling_qps) / self.survivor_qps - 1e-9)
        return math.ceil(survivors * self.zones / (self.zones - 1) - 1e-9)

    def scaled_object_spec(self, deployment: str, server_address: str) -> dict[str, object]:
        """The `spec` of a keda.sh/v1alpha1 ScaledObject for the predictor Deployment."""
        return {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "pollingInterval": self.polling_interval_s,
            "cooldownPeriod": self.cooldown_s,
            "minReplicaCount": self.min_replicas,
            "maxReplicaCount": self.max_replicas,
            # A trigger that cannot be read holds the Deployment's replicas (`behavior`; KEDA
            # 2.17+, pkg/fallback/fallback.go: the HPA is handed current x threshold): not the
            # floor, which a fleet losing its metrics under traffic cannot afford, and not max,
            # which every fresh rollout would reach (vLLM serves /metrics only once its model has
            # loaded, so a fleet still starting answers empty) and every Prometheus restart too
            # (since KEDA 2.19 a failing HPA read counts beside the poll: about 30 s of errors).
            # `replicas` is what `static` would use, kept for an operator who wants that.
            "fallback": {"failureThreshold": FALLBACK_FAILURES, "replicas": self.fallback_replicas,
                         "behavior": FALLBACK_BEHAVIOR},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": self.behavior}},
            "triggers": [{
                "type": "prometheus",
                "metadata": {
                    "serverAddress": server_address,
                    "query": self.query,
                    "threshold": str(self.threshold),
                    "activationThreshold": "0",
                    # KEDA's prometheus scaler reads an empty result (or NaN) as 0 unless this is
                    # false (pkg/scalers/prometheus_scaler.go, default true), and 0 asks the HPA
                    # for the floor: a model whose pods no longer reach Prometheus (a broken
                    # PodMonitor, a relabelling) would be scaled in at full traffic, and the
                    # fallback would never apply. vLLM creates its counters and gauges at 0 when
                    # its API server starts (v1/metrics/loggers.py), so a serving fleet never
                    # answers empty, idle or not; a fleet nobody scrapes, or whose every pod is
                    # still loading its model, does, and then holds its replicas (fallback).
                    "ignoreNullValues": "false",
                },
            }],
        }


def in_flight_sum(selector: str) -> str:
    """Requests running and waiting, summed over the model's pods."""
    return f"sum({RUNNING}{selector}) + sum({WAITING}{selector})"


def completion_rate(selector: str) -> str:
    """The model's finished requests a second over the last RATE_WINDOW, summed over its pods."""
    return f"sum(rate({SUCCESS}{selector}[{RATE_WINDOW}]))"


def lost_pods(model: str, namespace: str) -> str:
    """The pods of `model` (its PodMonitor's target label) whose last scrape timed out (`up` 0
    after at least LOST_SCRAPE_S: the address answered nothing, as a lost node's does), less
    those with a deletion timestamp, counted once a pod however many targets scrape it (0 when
    none: `count` of nothing is empty).

    A scrape refused at once is not a lost pod: vLLM serves no /metrics while it loads its model,
    and stops serving HTTP at once on SIGTERM, so a pod being scaled in fails its scrapes while
    it is still a target; counted, it would make the HPA add a replica after every scale-in. A
    deleted pod on a lost node stays a target (Prometheus's pod discovery keeps every pod with an
    address until the object goes, which waits for its kubelet), but the ReplicaSet has replaced
    it; its deletion timestamp keeps it out, read over DELETION_MEMORY: one failed scrape of
    kube-state-metrics marks its series stale, and an instant read would then count every such
    pod again for as long as the exporter is gone."""
    target = f'{{namespace="{namespace}",{pod_target_label(MODEL_LABEL)}="{model}"}}'
    # `up` and the scrape's duration are the same target's (all labels match); kube-state-metrics'
    # series carry the pod's namespace and name (pod names carry a random suffix: never reused).
    return (f"count(count by (namespace, pod) ((({UP}{target} == 0) and "
            f"({SCRAPE_DURATION}{target} >= {LOST_SCRAPE_S:g})) unless on(namespace, pod) "
            f'max_over_time({POD_DELETION}{{namespace="{namespace}"}}[{DELETION_MEMORY}]))) or vector(0)')


def fullest_zone(model: str, namespace: str) -> str:
    """The most pods of `model` serving in any one zone: its targets whose last scrape answered
    (vLLM serves /metrics only once its model has loaded, and stops serving HTTP on SIGTERM, so a
    pod loading, being scaled in or lost with its node does not count), counted once a pod, by
    the zone Prometheus wrote on the target from its node (ZONE_TARGET_LABEL: a PodMonitor with
    `attachMetadata.node` and a relabelling of the node's zone label). Empty while none serves.
    The zone branch's drift term (serving/zone_branch.py), which the plan leaves out."""
    # A target without the label (no relabelling) is left out, not counted as one zone of all.
    target = (f'{{namespace="{namespace}",{pod_target_label(MODEL_LABEL)}="{model}",'
              f'{ZONE_TARGET_LABEL}!=""}}')
    return (f"max(count by ({ZONE_TARGET_LABEL}) (count by (namespace, pod, {ZONE_TARGET_LABEL}) "
            f"({UP}{target} == 1)))")


def with_lost_pods(query: str, threshold: float, lost: str, floor: int) -> str:
    """`query`, held at `floor` replicas' worth (the ScaledObject's minimum: a fleet at its floor
    must get its lost pods replaced too, and the HPA clamps to the floor only after the query),
    plus one replica's `threshold` for each pod `lost` counts."""
    return f"clamp_min({query}, {round(floor * threshold, 4):g}) + {threshold:g} * ({lost})"


def in_flight_target(capacity: ReplicaCapacity, prof: Profile, input_tokens: int, output_tokens: int,
                     headroom: float) -> float:
    """Running + waiting requests of one replica serving its sized rate / (1 + headroom)."""
    return in_flight_at(capacity, prof, input_tokens, output_tokens, capacity.qps / (1 + headroom))


def in_flight_at(capacity: ReplicaCapacity, prof: Profile, input_tokens: int, output_tokens: int,
                 rate: float) -> float:
    """Running + waiting requests of one replica at `rate`: from the simulated in-flight curve
    (piecewise linear through the origin) where the simulator sized the replica, else Little's
    law on the closed form's figures."""
    points = [(0.0, 0.0), *capacity.in_flight_curve]
    if len(points) > 1:
        for (r0, n0), (r1, n1) in itertools.pairwise(points):
            if r0 <= rate <= r1:
                at = n0 + (n1 - n0) * (rate - r0) / (r1 - r0) if r1 > r0 else n1
                break
        else:
            at = points[-1][1] * rate / points[-1][0]  # beyond the curve: proportional
    else:
        at = rate * (prof.prefill_s(input_tokens) + output_tokens * capacity.tpot_tail_s)
    return max(1.0, round(at, 1))


def behavior(replicas: RegionReplicas, warm_start_s: float) -> dict[str, object]:
    """HPA v2 behavior: scale up at once and in steps of the whole lag headroom; scale down on the
    highest recommendation of the last warm start (`scale_down_window_s`), at most one pod a sync period
    (the HPA counts a scale event inside the last `periodSeconds`, so a sync that comes a little
    early still sees the last one and waits: between one pod per 15 s and one per 30 s).

    Why one pod at a time: the ReplicaSet controller ranks the pods once per sync and deletes the
    first `diff` of them, a pod whose node holds more of the model's pods first, then the shortest
    time ready in log2 buckets, then by pod UID (kubernetes pkg/controller/controller_utils.go
    `ActivePodsWithRanks`). Several pods in one step can all come off one zone (three off a 3/3/3
    spread left 3/2/1 in the simulator, and a zone loss then cost the 8B on the code trace 2.5 % of
    its requests against a 1.1 % budget); one pod a step always comes off the fullest node, which
    where a zone's replicas share a node is the fullest zone. Where a zone runs several nodes it is
    not, and the spread can still drift (a descheduler would be needed to hold it)."""
    step = max(HPA_MIN_STEP_PODS, math.ceil(replicas.max_replicas * replicas.headroom))
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": HPA_PERIOD_S},
                {"type": "Pods", "value": step, "periodSeconds": HPA_PERIOD_S},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": scale_down_window_s(warm_start_s),
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": HPA_PERIOD_S}],
        },
    }


def autoscaling(
    model: str,
    served_name: str,
    namespace: str,
    capacity: ReplicaCapacity,
    prof: Profile,
    replicas: RegionReplicas,
    input_tokens: int,
    output_tokens: int,
    ceiling_qps: float,
    cold_start_s: float,
    *,
    warm_start_s: float,
) -> Autoscaling:
    """Autoscaling of one model in one region. `served_name` is vLLM's --served-model-name,
    which its metrics carry as the `model_name` label; `ceiling_qps` the most load the zone
    branch holds survivors for (the stated peak and the tier's burst headroom above it);
    `cold_start_s` how far ahead the zone branch predicts the load (a replacement's cold start);
    `warm_start_s` how long a replica given back takes to return (the scale-down window)."""
    threshold = in_flight_target(capacity, prof, input_tokens, output_tokens, replicas.headroom)
    selector = f'{{namespace="{namespace}",model_name="{served_name}"}}'
    query, zone_note, survivor_qps = in_flight_sum(selector), "", None
    if replicas.zones > 1:
        z = replicas.zones
        # Zone loss: the worst zone takes ceil(R / Z) of R replicas spread over Z zones, and its
        # replacements come a cold start later, so the floor(R (Z - 1) / Z) survivors must carry
        # at their sized rate q the load that cold start ahead, L (`predicted_load`: the fit,
        # at most the stated growth): S = ceil(L / q) survivors, R = ceil(S Z / (Z - 1))
        # replicas, the fewest that leave S (`zone_query`). The load is read as the completion
        # rate (in flight grows faster than load, so dividing it would under-count a lightly
        # loaded fleet); the HPA follows the larger branch. The sufficient bound this replaced,
        # R >= 1 + load (1 + h) Z / (q (Z - 1)), asked for one replica more than S needs over
        # about half of each step.
        # The growth is held up to the stated peak and the tier's burst headroom above it, not
        # past it (clamp_max): the stack sizes for its busiest minute, so load x (1 + h) above
        # that is a peak the stack does not state. Past it the in-flight branch still scales the
        # fleet (to max), but a zone lost then is out of spec. The burst headroom is the tier's
        # margin for what a minute's mean hides: capped at the bare peak, the survivors ran at
        # their sized rate through the busiest minute, and a zone lost at 1,800 s of the
        # conversation trace cost the VL model 1.71 % of its requests (budget 1.5 %).
        survivor_qps = capacity.qps
        load = predicted_load(completion_rate(selector), replicas.headroom, cold_start_s,
                              POLLING_INTERVAL_S)
        query = zone_query(in_flight_sum(selector), load, 1 / survivor_qps, ceiling_qps / survivor_qps, z,
                           threshold)
        zone_note = (f"; and at least the replicas whose survivors of one of {z} zones lost carry "
                     f"the completion rate a {cold_start_s:.0f} s cold start ahead ({PREDICT_WINDOW} "
                     f"fit, at most {replicas.headroom:.0%} growth), up to {ceiling_qps:g} req/s, at "
                     f"{survivor_qps:.2f} req/s each")
    lost = lost_pods(model, namespace)
    query = with_lost_pods(persistent(query, POLLING_INTERVAL_S), threshold, lost, replicas.min_replicas)
    room = lost_zone_room(replicas.min_replicas, replicas.zones)
    notes = () if replicas.max_replicas - replicas.min_replicas >= room else (
        f"model {model}: max {replicas.max_replicas} leaves less than a zone's share of its floor "
        f"({room}) above min {replicas.min_replicas}, so at the floor the autoscaler cannot replace a "
        f"lost zone's pods before they are evicted; a max of {replicas.min_replicas + room} or more "
        f"lets it (serving/capacity.py lost_zone_room)",)
    return Autoscaling(
        model=model,
        query=query,
        threshold=threshold,
        polling_interval_s=POLLING_INTERVAL_S,
        cooldown_s=COOLDOWN_S,
        min_replicas=replicas.min_replicas,
        max_replicas=replicas.max_replicas,
        # Used only by a `static` fallback; the emitted one holds the current replicas.
        fallback_replicas=replicas.max_replicas,
        behavior=behavior(replicas, warm_start_s),
        rationale=(f"target {threshold:g} requests in flight a replica: "
                   f"{capacity.qps:.2f} req/s a replica within the tier ({capacity.source}), "
                   f"less {replicas.headroom:.0%} headroom for growth during a cold start{zone_note}; "
                   f"each at its lowest over the last {PERSIST_S} s (load that held, not a scrape's burst); "
                   f"and one more for each pod whose scrapes time out and that is not being deleted, "
                   f"which the ReplicaSet counts until it is evicted "
                   f"(baseline: 5 waiting, vLLM production-stack); a replica given back once "
                   f"surplus for its {scale_down_window_s(warm_start_s)} s warm start"),
        survivor_qps=survivor_qps, zones=replicas.zones, headroom=replicas.headroom,
        ceiling_qps=ceiling_qps if survivor_qps is not None else None, selector=selector, lost=lost,
        notes=notes,
    )


__all__ = ["DELETION_MEMORY", "FALLBACK_BEHAVIOR", "LOST_SCRAPE_S", "POLLING_INTERVAL_S", "RUNNING",
           "SCRAPE_TIMEOUT_S", "SUCCESS", "WAITING", "ZONE_TARGET_LABEL", "Autoscaling", "autoscaling",
           "behavior", "completion_rate", "fullest_zone", "in_flight_at", "in_flight_sum",
           "in_flight_target", "lost_pods", "with_lost_pods"]
