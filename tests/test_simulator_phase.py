"""The pod phase in the simulator's scale-in order: `ActivePodsWithRanks.Less` (kubernetes
pkg/controller/controller_utils.go) deletes unassigned pods first, then Pending ones (a bound pod
pulling its image), then Running ones, before it compares the node rank; a lost pod keeps the
phase and readiness it had when its zone went until the API marks it NotReady."""

from __future__ import annotations

import pytest

from serving.simulator import ColdStartSpec, EngineConfig, Failover, FleetConfig, StepTime
from serving.simulator.fleet import Fleet

STEP = StepTime(0.02, 0.0001, 0.015, 0.0004)
# A new node is up 400 s after it is asked for, its image 100 s later, a warm start takes 600 s.
COLD = ColdStartSpec(full_s=700.0, warm_s=600.0, node_ready_s=400.0, image_pull_s=100.0)


def _fleet(zones: tuple[str, ...], replicas: int, slots: int, failover: Failover | None = None) -> Fleet:
    cfg = FleetConfig(zones=zones, initial_replicas=replicas, slots_per_node=slots, cold_start=COLD,
                      **({"failover": failover} if failover else {}))
    return Fleet(cfg, EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)


def _gone(named: dict[str, object]) -> list[str]:
    return [n for n, r in named.items() if r.state == "gone"]  # type: ignore[attr-defined]


def test_a_pod_pulling_its_image_goes_before_one_loading_its_model() -> None:
    """W starts warm on r0's node at 0 s: the image is there, so it runs at once, loading its model
    (not ready until 600 s) beside r0. P gets a new node at 1 s: unassigned until the node joins
    at 401 s, then Pending while the image pulls, Running from 501 s. Before 501 s P goes first
    (by phase; by the node rank W, doubled up, would); from 501 s both are Running and not ready,
    and W's doubled-up node decides."""
    for at, first in ((300.0, "P"), (450.0, "P"), (550.0, "W")):
        fleet = _fleet(("a",), 1, slots=2)
        named = {"W": fleet.place(0.0), "P": fleet.place(1.0)}
        assert named["W"].node is fleet.replicas[0].node and named["P"].node is not named["W"].node
        assert named["P"].ready_s == 701.0 and named["W"].ready_s == 600.0
        fleet.scale_to(2, at)
        assert _gone(named) == [first], at


def test_a_pod_placed_on_a_node_still_pulling_waits_for_that_pull() -> None:
    """P's new node joins at 401 s and its image is there at 501 s. Q takes the node's second slot
    at 450 s: it is Pending until 501 s too (the kubelet pulls the image once), so P and Q share a
    phase and a node, and the newer, Q, goes first. Were Q Running at once, P would go."""
    fleet = _fleet(("a",), 2, slots=2)
    p = fleet.place(1.0)
    q = fleet.place(450.0)
    assert q.node is p.node and q.running_s == p.running_s == 501.0
    fleet.scale_to(3, 460.0)
    assert _gone({"P": p, "Q": q}) == ["Q"]


def test_a_pod_on_a_node_still_pulling_is_ready_after_the_pull_and_the_rest_of_a_cold_start() -> None:
    """With a 60 s warm start, Q on P's node at 450 s (the node up at 401 s, its image at 501 s)
    is ready with P at 701 s: the image, then the weights from the bucket and the engine (the
    full budget's 200 s after the pull), not at 510 s as on a node that had its image."""
    cold = ColdStartSpec(full_s=700.0, warm_s=60.0, node_ready_s=400.0, image_pull_s=100.0)
    fleet = Fleet(FleetConfig(zones=("a",), initial_replicas=2, slots_per_node=2, cold_start=cold),
                  EngineConfig(step=STEP, kv_blocks=100), lambda t, kind, obj: None)
    p = fleet.place(1.0)
    q = fleet.place(450.0)
    assert q.node is p.node and p.ready_s == q.ready_s == 701.0
    late = fleet.place(600.0)  # a third pod: a new node (two slots a node), the full budget
    assert late.node is not p.node and late.ready_s == 1300.0
    early = fleet.place(610.0)  # the initial node has no slot; the new node's second slot
    assert early.node is late.node and early.ready_s == 1300.0


def test_a_pod_lost_before_it_was_ready_goes_before_the_ready_ones() -> None:
    """Zones a and b hold two ready pods on one node each. S gets a new node of its own in zone a
    and runs from 500 s, loading its model; zone a is lost at 600 s. Until the API marks a's pods
    NotReady (55 s on), r0 and r2 (Ready at the loss) still read Ready, but S never was: a scale-in
    at 610 s takes S. Read as ready, S would stay (alone on its node, it ranks after every
    doubled-up pod) and a doubled-up pod would go, maybe a live one of zone b."""
    failover = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0)
    fleet = _fleet(("a", "b"), 4, slots=2, failover=failover)
    s = fleet.place(0.0)
    assert s.zone == "a" and s.running_s == 500.0 and len(s.node.replicas) == 1
    fleet.fail_zone("a", 600.0)
    fleet.scale_to(4, 610.0)
    assert [r.state for r in fleet.replicas] == ["lost", "ready", "lost", "ready", "gone"]


def test_the_image_pull_fits_the_budget_after_node_readiness() -> None:
    with pytest.raises(ValueError, match="image_pull_s <= full_s - node_ready_s"):
        ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0, image_pull_s=301.0)
    whole = ColdStartSpec(full_s=700.0, warm_s=200.0, node_ready_s=400.0, image_pull_s=300.0)
    assert whole.image_pull_s == 300.0
