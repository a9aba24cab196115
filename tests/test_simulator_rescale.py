"""Rate scaling (serving/simulator/rescale.py): same clock, k times the arrivals per bin, checked
against counts and growth recomputed here from the real Azure traces."""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
import pytest

from serving.simulator import load_azure_2023
from serving.simulator.rescale import RATE_BIN_S, rate_scaled
from tests.conftest import SHARED

TRACES = SHARED / "traces"
CONV = TRACES / "azure2023_AzureLLMInferenceTrace_conv.csv"
CODE = TRACES / "azure2023_AzureLLMInferenceTrace_code.csv"


def _per_bin(times: np.ndarray, start: float, width: float, bins: int) -> np.ndarray:
    return np.histogram(times, bins=start + width * np.arange(bins + 1))[0]


def _largest_rise(times: np.ndarray, start: float, minutes: int) -> float:
    """Largest rise of the per-minute count within `minutes`, over the busiest minute (by hand)."""
    counts = _per_bin(times, start, 60.0, int((times[-1] - start) // 60) + 1)
    rises = [counts[i + k] - counts[i] for k in range(1, minutes + 1) for i in range(len(counts) - k)]
    return max(rises) / counts.max()


@pytest.mark.parametrize("factor", [0.37, 1.0, 2.5, 4.6])
def test_every_bin_gets_k_times_its_arrivals_on_the_same_clock(factor: float):
    trace = load_azure_2023(CONV)
    scaled = rate_scaled(trace, factor)
    t0 = float(trace.arrival_s[0])
    n = int((trace.arrival_s[-1] - t0) // RATE_BIN_S) + 1
    before = _per_bin(trace.arrival_s, t0, RATE_BIN_S, n)
    after = _per_bin(scaled.arrival_s, t0, RATE_BIN_S, n)
    assert after.sum() == len(scaled) == int(np.floor(len(trace) * factor + 1e-9))
    assert np.all(np.abs(after - factor * before) <= 1.0 + 1e-9)  # remainder carried: never off by more
    assert scaled.arrival_s[0] >= t0 and scaled.arrival_s[-1] < t0 + n * RATE_BIN_S  # same clock


def test_lengths_come_from_the_same_bin():
    trace = load_azure_2023(CODE)
    scaled = rate_scaled(trace, 2.3)
    t0 = float(trace.arrival_s[0])
    pairs_by_bin: dict[int, set[tuple[int, int]]] = {}
    for t, p, o in zip(trace.arrival_s, trace.prompt_tokens, trace.output_tokens, strict=True):
        pairs_by_bin.setdefault(int((t - t0) // RATE_BIN_S), set()).add((int(p), int(o)))
    for t, p, o in zip(scaled.arrival_s, scaled.prompt_tokens, scaled.output_tokens, strict=True):
        assert (int(p), int(o)) in pairs_by_bin[int((t - t0) // RATE_BIN_S)]
    # floor(k) or ceil(k) uses of each request: the mix of the whole trace is kept closely.
    assert abs(scaled.prompt_tokens.mean() / trace.prompt_tokens.mean() - 1) < 0.02


@pytest.mark.parametrize("minutes", [1, 3, 10])
def test_rate_scaling_keeps_growth_per_real_minute(minutes: int):
    trace = load_azure_2023(CONV)
    by_rate = trace.rate_scaled_to_peak(40.0)
    original = _largest_rise(trace.arrival_s, float(trace.arrival_s[0]), minutes)
    assert abs(_largest_rise(by_rate.arrival_s, float(by_rate.arrival_s[0]), minutes) - original) < 0.02
    assert abs(by_rate.duration_s - trace.duration_s) <= RATE_BIN_S


@pytest.mark.parametrize(("path", "target"), [(CONV, 3.3), (CONV, 40.0), (CODE, 12.0), (CODE, 200.0)])
def test_rate_scaling_reaches_the_peak(path, target: float):
    scaled = load_azure_2023(path).rate_scaled_to_peak(target)
    times = scaled.arrival_s.tolist()
    peak = max(bisect_left(times, t + 60.0) - i for i, t in enumerate(times)) / 60.0
    assert abs(peak - target) * 60.0 <= 2.0  # within two requests in the busiest minute


def test_bad_factors_are_refused():
    trace = load_azure_2023(CODE)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive"):
            rate_scaled(trace, bad)
    with pytest.raises(ValueError, match="positive"):
        trace.rate_scaled_to_peak(0.0)
