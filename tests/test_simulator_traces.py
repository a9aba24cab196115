"""Trace loaders against the real Azure files, rescaling to a peak, and the generators."""

from __future__ import annotations

import csv
import json
from bisect import bisect_left
from datetime import datetime

import numpy as np
import pytest

from serving.simulator import Trace, diurnal, load_azure_2023, load_csv, load_jsonl, servegen_bursty
from tests.conftest import SHARED

TRACES = SHARED / "traces"


def _azure_by_hand(name: str) -> tuple[int, float, float, float]:
    """Rows with at least one token each way, mean context, mean generated, first-to-last span."""
    rows = []
    with (TRACES / name).open(newline="") as f:
        for row in csv.DictReader(f):
            ctx, gen = int(row["ContextTokens"]), int(row["GeneratedTokens"])
            if ctx >= 1 and gen >= 1:
                rows.append((row["TIMESTAMP"], ctx, gen))

    def when(s: str) -> datetime:
        return datetime.strptime(s[:26], "%Y-%m-%d %H:%M:%S.%f")  # 6 of the 7 decimals

    stamps = sorted(when(r[0]) for r in rows)
    return (len(rows), sum(r[1] for r in rows) / len(rows), sum(r[2] for r in rows) / len(rows),
            (stamps[-1] - stamps[0]).total_seconds())


@pytest.mark.parametrize("name", ["azure2023_AzureLLMInferenceTrace_conv.csv",
                                  "azure2023_AzureLLMInferenceTrace_code.csv"])
def test_azure_loader_reads_the_real_files(name: str):
    trace = load_azure_2023(TRACES / name)
    rows, ctx, gen, span = _azure_by_hand(name)
    assert len(trace) == rows
    assert trace.prompt_tokens.mean() == pytest.approx(ctx, rel=1e-12)
    assert trace.output_tokens.mean() == pytest.approx(gen, rel=1e-12)
    assert trace.duration_s == pytest.approx(span, abs=1e-5)
    assert trace.arrival_s[0] == 0.0


def test_conversation_trace_matches_sources_md():
    # SOURCES.md: 19,366 rows over 3,502 s, mean 5.53 req/s, context mean 1,155, generated mean 211.
    trace = load_azure_2023(TRACES / "azure2023_AzureLLMInferenceTrace_conv.csv")
    assert len(trace) == 19_366
    assert trace.mean_qps == pytest.approx(5.53, abs=0.01)
    assert round(trace.prompt_tokens.mean()) == 1155 and round(trace.output_tokens.mean()) == 211


def _peak_by_hand(times: list[float], window: float) -> float:
    return max(bisect_left(times, t + window) - i for i, t in enumerate(times)) / window


@pytest.mark.parametrize("target", [2.0, 20.0, 57.5])
def test_rate_scaling_hits_the_requested_peak(target: float):
    trace = load_azure_2023(TRACES / "azure2023_AzureLLMInferenceTrace_code.csv")
    scaled = trace.scaled_to_peak(target)
    # The peak count in a 60 s window is an integer: exact to one request per window.
    assert abs(_peak_by_hand(scaled.arrival_s.tolist(), 60.0) - target) <= 1 / 60 + 1e-9
    assert len(scaled) == len(trace)
    ratio = np.diff(scaled.arrival_s)[:100] / np.maximum(np.diff(trace.arrival_s)[:100], 1e-12)
    nonzero = np.diff(trace.arrival_s)[:100] > 0
    assert np.allclose(ratio[nonzero], ratio[nonzero][0])  # one time factor: the shape is kept


def test_generic_csv_and_jsonl(tmp_path):
    rows = [(3.5, 100, 7), (1.0, 20, 3), (2.0, 50, 0)]
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "input_tokens", "output_tokens"])
        w.writerows(rows)
    trace = load_csv(path)
    assert trace.arrival_s.tolist() == [0.0, 2.5]  # sorted, re-based, the zero-output row dropped
    assert trace.prompt_tokens.tolist() == [20, 100]
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps({"timestamp": f"2024-01-01T00:00:0{i}.5", "input_tokens": 10 + i,
                                        "output_tokens": 2}) for i in range(3)))
    assert load_jsonl(jl).arrival_s.tolist() == [0.0, 1.0, 2.0]
    bad = tmp_path / "bad.csv"
    bad.write_text("time,in,out\n1,2,3\n")
    with pytest.raises(ValueError, match="missing column"):
        load_csv(bad)
    bad.write_text("timestamp,input_tokens,output_tokens\nyesterday,2,3\n")
    with pytest.raises(ValueError, match="ISO-8601"):
        load_csv(bad)


def test_servegen_bursty_follows_the_windows_rates():
    path = TRACES / "servegen_reason_deepseek-r1_client_windows.csv"
    start, hours = 72_000.0, 1
    expected = 0.0
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            w = float(row["window_start_s"])
            if start <= w < start + 3600 * hours and row["iat_dist"] in ("Gamma", "Weibull"):
                expected += float(row["rate_rps"]) * 600
    trace = servegen_bursty(path, start, 3600.0 * hours, (1000, 200), seed=1)
    assert len(trace) == pytest.approx(expected, rel=0.1)
    assert trace.arrival_s.max() < 3600.0 * hours


def test_diurnal_ramp_rises_to_the_peak():
    trace = diurnal(3600.0, 1.0, 9.0, (100, 10), period_s=3600.0, seed=3)
    counts = np.histogram(trace.arrival_s, bins=4, range=(0, 3600))[0]
    # Mean rate (min + peak) / 2 = 5/s over the hour; the middle half holds the peak.
    assert len(trace) == pytest.approx(5.0 * 3600, rel=0.05)
    assert counts[1] > 2 * counts[0] and counts[2] > 2 * counts[3]


def test_trace_input_errors():
    with pytest.raises(ValueError, match="output_tokens"):
        Trace([0.0, 1.0], [1, 2], [1])
    with pytest.raises(ValueError, match="at least one"):
        Trace([0.0], [0], [1])
    with pytest.raises(ValueError, match="positive"):
        Trace([0.0, 1.0], [5, 5], [1, 1]).scaled_to_peak(0)
