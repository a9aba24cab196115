"""The simulator against the published figures of FACTS.md section 7 (issue 11, item 3).

Each published point is rerun in the simulator under the benchmark's own conditions, one replica
built as the planner builds it (`serving.replica_sim.replica_engine`: the profile, the KV blocks
the memory leaves after the weights) with the benchmark's engine flags where it states them.
Prints one row per published figure (published, simulated, simulated / published, where the
profile comes from) and writes benchmarks/results/published.json. Nothing here asserts agreement:
the point is to say by how much the two disagree (README, "The simulator against published
figures").

Conditions, with where each was read:

LambdaLabsML/vllm-benchmark (the FACTS throughput / ITL pairs):
- the table in `benchmark_v0.md` ("with --num-prompts fixed at 320") is `compile_sweetspot.py`'s
  `output_throughput` / `median_itl_ms` of `results/prompt_320/<N>x<GPU>/<model>_tp<N>_len2000.json`;
- `benchmark.py` starts vLLM with `--max-model-len` (2000 here), `--gpu-memory-utilization 0.95`,
  `--max-num-seqs 1024`, then vLLM's `benchmark_serving.py --dataset-name sharegpt --num-prompts 320`
  with no `--request-rate`: every prompt is sent at t = 0 (`"request_rate": "inf"` in the result
  files), a burst, not a closed loop; image vllm/vllm-openai:v0.5.4 (`benchmark_1x2x4x8x.sh`);
- the 320 ShareGPT prompts are the same in every result file: 65,578 input tokens in all; the
  generated output was 44,463 tokens in `results/prompt_320/1xH100-80GB-SXM/
  Meta-Llama-3.1-8B-FP8_tp1_len8000.json` (the other runs read: 43,953 and 44,041);
- output throughput = generated tokens / benchmark duration (first send to last token); ITL = each
  request's gaps between streamed tokens, median over all of them;
- the models are the FP8 checkpoints `neuralmagic/Meta-Llama-3.1-8B-FP8` (also on the A100: FACTS
  omits "FP8" for that figure) and `neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8`;
- vLLM 0.5.x without chunked prefill budgets max(max_model_len, 2048) = 2048 tokens a step
  (vllm `config.py` SchedulerConfig); the simulator is vLLM 0.11's V1 scheduler, which always
  chunks, so it runs with that budget: the nearest it has.

NVIDIA NIM (docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance, "Llama-3.3-70b-instruct
Results", NIM 1.8.0, 2 x H100 80G, fp8 TP2, "5000 Input Tokens / 500 Output Tokens"): AIPerf at a
fixed concurrency, a closed loop (each of C clients sends its next request when its last one
ends). The page gives TTFT, ITL and throughput per concurrency; it states neither the request
count nor which statistic (the mean is assumed; the median is kept beside it), nor the engine
(NIM's FP8 TP2 profiles on H100 are TensorRT-LLM, not vLLM) nor its memory fraction (the toolkit's
0.90 is used) nor its batch limits (vLLM 0.11's defaults for the device are used).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serving._calibration import REFERENCES  # noqa: E402
from serving._model_pod import device_memory_gb  # noqa: E402
from serving.hardware import GPUS, GpuModel  # noqa: E402
from serving.lengths import azure_conversation  # noqa: E402
from serving.models import CATALOG, Quantization, quantizations  # noqa: E402
from serving.profiles import SliceKind, profile  # noqa: E402
from serving.replica_sim import replica_engine  # noqa: E402
from serving.sharing import Whole  # noqa: E402
from serving.simulator import EngineConfig  # noqa: E402
from serving.simulator.engine import Engine, SimRequest, StepRecord  # noqa: E402
from serving.slices import GPU_MEMORY_UTILIZATION, served_context  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "published.json"
SEED = 320

# LambdaLabsML/vllm-benchmark conditions (module docstring).
LAMBDA_PROMPTS = 320
LAMBDA_INPUT_TOKENS = 65_578
LAMBDA_OUTPUT_TOKENS = 44_463
LAMBDA_MAX_MODEL_LEN = 2000
LAMBDA_MEMORY_UTILIZATION = 0.95
LAMBDA_MAX_NUM_SEQS = 1024
LAMBDA_STEP_TOKENS = 2048  # max(max_model_len, 2048)
# vLLM 0.5.4 benchmark_serving.py sample_sharegpt_requests drops prompts under 4 tokens or over
# 1024, outputs under 4, and pairs over 2048 tokens together.
SHAREGPT_MIN, SHAREGPT_PROMPT_MAX, SHAREGPT_PAIR_MAX = 4, 1024, 2048

# NIM conditions.
NIM_INPUT, NIM_OUTPUT = 5000, 500
NIM_GENERATIONS = 64  # requests per client
# All clients start together, so the first generations run in lockstep (their prompts prefill
# together); the mean TTFT settles only after ~16 generations (measured: 891 ms after 16 of 48,
# 868 after 32 of 64 or 64 of 128 at concurrency 25), so half the run is warm-up.
WARMUP_GENERATIONS = 32


@dataclass(frozen=True)
class Point:
    """One published benchmark point (one or two figures)."""

    key: str
    source: str
    checkpoint: str
    card: str  # the catalog model the simulator runs
    gpu: GpuModel
    tp: int
    quantization: Quantization
    figures: tuple[tuple[str, float], ...]  # (metric, published value)
    concurrency: int | None = None  # None: the LambdaLabs burst of 320 prompts at t = 0


_LAMBDA = "LambdaLabsML/vllm-benchmark benchmark_v0.md (vLLM 0.5.4)"
_NIM = "NVIDIA NIM 1.8.0 benchmarking page, Llama-3.3-70b-instruct"
# FACTS.md section 7, figure for figure (tests/test_published.py parses FACTS.md and compares).
POINTS: tuple[Point, ...] = (
    Point("8b-fp8-1xh100", _LAMBDA, "neuralmagic/Meta-Llama-3.1-8B-FP8", "llama-3.1-8b-instruct",
          GpuModel.H100_80GB, 1, Quantization.FP8, (("output_tok_s", 3400), ("median_itl_ms", 19.8))),
    Point("8b-fp8-1xa100", _LAMBDA, "neuralmagic/Meta-Llama-3.1-8B-FP8", "llama-3.1-8b-instruct",
          GpuModel.A100_80GB, 1, Quantization.FP8, (("output_tok_s", 1518), ("median_itl_ms", 42.9))),
    Point("70b-fp8-2xh100", _LAMBDA, "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "llama-3.3-70b-instruct",
          GpuModel.H100_80GB, 2, Quantization.FP8, (("output_tok_s", 1728), ("median_itl_ms", 49.3))),
    Point("70b-fp8-4xh100", _LAMBDA, "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "llama-3.3-70b-instruct",
          GpuModel.H100_80GB, 4, Quantization.FP8, (("output_tok_s", 2243), ("median_itl_ms", 38.3))),
    *(Point(f"nim-70b-fp8-2xh100-c{c}", _NIM, "meta/llama-3.3-70b-instruct (NIM fp8 TP2)",
            "llama-3.3-70b-instruct", GpuModel.H100_80GB, 2, Quantization.FP8, (("mean_ttft_ms", ttft),),
            concurrency=c)
      for c, ttft in ((25, 689), (50, 835), (100, 7996))),
)
# The same NIM table's ITL (ms) and throughput (tokens/s) at those concurrencies: context for the
# TTFT rows, not FACTS figures.
NIM_PAGE_CONTEXT = {25: (38.75, 623.4), 50: (59.73, 814.37), 100: (92.91, 917.26)}


def no_profile_reason(point: Point) -> str | None:
    """Why the toolkit has no profile for `point`, or None. The toolkit offers FP8 only where the
    GPU has FP8 tensor cores (serving.models.quantizations); vLLM runs an FP8 checkpoint on an
    A100 as weight-only FP8 (Marlin, 16-bit activations), a kernel no profile models."""
    card, spec = CATALOG[point.card], GPUS[point.gpu]
    if point.quantization not in quantizations(card, (point.quantization,), spec):
        return (f"no {point.quantization} path on {point.gpu}: no FP8 tensor cores, and vLLM's "
                f"weight-only FP8 (Marlin) kernel has no profile")
    return None


def profile_source(point: Point) -> dict[str, str]:
    card = CATALOG[point.card]
    prof = profile(card, SliceKind(point.gpu, tensor_parallel=point.tp), point.quantization)
    measured = point.quantization is Quantization.NONE and any(
        r.gpu is point.gpu and r.tensor_parallel == point.tp and abs(r.params_b / card.params_b - 1) < 0.02
        for r in REFERENCES)
    return {"kind": "measured" if measured else "derived", "detail": prof.source}


def engine_for(point: Point) -> EngineConfig:
    """One replica as `replica_engine` builds it, with the benchmark's flags where it states them."""
    card = CATALOG[point.card]
    kind = SliceKind(point.gpu, tensor_parallel=point.tp)
    visible = device_memory_gb(kind, Whole())
    if point.concurrency is None:
        usable = visible * point.tp * LAMBDA_MEMORY_UTILIZATION
        # The run's stated limits size the profile run's activation reserve too.
        return replica_engine(card, kind, point.quantization, LAMBDA_MAX_MODEL_LEN, visible, usable,
                              batch_limits=(LAMBDA_STEP_TOKENS, LAMBDA_MAX_NUM_SEQS))
    usable = visible * point.tp * GPU_MEMORY_UTILIZATION
    context = served_context(card, point.quantization, kind.memory_gb, None)
    return replica_engine(card, kind, point.quantization, context, visible, usable)


