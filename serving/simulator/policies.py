"""Autoscalers the simulator runs: the KEDA ScaledObject the toolkit emits, and baselines.

- `KedaAutoscaler(spec)`: the `spec` dict of `serving.autoscaling.Autoscaling.scaled_object_spec`.
  KEDA evaluates the prometheus trigger's query every `pollingInterval`; the HPA it owns runs every
  15 s (its sync period) on a fresh read of the scaler (the poll's own answer when the poll was at
  that instant), with AverageValue semantics (target = `threshold`)
  and the `advanced.horizontalPodAutoscalerConfig.behavior` policies (serving.simulator.hpa).
  A poll fails when Prometheus cannot answer (a metric outage) or the query returns several
  values; an empty, NaN or infinite result is 0 under the prometheus scaler's `ignoreNullValues`
  (default true) and a failure with it false (pkg/scalers/prometheus_scaler.go). Fallback
  as in KEDA 2.20 `pkg/fallback/fallback.go`: every failed read counts and a good one resets the
  count, where a read is KEDA's own poll and, since 2.19, also each metric request of the HPA
  (which queries the scaler afresh and counts on the same counter), so at a 15 s polling interval
  a failing sync counts twice; once failures exceed `fallback.failureThreshold` the HPA is given
  `n x threshold` and so asks for n (still through the behavior policies), n by
  `fallback.behavior`: `fallback.replicas` (static, the default), the Deployment's spec replicas
  (currentReplicas), or the larger or smaller of the two (currentReplicasIfHigher/IfLower).
  Before that a failure leaves the replicas alone.
- `StaticPolicy(n)`: static provisioning.
- `GpuUtilizationHpa`: an HPA on the pods' GPU utilisation (DCGM_FI_DEV_GPU_UTIL, the busy share
  of wall time) with the default behavior, using the resource-metric algorithm of
  `GetResourceReplicas`: on a scale-up, pods that are not ready count as 0 % and a change of
  direction or a ratio within tolerance keeps the current count.
- `Clairvoyant`: a reference no cluster can run, for judging the others: it reads the trace ahead
  and holds, a cold start early, the replicas the coming traffic needs at a replica's sized rate.
- `KnativeKpa`: the Knative Pod Autoscaler (knative/serving `pkg/autoscaler/scaling/autoscaler.go`)
  on in-flight requests (running + waiting) with the defaults of FACTS.md section 7: stable window
  60 s, panic window 6 s, panic when the panic-window demand reaches 200 % of the ready pods,
  target utilisation 70 % of `target_concurrency`, a 2 s tick, scale-down by at most half the ready
  pods per tick, and no scale-down while panicking.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from serving.simulator.hpa import SYNC_PERIOD_S, Behavior, Hpa, average_value_replicas
from serving.simulator.promql import PromQLError, Store, evaluate


class FleetView(Protocol):
    """What an autoscaler may read about the deployment at a decision."""

    store: Store
    spec_replicas: int

    @property
    def status_replicas(self) -> int: ...  # pods that exist and are not terminating

    @property
    def ready_replicas(self) -> int: ...

    def metrics_available(self, now: float) -> bool: ...

    def ready_loads(self) -> list[int]: ...  # running + waiting per ready replica

    def ready_gpu_utilization(self, now: float, window_s: float) -> list[float]: ...


class Autoscaler(Protocol):
    interval_s: float
    min_replicas: int
    max_replicas: int
    # Whether it decides on Prometheus's scrapes (so reads them `SimConfig.autoscale_offset_s`
    # late) rather than on the pods' state at its own instant.
    reads_scrapes: bool

    def decide(self, now: float, view: FleetView) -> int: ...


def _need(spec: dict[str, Any], key: str, kind: type) -> Any:
    value = spec.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"ScaledObject spec.{key}: expected {kind.__name__}, got {value!r}")
    return value


class HpaDriven:
    """A policy whose replica count an HPA decides: a warm start seeds that HPA's history."""

    hpa: Hpa

    def warm(self, replicas: int, now: float = 0.0) -> None:
        """Start as if `replicas` had been held up to `now` (see Hpa.hold)."""
        self.hpa.hold(replicas, now)


FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")


class KedaAutoscaler(HpaDriven):
    """A KEDA ScaledObject with one prometheus trigger, run as KEDA and the HPA would."""

    reads_scrapes = True

    def __init__(self, spec: dict[str, Any], hpa_sync_s: float = SYNC_PERIOD_S) -> None:
        if not isinstance(spec, dict):
            raise ValueError(f"KedaAutoscaler expects a ScaledObject spec mapping, got {type(spec).__name__}")
        self.polling_s = float(spec.get("pollingInterval", 30))
        self.min_replicas = int(spec.get("minReplicaCount", 0))
        self.max_replicas = int(spec.get("maxReplicaCount", 100))
        if self.min_replicas < 1:
            raise ValueError("ScaledObject minReplicaCount 0 (scale to zero) is not simulated; use >= 1")
        triggers = _need(spec, "triggers", list)
        if len(triggers) != 1 or triggers[0].get("type") != "prometheus":
            raise ValueError(f"ScaledObject spec.triggers: expected one prometheus trigger, got {triggers!r}")
        trigger = triggers[0]
        if trigger.get("metricType", "AverageValue") != "AverageValue":
            raise ValueError(f"prometheus trigger metricType {trigger.get('metricType')!r}: "
                             f"only AverageValue is simulated")
        meta = _need(trigger, "metadata", dict)
        self.query = _need(meta, "query", str)
        try:
            self.threshold = float(meta["threshold"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"prometheus trigger metadata.threshold must be a number, got "
                             f"{meta.get('threshold')!r}") from err
        if self.threshold <= 0:
            raise ValueError(f"prometheus trigger threshold must be positive, got {self.threshold}")
        self.ignore_null = str(meta.get("ignoreNullValues", "true")).lower() == "true"
        fallback = spec.get("fallback")
        self.fallback: tuple[int, int] | None = None
        self.fallback_behavior = "static"
        if fallback is not None:
            self.fallback = (int(fallback["failureThreshold"]), int(fallback["replicas"]))
            self.fallback_behavior = str(fallback.get("behavior", "static"))
            if self.fallback_behavior not in FALLBACK_BEHAVIORS:
                raise ValueError(f"ScaledObject fallback.behavior {self.fallback_behavior!r}: expected one "
                                 f"of {', '.join(FALLBACK_BEHAVIORS)}")
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
        self.hpa = Hpa(self.min_replicas, self.max_replicas, Behavior.from_spec(behavior))
        self.interval_s = hpa_sync_s
        self._next_poll = 0.0
        self._last: float | None = None  # the latest poll's value, None when it failed
        self.failures = 0
        self.history: list[tuple[float, float | None, int]] = []  # (time, metric given to the HPA, replicas)

    def poll(self, now: float, view: FleetView) -> float | None:
        """One KEDA poll of the trigger: the metric value, or None on failure."""
        if not view.metrics_available(now):
            return None
        try:
            result = evaluate(self.query, view.store, now)
        except PromQLError:
            return None
        if isinstance(result, dict):
            if not result:
                return 0.0 if self.ignore_null else None
            if len(result) > 1:
                return None  # KEDA: "prometheus query returned multiple elements"
            result = next(iter(result.values()))
        if not math.isfinite(result):  # KEDA: NaN or Inf is 0 when null values are ignored
            return 0.0 if self.ignore_null else None
        return result

    def _count(self, read: float | None) -> None:
        self.failures = 0 if read is not None else self.failures + 1

    def _fallback_replicas(self, current: int) -> int:
        assert self.fallback is not None
        fixed = self.fallback[1]
        return {"static": fixed, "currentReplicas": current, "currentReplicasIfHigher": max(current, fixed),
                "currentReplicasIfLower": min(current, fixed)}[self.fallback_behavior]

    def decide(self, now: float, view: FleetView) -> int:
        polled = now >= self._next_poll - 1e-9
        if polled:
            self._last = self.poll(now, view)
            self._count(self._last)
            self._next_poll = now + self.polling_s
        # The HPA's metric request reads the scaler afresh (the same instant's answer when the poll
        # was now) and, since KEDA 2.19, counts its failure too.
        metric = self._last if polled else self.poll(now, view)
        self._count(metric)
        if metric is None and self.fallback is not None and self.failures > self.fallback[0]:
            metric = self._fallback_replicas(view.spec_replicas) * self.threshold
        desired = (None if metric is None
                   else average_value_replicas(metric, self.threshold, view.status_replicas))
        replicas = self.hpa.reconcile(now, view.spec_replicas, desired)
        self.history.append((now, metric, replicas))
        return replicas


@dataclass
class StaticPolicy:
    reads_scrapes: ClassVar[bool] = False  # never decides
    replicas: int
    interval_s: float = math.inf

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"StaticPolicy needs at least one replica, got {self.replicas}")

    @property
    def min_replicas(self) -> int:
        return self.replicas

    @property
    def max_replicas(self) -> int:
        return self.replicas

    def decide(self, now: float, view: FleetView) -> int:
        return self.replicas


