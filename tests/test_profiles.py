"""Performance profiles: calibration matches the measurements, derivations follow the ratios,
and the derived figures agree with the published vLLM numbers within a stated tolerance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving._calibration import REFERENCES, fit_file
from serving.hardware import GPUS, GpuModel
from serving.models import CATALOG, ModelCard, Quantization, Variant
from serving.profiles import PER_SEQUENCE_FACTOR, SliceKind, profile, ratio_profile
from serving.slices import SharingMode
from tests.conftest import SHARED

TRACES = SHARED / "traces"
LLAMA_8B = CATALOG["llama-3.1-8b-instruct"]
LLAMA_70B = CATALOG["llama-3.3-70b-instruct"]


def test_references_are_the_least_squares_fits_of_the_csvs() -> None:
    fitted = {(r.model, r.gpu, r.tensor_parallel): r
              for path in sorted(TRACES.glob("profile_sageserve_*.csv")) for r in fit_file(path)}
    assert set(fitted) == {(r.model, r.gpu, r.tensor_parallel) for r in REFERENCES}
    for ref in REFERENCES:
        fit = fitted[(ref.model, ref.gpu, ref.tensor_parallel)]
        for name in ("prefill_fixed_s", "prefill_per_token_s", "tpot_fixed_s", "tpot_per_seq_s"):
            assert getattr(ref, name) == pytest.approx(getattr(fit, name), rel=5e-3, abs=1e-7), (ref, name)


def test_fits_read_the_units_of_each_file() -> None:
    # Llama-3.1-8B TP2 A100 measured ~8.5 ms per token at batch 1 (1.089 s / 128 tokens); the
    # perf_model file's Llama-2-70B TP2 A100 ~55 ms per token: both in seconds after the fit.
    by_key = {(r.model, r.tensor_parallel, r.gpu): r for r in REFERENCES}
    small = by_key[("Llama-3.1-8B", 2, GpuModel.A100_80GB)]
    big = by_key[("llama2-70b", 2, GpuModel.A100_80GB)]
    assert 0.007 < small.tpot_fixed_s + small.tpot_per_seq_s < 0.010
    assert 0.05 < big.tpot_fixed_s + big.tpot_per_seq_s < 0.065
    assert all(r.prefill_fixed_s >= 0 and r.prefill_per_token_s > 0 and r.tpot_per_seq_s >= 0
               for r in REFERENCES)


# FACTS.md section 7, LambdaLabsML/vllm-benchmark: (card, GPU, TP, variant, tok/s, ITL s).
# The concurrency behind each figure is throughput x ITL (Little's law over decoding sequences).
PUBLISHED = [
    (LLAMA_8B, GpuModel.H100_80GB, 1, Quantization.FP8, 3400, 0.0198),
    (LLAMA_8B, GpuModel.A100_80GB, 1, Quantization.NONE, 1518, 0.0429),
    (LLAMA_70B, GpuModel.H100_80GB, 2, Quantization.FP8, 1728, 0.0493),
    (LLAMA_70B, GpuModel.H100_80GB, 4, Quantization.FP8, 2243, 0.0383),
]


@pytest.mark.parametrize(("card", "gpu", "tp", "quant", "tokens_s", "itl_s"), PUBLISHED)
def test_derived_itl_matches_published_within_tolerance(card, gpu, tp, quant, tokens_s, itl_s) -> None:
    """Tolerance: the derived ITL at the published concurrency is within -10% / +35% of the
    published one. Measured today: +28% (8B FP8 H100), +12% (8B A100), +19% and +15% (70B FP8).
    The band is lopsided on purpose: a profile slower than reality costs GPUs, one faster than
    reality breaks the SLO."""
    prof = profile(card, SliceKind(gpu, tensor_parallel=tp), quant)
    ratio = prof.tpot_s(tokens_s * itl_s) / itl_s
    assert 0.9 <= ratio <= 1.35, ratio


def test_ratios_point_the_right_way() -> None:
    a100 = profile(LLAMA_8B, SliceKind(GpuModel.A100_80GB))
    h100 = profile(LLAMA_8B, SliceKind(GpuModel.H100_80GB))
    h100_fp8 = profile(LLAMA_8B, SliceKind(GpuModel.H100_80GB), Quantization.FP8)
    l4 = profile(LLAMA_8B, SliceKind(GpuModel.L4))
    mig3 = profile(LLAMA_8B, SliceKind(GpuModel.A100_80GB, SharingMode.MIG, mig_profile="3g.40gb"))
    shared = profile(LLAMA_8B, SliceKind(GpuModel.L4, SharingMode.TIME_SLICE, shares=2))
    assert h100.tpot_s(1) < a100.tpot_s(1) < l4.tpot_s(1)
    assert h100_fp8.tpot_s(1) < h100.tpot_s(1) and h100_fp8.prefill_s(2048) < h100.prefill_s(2048)
    # 3g.40gb: 4/8 of the bandwidth, 3/7 of the compute.
    assert mig3.tpot_s(8) == pytest.approx(a100.tpot_s(8) * 2)
    assert mig3.prefill_per_token_s == pytest.approx(a100.prefill_per_token_s * 7 / 3)
    assert shared.tpot_s(4) == pytest.approx(l4.tpot_s(4) * 2)
    # Bandwidth ratio alone sets decode between GPUs with no measurement of their own.
    assert l4.tpot_fixed_s / a100.tpot_fixed_s == pytest.approx(
        GPUS[GpuModel.A100_80GB].bandwidth_gb_s / GPUS[GpuModel.L4].bandwidth_gb_s)
    assert "SageServe" in a100.source


def test_tensor_parallel_speeds_up_prefill() -> None:
    one = profile(LLAMA_70B, SliceKind(GpuModel.H100_80GB, tensor_parallel=2), Quantization.FP8)
    four = profile(LLAMA_70B, SliceKind(GpuModel.H100_80GB, tensor_parallel=4), Quantization.FP8)
    assert four.prefill_s(4096) < one.prefill_s(4096)


def test_invalid_slices_are_refused() -> None:
    with pytest.raises(ValueError, match="MIG profile"):
        SliceKind(GpuModel.L4, SharingMode.MIG, mig_profile="1g.10gb")
    with pytest.raises(ValueError, match="whole GPUs"):
        SliceKind(GpuModel.A100_80GB, SharingMode.MIG, tensor_parallel=2, mig_profile="7g.80gb")
    with pytest.raises(ValueError, match="no int4 variant"):
        profile(CATALOG["llama-3.2-1b-instruct"], SliceKind(GpuModel.L4), Quantization.INT4)


@given(card=st.sampled_from(list(CATALOG.values())), gpu=st.sampled_from(list(GpuModel)),
       tp=st.sampled_from([1, 2, 4, 8]), batch=st.integers(1, 255), tokens=st.integers(1, 32000))
def test_times_are_positive_and_grow_with_work(card, gpu, tp, batch, tokens) -> None:
    prof = profile(card, SliceKind(gpu, tensor_parallel=tp))
    assert 0 < prof.tpot_s(batch) <= prof.tpot_s(batch + 1)
    assert 0 < prof.prefill_s(tokens) <= prof.prefill_s(tokens + 1)


# meta-llama/Llama-3.1-405B-Instruct config.json: hidden 16384, intermediate 53248, 126 layers,
# 128 heads, 8 KV heads of 128, vocab 128256, untied; FP8 weights: linear layers at one byte
# (401.65 B params), embeddings and lm_head in BF16 (2 x 2.10 B params x 2 bytes).
LLAMA_405B = ModelCard("llama-3.1-405b-instruct", "meta-llama/Llama-3.1-405B-Instruct", 405.85, 126, 8,
                       128, 131072, 811.7, 16384, 53248, 128256, 128, False,
                       variants=(Variant(Quantization.FP8, "amd/Llama-3.1-405B-Instruct-FP8-KV", 410.05),))


def test_mi300x_per_sequence_factor_is_the_published_runs_slope() -> None:
    """Oracle's vLLM latency runs on 8x MI300X (128 in, 128 out): a least-squares line of latency
    over batch. Its slope (one more sequence: 128 prompt tokens, 127 more decode steps) over the
    ratio derivation's is the factor the MI300X profiles carry; the intercept (the batch-free
    decode steps) measures under the derivation, so leaving it uncorrected is conservative, and
    the corrected profile is never faster than a published point."""
    data = json.loads((Path(__file__).parents[1] / "serving" / "data" / "published_mi300x.json").read_text())
    batch, latency = np.array(data["batch"], float), np.array(data["average_latency_s"])
    slope, intercept = np.polyfit(batch, latency, 1)
    kind = SliceKind(GpuModel.MI300X, tensor_parallel=data["tensor_parallel"])
    steps = data["output_tokens"] - 1
    # A straight line is a fair summary of the run: every point within 5 % of it.
    assert np.all(np.abs(intercept + slope * batch - latency) <= 0.05 * latency)
    raw = ratio_profile(LLAMA_405B, kind, Quantization.FP8)
    # The factor holds for the anchor MI300X derivations take at the run's TP (another anchor,
    # another factor: the module doc lists them).
    assert "A100-80GB TP8" in raw.source
    derived_slope = data["input_tokens"] * raw.prefill_per_token_s + steps * raw.tpot_per_seq_s
    assert slope / derived_slope == pytest.approx(PER_SEQUENCE_FACTOR[GpuModel.MI300X], abs=0.005)
    assert intercept < raw.prefill_fixed_s + steps * raw.tpot_fixed_s
    p = profile(LLAMA_405B, kind, Quantization.FP8)
    predicted = (p.prefill_fixed_s + p.prefill_per_token_s * data["input_tokens"] * batch
                 + steps * (p.tpot_fixed_s + p.tpot_per_seq_s * batch))
    assert np.all(predicted >= latency)
    # Only the MI300X carries it: an NVIDIA slice is the ratio derivation itself.
    h100 = SliceKind(GpuModel.H100_80GB, tensor_parallel=2)
    assert profile(LLAMA_70B, h100, Quantization.FP8) == ratio_profile(LLAMA_70B, h100, Quantization.FP8)
