"""Routing, sizing, cold starts and zone failures in the simulator."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pytest

from serving.simulator import (
    FULLEST,
    ColdStartSpec,
    EngineConfig,
    FleetConfig,
    SimConfig,
    StepTime,
    Targets,
    Trace,
    ZoneFailure,
    poisson,
    simulate,
)
from serving.simulator.engine import SimRequest
from serving.simulator.fleet import READY, Fleet
from serving.simulator.hours import packed_node_seconds

STEP = StepTime(0.02, 0.0001, 0.015, 0.0004)


def _cfg(replicas: int, zones: tuple[str, ...] = ("a", "b"), max_seqs: int = 16, **kw: object) -> SimConfig:
    fleet_args = {k: kw.pop(k) for k in ("slots_per_node", "cold_start") if k in kw}
    fleet = FleetConfig(zones=zones, initial_replicas=replicas, **fleet_args)  # type: ignore[arg-type]
    return SimConfig(engine=EngineConfig(step=STEP, kv_blocks=40_000, max_num_seqs=max_seqs), fleet=fleet,
                     targets=Targets(2.0, 0.1), **kw)  # type: ignore[arg-type]


def test_least_loaded_beats_round_robin_on_a_skewed_load():
    # Long (300-token) and short (3-token) requests alternate every 0.5 s: round robin sends every
    # long one to replica 0, which holds 4 at a time for ~5 s each (0.8/s < 1/s offered).
    n = 400
    trace = Trace(np.arange(n) * 0.5, np.full(n, 100), np.where(np.arange(n) % 2 == 0, 300, 3))
    cfg = _cfg(2, max_seqs=4)
    rr = simulate(trace, cfg, router="round-robin")
    ll = simulate(trace, cfg, router="least-loaded")
    assert list(rr.replica) == [i % 2 for i in range(n)]
    assert rr.ok.all() and ll.ok.all()
    assert ll.percentile("ttft", 95) < rr.percentile("ttft", 95) / 5
    assert ll.attainment > rr.attainment


def test_an_undersized_deployment_fails_the_p99_target():
    # One replica of batch 16: 16 / (prefill 0.07 s + 200 x tpot(16) 0.0214 s) = 3.7 req/s < 4 offered.
    trace = poisson(4.0, 600, (500, 200), seed=2)
    small = simulate(trace, _cfg(1))
    big = simulate(trace, _cfg(4))
    assert small.percentile("ttft", 99) > 2.0
    assert small.attainment < 0.5
    assert big.percentile("ttft", 99) <= 2.0
    assert big.attainment > 0.99


def test_cold_and_warm_starts_follow_node_slots():
    cold = ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0)
    events: list[tuple[float, str, object]] = []
    fleet = Fleet(FleetConfig(zones=("a",), initial_replicas=1, slots_per_node=2, cold_start=cold),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: events.append((t, kind, obj)))
    warm = fleet.place(10.0)  # the initial node has a free slot
    assert warm.ready_s == 210.0 and warm.warm
    new = fleet.place(20.0)  # no slot left: a new node, the full budget
    assert new.ready_s == 720.0 and not new.warm
    shared = fleet.place(30.0)  # the new node's second slot: up when the node is, then the rest
    assert shared.ready_s == pytest.approx(20.0 + 400.0 + 300.0)
    assert len(fleet.nodes) == 2


def test_a_zone_failure_loses_its_in_flight_requests_and_the_fleet_recovers():
    cold = ColdStartSpec(full_s=300.0, warm_s=60.0, node_ready_s=150.0)
    zones = ("a", "b", "c")
    trace = poisson(3.0, 900, (300, 100), seed=4)
    base = simulate(trace, _cfg(3, zones, max_seqs=64, cold_start=cold))
    hit = simulate(trace, _cfg(3, zones, max_seqs=64, cold_start=cold,
                               zone_failures=(ZoneFailure("a", 100.0),)))
    # Replica 0 is the one in zone a. Without the failure, the requests it held at t = 100:
    done = base.arrival_s + base.e2e_s
    in_flight = (base.replica == 0) & (base.arrival_s < 100.0) & (done > 100.0)
    assert in_flight.sum() > 0
    assert hit.failed == int(in_flight.sum())
    assert set(hit.replica[~hit.ok]) == {0}
    # The replacement starts at once in a surviving zone on a new node: ready after the full budget.
    replacement = [s for s in hit.starts if s.decided_s > 0]
    assert len(replacement) == 1
    assert replacement[0].zone in ("b", "c")
    assert replacement[0].ready_s == pytest.approx(400.0)
    ready = hit.series["ready"][hit.series["t"] >= 400.0]
    assert (ready == 3).all()
    assert hit.ok[hit.arrival_s > 100.0].all()
    assert not (hit.replica[hit.arrival_s > 100.0] == 0).any()  # the router stopped using it
    # Node GPU-hours: zone a's node 0..100 s, the new node 100 s..end, two nodes throughout.
    assert hit.gpu_hours == pytest.approx((2 * hit.end_s + 100.0 + (hit.end_s - 100.0)) / 3600)


def test_scaled_in_replicas_drain_before_they_go():
    fleet = Fleet(FleetConfig(zones=("a", "b"), initial_replicas=3), EngineConfig(step=STEP, kv_blocks=100),
                  lambda t, kind, obj: None)
    assert [r.state for r in fleet.replicas] == [READY] * 3
    # Ready 100000 s, 1000 s and 0.01 s ago: three log2 buckets, so no tie for the pod UID to break.
    fleet.replicas[0].ready_s, fleet.replicas[1].ready_s = -100_000.0, -1000.0
    busy = fleet.replicas[2]  # ready most recently (a shorter log2 bucket): the ReplicaSet removes it first
    end = busy.engine.submit(SimRequest(0, 0.0, 50, 3), 0.0)
    fleet.scale_to(2, 0.01)
    assert busy.state == "draining" and busy not in fleet.routable
    while end is not None:
        end = busy.engine.on_step_end(end)
    fleet.maybe_release(busy, 1.0)
    assert busy.state == "gone" and busy.engine.finished[0].out == 3
    fleet.scale_to(1, 2.0)  # an idle replica goes at once
    assert fleet.replicas[1].state == "gone" and len(fleet.routable) == 1


def test_a_draining_replica_is_stopped_at_its_drain_limit():
    """With a 2 s limit, the replica scaled in at 0.01 s is stopped at 2.01 s: its generation of
    3,000 tokens (at least 0.02 s a step, 60 s) is cut and counted; the fleet sets the limit's event
    itself, and a replica already gone by then is left alone."""
    events: list[tuple[float, str, object]] = []
    fleet = Fleet(FleetConfig(zones=("a", "b"), initial_replicas=3, drain_limit_s=2.0),
                  EngineConfig(step=STEP, kv_blocks=1000), lambda t, kind, obj: events.append((t, kind, obj)))
    fleet.replicas[0].ready_s, fleet.replicas[1].ready_s = -100_000.0, -1000.0
    busy = fleet.replicas[2]
    long = SimRequest(0, 0.0, 50, 3000)
    busy.engine.submit(long, 0.0)
    fleet.scale_to(2, 0.01)
    assert busy.state == "draining" and (2.01, "drain_limit", busy) in events
    fleet.stop_draining(busy, 2.01)
    assert busy.state == "gone" and fleet.drain_cut == 1 and fleet.lost == [long]
    fleet.stop_draining(busy, 3.0)
    assert fleet.drain_cut == 1


def _ready_fleet(zones: tuple[str, ...], replicas: int, slots: int) -> Fleet:
    cold = ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0)
    return Fleet(FleetConfig(zones=zones, initial_replicas=replicas, slots_per_node=slots, cold_start=cold,
                             initial_nodes=len(zones)), EngineConfig(step=STEP, kv_blocks=100),
                 lambda t, kind, obj: None)


def _per_zone(fleet: Fleet) -> dict[str, int]:
    return {z: sum(1 for r in fleet.active() if r.zone == z) for z in fleet.cfg.zones}


def test_fleet_scale_in_follows_the_replicaset_ranking():
    # kubernetes ActivePodsWithRanks: a pod whose node holds more of the ReplicaSet's pods goes
    # before a more recently ready pod alone on its node.
    fleet = _ready_fleet(("a", "b", "c"), 2, slots=2)  # a: r0, b: r1; c has an empty node
    late = fleet.place(10.0)  # the fewest replicas: zone c, on its free node
    doubled = fleet.place(20.0)  # a tie of one each: zone a, beside r0
    assert (late.zone, doubled.zone) == ("c", "a")
    for replica in (late, doubled):
        fleet.on_ready(replica)
    late.ready_s = 900.0  # c's replica is the most recently ready
    fleet.scale_to(3, 5000.0)
    gone = [r for r in fleet.replicas if r.state != READY]
    assert len(gone) == 1 and gone[0].zone == "a"  # not c's newer replica
    assert _per_zone(fleet) == {"a": 1, "b": 1, "c": 1}


def test_scale_in_takes_starting_pods_first_and_counts_only_active_ones_as_colocated():
    fleet = _ready_fleet(("a", "b"), 4, slots=4)  # a: r0, r2; b: r1, r3 on one node a zone
    fleet.replicas[0].ready_s = -1000.0  # ready long ago: a longer log2 bucket than r1-r3's
    starting = fleet.place(100.0)  # the fewest: a tie, zone a, beside r0 and r2
    assert starting.zone == "a" and starting.state == "starting"
    fleet.scale_to(4, 110.0)
    assert starting.state == "gone"  # not ready goes before ready, wherever it runs
    # r3 drains (busy); a's node then holds two active pods and b's one, so the next pod comes off a,
    # and of a's two the one ready more recently (r2, not r0).
    r3 = fleet.replicas[3]
    r3.engine.submit(SimRequest(0, 0.0, 50, 3), 120.0)
    r3.state = "draining"
    fleet._unroute(r3)
    fleet.scale_to(2, 130.0)
    assert fleet.replicas[2].state == "gone" and fleet.replicas[0].state == READY
    assert fleet.replicas[1].state == READY


def test_ready_times_in_one_log2_bucket_do_not_decide():
    # Ready 1000 s and 900 s before: int(log2(1e12 ns)) = int(log2(9e11 ns)) = 39, one bucket, so
    # the pod UID decides, not which was ready more recently (r1): the fleet's stand-in, the first
    # 8 bytes of SHA-256 over the 8-byte id, is smaller for r0 (computed here on its own).
    uid = [int.from_bytes(hashlib.sha256(rid.to_bytes(8, "big")).digest()[:8], "big") for rid in (0, 1)]
    assert uid[0] < uid[1]
    fleet = _ready_fleet(("a", "b"), 2, slots=1)
    fleet.replicas[0].ready_s, fleet.replicas[1].ready_s = 0.0, 100.0
    fleet.scale_to(1, 1000.0)
    assert [r.state for r in fleet.replicas] == ["gone", READY]


def test_one_pod_a_step_keeps_the_zones_even_where_a_zone_shares_a_node():
    # 3/3/3 on one node a zone: each single deletion comes off the fullest node, so 8, 7, 6 leave
    # 3/3/2, 3/2/2, 2/2/2 in some order; whatever the pod-UID tie-break.
    fleet = _ready_fleet(("a", "b", "c"), 9, slots=8)
    assert _per_zone(fleet) == {"a": 3, "b": 3, "c": 3}
    for n, now in ((8, 400.0), (7, 415.0), (6, 430.0)):
        fleet.scale_to(n, now)
        counts = sorted(_per_zone(fleet).values())
        assert counts[-1] - counts[0] <= 1 and sum(counts) == n
    assert _per_zone(fleet) == {"a": 2, "b": 2, "c": 2}


def test_fleet_input_errors():
    with pytest.raises(ValueError, match="zones"):
        FleetConfig(zones=("a", "a"), initial_replicas=1)
    with pytest.raises(ValueError, match="warm_s"):
        ColdStartSpec(full_s=10.0, warm_s=20.0)
    with pytest.raises(ValueError, match="zone failure"):
        _cfg(1, zone_failures=(ZoneFailure("z", 1.0),))
    with pytest.raises(ValueError, match="router"):
        simulate(Trace([0.0], [10], [2]), _cfg(1), router="random")


def test_the_fullest_zone_is_the_one_with_most_ready_replicas():
    """Ready replicas decide, not the zones' order and not pods still starting."""
    fleet = _ready_fleet(("a", "b", "c"), 3, slots=4)  # one ready replica a zone
    for zone in ("c", "c", "b"):  # c: two more ready, b: one
        node = next(n for n in fleet.nodes if n.zone == zone)
        fleet.on_ready(fleet._add_replica(node, 10.0, 10.0, warm=True))
    assert _ready_in(fleet) == {"a": 1, "b": 2, "c": 3}
    assert fleet.fullest_zone() == "c"  # the last listed
    # Two pods starting in b would make it the fullest if starting pods counted.
    node_b = next(n for n in fleet.nodes if n.zone == "b")
    for _ in range(2):
        fleet._add_replica(node_b, 20.0, 900.0, warm=True)
    assert _per_zone(fleet)["b"] > _per_zone(fleet)["c"] and fleet.fullest_zone() == "c"
    fleet.fail_zone("c", 30.0)
    assert fleet.fullest_zone() == "b"
    with pytest.raises(ValueError, match="leave none"):
        _cfg(1, ("a", "b"), zone_failures=(ZoneFailure(FULLEST, 1.0), ZoneFailure("a", 2.0)))


