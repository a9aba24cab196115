"""A lost zone as Kubernetes and the endpoint picker live through it (serving/failover.py, the
simulator's `Failover`): requests still picked for the lost pods fail until the router knows,
the ReplicaSet replaces them only once they are evicted, deletes them first once NotReady, and
the picker the plan configures drops them on stale metrics."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest
import yaml

from serving import failover as fo
from serving.autoscaling import in_flight_sum, lost_pods, with_lost_pods
from serving.simulator import (
    ColdStartSpec,
    EngineConfig,
    Failover,
    FleetConfig,
    KedaAutoscaler,
    SimConfig,
    StepTime,
    Targets,
    ZoneFailure,
    poisson,
    simulate,
)
from serving.simulator.engine import SimRequest
from serving.simulator.fleet import GONE, LOST, READY, Fleet
from serving.simulator.hours import slot_seconds
from serving.simulator.sim import Simulation
from tests.conftest import plan_of, record_of
from tests.test_gateway import HELM, kind

STEP = StepTime(0.02, 0.0001, 0.015, 0.0004)
COLD = ColdStartSpec(full_s=300.0, warm_s=60.0, node_ready_s=150.0)


def _cfg(failover: Failover, loss_s: float | None = 100.0, slots: int = 1,
         cold: ColdStartSpec = COLD) -> SimConfig:
    fleet = FleetConfig(zones=("a", "b", "c"), initial_replicas=3, cold_start=cold, failover=failover,
                        slots_per_node=slots, initial_nodes=3)
    # Prometheus labels each target with the pods' model as the PodMonitor's podTargetLabels do.
    return SimConfig(engine=EngineConfig(step=STEP, kv_blocks=40_000, max_num_seqs=64), fleet=fleet,
                     targets=Targets(2.0, 0.1), target_labels=(("rtip_dev_model", "model"),),
                     zone_failures=() if loss_s is None else (ZoneFailure("a", loss_s),))


def test_requests_picked_for_a_lost_pod_fail_until_the_router_knows_and_it_is_replaced_at_eviction():
    """Round robin over [r0 (zone a), r1, r2]: the k-th request goes to replica k mod 3 while the
    list holds three. Zone a goes at 100 s; the router keeps r0 until 120 s, so of the requests
    arriving in [100, 120) those with k mod 3 == 0 fail (by hand from the trace), besides the ones
    r0 held at 100 s; none after. The ReplicaSet counts r0 until its node's eviction at 100 + 200 s
    and only then starts a replacement (a new node: ready 300 s later)."""
    trace = poisson(3.0, 400, (300, 100), seed=4)
    failover = Failover(route_s=20.0, not_ready_s=55.0, evict_s=200.0, evict_every_s=10.0)
    base = simulate(trace, _cfg(Failover(), None), router="round-robin")
    run = Simulation(trace, _cfg(failover), "round-robin")
    hit = run.run()
    k = np.arange(len(trace.arrival_s))
    picked_dead = (trace.arrival_s >= 100.0) & (trace.arrival_s < 120.0) & (k % 3 == 0)
    done = base.arrival_s + base.e2e_s
    held = (base.replica == 0) & (base.arrival_s < 100.0) & (done > 100.0)
    assert picked_dead.sum() > 10 and held.sum() > 0
    assert hit.failed == int(picked_dead.sum() + held.sum())
    assert set(np.flatnonzero(~hit.ok)) == set(np.flatnonzero(picked_dead | held))
    assert not (hit.replica[trace.arrival_s >= 120.0] == 0).any()
    (replacement,) = run.fleet.replicas[3:]
    assert replacement.created_s == pytest.approx(300.0) and replacement.zone in ("b", "c")
    assert replacement.ready_s == pytest.approx(600.0)
    # The instant idealisation (the simulator's default) replaces at once and fails only what r0 held.
    quick = Simulation(trace, _cfg(Failover()), "round-robin")
    assert quick.run().failed == int(held.sum())
    assert [r.created_s for r in quick.fleet.replicas[3:]] == [100.0]


def test_a_zone_lost_again_while_down_changes_nothing():
    """Zone a lost at 100 s and again at 150 s (before its eviction at 300 s): the second loss
    finds nothing to lose, so the run is the run with one loss, request by request, with one
    loss recorded and one replacement started; the fleet refuses a second loss itself."""
    trace = poisson(3.0, 400, (300, 100), seed=4)
    failover = Failover(route_s=20.0, not_ready_s=55.0, evict_s=200.0, evict_every_s=10.0)
    once = Simulation(trace, _cfg(failover), "round-robin")
    one = once.run()
    twice = Simulation(trace, replace(_cfg(failover), zone_failures=(ZoneFailure("a", 100.0),
                                                                     ZoneFailure("a", 150.0))),
                       "round-robin")
    two = twice.run()
    for got, want in ((two.ok, one.ok), (two.ttft_s, one.ttft_s), (two.replica, one.replica)):
        np.testing.assert_array_equal(got, want)
    assert two.extra["zones_lost"] == one.extra["zones_lost"] == [(100.0, "a")]
    assert [r.created_s for r in twice.fleet.replicas[3:]] == [r.created_s for r in once.fleet.replicas[3:]] \
        == [300.0]
    with pytest.raises(ValueError, match="zone a is already lost"):
        twice.fleet.fail_zone("a", 400.0)


def _fleet(failover: Failover) -> Fleet:
    return Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=3, failover=failover),
                 EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)


def test_a_picker_stall_fails_every_request_arriving_within_it():
    """The model's picker leader lost with zone a at 100 s: every request arriving in the 30 s
    after fails, whichever replica would have served it; from 130 s on none does (the survivors
    hold the load: three replicas' worth of capacity for 3 req/s)."""
    trace = poisson(3.0, 300, (300, 100), seed=4)
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0, picker_stall_s=30.0)
    result = simulate(trace, _cfg(failover))
    stalled = (result.arrival_s >= 100.0) & (result.arrival_s < 130.0)
    assert stalled.sum() > 50 and not result.ok[stalled].any()
    assert result.ok[result.arrival_s >= 130.0].all()
    with pytest.raises(ValueError, match="non-negative"):
        Failover(picker_stall_s=-1.0)


