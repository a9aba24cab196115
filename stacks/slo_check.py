"""The figures of one simulated run and the SLO checklist (DESIGN.md, `rtip simulate`).

Figures: p50/p95/p99 TTFT and TPOT over the requests served, attainment (the share of all
requests served within both targets), ready replicas over time, time from a scale-up decision to
a ready replica, GPU utilisation (busy share of the ready replicas' wall time) and GPU-hours (the
replicas' GPU share x hours from scale-up decision to removal; `node_gpu_hours`: whole nodes
opened for this model alone, an upper bound when the pool's nodes carry other models too).

Checklist, each item PASS or FAIL (SKIP only for the zone loss when none was simulated):
1. tail within SLO at peak and during scale-up: at the tier's percentile, TTFT and TPOT of the
   requests arriving in the trace's busiest minute and of those arriving while a scale-up is under
   way (decision to the last new replica ready), each within its target. A failed request counts
   as infinitely slow. Requests in the zone-loss window are judged by item 4 instead.
2. a cold-start replica ready inside the autoscale window: the plan holds `headroom` x peak above
   demand so traffic can grow while a new replica starts (stacks/model_plan.py). The autoscale
   window is the shortest time in which the trace's five-minute rate grows by that headroom; the
   slowest scale-up of the run (the plan's cold-start budget when the run had none) must fit in it.
3. GPU utilisation above target at steady state: mean utilisation over the samples with no
   replica starting or draining, no scale event in the last minute and no zone down; target 70 %
   by default (the utilisation target of Knative's KPA, FACTS.md section 7).
4. zone loss served within the error budget: of the requests arriving from the loss until its
   replacements can be ready (`zone_loss_window_s`: the surviving zones carry the load until the
   lost pods are evicted, then for a cold start), plus those failed in flight, the share failed
   or missing a target is at most 1 - percentile/100 x availability (the latency SLO's allowance
   and the availability's). A loss less than that window before the trace ends is judged on what
   arrives before the end, and the item says how much of the window that was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from serving.simulator import SimResult, Trace, ZoneFailure
from stacks.simulation import Deployment

MINUTE_S = 60.0
RATE_WINDOW_S = 300.0
UTIL_TARGET = 0.7
_GRID_S = 5.0
WHOLE_TOLERANCE_S = 1e-6  # a window ending on the trace's last arrival is whole


@dataclass(frozen=True)
class Item:
    name: str
    status: str  # PASS | FAIL | SKIP
    detail: str
    figures: dict[str, float | int | None]

    def to_json(self) -> dict[str, object]:
        return {"item": self.name, "status": self.status, "detail": self.detail, "figures": self.figures}


def _num(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None


def tail(result: SimResult, mask: np.ndarray, q: float) -> tuple[float, float, int]:
    """(TTFT, TPOT) at percentile q of the requests in `mask`, a failed one counting as infinite."""
    n = int(mask.sum())
    if not n:
        return math.nan, math.nan, 0
    ttft = np.where(result.ok, result.ttft_s, np.inf)[mask]
    tpot = np.where(result.ok, result.tpot_s, np.inf)[mask]
    tpot = tpot[~np.isnan(tpot)]
    t1 = float(np.percentile(ttft, q, method="inverted_cdf"))
    t2 = float(np.percentile(tpot, q, method="inverted_cdf")) if len(tpot) else 0.0
    return t1, t2, n


def zone_loss_window_s(dep: Deployment) -> float:
    """How long a zone loss is judged: the lost pods count for the ReplicaSet until they are
    evicted (`Failover.evict_s`), and their replacements start only then and take a cold start
    on a new node; the surviving zones carry the load all that time."""
    return dep.plan.cold_start.total_s + dep.fleet.failover.evict_s


def zone_loss_budget(dep: Deployment) -> float:
    """The share of the requests in a zone-loss window that may fail or miss a target: the latency
    SLO's allowance and the availability's, 1 - percentile/100 x availability."""
    return 1 - dep.percentile / 100 * dep.availability


def last_whole_window_start(arrival_s: np.ndarray, window_s: float) -> float:
    """The latest moment from which a `window_s` window ends by the trace's last arrival: a zone
    lost later is judged on a window the trace's end cuts, where the requests killed in flight
    weigh most (benchmarks/sweep_edge.py)."""
    return float(arrival_s[-1]) - window_s + WHOLE_TOLERANCE_S


def busiest_minute(arrival_s: np.ndarray, latest_start_s: float = math.inf) -> tuple[float, float]:
    """The minute from an arrival holding the most arrivals, starting no later than
    `latest_start_s` (its arrivals are counted whole either way)."""
    starts = int(np.searchsorted(arrival_s, latest_start_s, side="right"))
    if not starts:
        return 0.0, 0.0
    ends = np.searchsorted(arrival_s, arrival_s[:starts] + MINUTE_S, side="left")
    i = int(np.argmax(ends - np.arange(starts)))
    return float(arrival_s[i]), float(arrival_s[i]) + MINUTE_S


def scale_up_windows(result: SimResult, cold_full_s: float) -> list[tuple[float, float]]:
    """[decision, last new replica ready) per autoscaler scale-up, merged."""
    spans = []
    for t, old, new in result.scale_events:
        if new > old:
            ready = [s.ready_s for s in result.starts if abs(s.decided_s - t) < 1e-9]
            spans.append((t, max(ready) if ready else min(result.end_s, t + cold_full_s)))
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def autoscale_window_s(trace: Trace, headroom_qps: float) -> float:
    """Shortest time in which the trace's five-minute rate grows by more than `headroom_qps`
    (inf when it never does), on a 5 s grid. Five minutes (the HPA's default scale-down window) smooth
    the Poisson noise of a low rate, which a one-minute rate would read as growth."""
    t = trace.arrival_s
    if len(t) < 2:
        return math.inf
    grid = np.arange(0.0, max(_GRID_S, t[-1] - RATE_WINDOW_S + _GRID_S), _GRID_S)
    rate = (np.searchsorted(t, grid + RATE_WINDOW_S) - np.searchsorted(t, grid)) / RATE_WINDOW_S
    for lag in range(1, len(rate)):
        if float(np.max(rate[lag:] - rate[:-lag])) > headroom_qps + 1e-9:
            return lag * _GRID_S
    return math.inf


def figures(result: SimResult, dep: Deployment) -> dict[str, object]:
    s = result.series
    ready = s["ready"]
    out: dict[str, object] = {"requests": result.requests, "failed": result.failed,
                              "attainment": _num(result.attainment)}
    for metric in ("ttft", "tpot"):
        for q in (50, 95, 99):
            out[f"{metric}_p{q}_s"] = _num(result.percentile(metric, q))
    out["replicas"] = {"min": int(ready.min()) if len(ready) else 0,
                       "mean": _num(float(ready.mean())) if len(ready) else 0.0,
                       "max": int(ready.max()) if len(ready) else 0}
    tts = result.time_to_scale()
    out["time_to_scale"] = {"count": tts["count"], "mean_s": _num(tts["mean_s"]), "max_s": _num(tts["max_s"])}
    util = s["gpu_util"]
    weights = ready + s["draining"]
    out["gpu_utilization"] = _num(float((util * weights).sum() / weights.sum())) if weights.sum() else None
    per_slot = dep.fleet.gpus_per_node / dep.fleet.slots_per_node
    out["gpu_hours"] = _num(result.replica_gpu_hours / per_slot * dep.gpu_share)
    out["node_gpu_hours"] = _num(result.gpu_hours)
    # The same replicas on the fewest nodes a zone, each freed the moment it empties.
    out["packed_node_gpu_hours"] = _num(float(result.extra.get("packed_node_gpu_hours", math.nan)))  # type: ignore[arg-type]
    out["preemptions"] = int(result.preemptions.sum())
    # Generations a scaled-in replica still ran when its drain bound came (the preStop hook's).
    out["drain_cut"] = int(result.extra.get("drain_cut", 0))  # type: ignore[call-overload]
    # Replicas placed while a zone up held no node of the model, so was no domain of its spread.
    out["narrowed_placements"] = int(result.extra.get("narrowed_placements", 0))  # type: ignore[call-overload]
    out["duration_s"] = _num(result.end_s)
    out["scale_events"] = [{"t_s": round(t, 3), "from": a, "to": b} for t, a, b in result.scale_events]
    out["series"] = {k: [round(float(v), 4) for v in s[k]]
                     for k in ("t", "ready", "starting", "waiting", "running", "gpu_util")}
    out["latency_series"] = latency_series(result)
    out["worst_minute"] = worst_minute(out["latency_series"], dep.targets.ttft_s, dep.targets.tpot_s)  # type: ignore[arg-type]
    return out


def latency_series(result: SimResult, bin_s: float = MINUTE_S) -> dict[str, list[float | None]]:
    """Per minute of arrivals: p50 / p99 TTFT and p99 TPOT of the requests served."""
    arrival = result.arrival_s
    out: dict[str, list[float | None]] = {"t": [], "ttft_p50_s": [], "ttft_p99_s": [], "tpot_p99_s": []}
    if not len(arrival):
        return out
    bins = np.floor(arrival / bin_s).astype(int)
    for b in range(int(bins.max()) + 1):
        mask = (bins == b) & result.ok
        ttft = result.ttft_s[mask]
        tpot = result.tpot_s[mask]
        tpot = tpot[~np.isnan(tpot)]
        out["t"].append(b * bin_s)
        out["ttft_p50_s"].append(_num(float(np.percentile(ttft, 50))) if len(ttft) else None)
        out["ttft_p99_s"].append(_num(float(np.percentile(ttft, 99))) if len(ttft) else None)
        out["tpot_p99_s"].append(_num(float(np.percentile(tpot, 99))) if len(tpot) else None)
    return out


def worst_minute(series: dict[str, list[float | None]], ttft_s: float, tpot_s: float) -> dict[str, object]:
    """The clock minute whose p99 stands furthest over (or least under) the tier, from
    `latency_series`, and how many minutes break it. The checklist judges the busiest minute by
    arrivals; a sharper burst inside a quieter minute can break the tier where it does not."""
    ratios = [max((a or 0.0) / ttft_s, (b or 0.0) / tpot_s)
              for a, b in zip(series["ttft_p99_s"], series["tpot_p99_s"], strict=True)]
    if not ratios:
        return {"t_s": None, "ttft_p99_s": None, "tpot_p99_s": None, "minutes_over": 0, "minutes": 0}
    i = max(range(len(ratios)), key=ratios.__getitem__)
    return {"t_s": series["t"][i], "ttft_p99_s": series["ttft_p99_s"][i],
            "tpot_p99_s": series["tpot_p99_s"][i], "minutes_over": sum(r > 1.0 for r in ratios),
            "minutes": len(ratios)}


def _in(arrival: np.ndarray, spans: list[tuple[float, float]]) -> np.ndarray:
    mask = np.zeros(len(arrival), dtype=bool)
    for a, b in spans:
        mask |= (arrival >= a) & (arrival < b)
    return mask


def _lost_zone(result: SimResult, failure: ZoneFailure) -> str:
    """The zone the run really lost (a FULLEST failure picks it when it fails)."""
    lost = [zone for at, zone in result.extra.get("zones_lost") or [] if at == failure.at_s]  # type: ignore[union-attr]
    return lost[0] if lost else failure.zone


def checklist(result: SimResult, dep: Deployment, trace: Trace, zone_loss: ZoneFailure | None,
              util_target: float = UTIL_TARGET) -> list[Item]:
    arrival = result.arrival_s
    q = dep.percentile
    ttft_t, tpot_t = dep.targets.ttft_s, dep.targets.tpot_s
    cold = dep.plan.cold_start.total_s
    zone_window = zone_loss_window_s(dep)
    zone_span = [(zone_loss.at_s, zone_loss.at_s + zone_window)] if zone_loss else []
    in_flight = ~result.ok & (arrival < zone_loss.at_s) if zone_loss else np.zeros(len(arrival), bool)
    outside_zone = ~_in(arrival, zone_span) & ~in_flight
    items = []

    # 1. tail at peak and during scale-up
    peak = busiest_minute(arrival[outside_zone])
    ups = scale_up_windows(result, dep.fleet.cold_start.full_s)
    p_ttft, p_tpot, p_n = tail(result, _in(arrival, [peak]) & outside_zone, q)
    u_ttft, u_tpot, u_n = tail(result, _in(arrival, ups) & outside_zone, q)
    ok_peak = p_n == 0 or (p_ttft <= ttft_t and p_tpot <= tpot_t)  # 0: inside the zone-loss window
    ok_up = u_n == 0 or (u_ttft <= ttft_t and u_tpot <= tpot_t)
    during = (f"during scale-up ({len(ups)} window(s), {u_n} requests) TTFT {u_ttft:.3f} s, "
              f"TPOT {u_tpot:.3f} s" if u_n else "no scale-up under traffic")
    items.append(Item(
        f"p{q:g} within SLO at peak and during scale-up", "PASS" if ok_peak and ok_up else "FAIL",
        f"targets TTFT {ttft_t:g} s, TPOT {tpot_t:g} s; " + (
            f"at peak ({p_n} requests from t={peak[0]:.0f} s) TTFT {p_ttft:.3f} s, TPOT {p_tpot:.3f} s"
            if p_n else "the peak minute falls in the zone-loss window (item 4)") + f"; {during}",
        {"peak_ttft_s": _num(p_ttft), "peak_tpot_s": _num(p_tpot), "peak_requests": p_n,
         "scale_up_ttft_s": _num(u_ttft), "scale_up_tpot_s": _num(u_tpot), "scale_up_requests": u_n}))

    # 2. cold start inside the autoscale window
    headroom_qps = dep.plan.headroom * dep.plan.peak_qps
    window = autoscale_window_s(trace, headroom_qps)
    tts = result.time_to_scale()
    measured = tts["count"] > 0
    slowest = tts["max_s"] if measured else cold
    items.append(Item(
        "cold-start replica ready inside the autoscale window", "PASS" if slowest <= window else "FAIL",
        f"{'slowest scale-up of the run' if measured else 'cold-start budget (no scale-up in the run)'} "
        f"{slowest:.0f} s; the trace outgrows the {dep.plan.headroom:.0%} headroom "
        f"({headroom_qps:.2f} req/s) " + (f"in {window:.0f} s" if math.isfinite(window) else "never"),
        {"time_to_ready_s": _num(slowest), "autoscale_window_s": _num(window),
         "headroom_qps": _num(headroom_qps)}))

    # 3. utilisation at steady state
    s = result.series
    t = s["t"]
    quiet = np.ones(len(t), dtype=bool)
    for ev_t, _, _ in result.scale_events:
        quiet &= ~((t >= ev_t) & (t < ev_t + MINUTE_S))
    if zone_loss:
        quiet &= t < zone_loss.at_s
    steady = quiet & (s["starting"] == 0) & (s["draining"] == 0) & (s["ready"] > 0)
    util = float(s["gpu_util"][steady].mean()) if steady.any() else math.nan
    items.append(Item(
        "GPU utilization above target at steady state",
        "PASS" if steady.any() and util >= util_target else "FAIL",
        f"{util:.1%} over {int(steady.sum())} steady samples (target {util_target:.0%})" if steady.any()
        else "no steady-state sample", {"steady_utilization": _num(util), "target": util_target,
                                        "steady_samples": int(steady.sum())}))

    # 4. zone loss within the error budget
    budget = zone_loss_budget(dep)
    if zone_loss is None:
        items.append(Item("zone loss served within the error budget", "SKIP",
                          "no --zone-loss given", {"error_budget": _num(budget)}))
    else:
        judged = _in(arrival, zone_span) | in_flight
        bad = int((judged & ~result.attained()).sum())
        n = int(judged.sum())
        share = bad / n if n else 0.0
        # A cut window's share reads high, so the item says so rather than pass it off as whole.
        seen = min(zone_window, max(0.0, float(trace.arrival_s[-1]) - zone_loss.at_s))
        cut = (f"; the trace ends {seen:.0f} s into that window, so only its first requests are "
               "judged" if zone_loss.at_s > last_whole_window_start(trace.arrival_s, zone_window) else "")
        fo = dep.fleet.failover
        lingers = ("" if fo.instant else f"; its pods picked for {fo.route_s:g} s and replaced from "
                   f"{fo.evict_s:g} s")
        pending = int(result.extra.get("unscheduled", 0))  # type: ignore[call-overload]
        bound = int(result.extra.get("bound_later", 0))  # type: ignore[call-overload]
        if pending:
            lingers += (f"; {pending} replica(s) waited Pending for a node: none launches while the zone "
                        "is down (Karpenter pins new nodes to it; list it in the region's zones_down)")
        if bound:
            lingers += f"; {bound} of them bound later to a slot a removed replica freed"
        items.append(Item(
            "zone loss served within the error budget", "PASS" if share <= budget + 1e-12 else "FAIL",
            f"zone {_lost_zone(result, zone_loss)} lost at {zone_loss.at_s:g} s: {bad} of {n} requests "
            "failed or missed "
            f"a target in the next {zone_window:.0f} s ({share:.2%}; budget {budget:.2%}){lingers}{cut}",
            {"bad": bad, "requests": n, "bad_share": _num(share), "error_budget": _num(budget),
             "failed_in_flight": int(in_flight.sum()), "window_s": _num(zone_window),
             "window_seen_s": _num(seen), "pending_replicas": pending, "bound_later": bound}))
    return items


__all__ = ["UTIL_TARGET", "Item", "autoscale_window_s", "busiest_minute", "checklist", "figures",
           "last_whole_window_start", "latency_series", "scale_up_windows", "tail", "worst_minute",
           "zone_loss_budget", "zone_loss_window_s"]