@dataclass
class GpuUtilizationHpa(HpaDriven):
    # As simulated it reads the engines at its instant; a cluster's would read DCGM's exporter
    # through Prometheus, late as KEDA does (not modelled).
    reads_scrapes: ClassVar[bool] = False
    min_replicas: int
    max_replicas: int
    target_utilization: float = 0.7  # share of time busy, as the HPA's averageUtilization / 100
    interval_s: float = SYNC_PERIOD_S
    tolerance: float = 0.1
    hpa: Hpa = field(init=False)

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1:
            raise ValueError(f"target_utilization must be in (0, 1], got {self.target_utilization}")
        self.hpa = Hpa(self.min_replicas, self.max_replicas, Behavior())

    def decide(self, now: float, view: FleetView) -> int:
        utils = view.ready_gpu_utilization(now, self.interval_s)
        desired: int | None = None
        if utils:
            status = view.status_replicas
            unready = max(0, status - len(utils))
            ratio = sum(utils) / len(utils) / self.target_utilization
            if unready and ratio > 1:
                new_ratio = sum(utils) / ((len(utils) + unready) * self.target_utilization)
                if abs(1 - new_ratio) <= self.tolerance or (ratio > 1) != (new_ratio > 1):
                    desired = status
                else:
                    desired = math.ceil(new_ratio * (len(utils) + unready))
            elif abs(1 - ratio) <= self.tolerance:
                desired = status
            else:
                desired = math.ceil(ratio * len(utils))
        return self.hpa.reconcile(now, view.spec_replicas, desired)