def test_a_scale_in_deletes_a_lost_pod_first_once_the_api_marks_it_not_ready():
    failover = Failover(route_s=2.0, not_ready_s=55.0, evict_s=355.0, evict_every_s=10.0)
    fleet = _fleet(failover)
    fleet.fail_zone("c", 100.0)
    assert [r.state for r in fleet.replicas] == [READY, READY, LOST]
    assert len(fleet.active()) == 3  # still the ReplicaSet's
    early = _fleet(failover)
    early.fail_zone("c", 100.0)
    # Before NotReady it ranks as a running pod, so the UIDs pick among all three: the smallest
    # first 8 bytes of SHA-256 over each replica's 8-byte id (r0's, computed here on its own).
    uid = [int.from_bytes(hashlib.sha256(rid.to_bytes(8, "big")).digest()[:8], "big") for rid in range(3)]
    assert uid.index(min(uid)) == 0
    early.scale_to(2, 130.0)
    assert [r.state for r in early.replicas] == [GONE, READY, LOST]
    fleet.scale_to(2, 160.0)  # NotReady since 155 s: it goes first, every ready pod stays
    assert [r.state for r in fleet.replicas] == [READY, READY, GONE]
    assert fleet.evictions("c") == []  # nothing left to evict, so nothing to replace
    # Against a pod still starting on a node that is up (both bound, Running, not ready), the
    # ReplicaSet ranks by colocation, then the newer first: the starting pod goes, not the lost one.
    tied = Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=3, slots_per_node=2,
                             initial_nodes=3, cold_start=COLD, failover=failover),
                 EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
    tied.fail_zone("a", 100.0)
    starting = tied.place(150.0)  # a free slot in zone b or c: bound, loading its model
    assert starting.node.ready_s <= 150.0 and starting.state == "starting"
    tied.scale_to(3, 160.0)  # 4 active: one goes
    assert starting.state == "gone" and tied.replicas[0].state == LOST