def _ready_in(fleet: Fleet) -> dict[str, int]:
    return {z: sum(1 for r in fleet.replicas if r.zone == z and r.state == READY) for z in fleet.cfg.zones}


def test_a_fullest_zone_failure_takes_the_zone_that_holds_most_when_it_fails():
    """Three replicas over zones a, b: a holds r0 and r2, b holds r1. Losing the fullest zone at
    100 s loses a (two replicas, the in-flight requests of both), where losing b loses one."""
    cold = ColdStartSpec(full_s=300.0, warm_s=60.0, node_ready_s=150.0)
    trace = poisson(3.0, 600, (300, 100), seed=4)
    fullest = simulate(trace, _cfg(3, ("a", "b"), max_seqs=64, cold_start=cold,
                                   zone_failures=(ZoneFailure(FULLEST, 100.0),)))
    named = simulate(trace, _cfg(3, ("a", "b"), max_seqs=64, cold_start=cold,
                                 zone_failures=(ZoneFailure("a", 100.0),)))
    b_only = simulate(trace, _cfg(3, ("a", "b"), max_seqs=64, cold_start=cold,
                                  zone_failures=(ZoneFailure("b", 100.0),)))
    assert fullest.extra["zones_lost"] == [(100.0, "a")]
    assert (fullest.ok == named.ok).all() and set(fullest.replica[~fullest.ok]) == {0, 2}
    assert fullest.failed > b_only.failed > 0


