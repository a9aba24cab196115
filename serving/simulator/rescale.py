"""Rate scaling: the same traffic on the same clock, k times as much of it.

`Trace.scaled_to_peak` compresses time, which keeps every request but makes traffic change k times
faster: the Azure conversation trace's rise of 32 % of peak within three minutes becomes a rise
within 3/k minutes. The plan's burst headroom is that rise over one cold start on a real clock
(serving/burst.py), so a time-compressed replay tests a faster-moving workload than the one planned
for. Rate scaling keeps the clock: per bin of `bin_s` seconds the arrival count is multiplied by k
(rounded with the remainder carried to the next bin, so every window's count is within one request
of k times the original and the total is exact), the new arrivals are spread uniformly over the
bin (sorted uniforms: Poisson arrivals conditioned on the count), and each takes the prompt, output
and prefix group of a request of the same bin, every request of the bin used floor(k) or ceil(k)
times. The shape at `bin_s` resolution, the token mix of every bin and the growth per real minute
are kept; what changes below `bin_s` is the arrival pattern within a bin.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from serving.simulator.traces import Trace

RATE_BIN_S = 10.0
PEAK_CORRECTIONS = 6


def rate_scaled(trace: Trace, factor: float, bin_s: float = RATE_BIN_S, seed: int = 0) -> Trace:
    """`trace` with `factor` times its arrivals per `bin_s` on the same clock (see the module)."""
    from serving.simulator.traces import Trace

    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"rate scale factor must be a positive number, got {factor}")
    if not bin_s > 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    if not len(trace):
        return trace
    rng = np.random.default_rng(seed)
    t0 = float(trace.arrival_s[0])
    bins = np.floor((trace.arrival_s - t0) / bin_s).astype(np.int64)
    counts = np.bincount(bins)
    wanted = np.floor(np.cumsum(counts) * factor + 1e-9).astype(np.int64)
    per_bin = np.diff(wanted, prepend=0)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    picks: list[np.ndarray] = []
    times: list[np.ndarray] = []
    for b in np.flatnonzero(per_bin):
        n, c = int(per_bin[b]), int(counts[b])
        # Every request of the bin floor(n / c) times, then a random few once more.
        order = np.concatenate([np.tile(np.arange(c), n // c), rng.permutation(c)[: n % c]])
        picks.append(starts[b] + rng.permutation(order))
        times.append(t0 + bin_s * (b + np.sort(rng.random(n))))
    if not picks:
        raise ValueError(f"rate factor {factor:g} leaves no request of the trace's {len(trace)}")
    pick = np.concatenate(picks)
    return Trace(np.concatenate(times), trace.prompt_tokens[pick], trace.output_tokens[pick],
                 trace.prefix_group[pick], trace.prefix_tokens[pick],
                 f"{trace.source} x{factor:.4g} rate")


def rate_scaled_to_peak(trace: Trace, peak_qps: float, window_s: float, bin_s: float = RATE_BIN_S,
                        seed: int = 0) -> Trace:
    """`trace` rate-scaled so its busiest `window_s` carries `peak_qps`, to within one request
    where the corrections converge (else the closest of them)."""
    if not peak_qps > 0:
        raise ValueError(f"target peak_qps must be positive, got {peak_qps}")
    if len(trace) < 2:
        raise ValueError("rate scaling needs at least two requests")
    # Spreading arrivals over their bin moves the busiest window's edges, so the first factor
    # lands a few % off; a few corrections by the ratio reached bring it within a request.
    factor = peak_qps / trace.peak_qps(window_s)
    best = scaled = rate_scaled(trace, factor, bin_s, seed)
    for _ in range(PEAK_CORRECTIONS):
        reached = scaled.peak_qps(window_s)
        if abs(reached - peak_qps) < abs(best.peak_qps(window_s) - peak_qps):
            best = scaled
        if abs(reached - peak_qps) * window_s <= 1.0:
            return scaled
        factor *= peak_qps / reached
        scaled = rate_scaled(trace, factor, bin_s, seed)
    return best if abs(best.peak_qps(window_s) - peak_qps) <= abs(scaled.peak_qps(window_s) - peak_qps) \
        else scaled


__all__ = ["RATE_BIN_S", "rate_scaled", "rate_scaled_to_peak"]