def test_each_further_lost_node_is_evicted_one_eviction_interval_later():
    fleet = Fleet(FleetConfig(zones=("a", "b"), initial_replicas=4, slots_per_node=1,
                              failover=Failover(route_s=2.0, not_ready_s=55.0, evict_s=355.0,
                                                evict_every_s=10.0)),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
    fleet.fail_zone("a", 0.0)
    times = [t for t, _ in fleet.evictions("a")]
    assert times == [355.0, 365.0]
    (_, first), _ = fleet.evictions("a")
    assert fleet.evict(first, 190.0) == 1 and len(fleet.active()) == 3


# --- the picker the plan configures ---------------------------------------------------------
def test_the_emitted_picker_drops_stale_endpoints_after_a_second():
    """Kubernetes 1.33's defaults (kube-controller-manager: node-monitor-grace-period 50 s,
    node-monitor-period 5 s, node-eviction-rate 0.1/s, the NoExecute taint on the pass after
    Unknown; DefaultTolerationSeconds 300 s), each at its latest: with the plan's picker a lost
    pod leaves the picks 1 s after the loss (its last good scrape came at the loss or before);
    with the chart's default profile, a second after the API's NotReady at 50 + 5 s; pods with no
    toleration of their own are deleted at 55 + 5 + 300 s."""
    assert fo.stale_filter_s(fo.picker_values()) == 1.0
    assert fo.failover(fo.picker_values(), []) == Failover(route_s=1.0, not_ready_s=55.0, evict_s=360.0,
                                                           evict_every_s=10.0)
    chart_default = {"pluginsConfigFile": "default-plugins.yaml"}  # the inferencepool chart's value
    assert fo.stale_filter_s(chart_default) is None
    assert fo.failover(chart_default, []).route_s == 56.0
    # A filter that is not first, or a first plugin that only scores, filters nothing first.
    config = fo.picker_config()
    profile = config["schedulingProfiles"][0]["plugins"]  # type: ignore[index]
    profile.append(profile.pop(0))
    moved = {"pluginsConfigFile": "x.yaml", "pluginsCustomConfig": {"x.yaml": yaml.safe_dump(config)}}
    assert fo.stale_filter_s(moved) is None


def test_a_pod_that_tolerates_the_unreachable_taint_is_evicted_that_much_later():
    """Kubernetes' matching (Toleration.ToleratesTaint): an empty effect, or Exists with no key,
    matches any taint; the shortest of several matching tolerations wins; no seconds is forever."""
    short = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
              "tolerationSeconds": 30}]
    assert fo.failover(fo.picker_values(), short).evict_s == 90.0
    assert fo.unreachable_toleration_s([{"operator": "Exists", "effect": "NoExecute"}]) == float("inf")
    assert fo.unreachable_toleration_s([{"operator": "Exists"}]) == float("inf")  # every taint, forever
    both = [*short, {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "effect": "",
                     "tolerationSeconds": 10}]
    assert fo.unreachable_toleration_s(both) == 10.0
    assert fo.unreachable_toleration_s([{**short[0], "tolerationSeconds": -5}]) == 0.0
    gpu = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
           {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"},
           {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "value": "x",
            "effect": "NoExecute"}]
    assert fo.unreachable_toleration_s(gpu) == fo.DEFAULT_TOLERATION_S