def test_packed_node_seconds_count_the_fewest_nodes_a_zone_by_hand():
    """One zone, two slots a node: three replicas from 0 s need 2 nodes; one removed at 100 s
    leaves 2, one node: 2 x 100 + 1 x 200 = 400 node-seconds to 300 s, whatever nodes the fleet
    really kept (the removed replica's node stays until its empty delay)."""
    cold = ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0)
    fleet = Fleet(FleetConfig(zones=("a",), initial_replicas=3, slots_per_node=2, cold_start=cold),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
    assert [r.created_s for r in fleet.replicas] == [0.0, 0.0, 0.0] and len(fleet.nodes) == 2
    fleet.scale_to(2, 100.0)
    assert sorted(r.gone_s or 0.0 for r in fleet.replicas) == [0.0, 0.0, 100.0]
    assert packed_node_seconds(fleet, 300.0) == pytest.approx(400.0)
    assert packed_node_seconds(fleet, 50.0) == pytest.approx(100.0)  # both nodes, 50 s


def test_a_simulation_cuts_the_generations_a_drain_limit_outlasts():
    """In a whole run: three replicas, each given a 3,000-token generation (at least 0.02 s a step,
    60 s), scaled to one at 10 s with a 2 s drain limit. The two scaled in are stopped at 12 s and
    their requests fail (drain_cut 2); the one kept finishes its own."""
    from serving.simulator import SimConfig, Targets, Trace, simulate

    class Down:
        interval_s = 10.0
        min_replicas = 1
        reads_scrapes = False

        def decide(self, now, view):
            return 3 if now < 10.0 else 1

    cfg = SimConfig(engine=EngineConfig(step=STEP, kv_blocks=1000),
                    fleet=FleetConfig(zones=("a", "b", "c"), initial_replicas=3, drain_limit_s=2.0),
                    targets=Targets(1.0, 1.0))
    res = simulate(Trace([0.0, 0.1, 0.2], [50, 50, 50], [3000, 3000, 3000]), cfg, "round-robin", Down())
    assert sorted(res.ok.tolist()) == [False, False, True]
    assert res.extra["drain_cut"] == 2


def test_the_fullest_zone_s_ready_replicas_are_sampled_with_the_fleet():
    """Four replicas over zones a, b, c are placed 2 / 1 / 1 (each to the emptiest zone, ties to
    the first listed): the fullest zone holds 2 at every sample; zone a lost at 30 s leaves b and
    c with one each while its two replacements start (200 s), so after it the fullest zone holds 1."""
    trace = poisson(2.0, 60, (100, 20), seed=1)
    result = simulate(trace, _cfg(4, zones=("a", "b", "c")), "least-loaded")
    fleet = Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=4),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
    assert fleet.ready_by_zone() == {"a": 2, "b": 1, "c": 1}
    assert set(result.series["fullest_ready"]) == {2.0} and set(result.series["emptiest_ready"]) == {1.0}
    failures = (ZoneFailure("a", 30.0),)
    slow = ColdStartSpec(full_s=200.0, warm_s=200.0, node_ready_s=0.0)
    lost = simulate(trace, _cfg(4, zones=("a", "b", "c"), zone_failures=failures, cold_start=slow),
                    "least-loaded")
    t, fullest = lost.series["t"], lost.series["fullest_ready"]
    assert set(fullest[t < 30.0]) == {2.0} and set(fullest[t > 30.0]) == {1.0}
    fleet.fail_zone("a", 30.0)
    assert fleet.ready_by_zone() == {"b": 1, "c": 1}


