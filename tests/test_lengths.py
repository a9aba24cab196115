"""The vendored length spread is the Azure conversation trace's, and sampling keeps the means."""

from __future__ import annotations

import json

import numpy as np

from serving.lengths import BANDS, DATA, azure_conversation
from serving.simulator import load_azure_2023
from tests.conftest import SHARED


def test_quantiles_are_the_traces() -> None:
    trace = load_azure_2023(SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv")
    levels = (np.arange(BANDS) + 0.5) / BANDS * 100
    shape = azure_conversation()
    for stored, tokens in ((shape.prompt, trace.prompt_tokens), (shape.output, trace.output_tokens)):
        expected = np.percentile(tokens, levels) / tokens.mean()
        assert np.allclose(stored, expected, atol=6e-5)
    assert json.loads(DATA.read_text())["requests"] == len(trace)


def test_samples_keep_the_stated_means_and_the_spread() -> None:
    rng = np.random.default_rng(0)
    prompt, output = azure_conversation().sample(200_000, 2000, 300, rng)
    assert abs(prompt.mean() / 2000 - 1) < 0.02 and abs(output.mean() / 300 - 1) < 0.02
    # The trace's p99 prompt is about 3.6 x its mean (serving.capacity.PROMPT_FACTORS).
    assert 3.3 < np.percentile(prompt, 99) / 2000 < 3.9
    assert prompt.min() >= 1 and output.min() >= 1