def test_every_pool_loads_the_filter_spreads_its_pickers_and_every_predictor_tolerates_30_s():
    """What the simulator's failover rests on, read off prod's record: each inferencepool release
    starts its picker on the file holding the staleness filter, first in the default profile, and
    each predictor tolerates the unreachable taint for 30 s (evicted at 60 + 30 s), the not-ready
    one for Kubernetes' default, and spreads over zones counting only nodes it tolerates (so a
    lost zone, its nodes tainted, stops being a domain its replacements must balance against)."""
    record = record_of("prod")
    pools = [r for r in record.by_type(HELM) if r.inputs["chart"].endswith("/inferencepool")]
    assert pools
    for pool in pools:
        values = pool.inputs["values"]["inferenceExtension"]
        assert fo.stale_filter_s(values) == 1.0
        # The pool object says what the AI Gateway does with it: fail closed.
        assert values["failureMode"] == "FailClose"
        config = yaml.safe_load(values["pluginsCustomConfig"][values["pluginsConfigFile"]])
        first = config["schedulingProfiles"][0]["plugins"][0]["pluginRef"]
        (detector,) = [p for p in config["plugins"] if p.get("name") == first]
        assert detector["type"] == "utilization-detector"
        # Its pickers prefer different zones: the term selects the chart's picker pods, labelled
        # `inferencepool: <release>-epp` (epplib _helpers.tpl; prod's release names are short and
        # lower-case already).
        (term,) = values["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"] == {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {
            "matchLabels": {"inferencepool": pool.inputs["name"] + "-epp"}}}
    for isvc in kind(record, "InferenceService"):
        tolerations = isvc.inputs["spec"]["predictor"]["tolerations"]
        assert fo.unreachable_toleration_s(tolerations) == 30.0, isvc.inputs["metadata"]
        assert not [t for t in tolerations if t.get("key") == "node.kubernetes.io/not-ready"]
        spread = isvc.inputs["spec"]["predictor"]["topologySpreadConstraints"]
        (zone,) = [c for c in spread if c["topologyKey"] == "topology.kubernetes.io/zone"]
        assert zone["nodeTaintsPolicy"] == "Honor" and zone["whenUnsatisfiable"] == "DoNotSchedule"


def test_the_lost_pod_term_starts_a_replacement_at_the_first_failed_scrape_not_the_eviction():
    """Three replicas, one a zone, at their floor (a threshold no load reaches: the query's floor
    term holds them). Zone a goes at 100 s, its pod evicted at 190 s. The scrape that began at 105 s
    fails at its 10 s timeout, which Prometheus knows from 115 s; the poll at 120 s asks for
    one more replica: its replacement is created at 120 s, the replacement still loading its
    model (`up` 0, never served) asks for none, and the eviction at 190 s, the HPA still holding
    four, adds the second. Without the term the only replacement comes at the eviction."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    selector = '{namespace="default",model_name="model"}'
    plain = in_flight_sum(selector)
    trace = poisson(3.0, 500, (300, 100), seed=4)

    def created(query: str) -> list[float]:
        spec = {"minReplicaCount": 3, "maxReplicaCount": 6, "pollingInterval": 15,
                "triggers": [{"type": "prometheus", "metadata": {"query": query, "threshold": "1000"}}]}
        auto = KedaAutoscaler(spec)
        auto.warm(3)
        run = Simulation(trace, _cfg(failover), "least-loaded", auto)
        run.run()
        return [r.created_s for r in run.fleet.replicas[3:]]

    assert created(with_lost_pods(plain, 1000, lost_pods("model", "default"), 3)) == [120.0, 190.0]
    assert created(plain) == [190.0]


def test_a_failed_scrape_reaches_an_autoscaler_reading_after_it_at_its_timeout():
    """The same fleet with its autoscaler reading 10 s or 12 s after each scrape (polls at
    100/115/130 s and 102/117/132 s): the scrape that began at 105 s is known from its timeout at
    115 s, so the poll at 115 s (10 s: Prometheus's write and the read at one instant, the write
    first) or 117 s asks for the replacement, not the next one, 15 s later."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    query = with_lost_pods(in_flight_sum('{namespace="default",model_name="model"}'), 1000,
                           lost_pods("model", "default"), 3)
    trace = poisson(3.0, 500, (300, 100), seed=4)
    for offset, first in ((10.0, 115.0), (12.0, 117.0)):
        spec = {"minReplicaCount": 3, "maxReplicaCount": 6, "pollingInterval": 15,
                "triggers": [{"type": "prometheus", "metadata": {"query": query, "threshold": "1000"}}]}
        auto = KedaAutoscaler(spec)
        auto.warm(3)
        run = Simulation(trace, replace(_cfg(failover), autoscale_offset_s=offset), "least-loaded", auto)
        run.run()
        assert run.fleet.replicas[3].created_s == first


