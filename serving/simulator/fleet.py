"""Nodes, zones and replicas of one deployment: placement, cold starts, scale-in, zone loss.

Rules (the ReplicaSet controller, the scheduler with a zone spread, and the node autoscaler):
- New replicas go to a free slot on a node in a zone with the fewest replicas among the spread's
  domains (maxSkew 1; a domain is a zone up that holds a node of the pool: `_domains`): the
  replica is ready after `cold_start.warm_s` (on a node still joining or pulling the model
  server's image: once the image is there, plus the rest of the full budget). Without one a new
  node is added in a zone up with the fewest replicas, as Karpenter counts them over every zone
  its NodePools name (the cluster autoscalers choose a node group by their expander, which is not
  modelled), and the replica is ready after `cold_start.full_s`. A replica's pod
  is Pending until its node is up and the image pulled, then Running, loading its model, until
  it is ready.
- Scale-in follows the ReplicaSet controller's ranking (kubernetes pkg/controller/controller_utils.go
  `ActivePodsWithRanks.Less`, ranks from replicaset `getPodsRankedByRelatedPodsOnSameNode`):
  replicas still starting first (those waiting for their node, one rank, then those pulling the
  image on a node, Pending, then those loading their model, Running and not ready), then ready
  ones; within each, a replica sharing its node with more active replicas of
  the model first ("doubled up"), then the shorter time ready (starting: the newer creation), in
  log2 buckets, ties in pseudo-random order (the controller breaks them by pod UID). The counts
  are taken once before the sort, so one scale-in of several pods can still empty a doubled-up
  node, but mostly scale-in thins nodes before it empties one, and Karpenter's `WhenEmpty` frees
  a node late. A ready replica being removed stops getting
  requests and, with `drain`, finishes what it holds before it goes, or within `drain_limit_s`,
  when what it still runs is cut (`drain_cut`).
- A replica no node came for (Pending: `place` found no slot and no node launches) binds to the
  first slot the spread allows once one frees (a replica's removal, a drain's end), and starts
  warm from there, as the scheduler retries unschedulable pods on such cluster events.
- A node without replicas for `node_empty_ttl_s` is removed (Karpenter consolidation).
- A zone failure removes the zone's nodes at once, and the requests on its replicas are lost.
  Its replicas linger as Kubernetes and the gateway let them (`FleetConfig.failover`): the
  router keeps picking them (by the load they last reported) until `route_s`, and every request
  sent there fails; they count for the ReplicaSet (so a scale-up past the replicas it believes it
  has is needed before any new one starts) until their node's eviction, when the ReplicaSet
  replaces them in the surviving zones; once the API has marked them NotReady a scale-in deletes
  them before every ready pod (after unscheduled ones, ranked with pods still starting). With an
  instant failover (the default) they are gone and replaced at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from serving.simulator.config import EngineConfig, FleetConfig
from serving.simulator.engine import Engine, SimRequest
from serving.simulator.metrics import ReplicaMetrics
from serving.simulator.replica import (
    DRAINING,
    GONE,
    LOST,
    READY,
    STARTING,
    UNSCHEDULED,
    Node,
    Replica,
    deletion_rank,
)

# Callbacks into the event loop: (time, kind, object).
Schedule = Callable[[float, str, object], None]


class Fleet:
    def __init__(self, cfg: FleetConfig, engine_cfg: EngineConfig, schedule: Schedule,
                 log_steps: bool = False) -> None:
        self.cfg = cfg
        self.engine_cfg = engine_cfg
        self.schedule = schedule
        self.log_steps = log_steps
        self.nodes: list[Node] = []
        self.replicas: list[Replica] = []
        self.down_zones: set[str] = set()
        self.routable: list[Replica] = []  # ready replicas, in creation order
        self.spec_replicas = cfg.initial_replicas
        self.lost: list[SimRequest] = []  # requests lost with a replica, drained by the caller
        self.unscheduled = 0  # replicas that waited Pending for a node (Failover.new_nodes_while_down)
        self.drain_cut = 0  # requests a draining replica still ran when its drain limit came
        self.narrowed = 0  # replicas placed while a zone up held no node of this fleet
        per_zone: dict[str, int] = {z: 0 for z in cfg.zones}
        nodes = cfg.initial_nodes if cfg.initial_nodes is not None else \
            -(-cfg.initial_replicas // cfg.slots_per_node)
        for i in range(nodes):
            self._add_node(cfg.zones[i % len(cfg.zones)], 0.0, 0.0, 0.0)
        for _ in range(cfg.initial_replicas):
            zone = min(cfg.zones, key=lambda z: per_zone[z])
            node = self._free_node(zone) or self._free_node(None)
            if node is None:
                raise AssertionError("initial nodes cannot hold the initial replicas")
            per_zone[node.zone] += 1
            replica = self._add_replica(node, 0.0, 0.0, warm=True)
            self._set_ready(replica)

    # -- views ---------------------------------------------------------------------------------
    def active(self) -> list[Replica]:
        """Replicas that count for the Deployment: starting, ready or lost (not terminating)."""
        return [r for r in self.replicas if r.state in (STARTING, READY, LOST)]

    def count(self, state: str) -> int:
        return sum(1 for r in self.replicas if r.state == state)

    # -- internals -----------------------------------------------------------------------------
    def _add_node(self, zone: str, now: float, ready_s: float, image_s: float) -> Node:
        node = Node(len(self.nodes), zone, self.cfg.slots_per_node, now, ready_s, image_s=image_s)
        self.nodes.append(node)
        return node

    def _free_node(self, zone: str | None) -> Node | None:
        best: Node | None = None
        for node in self.nodes:
            fits = node.gone_s is None and len(node.replicas) < node.slots
            if fits and (zone is None or node.zone == zone) and (best is None or node.ready_s < best.ready_s):
                    best = node
        return best

    def _add_replica(self, node: Node, now: float, ready_s: float, warm: bool) -> Replica:
        rid = len(self.replicas)
        engine = Engine(self.engine_cfg, ReplicaMetrics(), log_steps=self.log_steps)
        replica = Replica(rid, node, engine, now, ready_s, warm)
        node.replicas.add(rid)
        node.empty_since = None
        self.replicas.append(replica)
        return replica

    def _set_ready(self, replica: Replica) -> None:
        replica.state = READY
        self.routable.append(replica)

    def _release(self, replica: Replica, now: float) -> None:
        replica.state, replica.gone_s = GONE, now
        node = replica.node
        node.replicas.discard(replica.rid)
        if replica.scheduled and node.gone_s is None:
            self.bind_pending(now)  # its slot, or one the spread now allows, may take a Pending one
        if not node.replicas and node.gone_s is None:
            node.empty_since = now
            self.schedule(now + self.cfg.node_empty_ttl_s, "node_gc", node)

    def _unroute(self, replica: Replica) -> None:
        if replica in self.routable:
            self.routable.remove(replica)

    # -- actions -------------------------------------------------------------------------------
    @property
    def _up(self) -> list[str]:
        return [z for z in self.cfg.zones if z not in self.down_zones]

    def _with_nodes(self) -> list[str]:
        """The zones up holding a node of this fleet. A node counts from its launch, where the
        scheduler sees it once it has registered and is Ready (an older simplification)."""
        live = {n.zone for n in self.nodes if n.gone_s is None}
        return [z for z in self._up if z in live]

    def _domains(self) -> list[str]:
        """The zones up the scheduler's zone spread counts: it takes its domains off the nodes
        that exist and that the pods select and tolerate (kubernetes podtopologyspread
        filtering.go `calPreFilterState`), so a zone whose last node of the pool is gone is none
        and a new replica may take a free slot in a zone already fuller than it."""
        return self._up if self.cfg.every_zone_a_domain else self._with_nodes()

    def _fewest_zones(self, zones: list[str] | None = None) -> list[str]:
        """Those of `zones` (default: the zones up) with the fewest replicas starting or ready:
        where the spread lets one go."""
        if zones is None:
            zones = self._up
            if not zones:
                raise RuntimeError("every zone is down: no replica can start")
        counts = {z: sum(1 for r in self.replicas if r.zone == z and r.state in (STARTING, READY))
                  for z in zones}
        fewest = min(counts.values(), default=0)
        return [z for z in zones if counts[z] == fewest]

    def _slot(self, zones: list[str]) -> Node | None:
        """A node with a free slot in the first of `zones` that has one."""
        for zone in zones:
            node = self._free_node(zone)
            if node is not None:
                return node
        return None

    def _ready_on(self, node: Node, now: float) -> float:
        """When a replica placed on `node`'s free slot at `now` is ready: a warm start, or on a
        node still joining or pulling the image, once the image is there plus the rest of the
        full budget (the weights from the bucket, the engine)."""
        cold = self.cfg.cold_start
        if node.image_s <= now:
            return now + cold.warm_s
        return max(now + cold.warm_s, node.image_s + cold.full_s - cold.node_ready_s - cold.image_pull_s)

    def place(self, now: float) -> Replica:
        """Start one replica (see the module's placement rule)."""
        zones = self._fewest_zones()
        # Counted whether or not other models keep the zone a domain, so that a run shows when
        # the domains could have mattered at all.
        self.narrowed += len(self._with_nodes()) < len(self._up)
        cold = self.cfg.cold_start
        node = self._slot(self._fewest_zones(self._domains()))
        if node is not None:
            replica = self._add_replica(node, now, self._ready_on(node, now), warm=True)
        else:
            out = set(self.cfg.failover.zones_out_of_pools)  # no new node there: the pools exclude it
            pinned = self.down_zones - out
            launchable = [z for z in zones if z not in out] or [z for z in self._up if z not in out]
            if not launchable or (pinned and not self.cfg.failover.new_nodes_while_down):
                # No node comes for it while a zone its pools still name is down: Pending, on a
                # node that is never ready and never billed (not one of the fleet's nodes).
                lost_zone = sorted(pinned or out)[0]
                pending = Node(UNSCHEDULED, lost_zone, self.cfg.slots_per_node, now, math.inf,
                               image_s=math.inf)
                self.unscheduled += 1
                return self._add_replica(pending, now, math.inf, warm=False)
            node = self._add_node(launchable[0], now, now + cold.node_ready_s,
                                  now + cold.node_ready_s + cold.image_pull_s)
            replica = self._add_replica(node, now, now + cold.full_s, warm=False)
        self.schedule(replica.ready_s, "ready", replica)
        return replica

    def bind_pending(self, now: float) -> int:
        """The scheduler retrying Pending replicas once a slot frees (a replica's removal): each
        goes, oldest first, to a free slot the spread allows, and starts warm from there. Returns
        how many bound."""
        bound = 0
        for replica in self.replicas:
            if replica.state != STARTING or replica.scheduled:
                continue
            if len(self.down_zones) >= len(self.cfg.zones):
                break
            node = self._slot(self._fewest_zones(self._domains()))
            if node is None:
                break
            replica.node.replicas.discard(replica.rid)
            replica.node, replica.zone = node, node.zone
            node.replicas.add(replica.rid)
            node.empty_since = None
            replica.placed_s = now
            replica.ready_s = self._ready_on(node, now)
            replica.warm = True
            self.schedule(replica.ready_s, "ready", replica)
            bound += 1
        return bound

    def on_ready(self, replica: Replica) -> bool:
        if replica.state != STARTING:
            return False
        self._set_ready(replica)
        return True

    def scale_to(self, target: int, now: float) -> None:
        """The ReplicaSet controller: make the active replicas `target`."""
        self.spec_replicas = target
        active = self.active()
        for _ in range(target - len(active)):
            self.place(now)
        surplus = len(active) - target
        if surplus <= 0:
            return
        for replica in sorted(active, key=lambda r: self._deletion_rank(r, now))[:surplus]:
            self._unroute(replica)
            replica.deleted_s = now
            if replica.state == LOST:  # deleted: no longer counted, nothing to drain or free
                replica.state = GONE
                replica.node.replicas.discard(replica.rid)
            elif replica.state == STARTING or (replica.engine.idle and not replica.engine.busy):
                self._release(replica, now)
            elif self.cfg.drain:
                replica.state = DRAINING
                if self.cfg.drain_limit_s is not None:
                    self.schedule(now + self.cfg.drain_limit_s, "drain_limit", replica)
            else:
                self._stop(replica, now)

    def _deletion_rank(self, replica: Replica, now: float) -> tuple[int, ...]:
        """The ReplicaSet's deletion order as a sort key (see the module docstring). With
        `deletion_cost_by_zone`, the pod-deletion-cost (compared after readiness, before the
        colocation rank) is minus the active pods in the replica's zone; else all costs tie."""
        # Pods being deleted (draining) are not active and do not count as colocated; a lost pod
        # the API has not yet marked does, as the ReplicaSet still sees it running.
        active = (STARTING, READY, LOST)
        colocated = sum(1 for rid in replica.node.replicas if self.replicas[rid].state in active)
        cost = -sum(1 for r in self.replicas if r.zone == replica.zone and r.state in active) \
            if self.cfg.deletion_cost_by_zone else 0
        return deletion_rank(replica, now, colocated, cost, self.cfg.failover.not_ready_s)

    def stop_draining(self, replica: Replica, now: float) -> None:
        """The drain limit: a replica still draining is stopped, and what it runs is lost."""
        if replica.state == DRAINING:
            self.drain_cut += self._stop(replica, now)

    def _stop(self, replica: Replica, now: float) -> int:
        """Stop `replica` at once: what it runs is lost. Returns how many requests that was."""
        cut = replica.engine.kill()
        self.lost.extend(cut)
        self._release(replica, now)
        return len(cut)

    def maybe_release(self, replica: Replica, now: float) -> None:
        if replica.state == DRAINING and replica.engine.idle and not replica.engine.busy:
            self._release(replica, now)

    @property
    def bound(self) -> int:
        """Pending replicas the scheduler later bound to a slot that freed: those placed after
        their creation (`bind_pending` is the only way a replica's slot comes later)."""
        return sum(1 for r in self.replicas if r.placed_s > r.created_s)

    def ready_by_zone(self) -> dict[str, int]:
        """Ready replicas in each zone still up."""
        ready = {z: 0 for z in self.cfg.zones if z not in self.down_zones}
        for r in self.replicas:
            if r.state == READY and r.zone in ready:
                ready[r.zone] += 1
        return ready

    def fullest_zone(self) -> str:
        """The zone still up with the most ready replicas (ties: the first listed)."""
        ready = self.ready_by_zone()
        if not ready:
            raise RuntimeError("every zone is down: none left to lose")
        return max(ready, key=lambda z: ready[z])  # max keeps the first of equals

    def fail_zone(self, zone: str, now: float) -> list[Replica]:
        """Lose `zone`: its nodes vanish and the requests on its replicas are lost; returns the
        replicas lost. With an instant failover they are gone; otherwise they linger (LOST) until
        `route_lost` and `evict` (the caller schedules both from `cfg.failover`, once: a zone
        already lost is refused)."""
        if zone in self.down_zones:
            raise ValueError(f"zone {zone} is already lost")
        self.down_zones.add(zone)
        instant = self.cfg.failover.instant
        lost: list[Replica] = []
        for replica in self.replicas:
            if replica.zone != zone or replica.state == GONE:
                continue
            keep_routing = replica.state == READY and self.cfg.failover.route_s > 0
            replica.ready_at_loss = replica.state == READY
            replica.last_load = replica.load
            self.lost.extend(replica.engine.kill())
            replica.gone_s = now  # its GPUs serve nothing from here
            replica.unreachable = True
            if instant or replica.state == DRAINING:  # a draining pod is already being deleted
                self._unroute(replica)
                replica.state = GONE
                replica.deleted_s = now if replica.deleted_s is None else replica.deleted_s
                replica.node.replicas.discard(replica.rid)
            else:
                replica.state = LOST
                if not keep_routing:
                    self._unroute(replica)
            lost.append(replica)
        for node in self.nodes:
            if node.zone == zone and node.gone_s is None:
                node.gone_s = now
        return lost

    def route_lost(self, zone: str) -> None:
        """The router has learnt that `zone`'s replicas are gone: it picks them no more."""
        self.routable = [r for r in self.routable if not (r.state == LOST and r.zone == zone)]

    def evictions(self, zone: str) -> list[tuple[float, Node]]:
        """(seconds after the loss, node) at which each lost node's pods are deleted: the first
        node after `evict_s`, each further one `evict_every_s` later (in the order the nodes came)."""
        fo = self.cfg.failover
        lost = [n for n in self.nodes if n.zone == zone and any(
            self.replicas[rid].state == LOST for rid in n.replicas)]
        return [(fo.evict_s + i * fo.evict_every_s, node) for i, node in enumerate(lost)]

    def evict(self, node: Node, now: float) -> int:
        """The lost pods on `node` are deleted at `now`: they count for the ReplicaSet no more.
        Returns how many there were (the caller then lets the ReplicaSet replace them)."""
        n = 0
        for rid in list(node.replicas):
            replica = self.replicas[rid]
            if replica.state == LOST:
                self._unroute(replica)
                replica.state = GONE
                replica.deleted_s = now
                node.replicas.discard(rid)
                n += 1
        return n

    def node_gc(self, node: Node, now: float) -> None:
        if node.gone_s is None and not node.replicas and node.empty_since is not None \
                and now - node.empty_since >= self.cfg.node_empty_ttl_s - 1e-9:
            node.gone_s = now


__all__ = ["DRAINING", "GONE", "LOST", "READY", "STARTING", "UNSCHEDULED", "Fleet", "Node", "Replica"]
