"""benchmarks/published.py: the simulator rerun under the published benchmarks' conditions.

These tests check the conditions and the measuring, never that the simulator agrees with the
published figures (it does not, and the point of the script is to say by how much). Expected
values come from FACTS.md section 7 (parsed), the upstream benchmark files (cited where typed) or
hand calculation.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from functools import cache

import numpy as np
import pytest

from rtip.stackfile import PROJECT_DIR
from serving.hardware import GpuModel
from serving.models import CATALOG, Quantization
from serving.simulator import EngineConfig, StepTime
from tests.conftest import SHARED


def _load():
    path = PROJECT_DIR / "benchmarks" / "published.py"
    spec = importlib.util.spec_from_file_location("bench_published", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


bench = _load()


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@cache
def facts_figures() -> dict[tuple[str, int, int | None, str], float]:
    """FACTS.md section 7's published figures: (model size, GPU, TP, concurrency, metric) -> value."""
    text = (SHARED / "FACTS.md").read_text()
    section = " ".join(text.split("## 7.")[1].split("## 8.")[0].split())
    got: dict[tuple, float] = {}
    m = re.search(r"Llama-3\.1-8B FP8 1xH100 ([\d,]+) tok/s at ([\d.]+) ms ITL; 1xA100-80 ([\d,]+) tok/s "
                  r"at ([\d.]+) ms", section)
    assert m, "FACTS.md section 7 no longer states the Llama-3.1-8B figures this test parses"
    got[("8b", GpuModel.H100_80GB, 1, None, "output_tok_s")] = _number(m[1])
    got[("8b", GpuModel.H100_80GB, 1, None, "median_itl_ms")] = _number(m[2])
    got[("8b", GpuModel.A100_80GB, 1, None, "output_tok_s")] = _number(m[3])
    got[("8b", GpuModel.A100_80GB, 1, None, "median_itl_ms")] = _number(m[4])
    m = re.search(r"Llama-3\.1-70B FP8 2xH100 ([\d,]+) tok/s at ([\d.]+) ms, 4xH100 ([\d,]+) at ([\d.]+) ms",
                  section)
    assert m, "FACTS.md section 7 no longer states the Llama-3.1-70B figures this test parses"
    for tp, tput, itl in ((2, m[1], m[2]), (4, m[3], m[4])):
        got[("70b", GpuModel.H100_80GB, tp, None, "output_tok_s")] = _number(tput)
        got[("70b", GpuModel.H100_80GB, tp, None, "median_itl_ms")] = _number(itl)
    m = re.search(r"NIM Llama-3\.3-70B FP8 2xH100 \((\d+) in/(\d+) out\): TTFT ([\d,]+) ms at (\d+) "
                  r"concurrent, ([\d,]+) ms at (\d+), ([\d,]+) ms at (\d+)", section)
    assert m, "FACTS.md section 7 no longer states the NIM figures this test parses"
    got[("nim", "input")] = _number(m[1])
    got[("nim", "output")] = _number(m[2])
    for ttft, c in ((m[3], m[4]), (m[5], m[6]), (m[7], m[8])):
        got[("70b", GpuModel.H100_80GB, 2, int(c), "mean_ttft_ms")] = _number(ttft)
    return got


def _key(point, metric: str) -> tuple:
    size = "8b" if "8b" in point.card else "70b"
    return (size, point.gpu, point.tp, point.concurrency, metric)


def test_the_points_are_the_figures_of_facts_section_7():
    facts = {k: v for k, v in facts_figures().items() if k[0] != "nim"}
    script = {_key(p, metric): value for p in bench.POINTS for metric, value in p.figures}
    assert script == facts
    assert all(p.quantization is Quantization.FP8 for p in bench.POINTS)  # every figure is an FP8 run


def test_nim_lengths_and_concurrencies_are_those_of_facts():
    facts = facts_figures()
    assert (bench.NIM_INPUT, bench.NIM_OUTPUT) == (facts[("nim", "input")], facts[("nim", "output")])
    row = bench.run_point(next(p for p in bench.POINTS if p.concurrency == 25))
    assert row["load"] == {"kind": "closed-loop", "concurrency": 25, "requests": 25 * bench.NIM_GENERATIONS,
                           "input_tokens": 5000, "output_tokens": 500}


def test_lambda_engine_uses_the_benchmark_flags_and_memory():
    # benchmark.py: --max-model-len 2000 (the len2000 files), --max-num-seqs 1024,
    # --gpu-memory-utilization 0.95; vLLM 0.5.x SchedulerConfig: max(max_model_len, 2048) tokens a step.
    point = next(p for p in bench.POINTS if p.key == "8b-fp8-1xh100")
    cfg = bench.engine_for(point)
    assert (cfg.max_model_len, cfg.max_num_seqs, cfg.max_num_batched_tokens) == (2000, 1024, 2048)
    # Hand calculation: 80 GB x 0.95 less the FP8 weights (9.08 GB) and vLLM's profile-run reserve
    # (serving.activation) at the run's own limits, 2048 tokens and 1024 sequences: the sampler's
    # FP32 logits, 1024 x 128,256 vocab x 4 B, plus 2048 x 4096 hidden x 2 B still held, = 0.542113792
    # GB, above the forward pass's 2048 x 3 x 14,336 x 2 B + 2 x 2048 x 4096 x 2 B = 0.2097152 GB;
    # over 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes a token, in blocks of 16.
    assert cfg.kv_blocks == math.floor((80 * 0.95 - 9.08 - 0.542113792) * 1e9 / 131_072) // 16