def _mean_excess(key: Callable[[int], int]) -> float:
    """Replicas 0..R-1 placed round three zones in turn, k of them scaled in by ascending `key`
    (the ReplicaSet's last tie-break): the fullest zone's replicas above ceil(left / 3), averaged
    over R = 12..36 and every k that leaves more than three."""
    import math

    total = count = 0
    for r in range(12, 37):
        for k in range(1, r - 3):
            gone = set(sorted(range(r), key=key)[:k])
            per_zone = [sum(1 for i in range(r) if i % 3 == z and i not in gone) for z in range(3)]
            total += max(per_zone) - math.ceil((r - k) / 3)
            count += 1
    return total / count


def test_the_uid_stand_in_does_not_scale_in_round_the_zones():
    """Ties are broken by pod UID, which owes nothing to creation order. The stand-in the
    simulator used before, Knuth's multiplicative hash of the id, ordered replicas nearly as they
    were created, so tied scale-ins went round the zones and left them flatter than a UID order
    would; the SHA-256 stand-in leaves the fullest zone more than twice as far above even."""
    from serving.simulator.replica import pseudo_uid

    knuth = _mean_excess(lambda i: ((i + 1) * 2654435761) % 2**32)
    assert _mean_excess(pseudo_uid) > 2 * knuth > 0