def _lost_pod_run(failover: Failover, floor: int, max_replicas: int, end_s: float, slots: int = 1,
                  cold: ColdStartSpec = COLD) -> Simulation:
    """Three replicas, one a zone, `slots` a node (one node a zone), held at `floor` by the query's
    floor term (no load reaches the threshold), zone a lost at 100 s, run to `end_s`."""
    query = with_lost_pods(in_flight_sum('{namespace="default",model_name="model"}'), 1000,
                           lost_pods("model", "default"), floor)
    spec = {"minReplicaCount": 3, "maxReplicaCount": max_replicas, "pollingInterval": 15,
            "triggers": [{"type": "prometheus", "metadata": {"query": query, "threshold": "1000"}}]}
    auto = KedaAutoscaler(spec)
    auto.warm(3)
    run = Simulation(poisson(1.0, int(end_s), (300, 100), seed=4),
                     replace(_cfg(failover, slots=slots, cold=cold), end_s=end_s), "least-loaded", auto)
    run.run()
    return run


def test_a_pod_lost_while_it_loads_its_model_is_replaced_at_the_first_failed_scrape():
    """Held at four, the fourth replica starts at the first poll in zone a (the zones tie; a
    comes first) on the free slot of a's node, loading its model for 200 s. Zone a goes at 100 s
    with it still loading: it never served, yet its scrape times out like the ready pod's, so the
    poll at 120 s asks for two more, not one. The eviction of a's node at 190 s starts two more,
    as the HPA holds six for its scale-down window; once the deletions show, the term counts
    nothing, and when the window has passed the Deployment is back at four."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    cold = ColdStartSpec(full_s=300.0, warm_s=200.0, node_ready_s=150.0)
    run = _lost_pod_run(failover, floor=4, max_replicas=8, end_s=900.0, slots=2, cold=cold)
    fourth = run.fleet.replicas[3]
    assert fourth.zone == "a" and fourth.created_s < 100.0 < fourth.ready_s
    assert [r.created_s for r in run.fleet.replicas[4:]] == [120.0, 120.0, 190.0, 190.0]
    assert run.fleet.spec_replicas == 4


def test_a_pod_whose_node_had_not_joined_is_no_target_and_is_not_counted():
    """The same, one slot a node: the fourth replica waits for a new node in zone a (ready 150 s
    after the poll that asked for it), which the loss at 100 s takes first. Pending, it never had
    an address, so no scrape of it fails: the poll at 120 s asks for one more (the ready pod's)."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    run = _lost_pod_run(failover, floor=4, max_replicas=8, end_s=300.0)
    fourth = run.fleet.replicas[3]
    assert fourth.zone == "a" and fourth.created_s < 100.0 < fourth.node.ready_s
    assert [r.created_s for r in run.fleet.replicas[4:] if r.created_s < 190.0] == [120.0]


def test_a_pod_lost_and_deleted_at_once_is_never_counted():
    """An instant failover (the lost pod deleted with the zone, replaced at once): its target
    stays, its scrapes time out, but its deletion keeps the term at nothing, so the Deployment
    holds its floor of three to the end."""
    run = _lost_pod_run(Failover(), floor=3, max_replicas=6, end_s=900.0)
    assert [r.created_s for r in run.fleet.replicas[3:]] == [100.0]
    assert run.fleet.spec_replicas == 3


def test_a_lost_pod_never_evicted_is_counted_while_it_lasts():
    """A partially disrupted zone: the node lifecycle controller stops evicting (over 55 % of its
    nodes NotReady in a cluster of 50 nodes or fewer), so the lost pod counts for the ReplicaSet
    for the whole run. The term keeps counting it: one replacement at 120 s, the Deployment at
    four to the end, and three replicas serving from when the replacement is ready (a new node: a
    full cold start, 420 s)."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=10_000.0, evict_every_s=10.0)
    run = _lost_pod_run(failover, floor=3, max_replicas=6, end_s=1200.0)
    assert [r.created_s for r in run.fleet.replicas[3:]] == [120.0]
    assert run.fleet.spec_replicas == 4 and run.fleet.replicas[0].state == LOST
    assert run.fleet.replicas[3].ready_s == 420.0 and run.fleet.count(READY) == 3


def test_without_new_nodes_while_a_zone_is_down_a_replica_with_no_free_slot_stays_pending():
    """One slot a node, three zones, zone a lost: a fourth replica needs a node. With the node
    autoscaler launching in the zones up it starts there; as Karpenter does (the lost zone still a
    spread domain, every new node pinned to it) it stays Pending: counted by the ReplicaSet, never
    ready, holding no GPU, and the first to go on a scale-in."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    for launches in (True, False):
        fleet = _fleet(replace(failover, new_nodes_while_down=launches))
        fleet.fail_zone("a", 100.0)
        fourth = fleet.place(120.0)
        assert fourth in fleet.active() and fourth.state == "starting"
        if launches:
            assert fourth.zone in ("b", "c") and fourth.ready_s < float("inf")
            assert fourth.node in fleet.nodes
        else:
            assert fourth.ready_s == float("inf") and fourth.node not in fleet.nodes
            fleet.scale_to(3, 130.0)  # the ReplicaSet removes the unscheduled pod first
            assert fourth.state == "gone" and len(fleet.active()) == 3
        assert fleet.unscheduled == (0 if launches else 1)  # counted though it went


def test_a_pending_replica_binds_to_the_slot_a_drain_frees():
    """Zone a lost with new nodes pinned to it (Karpenter): the replacement finds zone b, the
    spread's only choice, full of a replica still draining, and waits Pending. When the drain
    ends, the scheduler binds it to that slot and it starts warm from then; it stays counted as
    once Pending. One more, with no free slot anywhere, waits."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0,
                        new_nodes_while_down=False)
    events: list[tuple[float, str, object]] = []
    fleet = Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=3, failover=failover),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, k, obj: events.append((t, k, obj)))
    assert [r.zone for r in fleet.replicas] == ["a", "b", "c"]
    # Ready 100000 s, 0.01 s and 1000 s ago: the ReplicaSet removes b's (the newest) first.
    fleet.replicas[0].ready_s, fleet.replicas[2].ready_s = -100_000.0, -1000.0
    draining = fleet.replicas[1]
    end = draining.engine.submit(SimRequest(0, 0.0, 50, 3), 0.0)
    fleet.scale_to(2, 0.01)
    assert draining.state == "draining"
    fleet.fail_zone("a", 0.02)
    pending = fleet.place(0.03)  # b has the fewest starting or ready (none), and no free slot
    assert pending.ready_s == float("inf") and not pending.scheduled and fleet.unscheduled == 1
    while end is not None:
        end = draining.engine.on_step_end(end)
    before = slot_seconds(fleet, 5.0)
    fleet.maybe_release(draining, 5.0)
    assert pending.node is draining.node and pending.zone == "b" and pending.scheduled
    assert pending.placed_s == 5.0 and fleet.bound == 1
    assert pending.running_s == 5.0  # its slot's node has the image: Running once bound, not Pending
    # Its GPU time counts from its slot at 5 s, not its creation at 0.03 s: from 5 to 15 s the
    # fleet's slot-seconds grow by c's replica and the bound one, 10 s each (a's stopped at the
    # loss, the drained one at 5 s); from its creation it would be 4.97 s more.
    assert slot_seconds(fleet, 15.0) - before == pytest.approx(10.0 + 10.0)
    warm = fleet.cfg.cold_start.warm_s
    assert pending.ready_s == pytest.approx(5.0 + warm) and (5.0 + warm, "ready", pending) in events
    assert draining.node.empty_since is None and fleet.unscheduled == 1
    # b and c hold one each now, on full nodes: another replica waits, and nothing frees.
    second = fleet.place(6.0)
    assert not second.scheduled and fleet.bind_pending(7.0) == 0


def test_a_lost_zone_the_stack_lists_as_down_pins_no_new_node():
    """The same fleet as Karpenter runs it (no launches while a zone its pools name is down): with
    zone a listed down (out of the NodePools), losing a leaves no zone to pin new nodes to, so
    the fourth replica gets a node in b or c; with only b listed, the lost a still pins them."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0,
                        new_nodes_while_down=False)
    for listed, launches in ((("a",), True), (("b",), False)):
        fleet = _fleet(replace(failover, zones_out_of_pools=listed))
        fleet.fail_zone("a", 100.0)
        fourth = fleet.place(120.0)
        assert (fourth.node in fleet.nodes) is launches and fleet.unscheduled == (0 if launches else 1)
        if launches:
            assert fourth.zone in ("b", "c") and fourth.ready_s < float("inf")
    # With every zone up, a listed zone still gets no new node. One replica a zone on one-slot
    # nodes: the fewest-replica zones come first (a, b, c; then a, c; then a alone), and each
    # new node goes to the first of them the pools name, else to another zone up: b, c, b.
    fleet = _fleet(replace(failover, zones_out_of_pools=("a",)))
    added = [fleet.place(20.0 + k) for k in range(3)]
    assert [r.zone for r in added] == ["b", "c", "b"] and fleet.unscheduled == 0
    assert all(r.node in fleet.nodes and r.node.created_s >= 20.0 for r in added)