def test_sharegpt_lengths_match_the_upstream_run_and_its_filter():
    # results/prompt_320/1xH100-80GB-SXM/Meta-Llama-3.1-8B-FP8_tp1_len8000.json: 320 prompts,
    # total_input_tokens 65578, total_output_tokens 44463.
    prompts, outputs = bench.sharegpt_like(320, 65578 / 320, 44463 / 320, np.random.default_rng(5))
    assert len(prompts) == len(outputs) == 320
    assert prompts.sum() == pytest.approx(65578, rel=0.01)
    assert outputs.sum() == pytest.approx(44463, rel=0.01)
    # vLLM 0.5.4 sample_sharegpt_requests: prompt and output >= 4 tokens, prompt <= 1024, pair <= 2048.
    assert prompts.min() >= 4 and outputs.min() >= 4 and prompts.max() <= 1024
    assert (prompts + outputs).max() <= 2048


# A hand engine: fast, and big enough a KV cache that nothing is preempted.
HAND = EngineConfig(step=StepTime(0.03, 0.0001, 0.012, 0.0004), kv_blocks=20_000,
                    max_num_batched_tokens=2048, max_num_seqs=256)


def test_burst_sends_every_prompt_at_t0():
    n = 40
    run = bench.drive(HAND, np.full(n, 300), np.full(n, 20), None)
    assert [r.arrival for r in run.requests] == [0.0] * n
    assert run.in_flight[0] == (0.0, n)
    assert all(r.out == 20 for r in run.requests)


def test_closed_loop_holds_the_stated_concurrency():
    c = 8
    n = c * bench.NIM_GENERATIONS
    run = bench.drive(HAND, np.full(n, 500), np.full(n, 50), c)
    assert len(run.requests) == n and all(r.done > 0 for r in run.requests)
    # The engine's own count (running + waiting) after every event, until the last request is sent.
    during = [k for t, k in run.in_flight if t < run.last_submit_s]
    assert during and set(during) == {c}
    assert max(k for _, k in run.in_flight) == c
    figures = bench.closed_loop_figures(run, c)
    assert figures["mean_in_flight"] == pytest.approx(c, rel=1e-9)


def test_littles_law_holds_on_the_closed_loop_figures():
    c = 6
    n = c * bench.NIM_GENERATIONS
    rng = np.random.default_rng(3)
    run = bench.drive(HAND, rng.integers(100, 900, n), rng.integers(10, 80, n), c)
    f = bench.closed_loop_figures(run, c)
    assert f["requests_per_s"] * f["mean_e2e_s"] == pytest.approx(c, rel=0.05)


def test_single_request_itl_is_the_profile_decode_step():
    # Alone, every decode step is tpot_fixed + tpot_per_seq x 1 = 12.4 ms (hand calculation).
    run = bench.drive(HAND, np.array([300]), np.array([30]), None)
    assert bench.median_itl_s(run.steps) == pytest.approx(0.0124, rel=1e-9)


def test_step_log_itl_agrees_with_per_request_token_times():
    rng = np.random.default_rng(11)
    run = bench.drive(HAND, rng.integers(50, 900, 120), rng.integers(5, 200, 120), None)
    reqs = [r for r in run.requests if r.out > 1]
    per_request = sum(r.last_token - r.first_token for r in reqs) / sum(r.out - 1 for r in reqs)
    assert bench.mean_itl_s(run.steps) == pytest.approx(per_request, rel=0.02)


def test_no_profile_only_where_the_toolkit_has_no_variant():
    a100 = next(p for p in bench.POINTS if p.gpu is GpuModel.A100_80GB)
    assert "A100" in bench.no_profile_reason(a100)
    assert all(bench.no_profile_reason(p) is None for p in bench.POINTS if p.gpu is GpuModel.H100_80GB)
    # The toolkit's rule (serving.models.quantizations): FP8 needs FP8 tensor cores; BF16 has a path.
    assert CATALOG[a100.card].variant_weights_gb(Quantization.NONE) > 0


@cache
def committed() -> dict:
    return json.loads((PROJECT_DIR / "benchmarks" / "results" / "published.json").read_text())


def test_json_has_one_row_per_published_figure():
    rows = committed()["rows"]
    point = {p.key: p for p in bench.POINTS}
    keys = [_key(point[r["point"]], r["metric"]) for r in rows]
    facts = {k: v for k, v in facts_figures().items() if k[0] != "nim"}
    assert sorted(map(str, keys)) == sorted(map(str, facts)) and len(set(keys)) == len(keys)
    for r, key in zip(rows, keys, strict=True):
        assert r["published"] == facts[key]
        if r["status"] == "no profile":
            assert r["simulated"] is None and r["ratio"] is None and r["profile"]["detail"]
        else:
            assert r["status"] == "ok" and r["profile"]["kind"] in ("measured", "derived")
            assert r["ratio"] == pytest.approx(r["simulated"] / r["published"], abs=2e-3)


def test_json_closed_loop_runs_hold_their_concurrency_and_littles_law():
    runs = committed()["runs"]
    closed = {k: v for k, v in runs.items() if v["load"]["kind"] == "closed-loop"}
    assert {v["load"]["concurrency"] for v in closed.values()} == {25, 50, 100}
    for run in closed.values():
        c, f = run["load"]["concurrency"], run["figures"]
        assert f["mean_in_flight"] == pytest.approx(c, rel=1e-6)
        assert f["requests_per_s"] * f["mean_e2e_s"] == pytest.approx(c, rel=0.03)


def test_a_fresh_run_reports_the_same_rows(tmp_path):
    out = tmp_path / "published.json"
    assert bench.main(["--out", str(out)]) == 0
    fresh = json.loads(out.read_text())["rows"]
    assert [(r["point"], r["metric"], r["status"]) for r in fresh] == \
        [(r["point"], r["metric"], r["status"]) for r in committed()["rows"]]
