"""The simulator's replica engine against queueing theory, the profile and vLLM's scheduler rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from serving.hardware import GpuModel
from serving.models import CATALOG
from serving.profiles import SliceKind, profile
from serving.simulator import (
    EngineConfig,
    FleetConfig,
    SimConfig,
    StepTime,
    Targets,
    Trace,
    default_batch_limits,
    poisson,
    simulate,
)
from serving.simulator.engine import Engine, SimRequest

# A hand profile with a non-zero prefill fixed part, so chunk counts show in the latencies.
PF, PT, TF, TS = 0.03, 0.0001, 0.012, 0.0004
STEP = StepTime(PF, PT, TF, TS)


def _one_replica(step: StepTime, **engine: object) -> SimConfig:
    args: dict[str, object] = {"kv_blocks": 20_000, **engine}
    return SimConfig(engine=EngineConfig(step=step, **args),  # type: ignore[arg-type]
                     fleet=FleetConfig(zones=("a",), initial_replicas=1), targets=Targets(1.0, 0.1),
                     log_steps=True)


def _drive(engine: Engine, reqs: list[SimRequest]) -> None:
    """Run an engine alone: submit each request at its arrival, step until idle."""
    pending = sorted(reqs, key=lambda r: r.arrival)
    t_end: float | None = None
    while pending or t_end is not None:
        if pending and (t_end is None or pending[0].arrival < t_end):
            r = pending.pop(0)
            new = engine.submit(r, r.arrival)
            t_end = new if new is not None else t_end
        else:
            assert t_end is not None
            t_end = engine.on_step_end(t_end)


def test_single_request_latencies_equal_the_profile():
    prof = profile(CATALOG["llama-3.1-8b-instruct"], SliceKind(GpuModel.A100_80GB))
    cfg = _one_replica(StepTime.from_profile(prof))
    res = simulate(Trace([0.0], [1500], [64]), cfg)
    assert res.ok.all()
    assert res.ttft_s[0] == pytest.approx(prof.prefill_s(1500), rel=1e-9)
    assert res.tpot_s[0] == pytest.approx(prof.tpot_s(1), rel=1e-9)
    assert res.e2e_s[0] == pytest.approx(prof.prefill_s(1500) + 63 * prof.tpot_s(1), rel=1e-9)


def test_chunked_prefill_splits_a_long_prompt_by_the_token_budget():
    engine = Engine(EngineConfig(step=STEP, kv_blocks=2000, max_num_batched_tokens=2048), log_steps=True)
    r = SimRequest(0, 0.0, 5000, 3)
    _drive(engine, [r])
    assert engine.log is not None
    assert [s.prefill_tokens for s in engine.log[:3]] == [2048, 2048, 5000 - 2 * 2048]
    # Three forward passes, each paying the fixed part once, and no token before the last chunk.
    assert r.first_token == pytest.approx(3 * PF + PT * 5000)


def test_a_mixed_step_costs_one_weight_pass_plus_both_per_unit_costs():
    engine = Engine(EngineConfig(step=STEP, kv_blocks=2000), log_steps=True)
    decoding = SimRequest(0, 0.0, 100, 50)
    newcomer = SimRequest(1, 0.2, 700, 2)
    _drive(engine, [decoding, newcomer])
    assert engine.log is not None
    mixed = [s for s in engine.log if s.decode_seqs == 1 and s.prefill_tokens == 700]
    assert len(mixed) == 1
    assert mixed[0].duration_s == pytest.approx(max(PF, TF) + TS * 1 + PT * 700)


def test_preemption_when_kv_blocks_run_short_and_the_victim_still_completes():
    # 20 blocks = 320 tokens; each request grows to 96 + 150 tokens (16 blocks): both cannot fit.
    engine = Engine(EngineConfig(step=STEP, kv_blocks=20, max_model_len=300))
    first, second = SimRequest(0, 0.0, 96, 150), SimRequest(1, 0.001, 96, 150)
    _drive(engine, [first, second])
    assert first.done > 0 and second.done > 0
    assert first.out == 150 and second.out == 150
    # vLLM's FCFS policy preempts the last request of the running list: the later one.
    assert first.preemptions == 0
    assert second.preemptions >= 1
    assert engine.metrics.preemptions == second.preemptions
    assert engine.kv.used == 0  # every block came back
    assert second.done > first.done


def test_admission_stops_at_max_num_seqs():
    engine = Engine(EngineConfig(step=STEP, kv_blocks=2000, max_num_seqs=2), log_steps=True)
    reqs = [SimRequest(i, 0.0, 50, 20) for i in range(3)]
    _drive(engine, reqs)
    assert engine.log is not None
    # The first starts alone at its arrival; the next step admits one more and the third waits.
    assert (engine.log[0].decode_seqs, engine.log[0].prefill_tokens) == (0, 50)
    assert (engine.log[1].decode_seqs, engine.log[1].prefill_tokens) == (1, 50)
    assert all(s.decode_seqs + (s.prefill_tokens > 0) <= 2 for s in engine.log)
    assert reqs[2].first_token > reqs[0].done


def test_prefix_cache_hit_skips_the_cached_full_blocks():
    engine = Engine(EngineConfig(step=STEP, kv_blocks=2000))
    a = SimRequest(0, 0.0, 1500, 2, group=7, prefix_tokens=1030)
    b = SimRequest(1, 5.0, 1500, 2, group=7, prefix_tokens=1030)
    _drive(engine, [a, b])
    cached = (1030 // 16) * 16  # only full 16-token blocks are cached
    assert b.first_token - b.arrival == pytest.approx(PF + PT * (1500 - cached))
    assert a.first_token - a.arrival == pytest.approx(PF + PT * 1500)


def test_prefix_caching_off_recomputes_the_prefix():
    engine = Engine(EngineConfig(step=STEP, kv_blocks=2000, enable_prefix_caching=False))
    a = SimRequest(0, 0.0, 1500, 2, group=7, prefix_tokens=1024)
    b = SimRequest(1, 5.0, 1500, 2, group=7, prefix_tokens=1024)
    _drive(engine, [a, b])
    assert b.first_token - b.arrival == pytest.approx(PF + PT * 1500)


def test_md1_mean_wait_matches_pollaczek_khinchine():
    # One sequence at a time, fixed prompt and output: deterministic service, Poisson arrivals.
    step = StepTime(0.01, 0.0001, 0.02, 0.0)
    prompt, out = 100, 5
    service = (0.01 + 0.0001 * prompt) + (out - 1) * 0.02  # one prefill step, then 4 decode steps
    rate = 0.7 / service
    trace = poisson(rate, 40_000 / rate, (prompt, out), seed=11)
    res = simulate(trace, _one_replica(step, max_num_seqs=1))
    wait = res.ttft_s - (0.01 + 0.0001 * prompt)
    rho = rate * service
    expected = rho * service / (2 * (1 - rho))  # Pollaczek-Khinchine, deterministic service
    assert float(np.mean(wait)) == pytest.approx(expected, rel=0.05)


def test_vllm_default_batch_limits():
    # FACTS.md section 9 and vLLM 0.11.0 EngineArgs._set_default_args.
    assert default_batch_limits(80, "NVIDIA H100 80GB HBM3") == (8192, 1024)
    assert default_batch_limits(80, "NVIDIA A100-SXM4-80GB") == (2048, 256)
    assert default_batch_limits(24, "NVIDIA L4") == (2048, 256)
    cfg = EngineConfig.vllm_defaults(STEP, 1000, 94, "NVIDIA H100 NVL")
    assert (cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.enable_prefix_caching) == (8192, 1024, True)


def test_rejects_bad_engine_inputs():
    with pytest.raises(ValueError, match="kv_blocks"):
        EngineConfig(step=STEP, kv_blocks=0)
    with pytest.raises(ValueError, match="tpot_per_seq_s"):
        StepTime(0.01, 0.001, 0.01, -1.0)
    with pytest.raises(ValueError, match="max_model_len"):
        EngineConfig(step=STEP, kv_blocks=10, max_model_len=1000)
    with pytest.raises(ValueError, match="sorted"):
        Trace([1.0, 0.5], [10, 10], [1, 1])


def test_a_prompt_longer_than_the_context_is_rejected():
    res = simulate(Trace([0.0, 1.0], [5000, 100], [10, 10]), _one_replica(STEP, max_model_len=4096))
    assert list(res.ok) == [False, True]
    assert math.isnan(res.ttft_s[0])
