"""The Kubernetes HorizontalPodAutoscaler's replica algorithm with autoscaling/v2 `behavior`.

Follows kubernetes `pkg/controller/podautoscaler/horizontal.go` and `replica_calculator.go`:
- external metric with an AverageValue target (what KEDA creates for a prometheus trigger):
  ratio = metric / (target x status replicas); within `tolerance` (0.1, the
  `--horizontal-pod-autoscaler-tolerance` default) nothing changes, else desired =
  ceil(metric / target) (`GetExternalPerPodMetricReplicas`);
- spec replicas above max go to max and below min go to min without looking at the metric;
  a metric error leaves the replicas alone;
- stabilisation (`stabilizeRecommendationWithBehaviors`): the recommendation is clamped between
  the minimum of the recommendations of the last scaleUp window and the maximum of those of the
  last scaleDown window (the current one included);
- rate limits (`calculateScaleUpLimitWithScalingRules` / `...ScaleDownLimit...`): each policy
  allows, from the replicas at the start of its period (current - added + removed in the last
  `periodSeconds`), `+value` pods or `x(1 + value%)` (rounded up) when scaling up, `-value` pods
  or `x(1 - value%)` (truncated) when scaling down; `selectPolicy: Max` takes the largest change,
  `Min` the smallest, `Disabled` none; the result is then bounded by min/max replicas.
Defaults when `behavior` leaves them out (autoscaling/v2 API defaults, FACTS.md section 7): scale up
with no stabilisation, Max of 4 pods or 100% per 15 s; scale down stabilised 300 s, 100% per 15 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.1
SYNC_PERIOD_S = 15.0


@dataclass(frozen=True)
class ScalingPolicy:
    type: str  # "Pods" or "Percent"
    value: int
    period_s: float

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent") or self.value <= 0 or self.period_s <= 0:
            raise ValueError(f"HPA policy expects type Pods|Percent, value > 0, periodSeconds > 0, "
                             f"got {self}")


@dataclass(frozen=True)
class ScalingRules:
    stabilization_s: float
    select: str  # "Max", "Min" or "Disabled"
    policies: tuple[ScalingPolicy, ...]

    def __post_init__(self) -> None:
        if self.select not in ("Max", "Min", "Disabled"):
            raise ValueError(f"HPA selectPolicy expects Max, Min or Disabled, got {self.select!r}")
        if self.stabilization_s < 0:
            raise ValueError(f"HPA stabilizationWindowSeconds must be >= 0, got {self.stabilization_s}")


DEFAULT_SCALE_UP = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN = ScalingRules(300, "Max", (ScalingPolicy("Percent", 100, 15),))


def _rules(spec: Any, default: ScalingRules, where: str) -> ScalingRules:
    if spec is None:
        return default
    if not isinstance(spec, dict):
        raise ValueError(f"HPA behavior.{where} must be a mapping, got {spec!r}")
    policies = spec.get("policies")
    parsed = default.policies if policies is None else tuple(
        ScalingPolicy(str(p["type"]), int(p["value"]), float(p["periodSeconds"])) for p in policies)
    window = spec.get("stabilizationWindowSeconds")
    return ScalingRules(default.stabilization_s if window is None else float(window),
                        str(spec.get("selectPolicy", "Max")), parsed)


@dataclass(frozen=True)
class Behavior:
    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> Behavior:
        """From an autoscaling/v2 `behavior` mapping (missing parts take the API defaults)."""
        spec = spec or {}
        return cls(_rules(spec.get("scaleUp"), DEFAULT_SCALE_UP, "scaleUp"),
                   _rules(spec.get("scaleDown"), DEFAULT_SCALE_DOWN, "scaleDown"))


def average_value_replicas(metric: float, target: float, status_replicas: int,
                           tolerance: float = TOLERANCE) -> int:
    """Replicas an external AverageValue metric asks for (before behavior and min/max)."""
    if target <= 0:
        raise ValueError(f"HPA AverageValue target must be positive, got {target}")
    if status_replicas > 0 and abs(1.0 - metric / (target * status_replicas)) <= tolerance:
        return status_replicas
    return math.ceil(metric / target - 1e-12)


@dataclass
class Hpa:
    """One HPA's state: recommendations and scale events, for stabilisation and rate limits."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior = field(default_factory=Behavior)
    _recs: list[tuple[float, int]] = field(default_factory=list)
    _up: list[tuple[float, int]] = field(default_factory=list)
    _down: list[tuple[float, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.min_replicas <= self.max_replicas:
            raise ValueError(f"HPA expects 0 < minReplicas <= maxReplicas, got {self.min_replicas}, "
                             f"{self.max_replicas}")

    def hold(self, replicas: int, now: float) -> None:
        """Record `replicas` as the recommendation at `now`, as an HPA that has held that count
        has it in its scale-down window. A replay that starts a fleet warm needs this: a fresh
        HPA's window holds only its first recommendation, read off metrics that have no history
        yet (a rate over a window with no samples), and drops a warm fleet to its floor at once."""
        self._recs.append((now, replicas))

    def reconcile(self, now: float, spec_replicas: int, desired: int | None) -> int:
        """The new spec replicas, given the metric's raw desired count (None: metric error)."""
        if spec_replicas > self.max_replicas:
            new = self.max_replicas
        elif spec_replicas < self.min_replicas:
            new = self.min_replicas
        elif desired is None:
            return spec_replicas
        else:
            new = self._rate_limited(now, spec_replicas, self._stabilized(now, spec_replicas, desired))
        if new != spec_replicas:
            (self._up if new > spec_replicas else self._down).append((now, abs(new - spec_replicas)))
        return new

    def _stabilized(self, now: float, current: int, desired: int) -> int:
        up_cut = now - self.behavior.scale_up.stabilization_s
        down_cut = now - self.behavior.scale_down.stabilization_s
        up = down = desired
        for t, rec in self._recs:
            if t > up_cut:
                up = min(up, rec)
            if t > down_cut:
                down = max(down, rec)
        keep = min(up_cut, down_cut)
        self._recs = [(t, r) for t, r in self._recs if t > keep]
        self._recs.append((now, desired))
        return min(max(current, up), down)

    @staticmethod
    def _changed(events: list[tuple[float, int]], now: float, period: float) -> int:
        return sum(c for t, c in events if t > now - period)

    def _period_start(self, now: float, current: int, period: float) -> int:
        """Replicas at the start of the policy's period: current - added + removed since."""
        return current - self._changed(self._up, now, period) + self._changed(self._down, now, period)

    def _rate_limited(self, now: float, current: int, desired: int) -> int:
        if desired > current:
            rules = self.behavior.scale_up
            if rules.select == "Disabled":
                limit = current
            else:
                proposals = []
                for p in rules.policies:
                    start = self._period_start(now, current, p.period_s)
                    proposals.append(start + p.value if p.type == "Pods"
                                     else math.ceil(start * (1 + p.value / 100)))
                limit = max(proposals) if rules.select == "Max" else min(proposals)
            limit = max(limit, current)
            return min(desired, limit, self.max_replicas)
        if desired < current:
            rules = self.behavior.scale_down
            if rules.select == "Disabled":
                limit = current
            else:
                proposals = []
                for p in rules.policies:
                    start = self._period_start(now, current, p.period_s)
                    proposals.append(start - p.value if p.type == "Pods"
                                     else int(start * (1 - p.value / 100)))
                limit = min(proposals) if rules.select == "Max" else max(proposals)
            limit = min(limit, current)
            return max(desired, limit, self.min_replicas)
        return desired


__all__ = ["DEFAULT_SCALE_DOWN", "DEFAULT_SCALE_UP", "SYNC_PERIOD_S", "TOLERANCE", "Behavior", "Hpa",
           "ScalingPolicy", "ScalingRules", "average_value_replicas"]
