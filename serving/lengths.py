"""The shape of request lengths: prompt and output tokens as multiples of their means.

A stack states each model's mean prompt and output tokens (`models[].tokens`); how the lengths
spread around those means decides the latency tail (one long prompt stalls every running
sequence for its prefill). The shape is the Azure LLM inference trace 2023, conversation
(`../shared/traces/azure2023_AzureLLMInferenceTrace_conv.csv`, 19,366 requests): its 200
quantiles at the midpoints of 0.5 % bands, each over the trace's mean, kept in
`serving/data/lengths_azure_conv.json` so planning never needs the trace at run time.
`tests/test_lengths.py` recomputes them from the trace with `quantile_ratios`.

Lengths for a model are drawn by inverse transform: a uniform band picks a quantile of each
(independently: the trace's prompt/output correlation is -0.11), scaled by the model's means.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("data") / "lengths_azure_conv.json"
BANDS = 200  # quantiles at (i + 0.5) / BANDS


def quantile_ratios(tokens: np.ndarray, bands: int = BANDS) -> list[float]:
    """The `bands` mid-band quantiles of `tokens` over its mean, rounded to 4 digits."""
    levels = (np.arange(bands) + 0.5) / bands * 100
    return [round(float(x), 4) for x in np.percentile(tokens, levels) / float(np.mean(tokens))]


@dataclass(frozen=True)
class LengthShape:
    source: str
    prompt: tuple[float, ...]  # quantile / mean, ascending
    output: tuple[float, ...]

    def sample(self, n: int, mean_prompt: int, mean_output: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """`n` (prompt, output) lengths with the shape's spread around the given means; each
        at least one token."""
        pick_p = rng.integers(0, len(self.prompt), n)
        pick_o = rng.integers(0, len(self.output), n)
        prompt = np.maximum(1, np.rint(np.asarray(self.prompt)[pick_p] * mean_prompt)).astype(np.int64)
        output = np.maximum(1, np.rint(np.asarray(self.output)[pick_o] * mean_output)).astype(np.int64)
        return prompt, output


@cache
def azure_conversation() -> LengthShape:
    raw = json.loads(DATA.read_text())
    return LengthShape(source=raw["source"], prompt=tuple(raw["prompt"]), output=tuple(raw["output"]))


__all__ = ["BANDS", "DATA", "LengthShape", "azure_conversation", "quantile_ratios"]
