"""Autoscaling policies against each other: both Azure LLM inference traces 2023 (conversation,
code), each scaled by rate on its own clock so its busiest minute is the model's peak_qps
(stacks.simulation.trace_for: traffic grows per real minute as it did), through every prod model's
deployment as the plan builds it for that trace's mean token mix (stacks/simulation.py, first
region of each model), under:

- plan: the toolkit's ScaledObject (`plan.autoscaling.scaled_object_spec`, verbatim);
- static-peak: static provisioning at the plan's max replicas (peak, the lag headroom and the
  zone surplus): the denominator of the issue's 0.7x target;
- static-at-peak: static provisioning at the replicas peak needs at the sized rate, spread over
  the zones (ceil(peak / rate), rounded up to a multiple of the zones, at least min and at most
  max, which need not be one), with no headroom and no zone surplus: what a fixed fleet sized by
  hand for the peak would run;
- keda-tutorial: KEDA on `sum(vllm:num_requests_waiting)` with the vLLM production-stack
  tutorial's settings, threshold 5 and polling 15 s, the HPA's default behavior, no fallback;
- hpa-gpu: an HPA on GPU utilisation (busy share) at a 70 % target with the default behavior;
- knative-kpa: the KPA on in-flight requests with its defaults (stable 60 s, panic 6 s at 200 %,
  target utilisation 70 % of the container-concurrency target default of 100);
- clairvoyant, clairvoyant-zone: references no cluster can run (serving.simulator.Clairvoyant):
  perfect foresight of the trace, a full cold start ahead, the replicas the coming busiest minute
  needs at the plan's sized rate per replica; -zone adds the surplus (x Z/(Z-1)) that carries a
  zone loss. A reference, not a lower bound (the sized rate keeps a margin, the zone surplus is
  sufficient rather than necessary): what a policy with the plan's sizing spends when lag is
  all it lacks, so whether the issue's 0.7x target is within that sizing's reach. They are
  never counted as baselines that beat the plan.
Every autoscaled policy starts warm (`warm_replicas`: the replicas the plan's query holds at the
trace's first minute) and is bounded by the plan's min and max.

The plan, the zone reference and every baseline that meets the SLO on fewer GPU-hours than the
plan then lose a zone, the one holding the most ready replicas at that moment: once as the
busiest minute begins (`zone_loss_at_peak`), and once at each
of `zone_loss_moments` (every 300 s while a whole cold start is left in the trace;
`zone_loss_sweep`), since an SRE does not choose when a zone goes and the busiest minute is not the
worst moment for every policy.

Each run replays at most --window seconds (default 3600) of the scaled trace from its start, so a
stretched trace (a low peak) stays bounded. Prints one row per run and, per model and trace, the
issue's verdict (the plan meets the SLO: >= 99 % of requests within both targets and p99 within the
tier; with at most 0.7x the GPU-hours of static peak; and no baseline meets it with fewer), writes
benchmarks/results/autoscaling.json and draws benchmarks/results/autoscaling.png.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import os
import sys
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtip.stackfile import load  # noqa: E402
from serving.autoscaling import POLLING_INTERVAL_S, WAITING  # noqa: E402
from serving.simulator import (  # noqa: E402
    FULLEST,
    Clairvoyant,
    FleetConfig,
    GpuUtilizationHpa,
    KedaAutoscaler,
    KnativeKpa,
    StaticPolicy,
    Trace,
    ZoneFailure,
    load_azure_2023,
    simulate,
)
from stacks.loader import SpecError  # noqa: E402
from stacks.naming import MODELS_NAMESPACE  # noqa: E402
from stacks.plan import Plan, load_plan  # noqa: E402
from stacks.simulation import Deployment, deployment, select, trace_for  # noqa: E402
from stacks.slo_check import (  # noqa: E402
    busiest_minute,
    checklist,
    figures,
    last_whole_window_start,
    zone_loss_window_s,
)

TRACES = {name: ROOT.parent / "shared" / "traces" / f"azure2023_AzureLLMInferenceTrace_{name}.csv"
          for name in ("conv", "code")}
OUT = ROOT / "benchmarks" / "results" / "autoscaling.json"
PLOT = OUT.with_suffix(".png")
REFERENCES = ("clairvoyant", "clairvoyant-zone")  # read the future: references, never baselines
POLICIES = ("plan", "static-peak", "static-at-peak", "keda-tutorial", "hpa-gpu", "knative-kpa", *REFERENCES)
GPU_HOURS_TARGET = 0.7  # issue 11: at most 0.7x the GPU-hours of static peak provisioning
TUTORIAL_THRESHOLD = 5  # vLLM production-stack tutorial (FACTS.md section 7)
TUTORIAL_POLLING_S = 15
HPA_TARGET_UTILIZATION = 0.7
KPA_TARGET_CONCURRENCY = 100.0  # Knative config-autoscaler container-concurrency-target-default


def tutorial_scaled_object(dep: Deployment) -> dict[str, Any]:
    """The plan's ScaledObject with the tutorial's trigger (waiting requests, threshold 5) and
    polling, and no behavior or fallback (KEDA then leaves the HPA's defaults)."""
    spec = copy.deepcopy(dep.scaled_object)
    spec["pollingInterval"] = TUTORIAL_POLLING_S
    spec.pop("fallback", None)
    spec.pop("advanced", None)
    meta = spec["triggers"][0]["metadata"]
    meta["query"] = (f'sum({WAITING}{{namespace="{MODELS_NAMESPACE}",'
                     f'model_name="{dep.plan.model}"}})')
    meta["threshold"] = str(TUTORIAL_THRESHOLD)
    return spec


def at_peak_replicas(dep: Deployment) -> int:
    """Replicas that serve the model's peak at its sized rate, spread evenly over the zones, within
    the plan's bounds."""
    zones = len(dep.fleet.zones)
    needed = math.ceil(dep.plan.peak_qps / dep.plan.capacity.qps - 1e-9)
    return min(dep.plan.max_replicas, max(dep.plan.min_replicas, zones * math.ceil(needed / zones)))


def static_replicas(dep: Deployment, policy: str) -> int | None:
    """The replicas a static policy holds (and starts with); None for the others."""
    if policy == "static-peak":
        return dep.plan.max_replicas
    if policy == "static-at-peak":
        return at_peak_replicas(dep)
    return None


def _policy(name: str, dep: Deployment, trace: Trace) -> object:
    lo, hi = dep.plan.min_replicas, dep.plan.max_replicas
    fixed = static_replicas(dep, name)
    if fixed is not None:
        return StaticPolicy(fixed)
    if name in REFERENCES:
        zones = len(dep.fleet.zones) if name == "clairvoyant-zone" else 1
        return Clairvoyant(lo, hi, trace.arrival_s, dep.plan.capacity.qps, dep.fleet.cold_start.full_s, zones)
    scaler: KedaAutoscaler | GpuUtilizationHpa | KnativeKpa
    if name == "plan":
        scaler = dep.autoscaler()
    elif name == "keda-tutorial":
        scaler = KedaAutoscaler(tutorial_scaled_object(dep))
    elif name == "hpa-gpu":
        scaler = GpuUtilizationHpa(lo, hi, HPA_TARGET_UTILIZATION)
    elif name == "knative-kpa":
        scaler = KnativeKpa(lo, hi, KPA_TARGET_CONCURRENCY)
    else:
        raise ValueError(name)
    # The fleet starts warm (`warm_replicas`), so its autoscaler starts as one that has held it.
    scaler.warm(warm_replicas(dep, trace))
    return scaler


def warm_replicas(dep: Deployment, trace: Trace) -> int:
    """Replicas an autoscaled fleet holds when the replay starts: what the plan's query asks for
    at the trace's first minute in a steady state (its rate x (1 + headroom) / a replica's sized
    rate, and with several zones the zone branch, `Autoscaling.zone_replicas`), within min and
    max. The traces open at 40-70 % of their peak; a fleet at its floor there measures a cold boot
    into heavy traffic, not how a policy follows traffic, so every autoscaled policy starts warm.
    A zone lost at 300 s cost the 70B on the conversation trace 5.6 % of its requests when the
    fleet started without the zone branch and its HPA fresh, 4.6 % with the zone branch alone
    (the fresh HPA dropped the fleet to its floor: `_policy` warms it too), 1.0 % with both."""
    first = float((trace.arrival_s < trace.arrival_s[0] + 60.0).sum()) / 60.0
    wanted = math.ceil(first * (1 + dep.plan.headroom) / dep.plan.capacity.qps)
    zone = dep.plan.autoscaling.zone_replicas(first)
    if zone is not None:
        wanted = max(wanted, zone)
    return min(dep.plan.max_replicas, max(dep.plan.min_replicas, wanted))


def zone_loss_at(dep: Deployment, trace: Trace, policy: str, at_s: float) -> dict[str, object]:
    """The checklist's zone-loss item for `policy`: the zone with the most ready replicas at
    `at_s` lost then (FULLEST: scale-in leaves zones only roughly even, so a fixed zone is not
    always the worst)."""
    failure = ZoneFailure(FULLEST, at_s)
    fleet = _start_fleet(dep, trace, policy)
    result = simulate(trace, dep.sim_config((failure,), fleet=fleet), "least-loaded",
                      _policy(policy, dep, trace))  # type: ignore[arg-type]
    item = checklist(result, replace(dep, fleet=fleet), trace, failure)[3]
    (_, zone), = result.extra["zones_lost"]  # type: ignore[misc]
    return {"zone": zone, "at_s": round(failure.at_s, 1), "status": item.status, **item.figures}


def zone_loss_at_peak(dep: Deployment, trace: Trace, policy: str) -> dict[str, object]:
    """The zone lost as the trace's busiest minute begins: the most load moves to the surviving
    zones at once (not always the worst moment: see `zone_loss_moments`). Of the minutes a whole
    cold start can follow before the trace ends, as the sweep's moments: the nearly flat hour of
    benchmarks/sustained_peak.py had its busiest minute at about 3,140 s of 3,600, which left
    some 460 s of a 752 s window to judge."""
    latest = last_whole_window_start(trace.arrival_s, zone_loss_window_s(dep))
    if latest < trace.arrival_s[0]:  # no whole window in the trace: its item says it was cut
        latest = math.inf
    return zone_loss_at(dep, trace, policy, busiest_minute(trace.arrival_s, latest)[0])


ZONE_LOSS_EVERY_S = 300.0


def zone_loss_moments(trace: Trace, cold_s: float, every_s: float = ZONE_LOSS_EVERY_S) -> list[float]:
    """When the sweep loses a zone: every `every_s` from the trace's start + `every_s` while a
    whole cold start (`cold_s`, the window the checklist judges) fits before the trace's last
    arrival. An SRE does not choose the moment; the busiest minute is not the worst one for every
    policy (a fleet scaled down to its floor as a burst arrives, a static fleet as the load stays
    high for a whole cold start after a lesser minute).

    Whole windows only, because a window the trace's end cuts is judged on its first requests
    alone, where the requests killed in flight with the zone weigh most: on the 70B's conversation
    run most bad requests at 2,700, 3,000 and 3,300 s (14-28 of 20-31) were in flight on the lost
    zone, about as many at each moment, yet the share at 3,300 s read 1.85 / 1.86 / 1.95 % on three
    draws (budget 1.5 %) over some 1,078 requests, against some 4,860 at 2,700 s, whose window the
    trace cuts only 36 s short (benchmarks/sweep_edge.py)."""
    start = float(trace.arrival_s[0])
    return [float(t) for t in np.arange(start + every_s, last_whole_window_start(trace.arrival_s, cold_s),
                                        every_s)]


def _zone_loss_job(job: tuple[Deployment, Trace, str, float]) -> dict[str, object]:
    return zone_loss_at(*job)


def zone_loss_sweep(dep: Deployment, trace: Trace, policy: str,
                    pool: Executor | None = None) -> dict[str, object]:
    """The zone-loss item at every moment of `zone_loss_moments`: PASS only when each passes."""
    cold = zone_loss_window_s(dep)
    jobs = [(dep, trace, policy, at) for at in zone_loss_moments(trace, cold)]
    got = list(pool.map(_zone_loss_job, jobs) if pool else map(_zone_loss_job, jobs))
    if not got:  # a trace shorter than one step and a cold start
        return {"every_s": ZONE_LOSS_EVERY_S, "window_s": cold, "moments": 0, "passed": 0,
                "status": "SKIP", "failed_at_s": [], "worst": None}
    worst = max(got, key=lambda r: r["bad_share"])  # type: ignore[arg-type,return-value]
    failed = [r["at_s"] for r in got if r["status"] != "PASS"]
    return {"every_s": ZONE_LOSS_EVERY_S, "window_s": cold, "moments": len(got),
            "passed": len(got) - len(failed),
            "status": "PASS" if not failed else "FAIL", "failed_at_s": failed,
            "worst": {k: worst[k] for k in ("at_s", "bad", "requests", "bad_share", "error_budget")}}


def passes_checklist(row: dict[str, Any]) -> bool:
    """A run that passes every item: the SLO over the run, the tail at the busiest minute, a zone
    lost as it begins (`zone_loss`) and at every moment of the sweep (`zone_loss_any_moment`)."""
    return bool(row["meets_slo"] and row["tail_at_peak"]["status"] == "PASS"
                and row["zone_loss"]["status"] == "PASS" and row["zone_loss_any_moment"]["status"] == "PASS")


def fleet_with(fleet: FleetConfig, replicas: int) -> FleetConfig:
    """`fleet` starting with `replicas` over its zones, each zone on the whole nodes its share needs."""
    if replicas == fleet.initial_replicas:
        return fleet
    per_zone = math.ceil(replicas / len(fleet.zones))
    return replace(fleet, initial_replicas=replicas,
                   initial_nodes=len(fleet.zones) * math.ceil(per_zone / fleet.slots_per_node))


def _start_fleet(dep: Deployment, trace: Trace, policy: str) -> FleetConfig:
    fixed = static_replicas(dep, policy)
    return fleet_with(dep.fleet, warm_replicas(dep, trace) if fixed is None else fixed)


def run(dep: Deployment, trace: Trace, policy: str) -> dict[str, object]:
    fleet = _start_fleet(dep, trace, policy)
    result = simulate(trace, dep.sim_config(fleet=fleet), "least-loaded", _policy(policy, dep, trace))  # type: ignore[arg-type]
    f = figures(result, replace(dep, fleet=fleet))
    # gpu_hours: the replicas' GPU slices, what the verdicts compare; node_gpu_hours: whole GPU
    # nodes while they exist, which is what the cloud bills (a node partly full after scale-in,
    # or kept empty for its consolidation delay, counts whole); packed_node_gpu_hours: the same
    # replicas on the fewest nodes a zone, each freed at once (what packing alone could save).
    out = {k: f[k] for k in ("requests", "failed", "attainment", "ttft_p99_s", "tpot_p99_s", "gpu_hours",
                             "node_gpu_hours", "packed_node_gpu_hours", "replicas", "time_to_scale",
                             "drain_cut", "narrowed_placements")}
    targets = {"ttft_s": dep.targets.ttft_s, "tpot_s": dep.targets.tpot_s}
    # The checklist's first item: the tail of the busiest minute's requests and of those arriving
    # while a scale-up is under way, each within the tier (a run can pass on the hour's p99 while
    # its busiest minute breaks the tier).
    tail = checklist(result, replace(dep, fleet=fleet), trace, None)[0]
    return {**out, "targets": targets, "meets_slo": meets_slo(out, targets),
            "tail_at_peak": {"status": tail.status, **tail.figures},
            "worst_minute": f["worst_minute"]}


SLO_ATTAINMENT = 0.99  # issue 11: >= 99 % of requests within both targets, p99 within the tier
# A baseline within this share of the plan's GPU-hours ran the same fleet (the 8B's code run: the
# KPA's 5.7367 against the plan's 5.7417 GPU-h, both at min = max = 3, a pod's seconds apart).
SAME_FLEET = 0.005


def meets_slo(figs: dict[str, Any], targets: dict[str, float]) -> bool:
    """At least 99 % of requests within both targets and the run's p99 TTFT and TPOT within them."""
    a, ttft, tpot = figs["attainment"], figs["ttft_p99_s"], figs["tpot_p99_s"]
    return (a is not None and ttft is not None and tpot is not None and a >= SLO_ATTAINMENT
            and ttft <= targets["ttft_s"] and tpot <= targets["tpot_s"])


def verdicts(rows_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model and trace: the plan's GPU-hours against static peak provisioning, every baseline
    that meets the SLO with fewer GPU-hours than the plan (the issue's two targets), and the
    clairvoyant references' GPU-hours against static (what the plan's sizing needs without lag)."""
    out = []
    for key in dict.fromkeys((r["model"], r["trace"]) for r in rows_):
        runs = {r["policy"]: r for r in rows_ if (r["model"], r["trace"]) == key}
        plan, static = runs["plan"], runs["static-peak"]
        def share(r: dict[str, Any], static: dict[str, Any] = static) -> float | None:
            return round(r["gpu_hours"] / static["gpu_hours"], 3) if static["gpu_hours"] else None

        ratio = share(plan)
        baselines = {p: r for p, r in runs.items() if p != "plan" and p not in REFERENCES}
        cheaper = sorted(p for p, r in baselines.items()
                         if r["meets_slo"] and r["gpu_hours"] < plan["gpu_hours"] * (1 - SAME_FLEET))
        at_peak = sorted(p for p in cheaper if baselines[p]["tail_at_peak"]["status"] == "PASS")
        with_loss = sorted(p for p in cheaper if baselines[p].get("zone_loss", {}).get("status") == "PASS")
        any_moment = sorted(p for p in cheaper
                            if baselines[p].get("zone_loss_any_moment", {}).get("status") == "PASS")
        refs = {p: {"over_static_gpu_hours": share(runs[p]), "meets_slo": runs[p]["meets_slo"],
                    "tail_at_peak": runs[p]["tail_at_peak"]["status"],
                    "zone_loss_at_peak": runs[p].get("zone_loss", {}).get("status"),
                    "zone_loss_any_moment": runs[p].get("zone_loss_any_moment", {}).get("status")}
                for p in REFERENCES if p in runs}
        out.append({"model": key[0], "trace": key[1], "plan_meets_slo": plan["meets_slo"],
                    "plan_tail_at_peak": plan["tail_at_peak"]["status"],
                    "plan_zone_loss_at_peak": plan.get("zone_loss", {}).get("status"),
                    "plan_zone_loss_any_moment": plan.get("zone_loss_any_moment", {}).get("status"),
                    "cheaper_baselines_meeting_slo_and_zone_loss": with_loss,
                    "cheaper_baselines_meeting_slo_and_zone_loss_any_moment": any_moment,
                    "cheaper_baselines_meeting_slo_and_tail_at_peak": at_peak,
                    "plan_over_static_gpu_hours": ratio,
                    "cheaper_baselines_meeting_slo": cheaper,
                    "references": refs,
                    "targets_met": bool(plan["meets_slo"] and ratio is not None and ratio <= GPU_HOURS_TARGET
                                        and not cheaper)})
    return out


DEFAULT_INPUT_TOKENS = 1155  # stacks.schema.TokenMix's default (the conversation trace's mean)
POOL_SCALES = (1, 2, 4, 8)  # max_nodes multipliers tried when the stated pools cannot hold a trace's mix


TRAFFIC_OF = {"conv": "conversation", "code": "code"}  # each trace's `traffic` in a stack


def plan_for(platform: dict[str, Any], source: str, trace: Trace, name: str = "conv") -> tuple[Plan, int]:
    """The stack as it would be written for this traffic: every model's `tokens` set to the
    trace's means (the plan sizes replicas from the stated mix, so a trace with longer prompts
    replayed against a plan for shorter ones measures the mismatch, not the autoscaler), its
    `traffic` to the trace `name` (TRAFFIC_OF: how fast it grows sets the headroom), its
    `peak_qps` scaled so the peak prompt-token rate stays the stated one (a trace of longer
    prompts at the same request peak is a bigger workload, not a different one), and its pools'
    `max_nodes` multiplied by the first of POOL_SCALES that lets that plan."""
    mix = {"input_tokens": round(float(trace.prompt_tokens.mean())),
           "output_tokens": round(float(trace.output_tokens.mean()))}
    failure: SpecError | None = None
    traffic = TRAFFIC_OF[name]
    for scale in POOL_SCALES:
        raw = copy.deepcopy(platform)
        for model in raw["models"]:
            stated = (model.get("tokens") or {}).get("input_tokens", DEFAULT_INPUT_TOKENS)
            model["peak_qps"] = round(model["peak_qps"] * min(1.0, stated / mix["input_tokens"]), 3)
            model["tokens"] = dict(mix)
            model["traffic"] = traffic
        for region in raw["regions"]:
            for pool in region.get("gpu_pools", []):
                pool["max_nodes"] = pool["max_nodes"] * scale
        try:
            return load_plan(raw, source), scale
        except SpecError as err:
            failure = err
    assert failure is not None
    raise failure


def rows(plans: dict[str, Plan], traces: dict[str, Trace], window_s: float,
         policies: tuple[str, ...] = POLICIES, models: list[str] | None = None,
         zone_loss: bool = True, pool: Executor | None = None,
         autoscale_offset_s: float = 0.0, seed: int = 0,
         scrape_phase_s: float = 0.0) -> list[dict[str, object]]:
    out = []
    for tname, base in traces.items():
        plan = plans[tname]
        for mp in select(plan, None):
            if models and mp.model not in models:
                continue
            # Only the policies whose autoscaler reads Prometheus (`reads_scrapes`) read it late.
            dep = replace(deployment(plan, mp), autoscale_offset_s=autoscale_offset_s,
                          scrape_phase_s=scrape_phase_s)
            trace = trace_for(mp, base, seed=seed)
            trace = trace.window(0.0, window_s) if trace.duration_s > window_s else trace
            plan_gpu_h = math.inf
            for policy in policies:
                row = {"model": mp.model, "region": mp.region, "trace": tname, "policy": policy,
                       "window_s": round(trace.duration_s, 1),
                       "replicas_bounds": [mp.min_replicas, mp.max_replicas],
                       "replica_qps": round(mp.capacity.qps, 3), **run(dep, trace, policy)}
                plan_gpu_h = row["gpu_hours"] if policy == "plan" else plan_gpu_h  # type: ignore[assignment]
                # Only the plan, the zone-surplus reference and a baseline that would otherwise beat
                # the plan need the zone-loss run.
                beats = (policy not in REFERENCES and row["meets_slo"]
                         and row["gpu_hours"] < plan_gpu_h * (1 - SAME_FLEET))
                if zone_loss and (policy in ("plan", "clairvoyant-zone") or beats):
                    row["zone_loss"] = zone_loss_at_peak(dep, trace, policy)
                    row["zone_loss_any_moment"] = zone_loss_sweep(dep, trace, policy, pool)
                out.append(row)
                print(_line(row), flush=True)
    return out


HEADER = (f"{'model':10} {'trace':5} {'policy':14} {'attain':>7} {'TTFT99':>8} {'TPOT99':>7} "
          f"{'GPU-h':>7} {'rep min/mean/max':>17} {'scale-ups':>9} {'to ready':>8}")


def _line(r: dict[str, Any]) -> str:
    reps, tts = r["replicas"], r["time_to_scale"]
    ready = "-" if tts["mean_s"] is None else f"{tts['mean_s']:.0f}s"
    fmt = lambda x, d: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
    return (f"{r['model']:10} {r['trace']:5} {r['policy']:14} {fmt(r['attainment'], 4):>7} "
            f"{fmt(r['ttft_p99_s'], 3):>8} {fmt(r['tpot_p99_s'], 3):>7} {fmt(r['gpu_hours'], 2):>7} "
            f"{reps['min']:>5}/{reps['mean']:>5.2f}/{reps['max']:<4} {tts['count']:>9} {ready:>8}")


def out_path(offset_s: float, seed: int = 0, traces: tuple[str, ...] = tuple(TRACES),
             phase_s: float = 0.0) -> Path:
    """Where a run writes by default: the freshest read of the first draw of every trace is the
    published table; a lagged read's, a scrape phase's, another draw's or fewer traces' goes
    beside it, never over it."""
    name = ("autoscaling" + ("" if set(traces) == set(TRACES) else "_" + "_".join(traces))
            + (f"_offset{offset_s:g}s" if offset_s else "") + (f"_phase{phase_s:g}s" if phase_s else "")
            + (f"_seed{seed}" if seed else ""))
    return OUT.with_name(f"{name}.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--window", type=float, default=3600.0, help="seconds of each scaled trace replayed")
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT}")
    ap.add_argument("--plot", type=Path, default=None,
                    help=f"bar chart of GPU-hours per policy (PNG; default {PLOT}, none with an offset)")
    ap.add_argument("--scrape-phase", type=float, default=0.0,
                    help="seconds past the subqueries' 15 s grid the scrapes fall (0: on it, so the "
                         "persistence's last step holds the newest scrape; past it, the scrape before, "
                         "unless the read falls after the next step)")
    ap.add_argument("--autoscale-offset", type=float, default=0.0,
                    help="seconds after each scrape the autoscalers read (the simulator's default 0 is "
                         "the freshest read; a cluster's falls anywhere within a scrape interval)")
    ap.add_argument("--seed", type=int, default=0,
                    help="the rate scaling's draw (which requests a thinned or replicated bin keeps)")
    ap.add_argument("--traces", default=",".join(TRACES), help="comma-separated: conv,code")
    args = ap.parse_args(argv)
    names = list(dict.fromkeys(t for t in args.traces.split(",") if t))
    if not names or not set(names) <= set(TRACES):
        ap.error(f"--traces: one or more of {', '.join(TRACES)}, got {args.traces!r}")
    offset = args.autoscale_offset
    if not 0 <= offset < POLLING_INTERVAL_S:
        ap.error(f"--autoscale-offset: from 0 to under the scrape interval ({POLLING_INTERVAL_S} s), "
                 f"got {offset:g}")
    phase = args.scrape_phase
    if not 0 <= phase < POLLING_INTERVAL_S:
        ap.error(f"--scrape-phase: from 0 to under the scrape interval ({POLLING_INTERVAL_S} s), "
                 f"got {phase:g}")
    if args.out is None:
        args.out = out_path(offset, args.seed, tuple(names), phase)
    if args.plot is None and args.out.resolve() == OUT:
        args.plot = PLOT
    config = load(args.stack)
    traces = {name: load_azure_2023(TRACES[name]) for name in names}
    planned = {name: plan_for(config.platform, config.source, trace, name) for name, trace in traces.items()}
    plans = {name: plan for name, (plan, _) in planned.items()}
    print(HEADER)
    # The zone-loss sweep is most of the run: its moments go to a process per usable core (fork:
    # the workers start with the modules loaded; each job still pickles its deployment and trace).
    with ProcessPoolExecutor(max_workers=len(os.sched_getaffinity(0)),
                             mp_context=multiprocessing.get_context("fork")) as pool:
        result = rows(plans, traces, args.window, pool=pool, autoscale_offset_s=offset, seed=args.seed,
                      scrape_phase_s=phase)
    doc = {"stack": args.stack, "window_s": args.window, "router": "least-loaded",
           "autoscale_offset_s": offset, "scrape_phase_s": phase, "seed": args.seed,
           "policies": {"plan": "the plan's ScaledObject", "static-peak": "max replicas",
                        "static-at-peak": "ceil(peak / sized rate) replicas, spread over the zones",
                        "keda-tutorial": f"waiting > {TUTORIAL_THRESHOLD}/replica, polling "
                                         f"{TUTORIAL_POLLING_S} s, HPA default behavior",
                        "hpa-gpu": f"GPU busy {HPA_TARGET_UTILIZATION:.0%}, HPA default behavior",
                        "knative-kpa": f"KPA defaults, target concurrency {KPA_TARGET_CONCURRENCY:g} x 70%",
                        "clairvoyant": "reference: foresight, a cold start ahead, the sized rate",
                        "clairvoyant-zone": "reference: as clairvoyant, x Z/(Z-1) for a zone loss"},
           "pool_scale": {name: scale for name, (_, scale) in planned.items()},
           "token_mix": {name: [round(float(t.prompt_tokens.mean())), round(float(t.output_tokens.mean()))]
                         for name, t in traces.items()},
           "rows": result, "verdicts": verdicts(result)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    for v in doc["verdicts"]:
        print(f"{v['model']:10} {v['trace']:5} plan meets SLO {v['plan_meets_slo']!s:5} "
              f"(tail at peak {v['plan_tail_at_peak']}) GPU-h/static {v['plan_over_static_gpu_hours']} "
              f"cheaper baselines meeting it: {', '.join(v['cheaper_baselines_meeting_slo']) or '-'}; "
              "and the tail at peak: "
              f"{', '.join(v['cheaper_baselines_meeting_slo_and_tail_at_peak']) or '-'}; "
              f"and a zone loss at peak (plan: {v['plan_zone_loss_at_peak']}): "
              f"{', '.join(v['cheaper_baselines_meeting_slo_and_zone_loss']) or '-'}; "
              f"and at every moment (plan: {v['plan_zone_loss_any_moment']}): "
              f"{', '.join(v['cheaper_baselines_meeting_slo_and_zone_loss_any_moment']) or '-'}; "
              "references/static: "
              + ", ".join(f"{p} {r['over_static_gpu_hours']} (SLO {r['meets_slo']}, zone loss "
                          f"{r['zone_loss_at_peak'] or '-'}, any moment {r['zone_loss_any_moment'] or '-'})"
                          for p, r in v["references"].items()))
    if args.plot:
        plot(doc, args.plot)
        print(f"wrote {args.plot}")
    return 0


def plot(doc: dict[str, Any], path: Path) -> None:
    """GPU-hours per policy, one panel per model and trace; hatched bars miss the SLO."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # loaded only when drawing

    keys = list(dict.fromkeys((r["model"], r["trace"]) for r in doc["rows"]))
    models = list(dict.fromkeys(k[0] for k in keys))
    traces = list(dict.fromkeys(k[1] for k in keys))
    fig, axes = plt.subplots(len(traces), len(models), figsize=(3.2 * len(models), 3.4 * len(traces)),
                             squeeze=False)
    for (model, trace) in keys:
        ax = axes[traces.index(trace)][models.index(model)]
        runs = [r for r in doc["rows"] if (r["model"], r["trace"]) == (model, trace)]
        for i, r in enumerate(runs):
            ax.bar(i, r["gpu_hours"], color="tab:blue" if r["policy"] == "plan" else "tab:gray",
                   hatch="" if r["meets_slo"] else "//", edgecolor="black")
            ax.text(i, r["gpu_hours"], f"{r['attainment']:.3f}", ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(runs)), [r["policy"] for r in runs], rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{model}, {trace}", fontsize=9)
        ax.set_ylabel("GPU-hours", fontsize=8)
    fig.suptitle("GPU-hours per policy (hatched: misses the SLO; label: attainment)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
