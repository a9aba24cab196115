"""What a simulation run produces: per-request latencies, their percentiles and attainment, time
series of the fleet, scaling events and GPU-hours.

Definitions:
- TTFT: arrival at the router to the first token; TPOT: the request's mean inter-token time,
  (last token - first token) / (tokens - 1), undefined (NaN) for one-token outputs; e2e: arrival
  to the last token.
- A failed request (lost with its replica, rejected as too long, or arriving while no replica is
  ready) has NaN latencies and counts as a miss.
- Attainment: the share of *all* requests that succeeded with TTFT <= the TTFT target and TPOT <=
  the TPOT target (a one-token request meets the TPOT target by definition).
- Percentiles are over successful requests (numpy's linear interpolation).
- GPU-hours: nodes from creation to removal (what the cloud bills) x GPUs per node; replica GPU-hours
  count only the GPUs the replicas hold, from scale-up decision to removal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from serving.simulator.config import Targets


@dataclass(frozen=True)
class ReplicaStart:
    rid: int
    zone: str
    decided_s: float
    ready_s: float
    warm: bool

    @property
    def time_to_ready_s(self) -> float:
        return self.ready_s - self.decided_s


@dataclass(eq=False)
class SimResult:
    targets: Targets
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    ok: np.ndarray
    replica: np.ndarray
    preemptions: np.ndarray
    series: dict[str, np.ndarray]
    scale_events: list[tuple[float, int, int]]
    starts: list[ReplicaStart]
    gpu_hours: float
    replica_gpu_hours: float
    end_s: float
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return len(self.arrival_s)

    @property
    def failed(self) -> int:
        return int((~self.ok).sum())

    def percentile(self, metric: str, q: float) -> float:
        values = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s}[metric]
        values = values[self.ok & ~np.isnan(values)]
        return float(np.percentile(values, q)) if len(values) else float("nan")

    def attained(self) -> np.ndarray:
        tpot_ok = np.isnan(self.tpot_s) | (self.tpot_s <= self.targets.tpot_s + 1e-12)
        return self.ok & (self.ttft_s <= self.targets.ttft_s + 1e-12) & tpot_ok

    @property
    def attainment(self) -> float:
        return float(self.attained().mean()) if self.requests else float("nan")

    def time_to_scale(self) -> dict[str, float]:
        """Seconds from a scale-up decision to the replica being ready, after t = 0."""
        times = [s.time_to_ready_s for s in self.starts if s.decided_s > 0]
        if not times:
            return {"count": 0, "mean_s": float("nan"), "max_s": float("nan")}
        return {"count": len(times), "mean_s": float(np.mean(times)), "max_s": float(np.max(times))}

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"requests": self.requests, "failed": self.failed,
                                  "attainment": round(self.attainment, 6)}
        for metric in ("ttft", "tpot", "e2e"):
            for q in (50, 95, 99):
                out[f"{metric}_p{q}_s"] = round(self.percentile(metric, q), 6)
        out["preemptions"] = int(self.preemptions.sum())
        out["scale_events"] = len(self.scale_events)
        out["time_to_scale"] = self.time_to_scale()
        out["max_ready_replicas"] = int(self.series["ready"].max()) if len(self.series["ready"]) else 0
        out["gpu_hours"] = round(self.gpu_hours, 4)
        out["replica_gpu_hours"] = round(self.replica_gpu_hours, 4)
        out["end_s"] = round(self.end_s, 3)
        return out


__all__ = ["ReplicaStart", "SimResult"]
