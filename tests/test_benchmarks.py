"""The benchmark scripts still run against the current code (on their smallest inputs)."""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml

from rtip.stackfile import PROJECT_DIR
from serving.simulator import Failover


def _deployment(stack: str, model: str) -> tuple[Any, Any]:
    """A shipped stack's one-region model and the deployment the simulator runs for it."""
    from stacks.simulation import deployment, select
    from tests.conftest import plan_of

    plan = plan_of(stack)
    (mp,) = select(plan, model)
    return mp, deployment(plan, mp)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", PROJECT_DIR / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so a worker process can unpickle its functions
    spec.loader.exec_module(module)
    return module


def test_plan_speed_generates_valid_multi_cloud_stacks(tmp_path: Path) -> None:
    bench = _load("plan_speed")
    path = tmp_path / "Pulumi.bench.yaml"
    path.write_text(yaml.safe_dump(bench.stack(2, 2, 1, bench.MULTI_CLOUD)))
    seconds, resources = bench.plan_once(path)
    assert seconds > 0 and resources > 100


def test_packing_rows_compare_against_the_bound() -> None:
    row = _load("packing").run(10, seed=7)
    assert row["ratio_planner"] >= 0.999  # never below the lower bound
    assert row["ratio_planner"] <= row["ratio_one_model_per_gpu"]
    assert row["ratio_planner"] <= row["ratio_first_fit_decreasing"]
    # One layout per pool only adds a constraint: on this catalog it costs no less than the planner.
    assert row["ratio_planner_one_layout_per_pool"] >= row["ratio_planner"] - 1e-9


