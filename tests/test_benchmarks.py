"""The benchmark scripts still run against the current code (on their smallest inputs)."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import yaml

from rtip.stackfile import PROJECT_DIR


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", PROJECT_DIR / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
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


def test_autoscaling_benchmark_loses_a_zone_as_the_busiest_minute_begins() -> None:
    from serving.simulator import poisson
    from stacks.simulation import deployment, select
    from tests.conftest import plan_of

    bench = _load("autoscaling")
    plan = plan_of("prod")
    (mp,) = select(plan, "llama-3b")
    dep = deployment(plan, mp)
    trace = poisson(mp.peak_qps, 240.0, (1155, 211), seed=5)
    loss = bench.zone_loss_at_peak(dep, trace, "plan")
    # The busiest 60 s window by hand: the arrival that starts the most arrivals within 60 s.
    t = trace.arrival_s.tolist()
    counts = [sum(1 for u in t[i:] if u < s + 60.0) for i, s in enumerate(t)]
    assert loss["at_s"] == round(t[counts.index(max(counts))], 1)
    assert loss["zone"] == dep.fleet.zones[0] and len(dep.fleet.zones) > 1
    assert loss["status"] in ("PASS", "FAIL") and loss["failed_in_flight"] >= 0
    assert (loss["status"] == "FAIL") == (loss["bad_share"] > loss["error_budget"])


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
                                              "tail_at_peak": "PASS", "zone_loss_at_peak": None}
    assert v["references"]["clairvoyant-zone"]["over_static_gpu_hours"] == 0.7
    assert v["references"]["clairvoyant-zone"]["zone_loss_at_peak"] == "PASS"