def test_a_deletion_cost_by_zone_takes_the_fullest_zones_pod_first():
    """Seven replicas on two-slot nodes over zones a, b, c: a holds 3 (a full node and a half
    one), b and c 2 each (one full node). Scaling to 6, the ReplicaSet's own order takes a pod
    from any full node, the pod UID deciding (the SHA-256 stand-in, computed here on its own);
    with each pod's deletion cost at minus its zone's pods (`deletion_cost_by_zone`, compared
    before the node rank), it takes one of a's, which leaves 2/2/2."""
    def fleet(by_zone: bool) -> Fleet:
        return Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=7, slots_per_node=2,
                                 initial_nodes=6, deletion_cost_by_zone=by_zone),
                     EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)

    plain, costed = fleet(False), fleet(True)
    assert _per_zone(plain) == {"a": 3, "b": 2, "c": 2}
    full = [r.rid for r in plain.replicas if len(r.node.replicas) == 2]
    assert len(full) == 6
    uid = {rid: int.from_bytes(hashlib.sha256(rid.to_bytes(8, "big")).digest()[:8], "big") for rid in full}
    plain.scale_to(6, 1000.0)
    (gone,) = [r for r in plain.replicas if r.state != READY]
    assert gone.rid == min(full, key=uid.__getitem__) and gone.zone == "c"  # here: 3/2/1
    assert _per_zone(plain) == {"a": 3, "b": 2, "c": 1}
    costed.scale_to(6, 1000.0)
    (gone,) = [r for r in costed.replicas if r.state != READY]
    on_full_a = [rid for rid in full if costed.replicas[rid].zone == "a"]  # not a's lone pod
    assert gone.rid == min(on_full_a, key=uid.__getitem__)
    assert _per_zone(costed) == {"a": 2, "b": 2, "c": 2}