def sharegpt_like(n: int, mean_prompt: float, mean_output: float,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`n` request lengths with the project's length spread (serving.lengths), kept by the
    benchmark's ShareGPT filter, their means matched to the published run's by rescaling."""
    shape = azure_conversation()
    scale_p, scale_o = mean_prompt, mean_output
    for _ in range(8):
        draw_rng = np.random.default_rng(rng.integers(1 << 32))
        p, o = shape.sample(8 * n, round(scale_p), round(scale_o), draw_rng)
        keep = ((p >= SHAREGPT_MIN) & (o >= SHAREGPT_MIN) & (p <= SHAREGPT_PROMPT_MAX)
                & (p + o <= SHAREGPT_PAIR_MAX))
        p, o = p[keep][:n], o[keep][:n]
        scale_p *= mean_prompt / p.mean()
        scale_o *= mean_output / o.mean()
    # 320 draws of a long-tailed shape miss the mean by several %: a last direct correction.
    p = np.clip(np.rint(p * mean_prompt / p.mean()), SHAREGPT_MIN, SHAREGPT_PROMPT_MAX).astype(np.int64)
    o = np.clip(np.rint(o * mean_output / o.mean()), SHAREGPT_MIN, SHAREGPT_PAIR_MAX - p).astype(np.int64)
    return p, o


@dataclass
class Drive:
    """A run of one engine: its requests, step log and (time, in flight) after every event."""

    requests: list[SimRequest]
    steps: list[StepRecord]
    in_flight: list[tuple[float, int]]
    last_submit_s: float


def drive(cfg: EngineConfig, prompts: np.ndarray, outputs: np.ndarray, concurrency: int | None) -> Drive:
    """Every request at t = 0 (`concurrency` None) or a closed loop of `concurrency` clients: a
    client sends its next request the instant its last one ends (the engine sees it at its next
    step boundary, as `serving.simulator.sim` delivers an arrival during a step)."""
    engine = Engine(cfg, log_steps=True)
    limit = cfg.context_limit
    n = len(prompts)
    reqs: list[SimRequest] = []
    t_end: float | None = None
    last_submit = 0.0

    def submit(now: float) -> None:
        nonlocal t_end, last_submit
        i = len(reqs)
        prompt = int(prompts[i])
        req = SimRequest(i, now, prompt, max(1, min(int(outputs[i]), limit - prompt)))
        reqs.append(req)
        last_submit = now
        new = engine.submit(req, now)
        if new is not None:
            t_end = new

    for _ in range(n if concurrency is None else min(concurrency, n)):
        submit(0.0)
    samples = [(0.0, engine.load)]
    while t_end is not None:
        now = t_end
        t_end = engine.on_step_end(now)
        ended = len(engine.finished)
        engine.finished.clear()
        for _ in range(ended if concurrency is not None else 0):
            if len(reqs) < n:
                submit(now)
        samples.append((now, engine.load))
    assert engine.log is not None
    return Drive(reqs, engine.log, samples, last_submit)


def median_itl_s(steps: list[StepRecord]) -> float:
    """Median gap between a sequence's tokens: each decode token of a step arrives one step after
    the sequence's previous token (V1 schedules running requests first, every step), so the gaps
    are the step durations weighted by the decode tokens each step emits."""
    d = np.array([s.duration_s for s in steps if s.decode_seqs])
    w = np.array([s.decode_seqs * s.steps for s in steps if s.decode_seqs], dtype=float)
    order = np.argsort(d)
    cum = np.cumsum(w[order])
    return float(d[order][np.searchsorted(cum, cum[-1] / 2)])


def mean_itl_s(steps: list[StepRecord]) -> float:
    w = np.array([s.decode_seqs * s.steps for s in steps], dtype=float)
    d = np.array([s.duration_s for s in steps])
    return float((d * w).sum() / w.sum())


def burst_figures(run: Drive) -> dict[str, float]:
    out = np.array([r.out for r in run.requests], dtype=float)
    done = np.array([r.done for r in run.requests])
    ttft = np.array([r.first_token - r.arrival for r in run.requests])
    duration = float(done.max())
    return {"output_tok_s": float(out.sum() / duration), "median_itl_ms": median_itl_s(run.steps) * 1e3,
            "duration_s": duration, "mean_ttft_ms": float(ttft.mean() * 1e3),
            "mean_prompt": float(np.mean([r.prompt for r in run.requests])), "mean_output": float(out.mean()),
            "preemptions": int(sum(r.preemptions for r in run.requests))}


def window(run: Drive, concurrency: int) -> tuple[float, float]:
    """The measured span of a closed loop: after the warm-up generations, until the last request
    is sent (after it the clients stop and in-flight falls)."""
    first = min(WARMUP_GENERATIONS * concurrency, len(run.requests) - 1)
    return run.requests[first].arrival, run.last_submit_s


def closed_loop_figures(run: Drive, concurrency: int) -> dict[str, float]:
    t_a, t_b = window(run, concurrency)
    done = [r for r in run.requests if t_a < r.done <= t_b]
    measured = [r for r in done if r.arrival >= t_a]
    ttft = np.array([r.first_token - r.arrival for r in measured])
    e2e = np.array([r.done - r.arrival for r in done])
    tpot = np.array([(r.last_token - r.first_token) / (r.out - 1) for r in measured if r.out > 1])
    span = t_b - t_a
    times = np.array([t for t, _ in run.in_flight])
    loads = np.array([k for _, k in run.in_flight], dtype=float)
    inside = (times >= t_a) & (times < t_b)
    dt = np.diff(np.append(times, times[-1]))
    return {"mean_ttft_ms": float(ttft.mean() * 1e3), "median_ttft_ms": float(np.median(ttft) * 1e3),
            "mean_itl_ms": float(tpot.mean() * 1e3), "output_tok_s": sum(r.out for r in done) / span,
            "requests_per_s": len(done) / span, "mean_e2e_s": float(e2e.mean()),
            "mean_in_flight": float((loads[inside] * dt[inside]).sum() / dt[inside].sum()),
            "measured_requests": len(measured), "window_s": span,
            "preemptions": int(sum(r.preemptions for r in run.requests))}


def run_point(point: Point, seed: int = SEED) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    cfg = engine_for(point)
    if point.concurrency is None:
        prompts, outputs = sharegpt_like(LAMBDA_PROMPTS, LAMBDA_INPUT_TOKENS / LAMBDA_PROMPTS,
                                         LAMBDA_OUTPUT_TOKENS / LAMBDA_PROMPTS, rng)
        figures = burst_figures(drive(cfg, prompts, outputs, None))
        load = {"kind": "burst", "prompts": LAMBDA_PROMPTS, "request_rate": "inf"}
    else:
        n = NIM_GENERATIONS * point.concurrency
        prompts, outputs = np.full(n, NIM_INPUT), np.full(n, NIM_OUTPUT)
        figures = closed_loop_figures(drive(cfg, prompts, outputs, point.concurrency), point.concurrency)
        itl, tput = NIM_PAGE_CONTEXT[point.concurrency]
        figures["page_itl_ms"], figures["page_output_tok_s"] = itl, tput
        # What-if, not a published condition: twice the KV blocks, as an FP8 KV cache (1 byte a
        # value, the profile's cache is BF16) would hold; only the capacity changes, not the step
        # times. Whether NIM's profile runs one is not stated on the page.
        doubled = replace(cfg, kv_blocks=2 * cfg.kv_blocks)
        what_if = closed_loop_figures(drive(doubled, prompts, outputs, point.concurrency), point.concurrency)
        figures["what_if_2x_kv_mean_ttft_ms"] = what_if["mean_ttft_ms"]
        load = {"kind": "closed-loop", "concurrency": point.concurrency, "requests": n,
                "input_tokens": NIM_INPUT, "output_tokens": NIM_OUTPUT}
    engine = {k: v for k, v in asdict(cfg).items() if k != "step"}
    return {"load": load, "engine": engine, "figures": figures}


def rows(point: Point, sim: dict[str, object] | None, reason: str | None) -> list[dict[str, object]]:
    source = profile_source(point) if reason is None else {"kind": "none", "detail": reason}
    out = []
    for metric, published in point.figures:
        simulated = None if sim is None else sim["figures"][metric]  # type: ignore[index]
        out.append({"point": point.key, "source": point.source, "checkpoint": point.checkpoint,
                    "gpu": str(point.gpu), "tensor_parallel": point.tp,
                    "quantization": str(point.quantization), "concurrency": point.concurrency,
                    "metric": metric, "published": published,
                    "simulated": None if simulated is None else round(simulated, 3),
                    "ratio": None if simulated is None else round(simulated / published, 3),
                    "status": "no profile" if reason else "ok", "profile": source})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    table: list[dict[str, object]] = []
    runs: dict[str, object] = {}
    for point in POINTS:
        reason = no_profile_reason(point)
        sim = None if reason else run_point(point)
        if sim is not None:
            runs[point.key] = sim
        table.extend(rows(point, sim, reason))
    print(f"{'point':24} {'metric':14} {'published':>10} {'simulated':>10} {'sim/pub':>8}  profile")
    for r in table:
        sim_text = "-" if r["simulated"] is None else f"{r['simulated']:.1f}"
        ratio = "no profile" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(f"{r['point']:24} {r['metric']:14} {r['published']:>10} {sim_text:>10} {ratio:>8}  "
              f"{r['profile']['kind']}: {r['profile']['detail']}")  # type: ignore[index]
    seconds = time.perf_counter() - started
    print(f"{len(table)} figures in {seconds:.1f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"rows": table, "runs": runs, "seconds": round(seconds, 1)}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