@dataclass
class KnativeKpa:
    reads_scrapes: ClassVar[bool] = False  # the pods' concurrency at its instant
    min_replicas: int
    max_replicas: int
    target_concurrency: float  # in-flight requests a pod is meant to hold
    target_utilization: float = 0.7
    stable_window_s: float = 60.0
    panic_window_s: float = 6.0
    panic_threshold: float = 2.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    interval_s: float = 2.0
    _samples: deque[tuple[float, float]] = field(default_factory=deque)
    _panic_since: float | None = None
    _panic_max: int = 0

    def __post_init__(self) -> None:
        if self.target_concurrency <= 0 or not 0 < self.target_utilization <= 1:
            raise ValueError("KnativeKpa expects target_concurrency > 0 and target_utilization in (0, 1]")
        if not 0 < self.min_replicas <= self.max_replicas:
            raise ValueError(f"KnativeKpa expects 0 < min_replicas <= max_replicas, got "
                             f"{self.min_replicas}, {self.max_replicas}")

    def warm(self, replicas: int, now: float = 0.0) -> None:
        """Start as if `replicas` pods had each held the target concurrency up to `now`: the
        stable window's average then asks for `replicas` until real samples replace it (a fresh
        KPA's window holds only the first sample, of a fleet that has served nothing yet)."""
        target = self.target_concurrency * self.target_utilization
        steps = int(self.stable_window_s // self.interval_s)
        # The window is (now - stable, now] and the first decision adds its own sample at `now`.
        for i in range(steps - 1, 0, -1):
            self._samples.append((now - i * self.interval_s, replicas * target))

    def _average(self, now: float, window: float) -> float:
        values = [v for t, v in self._samples if t > now - window]
        return sum(values) / len(values) if values else 0.0

    def decide(self, now: float, view: FleetView) -> int:
        self._samples.append((now, float(sum(view.ready_loads()))))
        while self._samples and self._samples[0][0] <= now - self.stable_window_s:
            self._samples.popleft()
        ready = max(1, view.ready_replicas)
        target = self.target_concurrency * self.target_utilization
        stable = math.ceil(self._average(now, self.stable_window_s) / target)
        panic = math.ceil(self._average(now, self.panic_window_s) / target)
        up_limit = math.ceil(self.max_scale_up_rate * ready)
        down_limit = math.floor(ready / self.max_scale_down_rate)
        over = panic / ready >= self.panic_threshold
        if over:
            self._panic_since = now
        elif self._panic_since is not None and self._panic_since + self.stable_window_s <= now:
            self._panic_since = None
            self._panic_max = 0
        desired = min(max(stable, down_limit), up_limit)
        if self._panic_since is not None:
            # Panic mode never scales down: hold the largest panic-window demand seen.
            self._panic_max = max(self._panic_max, min(max(panic, down_limit), up_limit), view.spec_replicas)
            desired = self._panic_max
        return min(max(desired, self.min_replicas), self.max_replicas)


@dataclass
class Clairvoyant:
    """Perfect foresight of the arrivals, a reference for GPU-hours (not a bound): at each step it asks
    for the replicas that the busiest `window_s` starting within the next `lead_s` (the cold
    start, so a replica asked for now is ready before that traffic) needs at `replica_qps`; with
    `zones` > 1, times Z / (Z - 1), so the survivors of one lost zone still carry it. It reacts to
    nothing it observes: what it spends is what a policy with this sizing and cold start needs
    when it has no lag of its own."""
    reads_scrapes: ClassVar[bool] = False  # the trace itself

    min_replicas: int
    max_replicas: int
    arrival_s: np.ndarray
    replica_qps: float
    lead_s: float
    zones: int = 1
    window_s: float = 60.0
    interval_s: float = SYNC_PERIOD_S
    _need: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.replica_qps <= 0 or self.lead_s < 0 or self.zones < 1 or self.window_s <= 0:
            raise ValueError("Clairvoyant expects replica_qps > 0, lead_s >= 0, zones >= 1, window_s > 0")
        arrivals = np.asarray(self.arrival_s, dtype=float)
        end = float(arrivals[-1]) if len(arrivals) else 0.0
        grid = np.arange(0.0, end + self.interval_s, self.interval_s)
        rate = (np.searchsorted(arrivals, grid + self.window_s, "left")
                - np.searchsorted(arrivals, grid, "left")) / self.window_s
        ahead = math.ceil(self.lead_s / self.interval_s)
        # The busiest window among those starting in [t, t + lead]: a sliding maximum forward.
        padded = np.concatenate([rate, np.zeros(ahead)])
        peak = np.max(np.lib.stride_tricks.sliding_window_view(padded, ahead + 1), axis=1)[:len(rate)]
        need = np.ceil(peak / self.replica_qps - 1e-9)
        if self.zones > 1:
            need = np.ceil(need * self.zones / (self.zones - 1) - 1e-9)
        self._need = np.clip(need, self.min_replicas, self.max_replicas).astype(int)

    def decide(self, now: float, view: FleetView) -> int:
        i = min(len(self._need) - 1, max(0, int(now // self.interval_s)))
        return int(self._need[i])


__all__ = ["Autoscaler", "Clairvoyant", "FleetView", "GpuUtilizationHpa", "KedaAutoscaler", "KnativeKpa",
           "StaticPolicy"]
