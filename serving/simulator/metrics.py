"""The Prometheus metrics one vLLM replica exposes on /metrics, as the simulator keeps them.

Names and histogram bucket boundaries are vLLM 0.11.0's (`vllm/v1/metrics/loggers.py`,
PrometheusStatLogger): gauges `vllm:num_requests_running` (line 190), `vllm:num_requests_waiting`
(199), `vllm:kv_cache_usage_perc` (252, 1.0 = full); counters `vllm:num_preemptions` (278),
`vllm:prompt_tokens` (285), `vllm:generation_tokens` (293), `vllm:request_success`; histograms
`vllm:time_to_first_token_seconds` (376), `vllm:inter_token_latency_seconds` (403),
`vllm:request_time_per_output_token_seconds` (414: one observation a finished request, its decode
time over its output tokens less the first, `vllm/v1/metrics/stats.py` line 182; 0 with one
token) and `vllm:e2e_request_latency_seconds` (431). prometheus_client appends `_total` to counters and
`_bucket`/`_sum`/`_count` to histograms, which is what a query sees.

`DCGM_FI_DEV_GPU_UTIL` is added as the GPU-utilisation baseline's input: the share of wall time the
replica ran engine steps (the NVIDIA DCGM exporter reports the share of time a kernel ran).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0)
REQUEST_TPOT_BUCKETS: tuple[float, ...] = ITL_BUCKETS  # the same list in loggers.py (line 416)
E2E_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0)

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
REQUEST_TPOT = "vllm:request_time_per_output_token_seconds"
E2E = "vllm:e2e_request_latency_seconds"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"

Sample = tuple[str, tuple[tuple[str, str], ...], float]


def _le(bound: float) -> str:
    # prometheus_client formats bucket bounds with repr-like floats ("0.1", "1.0", "+Inf").
    return repr(float(bound))


class Histogram:
    """A cumulative Prometheus histogram: per-bucket counts, sum and count."""

    __slots__ = ("bounds", "count", "counts", "labels", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram bounds must be strictly increasing, got {bounds!r}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # last one: +Inf
        self.total = 0.0
        self.count = 0
        self.labels = (*tuple(_le(b) for b in bounds), "+Inf")

    def observe(self, value: float, n: int = 1) -> None:
        # `le` is inclusive: a value equal to a bound falls in that bound's bucket.
        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n
        self.count += n

    def samples(self, name: str) -> Iterator[Sample]:
        running = 0
        for le, c in zip(self.labels, self.counts, strict=True):
            running += c
            yield f"{name}_bucket", (("le", le),), float(running)
        yield f"{name}_sum", (), self.total
        yield f"{name}_count", (), float(self.count)


class ReplicaMetrics:
    """Counters and histograms of one replica (gauges are read live from the engine)."""

    __slots__ = ("busy_s", "e2e", "generation_tokens", "itl", "preemptions", "prompt_tokens",
                 "request_tpot", "success", "ttft")

    def __init__(self) -> None:
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.request_tpot = Histogram(REQUEST_TPOT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.success = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.busy_s = 0.0  # wall time spent in engine steps, for the GPU-utilisation gauge

    def samples(self, running: int, waiting: int, kv_usage: float, gpu_util: float) -> Iterator[Sample]:
        yield RUNNING, (), float(running)
        yield WAITING, (), float(waiting)
        yield KV_USAGE, (), kv_usage
        yield GPU_UTIL, (), gpu_util * 100.0  # DCGM reports percent
        yield "vllm:request_success_total", (), float(self.success)
        yield "vllm:prompt_tokens_total", (), float(self.prompt_tokens)
        yield "vllm:generation_tokens_total", (), float(self.generation_tokens)
        yield "vllm:num_preemptions_total", (), float(self.preemptions)
        yield from self.ttft.samples(TTFT)
        yield from self.itl.samples(ITL)
        yield from self.request_tpot.samples(REQUEST_TPOT)
        yield from self.e2e.samples(E2E)


__all__ = ["E2E", "E2E_BUCKETS", "GPU_UTIL", "ITL", "ITL_BUCKETS", "KV_USAGE", "REQUEST_TPOT",
           "REQUEST_TPOT_BUCKETS", "RUNNING", "TTFT", "TTFT_BUCKETS", "WAITING", "Histogram",
           "ReplicaMetrics", "Sample"]