def test_autoscaling_benchmark_runs_every_policy_on_a_short_trace() -> None:
    from serving.simulator import poisson
    from stacks.simulation import deployment, select
    from tests.conftest import plan_of

    bench = _load("autoscaling")
    plan = plan_of("dev")
    trace = poisson(1.0, 300, (1155, 211), seed=3)
    rows = bench.rows({"poisson": plan}, {"poisson": trace}, 240.0, models=["llama-1b"], zone_loss=False)
    assert [r["policy"] for r in rows] == list(bench.POLICIES)
    (mp,) = [m for m in select(plan, "llama-1b")]
    static = next(r for r in rows if r["policy"] == "static-peak")
    assert static["replicas"]["min"] == static["replicas"]["max"] == mp.max_replicas
    # A fixed fleet sized by hand for the peak: ceil(peak / rate) rounded up to whole zones.
    zones = len(plan.region(mp.region).pool(mp.pool).zones)
    by_hand = -(-math.ceil(mp.peak_qps / mp.capacity.qps) // zones) * zones
    at_peak = next(r for r in rows if r["policy"] == "static-at-peak")
    assert at_peak["replicas"]["min"] == at_peak["replicas"]["max"] == \
        min(mp.max_replicas, max(mp.min_replicas, by_hand))
    # Where the bounds do not decide it: 4.5 replicas' worth of peak over two zones is 5, then 6.
    dep = deployment(plan, mp)
    wide = replace(dep, plan=replace(mp, peak_qps=mp.capacity.qps * 4.5, min_replicas=2, max_replicas=20),
                   fleet=replace(dep.fleet, zones=("a", "b")))
    assert bench.at_peak_replicas(wide) == 6
    for r in rows:
        assert mp.min_replicas <= r["replicas"]["min"] <= r["replicas"]["max"] <= mp.max_replicas
        assert 0 <= r["attainment"] <= 1 and r["window_s"] <= 240.0
    # The tutorial's ScaledObject: threshold 5, polling 15 s, the HPA's default behavior.
    spec = bench.tutorial_scaled_object(deployment(plan, mp))
    meta = spec["triggers"][0]["metadata"]
    assert meta["threshold"] == "5" and spec["pollingInterval"] == 15
    assert meta["query"].startswith("sum(vllm:num_requests_waiting{") and "running" not in meta["query"]
    assert "advanced" not in spec and "fallback" not in spec


def test_a_read_offset_outside_one_scrape_interval_is_refused_and_lands_beside_the_table(capsys) -> None:
    """The HPA reads within a scrape interval (15 s) of the last scrape: 15 s or a negative
    offset is refused with exit status 2 before anything is planned; an offset's results never
    overwrite the freshest read's table."""
    bench = _load("autoscaling")
    for bad in ("15", "-1"):
        with pytest.raises(SystemExit) as stop:
            bench.main(["--autoscale-offset", bad])
        assert stop.value.code == 2
        assert "--autoscale-offset: from 0 to under the scrape interval (15 s)" in capsys.readouterr().err
        with pytest.raises(SystemExit) as stop:
            bench.main(["--scrape-phase", bad])
        assert stop.value.code == 2
        assert "--scrape-phase: from 0 to under the scrape interval (15 s)" in capsys.readouterr().err
    assert bench.out_path(0.0) == bench.OUT
    assert bench.out_path(7.5).name == "autoscaling_offset7.5s.json"
    assert bench.out_path(14.0).parent == bench.OUT.parent
    assert bench.out_path(0.0, 2).name == "autoscaling_seed2.json"
    assert bench.out_path(7.5, 1).name == "autoscaling_offset7.5s_seed1.json"
    assert bench.out_path(0.0, 1, ("conv",)).name == "autoscaling_conv_seed1.json"
    assert bench.out_path(0.0, 0, phase_s=7.5).name == "autoscaling_phase7.5s.json"
    assert bench.out_path(7.5, 1, ("code",), 4.0).name == "autoscaling_code_offset7.5s_phase4s_seed1.json"
    assert bench.out_path(0.0, 0, ("code", "conv")) == bench.OUT
    with pytest.raises(SystemExit) as stop:
        bench.main(["--traces", "chat"])
    assert stop.value.code == 2 and "--traces: one or more of conv, code" in capsys.readouterr().err


def test_capacity_check_runs_one_replica_at_the_claimed_rate() -> None:
    from tests.conftest import plan_of

    plan = plan_of("dev")
    mp = next(m for m in plan.models if m.model == "llama-1b")
    row = _load("capacity_check").check(plan, mp, 300.0)
    assert row["qps"] == round(mp.capacity.qps, 4) and row["requests"] > 0
    # Poisson arrivals at rate r for 300 s: the count is within 5 sigma of r x 300.
    expected = mp.capacity.qps * 300
    assert abs(row["requests"] - expected) < 5 * expected ** 0.5
    assert row["simulated_ttft_s"] > 0 and row["simulated_tpot_s"] > 0


def test_autoscaling_benchmark_replays_the_draw_its_seed_names(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed `rows` takes (`main` passes `--seed` to it) reaches the replay: each seed's row
    serves exactly the requests of that seed's rescaled trace (drawn here through `trace_for` on
    its own), seed 0's draw is of another length (so a row that ignored its seed would fail), and
    two seeds draw different requests."""
    from serving.simulator import poisson
    from stacks.simulation import trace_for
    from tests.conftest import plan_of

    bench = _load("autoscaling")
    plan = plan_of("prod")
    (mp,) = [m for m in bench.select(plan, None) if m.model == "llama-3b"]
    base = poisson(mp.peak_qps / 3, 240.0, (1155, 211), seed=8)  # rescaling replicates its bins
    served = {}
    for seed in (1, 2):
        (row,) = bench.rows({"conv": plan}, {"conv": base}, 300.0, policies=("static-peak",),
                            models=["llama-3b"], zone_loss=False, seed=seed)
        served[seed] = row["requests"]
        assert row["requests"] == len(trace_for(mp, base, seed=seed).arrival_s)
    capsys.readouterr()
    drawn = [trace_for(mp, base, seed=s).arrival_s for s in (1, 2)]
    assert len(trace_for(mp, base, seed=0).arrival_s) not in set(served.values())
    assert len(drawn[0]) != len(drawn[1]) or not np.array_equal(drawn[0], drawn[1])


def test_autoscaling_benchmark_loses_a_zone_as_the_busiest_minute_begins() -> None:
    from serving.simulator import poisson

    bench = _load("autoscaling")
    mp, dep = _deployment("prod", "llama-3b")
    trace = poisson(mp.peak_qps, 240.0, (1155, 211), seed=5)
    loss = bench.zone_loss_at_peak(dep, trace, "plan")
    # The busiest 60 s window by hand: the arrival that starts the most arrivals within 60 s.
    t = trace.arrival_s.tolist()
    counts = [sum(1 for u in t[i:] if u < s + 60.0) for i, s in enumerate(t)]
    assert loss["at_s"] == round(t[counts.index(max(counts))], 1)
    assert loss["zone"] == dep.fleet.zones[0] and len(dep.fleet.zones) > 1
    assert loss["status"] in ("PASS", "FAIL") and loss["failed_in_flight"] >= 0
    assert (loss["status"] == "FAIL") == (loss["bad_share"] > loss["error_budget"])


def test_the_zone_lost_at_the_busiest_minute_keeps_a_whole_window_to_judge() -> None:
    """A burst in the trace's last cold start is not the minute the zone goes: the busiest minute
    that a whole cold start can follow is, so its window is judged whole (counted by hand)."""
    import numpy as np

    from serving.simulator import Trace

    bench = _load("autoscaling")
    mp, dep = _deployment("prod", "llama-3b")
    cold = mp.cold_start.total_s
    base = np.arange(0.0, 1000.0, 1.0)
    late = np.linspace(900.0, 910.0, 30)  # the busiest minute overall, < cold before the end
    early = np.linspace(100.0, 110.0, 15)
    arrivals = np.sort(np.concatenate([base, late, early]))
    n = len(arrivals)
    trace = Trace(arrivals, np.full(n, 1155), np.full(n, 211), source="by hand")
    assert arrivals[-1] - 900.0 < cold < arrivals[-1] - 110.0
    t = arrivals.tolist()
    counts = [sum(1 for u in t[i:] if u < s + 60.0) if s <= t[-1] - cold else -1 for i, s in enumerate(t)]
    loss = bench.zone_loss_at_peak(dep, trace, "plan")
    assert 40.0 <= loss["at_s"] <= 110.0 and loss["at_s"] == round(t[counts.index(max(counts))], 1)
    assert loss["window_seen_s"] == pytest.approx(loss["window_s"])


def test_autoscaling_verdicts_follow_the_issue_targets() -> None:
    bench = _load("autoscaling")
    targets = {"ttft_s": 2.0, "tpot_s": 0.1}
    ok = {"attainment": 0.995, "ttft_p99_s": 1.5, "tpot_p99_s": 0.09}
    assert bench.meets_slo(ok, targets)
    assert not bench.meets_slo({**ok, "attainment": 0.989}, targets)  # under 99 %
    assert not bench.meets_slo({**ok, "tpot_p99_s": 0.11}, targets)  # p99 past the tier
    assert not bench.meets_slo({**ok, "ttft_p99_s": None}, targets)  # nothing served

    def row(policy: str, gpu_h: float, meets: bool, tail: str = "PASS") -> dict:
        return {"model": "m", "trace": "conv", "policy": policy, "gpu_hours": gpu_h, "meets_slo": meets,
                "tail_at_peak": {"status": tail}}

    runs = [row("plan", 10.0, True), row("static-peak", 20.0, True), row("keda-tutorial", 8.0, True),
            row("hpa-gpu", 9.0, False), row("knative-kpa", 12.0, True)]
    (v,) = bench.verdicts(runs)
    # 10 / 20 = 0.5 of static, but the tutorial meets the SLO on 8 < 10 GPU-hours.
    assert v["plan_over_static_gpu_hours"] == 0.5 and v["cheaper_baselines_meeting_slo"] == ["keda-tutorial"]
    assert not v["targets_met"]
    assert v["cheaper_baselines_meeting_slo_and_tail_at_peak"] == ["keda-tutorial"]
    runs[2] = row("keda-tutorial", 8.0, True, tail="FAIL")  # the hour's SLO, but not its busiest minute
    (v,) = bench.verdicts(runs)
    assert v["cheaper_baselines_meeting_slo"] == ["keda-tutorial"]
    assert v["cheaper_baselines_meeting_slo_and_tail_at_peak"] == []
    assert v["cheaper_baselines_meeting_slo_and_zone_loss"] == []  # no zone-loss run: not shown to pass
    runs[2] = {**row("keda-tutorial", 8.0, True), "zone_loss": {"status": "PASS"}}
    assert bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo_and_zone_loss"] == ["keda-tutorial"]
    # Passing at the busiest minute is not passing at every moment of the sweep.
    assert bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo_and_zone_loss_any_moment"] == []
    runs[2]["zone_loss_any_moment"] = {"status": "FAIL"}
    assert bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo_and_zone_loss_any_moment"] == []
    runs[2]["zone_loss_any_moment"] = {"status": "PASS"}
    any_moment = bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo_and_zone_loss_any_moment"]
    assert any_moment == ["keda-tutorial"]
    runs[2] = row("keda-tutorial", 9.96, True)  # 0.4 % fewer GPU-hours: the same fleet, not cheaper
    assert bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo"] == []
    runs[2] = row("keda-tutorial", 9.9, True)  # 1 % fewer: cheaper
    assert bench.verdicts(runs)[0]["cheaper_baselines_meeting_slo"] == ["keda-tutorial"]
    runs[2] = row("keda-tutorial", 8.0, False)  # cheaper, but missing the SLO, does not count
    assert bench.verdicts(runs)[0]["targets_met"]
    runs[1] = row("static-peak", 13.0, True)  # 10 / 13 > 0.7
    assert not bench.verdicts(runs)[0]["targets_met"]
    # The clairvoyant references read the future: never a baseline that beats the plan, but their
    # share of static is reported (6.5 / 13 = 0.5; 9.1 / 13 = 0.7).
    runs += [row("clairvoyant", 6.5, True),
             {**row("clairvoyant-zone", 9.1, True), "zone_loss": {"status": "PASS"}}]
    (v,) = bench.verdicts(runs)
    assert v["cheaper_baselines_meeting_slo"] == []
    assert v["references"]["clairvoyant"] == {"over_static_gpu_hours": 0.5, "meets_slo": True,
                                              "tail_at_peak": "PASS", "zone_loss_at_peak": None,
                                              "zone_loss_any_moment": None}
    assert v["references"]["clairvoyant-zone"]["over_static_gpu_hours"] == 0.7
    assert v["references"]["clairvoyant-zone"]["zone_loss_at_peak"] == "PASS"


def _dep_for_warm_start(zones: tuple[str, ...], qps: float, headroom: float, peak: float = 10.0):

    mp, dep = _deployment("dev", "llama-1b")
    # The zone branch's terms as serving.autoscaling sets them: a survivor's rate q, the zones,
    # and a ceiling of the peak and the tier's burst headroom.
    z = len(zones)
    scaling = replace(mp.autoscaling, survivor_qps=qps if z > 1 else None, zones=z,
                      headroom=headroom, ceiling_qps=peak * (1 + mp.tier_spec.burst_headroom))
    mp = replace(mp, capacity=replace(mp.capacity, qps=qps), headroom=headroom, min_replicas=1,
                 max_replicas=50, peak_qps=peak, autoscaling=scaling)
    return replace(dep, plan=mp, fleet=replace(dep.fleet, zones=zones))


def test_autoscaled_policies_start_where_the_plans_query_holds_the_first_minute() -> None:
    import numpy as np

    from serving.simulator import Trace

    bench = _load("autoscaling")
    # 120 arrivals in the first minute (2 req/s), then 100 more spread over the next 500 s.
    arrivals = np.concatenate([np.linspace(0.0, 59.5, 120), np.linspace(70.0, 570.0, 100)])
    n = len(arrivals)
    trace = Trace(arrivals, np.full(n, 1000), np.full(n, 100), source="by hand")
    # 2 req/s x (1 + 0.5) = 3 req/s at 1 req/s a replica: 3 replicas; over three zones the zone
    # branch asks for 3 survivors of the worst zone: 5 replicas (2, 2, 1), not 4 (2, 1, 1).
    assert bench.warm_replicas(_dep_for_warm_start(("a",), 1.0, 0.5), trace) == 3
    assert bench.warm_replicas(_dep_for_warm_start(("a", "b", "c"), 1.0, 0.5), trace) == 5
    # Two zones: 3 survivors of 6 (3, 3).
    assert bench.warm_replicas(_dep_for_warm_start(("a", "b"), 1.0, 0.5), trace) == 6
    # A stated peak of 2 req/s: the zone branch holds at most the peak and the tier's burst
    # headroom, 2 x (1 + b), so S = ceil(2 (1 + b)) survivors, and over three zones the fewest R
    # with R - ceil(R / 3) >= S (counted here); the in-flight branch's 3 still holds below it.
    low = _dep_for_warm_start(("a", "b", "c"), 1.0, 0.5, peak=2.0)
    b = low.plan.tier_spec.burst_headroom
    survivors = math.ceil(min(3.0, 2.0 * (1 + b)) - 1e-9)
    fewest = next(r for r in range(1, 50) if r - math.ceil(r / 3) >= survivors)
    assert bench.warm_replicas(low, trace) == max(3, fewest)


def test_zone_loss_sweep_takes_every_moment_and_passes_only_when_each_does(monkeypatch) -> None:
    import numpy as np

    from serving.simulator import Trace

    bench = _load("autoscaling")
    arrivals = np.linspace(10.0, 1010.0, 500)
    trace = Trace(arrivals, np.full(500, 100), np.full(500, 10), source="by hand")
    # Every 300 s from the start + 300 while a whole cold start is left before the last arrival
    # (1010 s): a 100 s cold start fits after 910 s exactly, a 101 s one does not.
    assert bench.zone_loss_moments(trace, 100.0) == [310.0, 610.0, 910.0]
    assert bench.zone_loss_moments(trace, 101.0) == [310.0, 610.0]
    assert bench.zone_loss_moments(trace, 701.0) == []
    # The window the sweep judges: the cold start after an instant failover (stacks.slo_check).
    dep = SimpleNamespace(plan=SimpleNamespace(cold_start=SimpleNamespace(total_s=101.0)),
                          fleet=SimpleNamespace(failover=Failover()))
    shares = {310.0: 0.004, 610.0: 0.02, 910.0: 0.5}  # 910 s would fail, were it run

    def fake(dep, trace, policy, at_s):
        share = shares[at_s]
        return {"at_s": at_s, "bad": round(share * 1000), "requests": 1000, "bad_share": share,
                "error_budget": 0.015, "status": "PASS" if share <= 0.015 else "FAIL"}

    monkeypatch.setattr(bench, "zone_loss_at", fake)
    got = bench.zone_loss_sweep(dep, trace, "plan")
    # 101 s: the sweep reads the plan's cold start, so 910 s (whose window the trace cuts) is not run.
    assert (got["moments"], got["passed"], got["status"], got["window_s"]) == (2, 1, "FAIL", 101.0)
    assert got["failed_at_s"] == [610.0] and got["worst"]["at_s"] == 610.0
    shares[610.0] = 0.015  # at the budget passes, as the checklist's item does
    assert bench.zone_loss_sweep(dep, trace, "plan")["status"] == "PASS"
    short = Trace(arrivals[:100] / 10, np.full(100, 100), np.full(100, 10), source="by hand")
    assert bench.zone_loss_sweep(dep, short, "plan")["status"] == "SKIP"


def test_overload_counts_a_zones_survivors_and_their_misses_grow_with_load() -> None:

    bench = _load("overload")
    mp, dep = _deployment("dev", "llama-1b")
    # A zone lost from the floor: 3 over 3 zones leaves 2, 6 leaves 4, 7 (3/2/2) leaves 4; one zone keeps all.
    for floor, zones, left in ((3, 3, 2), (6, 3, 4), (7, 3, 4), (2, 1, 2)):
        d = replace(dep, plan=replace(mp, min_replicas=floor),
                    fleet=replace(dep.fleet, zones=tuple("abc"[:zones])))
        assert bench.survivors(d) == left
    q = mp.capacity.qps
    mix = (1155, 211)
    # A tenth of the sized rate is served within the tier; three times it is not, for most requests.
    assert bench.miss_share(dep, 1, q * 0.1, 120.0, mix) <= 0.01
    assert bench.miss_share(dep, 1, q * 3.0, 120.0, mix) > 0.5


def test_benchmark_plans_state_the_traces_traffic_and_autoscalers_start_warm() -> None:
    from rtip.stackfile import load
    from serving.simulator import KedaAutoscaler, poisson
    from stacks.simulation import deployment, select

    bench = _load("autoscaling")
    config = load("dev")
    trace = poisson(1.0, 120, (1155, 211), seed=4)  # the dev stack's own mix: its sizing is reused
    for name, traffic in (("conv", "conversation"), ("code", "code")):
        plan, _ = bench.plan_for(config.platform, config.source, trace, name)
        assert plan.models and all(f"({traffic} traffic)" in mp.replicas_source for mp in plan.models)
    (mp,) = select(plan, "llama-1b")
    dep = deployment(plan, mp)
    policy = bench._policy("plan", dep, trace)
    assert isinstance(policy, KedaAutoscaler)
    # The HPA has held the warm fleet: its window keeps that count as a recommendation at 0 s.
    assert policy.hpa._recs == [(0.0, bench.warm_replicas(dep, trace))]


def test_zone_loss_sweep_in_worker_processes_matches_the_sweep_in_process() -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from serving.simulator import poisson

    bench = _load("autoscaling")
    mp, dep = _deployment("dev", "llama-1b")
    trace = poisson(mp.peak_qps, 1500.0, (1155, 211), seed=6)
    # dev's zone-loss window (a 706.8 s cold start after the lost pods' eviction at 90 s) fits after
    # 300 and 600 s in 1,500 s, not after 900 s.
    window = mp.cold_start.total_s + dep.fleet.failover.evict_s
    assert window == pytest.approx(706.8 + 90.0)
    assert bench.zone_loss_moments(trace, window) == [
        pytest.approx(float(trace.arrival_s[0]) + t) for t in (300.0, 600.0)]
    here = bench.zone_loss_sweep(dep, trace, "plan")
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        there = bench.zone_loss_sweep(dep, trace, "plan", pool)
    assert there == here and here["moments"] == 2


def test_the_alert_reading_bounds_the_real_misses_from_above_and_the_bucket_above_from_below() -> None:
    """benchmarks/alert_reading.py at 1.3x the 8B's sized rate: the emitted rule (a miss past
    the bucket at or below each target, TTFT and TPOT shares added) can only read high of the
    requests' own miss share; the bucket above reads low here (the 8B's overload keeps TPOT under
    50 ms); the committed results keep that order at every factor."""
    import json

    bench = _load("alert_reading")
    row = bench.reading("prod", 1.3)
    assert row["bucket_above_reads"] <= row["really_missed"] <= row["rule_reads"]
    assert row["really_missed"] > 0 and row["rule_reads"] > 10 * row["really_missed"]
    saved = json.loads(bench.OUT.read_text())["rows"]
    assert [r["factor"] for r in saved] == list(bench.FACTORS)
    assert all(r["bucket_above_reads"] <= r["really_missed"] <= r["rule_reads"] for r in saved)


def test_lost_pods_strips_only_the_lost_term() -> None:
    """The query without the term is the plan's up to its last ` + T * (...)`, floor kept: on a
    store where one pod stopped answering after serving, the plan's query reads one threshold
    more than the stripped one; a query without the term is refused."""
    from serving.simulator.promql import Store, evaluate

    bench = _load("lost_pods")
    mp, dep = _deployment("dev", "llama-3b")
    query = dep.scaled_object["triggers"][0]["metadata"]["query"]
    stripped = bench.without_lost_term(query)
    assert stripped.startswith("clamp_min(") and "up{" not in stripped and "up{" in query
    with pytest.raises(ValueError, match="no lost-pod term"):
        bench.without_lost_term(stripped)
    store = Store()
    cfg = dep.sim_config()
    ns, served = cfg.namespace, cfg.model_name
    for t in range(0, 121, 15):
        for pod, alive in (("a", True), ("b", t <= 60)):
            target = (("namespace", ns), ("pod", pod), *cfg.target_labels)
            store.add(float(t), "up", target, 1.0 if alive else 0.0)
            store.add(float(t), "scrape_duration_seconds", target, 0.05 if alive else 10.0)
            if alive:
                labels = (("model_name", served), ("namespace", ns), ("pod", pod))
                store.add(float(t), "vllm:num_requests_running", labels, 500.0)
                store.add(float(t), "vllm:num_requests_waiting", labels, 0.0)
                store.add(float(t), "vllm:request_success_total", labels, 2.0 * t)
    store.mark_stale(75.0, "pod", "b", keep=("up", "scrape_duration_seconds"))
    (full,) = evaluate(query, store, 120.0).values()
    (bare,) = evaluate(stripped, store, 120.0).values()
    assert full == pytest.approx(bare + mp.autoscaling.threshold)


def test_failover_variants_undo_one_setting_each() -> None:
    """Each variant's times by hand from Kubernetes 1.33's defaults: NotReady at the 50 s grace
    plus a 5 s monitor period; without the staleness filter the picker drops a lost pod 1 s after
    that (56 s); with it, after its threshold (1 s as emitted, 2 s); the node is tainted a period
    after NotReady (60 s) and its pods evicted a toleration later (30 s as emitted: 90 s; the
    admission plugin's 300 s: 360 s). The picker-leader variants stall every request for the
    standby's handover (a 15 s lease, a 2 s retry at 1.2 jitter, about 1 s to start and sync, a
    2 s probe, about 1 s for the endpoints: 21.4 s) or until Linux gives up on the dead
    connection (924.6 s, ip-sysctl.rst's figure for tcp_retries2 = 15). Every variant keeps the
    plan's node launches."""
    bench = _load("failover")
    emitted = Failover(route_s=1.0, not_ready_s=55.0, evict_s=90.0, evict_every_s=10.0,
                       new_nodes_while_down=False)
    got = {name: bench.variant(name, emitted) for name in bench.VARIANTS}
    assert {n: (f.route_s, f.evict_s, f.picker_stall_s) for n, f in got.items()} == {
        "as-emitted": (1.0, 90.0, 0.0), "no-filter": (56.0, 90.0, 0.0), "filter-2s": (2.0, 90.0, 0.0),
        "toleration-300s": (1.0, 360.0, 0.0), "instant": (0.0, 0.0, 0.0),
        "blind-55s": (1.0, 90.0, 0.0), "blind-55s-toleration-300s": (1.0, 360.0, 0.0),
        "at-max": (1.0, 90.0, 0.0), "at-max-toleration-300s": (1.0, 360.0, 0.0),
        "picker-handover": (1.0, 90.0, pytest.approx(21.4)),
        "picker-stuck": (1.0, 90.0, 924.6)}
    assert all(f.new_nodes_while_down is False for f in got.values())