def test_the_deletion_cost_is_compared_before_the_node_rank_and_after_readiness():
    """Zone a runs 3 ready pods alone on three nodes, b and c 2 ready pods each on one full node.
    Cost before the node rank (Kubernetes' order: readiness, then deletion cost, then pods on the
    same node) takes one of a's, though b's and c's are doubled up; a pod still starting in b
    goes before any ready pod, whatever its zone's cost."""
    def fleet(by_zone: bool) -> Fleet:
        f = Fleet(FleetConfig(zones=("a", "b", "c"), initial_replicas=0, slots_per_node=2,
                              initial_nodes=9, deletion_cost_by_zone=by_zone),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
        nodes = {z: [n for n in f.nodes if n.zone == z] for z in ("a", "b", "c")}
        for node in (*nodes["a"][:3], nodes["b"][0], nodes["b"][0], nodes["c"][0], nodes["c"][0]):
            f.on_ready(f._add_replica(node, 0.0, 0.0, warm=True))
        return f

    plain, costed = fleet(False), fleet(True)
    assert _per_zone(costed) == {"a": 3, "b": 2, "c": 2}
    plain.scale_to(6, 1000.0)
    costed.scale_to(6, 1000.0)
    assert _per_zone(plain)["a"] == 3  # the node rank alone takes a doubled-up pod of b or c
    assert _per_zone(costed) == {"a": 2, "b": 2, "c": 2}
    starting = costed._add_replica(next(n for n in costed.nodes if n.zone == "b" and not n.replicas),
                                   1000.0, 2000.0, warm=True)
    costed.scale_to(6, 1010.0)
    assert starting.state == "gone" and _per_zone(costed) == {"a": 2, "b": 2, "c": 2}