def test_the_simulated_deployment_takes_the_stacks_zones_down() -> None:
    """staging's AWS region with `zones_down: [us-east-2a]`: every model there runs with that
    zone out of the pools; as shipped, none."""
    import copy

    from rtip.stackfile import load
    from stacks.plan import load_plan
    from stacks.simulation import deployment
    from tests.conftest import stack_doc

    platform = copy.deepcopy(stack_doc("staging")["config"]["rtip:platform"])
    (aws_at,) = [i for i, r in enumerate(platform["regions"]) if r["cloud"] == "aws"]
    region = platform["regions"][aws_at]["region"]
    platform["regions"][aws_at]["zones_down"] = ["us-east-2a"]
    plan = load_plan(platform, load("staging").source)
    listed = [deployment(plan, m).fleet.failover for m in plan.models if m.region == region]
    assert listed and all(f.zones_out_of_pools == ("us-east-2a",) for f in listed)
    shipped = plan_of("staging")
    assert all(deployment(shipped, m).fleet.failover.zones_out_of_pools == () for m in shipped.models)


def test_a_pending_replica_bills_no_gpu_time():
    trace = poisson(3.0, 200, (300, 100), seed=4)
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0,
                        new_nodes_while_down=False)
    run = Simulation(trace, _cfg(failover), "least-loaded")
    result = run.run()
    replacement = run.fleet.replicas[3]  # the lost pod's, at its eviction: no free slot, no node
    assert replacement.created_s == pytest.approx(190.0) and replacement.ready_s == float("inf")
    served = sum(((r.gone_s if r.gone_s is not None else result.end_s) - r.created_s)
                 for r in run.fleet.replicas[:3]) / 3600
    assert result.replica_gpu_hours == pytest.approx(served)


def test_only_the_eks_pools_launch_no_node_while_a_zone_is_down():
    """prod runs models on EKS (Karpenter), GKE and AKS: the simulator lets only the cluster
    autoscalers launch nodes in the zones up during an outage, and reads the PodMonitor's
    scrape timeout."""
    from stacks.simulation import deployment

    plan = plan_of("prod")
    clouds = set()
    for mp in plan.models:
        dep = deployment(plan, mp)
        clouds.add(mp.cloud)
        assert dep.fleet.failover.new_nodes_while_down is (mp.cloud != "aws"), (mp.model, mp.region)
        pod_monitor = next(r.inputs for r in record_of("prod").resources
                           if r.inputs.get("kind") == "PodMonitor"
                           and r.inputs["metadata"]["name"] == mp.model)
        assert dep.sim_config().scrape_timeout_s == float(
            pod_monitor["spec"]["podMetricsEndpoints"][0]["scrapeTimeout"].rstrip("s"))
    assert clouds == {"aws", "gcp", "azure"}
