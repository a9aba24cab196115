"""The event loop: a trace through a router onto the fleet's engines, with Prometheus scraping,
the autoscaler, cold starts and zone failures.

Events at the same instant run in this order: engine step ends, replicas becoming ready, zone
failures (and the router learning of one, and a lost node's pods being deleted), node clean-up,
arrivals, scrapes (and a lost pod's scrape timing out), autoscaler decisions, time-series
samples. So a scrape sees the steps that ended at its instant, and an autoscaler sees the scrape
of its instant (or, with `autoscale_offset_s`, the last scrape before it, for an autoscaler that
`reads_scrapes`).

Requests that arrive while no replica is ready, or within the endpoint picker's stall after a
zone loss (`Failover.picker_stall_s`), fail at once (the gateway answers 503); a prompt
that does not fit `max_model_len` is rejected (vLLM answers 400), and an output is cut at the
context limit or at the engine's `max_output_tokens` (vLLM stops the request with finish
reason "length").
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from serving.kube_names import KSM_POD_SERIES, POD_DELETION
from serving.simulator.config import FULLEST, SimConfig
from serving.simulator.engine import SimRequest
from serving.simulator.fleet import DRAINING, GONE, LOST, READY, STARTING, Fleet, Node, Replica
from serving.simulator.hours import packed_node_seconds, slot_seconds
from serving.simulator.policies import Autoscaler, StaticPolicy
from serving.simulator.prometheus import (
    SCRAPE_DURATION,
    TARGET_SERIES,
    UP,
    pod_name,
    pod_samples,
)
from serving.simulator.promql import Store
from serving.simulator.results import ReplicaStart, SimResult
from serving.simulator.router import Router, make_router
from serving.simulator.traces import Trace

# What a scrape takes in the simulated Prometheus: an answered one, and one refused at once.
ANSWERED_S = 0.05
REFUSED_S = 0.001
_PRIO = {"step": 0, "ready": 1, "zone": 2, "route_lost": 2, "evict": 2, "drain_limit": 2, "node_gc": 3,
         "arrival": 4, "scrape": 5, "scrape_failed": 5, "autoscale": 6, "sample": 7}


class Simulation:
    """One run. Also the `FleetView` the autoscaler reads."""

    def __init__(self, trace: Trace, cfg: SimConfig, router: Router | str = "least-loaded",
                 autoscaler: Autoscaler | None = None) -> None:
        self.trace = trace
        self.cfg = cfg
        self.router = make_router(router) if isinstance(router, str) else router
        self.autoscaler = autoscaler or StaticPolicy(cfg.fleet.initial_replicas)
        self.store = Store()
        self._heap: list[tuple[float, int, int, str, object, int]] = []
        self._seq = 0
        self.fleet = Fleet(cfg.fleet, cfg.engine, self._schedule, log_steps=cfg.log_steps)
        self.requests: list[SimRequest] = []
        self._outstanding = 0
        self._scale_events: list[tuple[float, int, int]] = []
        self._zones_lost: list[tuple[float, str]] = []
        self._stalled_until = -math.inf  # Failover.picker_stall_s after a zone loss
        self._last_busy: dict[int, tuple[float, float]] = {}  # rid -> (time, busy_s) at last scrape
        self._util_mark: dict[int, tuple[float, float]] = {}  # the same, at the last autoscaler read
        self._stale_marked: set[int] = set()  # lost pods whose series a failed scrape ended
        self._gone_marked: set[int] = set()  # deleted pods, every series ended
        self._series: dict[str, list[float]] = {k: [] for k in (
            "t", "ready", "fullest_ready", "emptiest_ready", "starting", "draining", "waiting", "running",
            "kv_usage", "gpu_util")}
        self._sample_busy: dict[int, float] = {}
        self.now = 0.0

    # -- FleetView -----------------------------------------------------------------------------
    @property
    def spec_replicas(self) -> int:
        return self.fleet.spec_replicas

    @property
    def status_replicas(self) -> int:
        return len(self.fleet.active())

    @property
    def ready_replicas(self) -> int:
        return len(self.fleet.routable)

    def metrics_available(self, now: float) -> bool:
        return not any(start <= now < end for start, end in self.cfg.metric_outages)

    def ready_loads(self) -> list[int]:
        return [r.load for r in self.fleet.routable]

    def ready_gpu_utilization(self, now: float, window_s: float) -> list[float]:
        utils = []
        for r in self.fleet.routable:
            r.engine.advance(now)
            busy = r.engine.metrics.busy_s
            t0, b0 = self._util_mark.get(r.rid, (max(r.ready_s, now - window_s), busy))
            utils.append(min(1.0, (busy - b0) / (now - t0)) if now > t0 else 0.0)
            self._util_mark[r.rid] = (now, busy)
        return utils

    # -- events --------------------------------------------------------------------------------
    def _schedule(self, t: float, kind: str, obj: object, gen: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, _PRIO[kind], self._seq, kind, obj, gen))

    def _fail(self, reqs: list[SimRequest], now: float) -> None:
        for r in reqs:
            if not r.failed and r.done < 0:
                r.failed = True
                r.done = now
                self._outstanding -= 1

    def _after_step(self, replica: Replica, t_next: float | None) -> None:
        engine = replica.engine
        if engine.finished:
            self._outstanding -= len(engine.finished)
            engine.finished.clear()
        if t_next is not None:
            self._schedule(t_next, "step", replica, engine.gen)
        elif replica.state == DRAINING:
            self.fleet.maybe_release(replica, self.now)

    def _arrive(self, i: int, now: float) -> None:
        tr = self.trace
        limit = self.cfg.engine.context_limit
        prompt = int(tr.prompt_tokens[i])
        output = min(int(tr.output_tokens[i]), limit - prompt,
                     self.cfg.engine.max_output_tokens or limit)
        req = SimRequest(i, now, prompt, max(1, output), int(tr.prefix_group[i]), int(tr.prefix_tokens[i]))
        self.requests.append(req)
        self._outstanding += 1
        routable = self.fleet.routable
        if prompt >= limit or not routable or now < self._stalled_until:
            self._fail([req], now)
            return
        replica: Replica = self.router.choose(req, routable)  # type: ignore[assignment]
        req.replica = replica.rid
        if replica.state == LOST:  # picked before the router knew: its address answers no more
            self._fail([req], now)
            return
        t_next = replica.engine.submit(req, now)
        if t_next is not None:
            self._schedule(t_next, "step", replica, replica.engine.gen)

    def _scrape(self, now: float) -> None:
        base = (("model_name", self.cfg.model_name), ("namespace", self.cfg.namespace))
        interval = self.cfg.scrape_interval_s
        for r in self.fleet.replicas:
            pod = self._pod(r)
            target = self._target(r, pod)
            if r.unreachable:
                # Lost with its zone: this scrape fails at its timeout, when Prometheus writes it
                # (`scrape_failed`). Deleted or not, its pod stays a target: the object goes only
                # once its kubelet confirms, which never comes here. A pod whose node had not
                # joined by the loss was Pending: no address, no target.
                lost_s = r.gone_s  # set with `unreachable` (Fleet.fail_zone)
                if lost_s is not None and r.bound(lost_s) and lost_s <= now:
                    self._schedule(now + self.cfg.scrape_timeout_s, "scrape_failed", (r, now))
                self._ksm_samples(now, r, pod)
                continue
            if r.state == GONE:  # deleted: its target goes, and every series of it ends, `up` too
                if r.rid not in self._gone_marked:
                    self.store.mark_stale(now, "pod", pod)
                    self._gone_marked.add(r.rid)
                continue
            self._ksm_samples(now, r, pod)
            if not r.bound(now):  # no node yet, no address: no target
                continue
            if r.state == STARTING:  # no /metrics until vLLM has loaded its model: refused at once
                self.store.add(now, UP, target, 0.0)
                self.store.add(now, SCRAPE_DURATION, target, REFUSED_S)
                continue
            self.store.add(now, UP, target, 1.0)
            self.store.add(now, SCRAPE_DURATION, target, ANSWERED_S)
            engine = r.engine
            engine.advance(now)
            busy = engine.metrics.busy_s
            t0, b0 = self._last_busy.get(r.rid, (max(r.ready_s, now - interval), busy))
            util = min(1.0, (busy - b0) / (now - t0)) if now > t0 else 0.0
            self._last_busy[r.rid] = (now, busy)
            # A target's labels go on every series it exposes: the zone only where it is written.
            labels = (*base, ("pod", self._pod(r)), *self._zone(r))
            for name, extra, value in engine.metrics.samples(len(engine.running), len(engine.waiting),
                                                              engine.kv.usage, util):
                self.store.add(now, name, labels + extra if extra else labels, value)

    def _scrape_failed(self, r: Replica, began: float) -> None:
        """The scrape of lost replica `r` that began at `began` has timed out: Prometheus writes
        `up` 0 and the whole timeout as its duration, stamped with the scrape's start, and ends
        the pod's own series with a staleness marker there (kube-state-metrics' series of the pod
        are the exporter's, not the pod's)."""
        pod = self._pod(r)
        target = self._target(r, pod)
        if r.rid not in self._stale_marked:
            self.store.mark_stale(began, "pod", pod, keep=(*TARGET_SERIES, *KSM_POD_SERIES))
            self._stale_marked.add(r.rid)
        self.store.add(began, UP, target, 0.0)
        self.store.add(began, SCRAPE_DURATION, target, self.cfg.scrape_timeout_s)

    def _zone(self, r: Replica) -> tuple[tuple[str, str], ...]:
        """The zone label Prometheus writes on `r`'s target, where the PodMonitor writes one."""
        return ((self.cfg.zone_label, r.zone),) if self.cfg.zone_label else ()

    def _target(self, r: Replica, pod: str) -> tuple[tuple[str, str], ...]:
        return (("namespace", self.cfg.namespace), ("pod", pod), *self.cfg.target_labels, *self._zone(r))

    def _pod(self, r: Replica) -> str:
        # As a ReplicaSet names it: the Deployment, the template's hash (one template here), a suffix.
        return pod_name(self.cfg.model_name, r.rid)

    def _ksm_samples(self, now: float, r: Replica, pod: str) -> None:
        """kube-state-metrics' series of a pod, as long as the pod exists (read from the API
        server, which a lost zone leaves answering; the exporter is taken as answering too, and
        as scraped as often as the model): its deletion timestamp once it has one, its creation,
        and its Ready condition once its node has joined (a pod lost Ready reads Ready until the
        API marks it NotReady, the failover's `not_ready_s` after the loss)."""
        if r.deleted_s is not None:
            self.store.add(now, POD_DELETION, (("namespace", self.cfg.namespace), ("pod", pod)), r.deleted_s)
        marked = r.gone_s is None or now >= r.gone_s + self.cfg.fleet.failover.not_ready_s
        ready = r.state == READY or (r.state == LOST and r.ready_at_loss and not marked)
        pod_samples(self.store, now, self.cfg.namespace, pod, r.created_s, ready if r.bound(now) else None)

    def _autoscale(self, now: float) -> None:
        desired = self.autoscaler.decide(now, self)
        if desired != self.fleet.spec_replicas:
            self._scale_events.append((now, self.fleet.spec_replicas, desired))
            self.fleet.scale_to(desired, now)
        self._flush_lost(now)

    def _flush_lost(self, now: float) -> None:
        if self.fleet.lost:
            self._fail(self.fleet.lost, now)
            self.fleet.lost.clear()

    def _sample(self, now: float) -> None:
        s = self._series
        ready = [r for r in self.fleet.replicas if r.state in (READY, DRAINING)]
        s["t"].append(now)
        s["ready"].append(self.fleet.count(READY))
        # The ready replicas a zone loss would take now (the ReplicaSet scales in by node and age,
        # not by zone, so the fullest zone can hold more than its even share: benchmarks/zone_skew.py).
        by_zone = self.fleet.ready_by_zone().values()
        s["fullest_ready"].append(max(by_zone, default=0))
        s["emptiest_ready"].append(min(by_zone, default=0))
        s["starting"].append(self.fleet.count(STARTING))
        s["draining"].append(self.fleet.count(DRAINING))
        s["waiting"].append(sum(len(r.engine.waiting) for r in ready))
        s["running"].append(sum(len(r.engine.running) for r in ready))
        s["kv_usage"].append(sum(r.engine.kv.usage for r in ready) / len(ready) if ready else 0.0)
        busy = 0.0
        for r in ready:
            r.engine.advance(now)
            b = r.engine.metrics.busy_s
            fresh = r.ready_s >= now - self.cfg.sample_interval_s  # ready within this interval
            busy += b - self._sample_busy.get(r.rid, 0.0 if fresh else b)
            self._sample_busy[r.rid] = b
        s["gpu_util"].append(min(1.0, busy / (self.cfg.sample_interval_s * len(ready))) if ready else 0.0)

    # -- run -----------------------------------------------------------------------------------
    def run(self) -> SimResult:
        cfg = self.cfg
        arrivals = self.trace.arrival_s.tolist()
        n = len(arrivals)
        self._schedule(cfg.scrape_phase_s, "scrape", None)
        if math.isfinite(self.autoscaler.interval_s):
            # Only an autoscaler that reads Prometheus reads it late; one that asks the pods
            # reads them as they are, whatever its phase.
            offset = cfg.scrape_phase_s + cfg.autoscale_offset_s if self.autoscaler.reads_scrapes else 0.0
            self._schedule(offset, "autoscale", None)
        self._schedule(0.0, "sample", None)
        for failure in cfg.zone_failures:
            self._schedule(failure.at_s, "zone", failure.zone)
        end_s = cfg.end_s if cfg.end_s is not None else math.inf
        i = 0
        heap = self._heap
        arrival_prio = _PRIO["arrival"]
        while True:
            next_arrival = arrivals[i] if i < n else math.inf
            if heap and (heap[0][0], heap[0][1]) < (next_arrival, arrival_prio):
                t, _, _, kind, obj, gen = heapq.heappop(heap)
                if t > end_s:
                    break
                self.now = t
                if kind == "step":
                    replica: Replica = obj  # type: ignore[assignment]
                    if replica.state != GONE and gen == replica.engine.gen:
                        self._after_step(replica, replica.engine.on_step_end(t))
                elif kind == "ready":
                    self.fleet.on_ready(obj)  # type: ignore[arg-type]
                elif kind == "zone":
                    zone = self.fleet.fullest_zone() if obj == FULLEST else str(obj)
                    if zone not in self.fleet.down_zones:  # a zone already lost has nothing more to lose
                        self._zones_lost.append((t, zone))
                        self._stalled_until = max(self._stalled_until, t + cfg.fleet.failover.picker_stall_s)
                        self.fleet.fail_zone(zone, t)
                        self._flush_lost(t)
                        failover = cfg.fleet.failover
                        if failover.route_s > 0:
                            self._schedule(t + failover.route_s, "route_lost", zone)
                        for after, lost_node in self.fleet.evictions(zone):
                            self._schedule(t + after, "evict", lost_node)
                        self.fleet.scale_to(self.fleet.spec_replicas, t)
                elif kind == "route_lost":
                    self.fleet.route_lost(str(obj))
                elif kind == "evict":
                    if self.fleet.evict(obj, t):  # type: ignore[arg-type]
                        self.fleet.scale_to(self.fleet.spec_replicas, t)  # the ReplicaSet replaces them
                elif kind == "drain_limit":
                    self.fleet.stop_draining(obj, t)  # type: ignore[arg-type]
                    self._flush_lost(t)
                elif kind == "scrape_failed":
                    self._scrape_failed(*obj)  # type: ignore[misc]
                elif kind == "node_gc":
                    node: Node = obj  # type: ignore[assignment]
                    self.fleet.node_gc(node, t)
                else:
                    if i >= n and self._outstanding == 0 and cfg.end_s is None:
                        # A sample ends the run (every 5 s from 0), whatever the autoscaler's
                        # or the scrapes' phase; a scrape still runs, a read no longer does.
                        if kind == "autoscale":
                            continue
                        if kind == "sample":
                            break
                    if kind == "scrape":
                        self._scrape(t)
                        self._schedule(t + cfg.scrape_interval_s, "scrape", None)
                    elif kind == "autoscale":
                        self._autoscale(t)
                        self._schedule(t + self.autoscaler.interval_s, "autoscale", None)
                    else:
                        self._sample(t)
                        self._schedule(t + cfg.sample_interval_s, "sample", None)
            elif i < n:
                if next_arrival > end_s:
                    break
                self.now = next_arrival
                self._arrive(i, next_arrival)
                i += 1
            else:
                break
        self._fail([r for r in self.requests if r.done < 0], self.now)  # cut off by end_s
        return self._result(self.now)

    def _result(self, end: float) -> SimResult:
        reqs = self.requests
        ok = np.array([not r.failed for r in reqs], dtype=bool)
        arrival = np.array([r.arrival for r in reqs], dtype=float)
        first = np.array([r.first_token for r in reqs], dtype=float)
        last = np.array([r.last_token for r in reqs], dtype=float)
        out = np.array([r.out for r in reqs], dtype=float)
        done = np.array([r.done for r in reqs], dtype=float)
        nan = np.full(len(reqs), np.nan)
        ttft = np.where(ok, first - arrival, nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(ok & (out > 1), (last - first) / (out - 1), nan)
        e2e = np.where(ok, done - arrival, nan)
        fleet = self.fleet
        gpus_per_slot = self.cfg.fleet.gpus_per_node / self.cfg.fleet.slots_per_node
        node_hours = sum(((nd.gone_s if nd.gone_s is not None else end) - nd.created_s)
                         for nd in fleet.nodes) * self.cfg.fleet.gpus_per_node / 3600
        replica_hours = slot_seconds(fleet, end) * gpus_per_slot / 3600
        starts = [ReplicaStart(r.rid, r.zone, r.created_s, r.ready_s, r.warm) for r in fleet.replicas
                  if r.state != STARTING and r.ready_s <= (r.gone_s if r.gone_s is not None else end)]
        return SimResult(
            targets=self.cfg.targets, arrival_s=arrival, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, ok=ok,
            replica=np.array([r.replica for r in reqs], dtype=int),
            preemptions=np.array([r.preemptions for r in reqs], dtype=int),
            series={k: np.asarray(v, dtype=float) for k, v in self._series.items()},
            scale_events=self._scale_events, starts=starts, gpu_hours=node_hours,
            replica_gpu_hours=replica_hours, end_s=end,
            extra={"autoscaler_history": getattr(self.autoscaler, "history", None),
                   "zones_lost": list(self._zones_lost),
                   # Replicas that waited for a node no autoscaler launches
                   # (Failover.new_nodes_while_down), whether or not a scale-in removed them later.
                   "unscheduled": fleet.unscheduled, "bound_later": fleet.bound,
                   "drain_cut": fleet.drain_cut, "narrowed_placements": fleet.narrowed,
                   "packed_node_gpu_hours":
                       packed_node_seconds(fleet, end) * self.cfg.fleet.gpus_per_node / 3600},
        )


def simulate(trace: Trace, cfg: SimConfig, router: Router | str = "least-loaded",
             autoscaler: Autoscaler | None = None) -> SimResult:
    """Run `trace` through one deployment; see `Simulation`."""
    return Simulation(trace, cfg, router, autoscaler).run()


__all__ = ["SimConfig", "Simulation", "simulate"]
