"""A replica of the simulated deployment and the node it runs on, and the ReplicaSet
controller's tie-breakers between replicas (serving/simulator/fleet.py places and removes them)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from serving.simulator.engine import Engine

UNSCHEDULED = -1  # the node id of a replica no node came for
STARTING, READY, DRAINING, GONE = "starting", "ready", "draining", "gone"
# In a lost zone: unreachable, still a pod of the ReplicaSet until its node's eviction.
LOST = "lost"


@dataclass(eq=False)
class Node:
    nid: int  # UNSCHEDULED: the node a Pending replica waits for, never launched
    zone: str
    slots: int
    created_s: float
    ready_s: float
    replicas: set[int] = field(default_factory=set)
    empty_since: float | None = None
    gone_s: float | None = None
    # When the model server's image is on it: a joining node's first pod pulls it after the node
    # is up (a later pod waits for that pull); a node the run starts with has it.
    image_s: float = 0.0


class Replica:
    __slots__ = ("created_s", "deleted_s", "engine", "gone_s", "last_load", "node", "placed_s",
                 "ready_at_loss", "ready_s", "rid", "state", "unreachable", "warm", "zone")

    def __init__(self, rid: int, node: Node, engine: Engine, created_s: float, ready_s: float,
                 warm: bool) -> None:
        self.rid = rid
        self.node = node
        self.zone = node.zone
        self.engine = engine
        self.created_s = created_s
        self.placed_s = created_s  # when it got its GPU slot: later for a Pending one that binds
        self.ready_s = ready_s
        self.gone_s: float | None = None  # when it stopped serving: scaled in, or lost with its zone
        # When its deletion was asked for (scale-in or eviction): its pod then has a deletion
        # timestamp, and the object stays while it drains, or for good on an unreachable node.
        self.deleted_s: float | None = None
        self.unreachable = False  # lost with its zone: its address answers nothing from then on
        self.state = STARTING
        self.warm = warm
        self.last_load = 0  # what a lost replica last reported: the router's view of it
        self.ready_at_loss = False  # Ready when its zone went: the API says so until it marks it NotReady

    @property
    def scheduled(self) -> bool:
        """Whether a node came for it (a Pending one has no node, address or GPU)."""
        return self.node.nid != UNSCHEDULED

    def bound(self, now: float) -> bool:
        """Whether its node had joined by `now` (the unscheduled node never joins): only then
        does the pod have an address and a kubelet to set its conditions."""
        return self.node.ready_s <= now

    @property
    def running_s(self) -> float:
        """When its container starts (pod phase Running, loading its model): once it has its slot
        and the node has the image (a later pod on a node still pulling waits for that pull)."""
        return max(self.placed_s, self.node.image_s)

    @property
    def load(self) -> int:
        if self.state == LOST:
            return self.last_load
        return len(self.engine.running) + len(self.engine.waiting)


def log2_age(age_s: float) -> int:
    """The controller's logarithmic rank of a time (logarithmicRankDiff): int(log2(ns ago)), -1 for none."""
    age_ns = age_s * 1e9
    return int(math.log2(age_ns)) if age_ns >= 1 else -1


def pseudo_uid(rid: int) -> int:
    """A fixed pseudo-random order of replicas, standing in for the pod UIDs the controller
    breaks ties with (deterministic, so runs repeat). A cryptographic hash, because the order must
    not follow creation: replicas are placed round the zones in turn, so an order that follows
    `rid` (as Knuth's multiplicative hash, used before, roughly did) scales in round the zones too,
    more evenly than random UIDs do (tests/test_simulator_fleet.py measures both orders)."""
    return int.from_bytes(hashlib.sha256(rid.to_bytes(8, "big")).digest()[:8], "big")


def deletion_rank(replica: Replica, now: float, colocated: int, cost: int,
                  not_ready_s: float) -> tuple[int, ...]:
    """`replica`'s place in the ReplicaSet's deletion order as a sort key, first deleted first
    (kubernetes pkg/controller/controller_utils.go `ActivePodsWithRanks.Less`): unassigned, then
    Pending, then Running pods; not ready before ready; the lower pod-deletion-cost (`cost`);
    more active pods of the model on its node (`colocated`, the rank) first; the shorter time
    ready, for pods not ready the newer creation, in log2 buckets; then the UID. A lost pod
    reads as it was when its zone went (no kubelet moves its phase on), Ready until the API marks
    it NotReady, `not_ready_s` after the loss."""
    lost = replica.state == LOST and replica.gone_s is not None
    if replica.state == READY or (lost and replica.ready_at_loss and now < replica.gone_s + not_ready_s):
        return (1, cost, -colocated, log2_age(now - replica.ready_s), pseudo_uid(replica.rid))
    at = replica.gone_s if lost else now
    # Pods waiting for their node are unassigned (the empty node name, so one rank and no node
    # rank); a bound one is Pending while its image pulls, then Running.
    unbound = replica.node.ready_s > at
    phase = 0 if unbound else 1 if at < replica.running_s else 2
    return (0, phase, cost, 0 if unbound else -colocated, log2_age(now - replica.created_s),
            pseudo_uid(replica.rid))


__all__ = ["DRAINING", "GONE", "LOST", "READY", "STARTING", "UNSCHEDULED", "Node", "Replica", "deletion_rank",
           "log2_age", "pseudo_uid"]
