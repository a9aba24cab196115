"""Least-squares calibration of the measured SageServe profiles, and the fits it produced.

The measurements are `../shared/traces/profile_sageserve_*.csv` (shashwatj07/SageServe, MIT; see
`../shared/traces/SOURCES.md`). Units differ by file, as SOURCES.md verified against `e2e_time`:
- `Llama-3.*-tp-*.csv`: seconds; `prompt_time` is the prefill, `token_time` the whole decode, so
  the time per output token is `token_time / token_size`.
- `perf_model.csv`: milliseconds; `token_time` is already per output token.

Two straight lines are fitted per (model, hardware, tensor parallel):
- prefill_s = a + b * prompt_tokens, from the batch-1 rows (the batched rows of these files time
  the whole batch's prefill inconsistently, e.g. perf_model A100 TP2 bs64 < bs16, so they are left
  out);
- tpot_s(batch) = c + d * batch, from the 512-token-prompt rows at every batch size.

`REFERENCES` holds the result so planning never needs the CSVs at run time;
`tests/test_profiles.py` refits the CSVs with `fit_file` and checks `REFERENCES` matches, so the
constants cannot drift from the data.
"""

from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from serving.hardware import GpuModel

_HARDWARE = {"a100-80gb": GpuModel.A100_80GB, "h100-80gb": GpuModel.H100_80GB}
# Decode rows are taken at this prompt length, the one every batch size was measured at.
_DECODE_PROMPT = 512


@dataclass(frozen=True)
class Reference:
    """One measured configuration, reduced to the two fitted lines (seconds)."""

    model: str
    gpu: GpuModel
    tensor_parallel: int
    params_b: float  # parameters, billions: the model's HF config
    weights_gb: float  # BF16 safetensors total, decimal GB
    kv_bytes_per_token: int  # BF16 K+V over all layers
    prefill_fixed_s: float
    prefill_per_token_s: float
    tpot_fixed_s: float
    tpot_per_seq_s: float


# Architecture of the measured models (HF config.json): Llama-3.1-8B 32 layers, 8 KV heads x 128;
# Llama-3.2-3B 28 x 8 x 128; Llama-2-70B 80 x 8 x 128, 68.98 B params, 137.98 GB BF16 safetensors.
_ARCH: dict[str, tuple[float, float, int]] = {
    "Llama-3.1-8B": (8.03, 16.07, 2 * 32 * 8 * 128 * 2),
    "Llama-3.2-3B": (3.21, 6.43, 2 * 28 * 8 * 128 * 2),
    "llama2-70b": (68.98, 137.98, 2 * 80 * 8 * 128 * 2),
}


def _line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope, both kept non-negative: a time that falls with more
    work, or a negative time for no work, is measurement noise, and either would let the planner
    promise latencies no GPU gives. A negative intercept refits the line through the origin."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    design = np.column_stack([np.ones(len(xs)), xs])
    (intercept, slope), *_ = np.linalg.lstsq(design, ys, rcond=None)
    if slope < 0:
        return float(ys.mean()), 0.0
    if intercept < 0:
        return 0.0, float(xs @ ys / (xs @ xs))
    return float(intercept), float(slope)


def _drop_dips(batches: list[float], times: list[float]) -> None:
    """Remove, in place, the rows of any batch size whose mean time per token is below the mean at
    the next smaller batch size. Only perf_model TP2 bs64 does that (A100 67 ms < 72 ms at bs32;
    its prefill is out of line too, SOURCES.md): a decode step cannot get faster with more work."""
    means: dict[float, list[float]] = defaultdict(list)
    for b, t in zip(batches, times, strict=True):
        means[b].append(t)
    order = sorted(means)
    dips = {b for prev, b in itertools.pairwise(order)
            if np.mean(means[b]) < np.mean(means[prev])}
    kept = [(b, t) for b, t in zip(batches, times, strict=True) if b not in dips]
    batches[:] = [b for b, _ in kept]
    times[:] = [t for _, t in kept]


def fit_file(path: Path) -> list[Reference]:
    """Fit every (model, hardware, TP) of one SageServe CSV that the catalog can use."""
    milliseconds = "perf_model" in path.name
    scale = 1e-3 if milliseconds else 1.0
    prefill: dict[tuple[str, str, int], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    decode: dict[tuple[str, str, int], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["model"] not in _ARCH or row["hardware"] not in _HARDWARE:
                continue  # bloom-176b and power-capped H100 rows: nothing in the catalog uses them
            key = (row["model"], row["hardware"], int(row["tensor_parallel"]))
            prompt, batch = int(row["prompt_size"]), int(row["batch_size"])
            per_token = float(row["token_time"]) * scale
            if not milliseconds:
                per_token /= int(row["token_size"])
            if batch == 1:
                prefill[key][0].append(prompt)
                prefill[key][1].append(float(row["prompt_time"]) * scale)
            if prompt == _DECODE_PROMPT:
                decode[key][0].append(batch)
                decode[key][1].append(per_token)
    fits = []
    for key in sorted(prefill):
        _drop_dips(*decode[key])
        model, hardware, tp = key
        params, weights, kv = _ARCH[model]
        a, b = _line(*prefill[key])
        c, d = _line(*decode[key])
        fits.append(Reference(model, _HARDWARE[hardware], tp, params, weights, kv, a, b, c, d))
    return fits


def _ref(model: str, gpu: GpuModel, tp: int, a: float, b: float, c: float, d: float) -> Reference:
    params, weights, kv = _ARCH[model]
    return Reference(model, gpu, tp, params, weights, kv, a, b, c, d)


_A100, _H100 = GpuModel.A100_80GB, GpuModel.H100_80GB
# Output of fit_file over the five CSVs (rounded to 4 significant digits; the test allows 0.5%).
REFERENCES: tuple[Reference, ...] = (
    _ref("Llama-3.1-8B", _A100, 2, 0, 6.406e-05, 0.008369, 0.00024),
    _ref("Llama-3.1-8B", _A100, 4, 0.0009142, 8.191e-05, 0.006764, 0.0004154),
    _ref("Llama-3.2-3B", _A100, 2, 0.003707, 3.741e-05, 0.005344, 0.0001939),
    _ref("Llama-3.2-3B", _A100, 4, 0.003468, 5.296e-05, 0.005337, 0.0002723),
    _ref("llama2-70b", _A100, 2, 0.008584, 0.0003617, 0.05825, 0.0004418),
    _ref("llama2-70b", _A100, 4, 0, 0.0002704, 0.04367, 0.0004124),
    _ref("llama2-70b", _A100, 8, 0, 0.0001802, 0.04446, 0.0003875),
    _ref("llama2-70b", _H100, 2, 0.00174, 0.0001613, 0.03668, 0.0004599),
    _ref("llama2-70b", _H100, 4, 0.004278, 0.0001133, 0.02882, 0.0003364),
    _ref("llama2-70b", _H100, 8, 0.001762, 9.939e-05, 0.03012, 0.0003009),
)

__all__ = ["REFERENCES", "Reference", "fit_file"]
