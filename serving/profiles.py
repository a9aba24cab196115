"""Performance profile of a model on a GPU slice: prefill time by prompt length, decode time per
output token by batch size.

Measured anchors are the SageServe least-squares fits in `serving._calibration` (A100-80GB for
Llama-3.1-8B and Llama-3.2-3B at TP2/TP4, A100 and H100 for Llama-2-70B at TP2/4/8). Any other
(model, GPU, slice, TP, quantization) is derived from the nearest anchor by ratios:

- decode is memory-bandwidth bound: the batch-independent part of a decode step scales with the
  weight bytes each GPU reads (model, quantization, TP) over the slice's bandwidth; the per-sequence
  part with the KV-cache bytes each GPU reads per sequence (the BF16 cache, split by TP) over the
  same bandwidth;
- prefill is compute bound: its per-token part scales with parameters per GPU over the slice's dense
  tensor TFLOPS (FP8 TFLOPS when the variant is FP8 or INT8 w8a8 and the GPU has FP8 tensor cores;
  the A100's INT8 rate is not in the hardware table, so A100 INT8 is costed at FP16, a pessimism);
  its fixed part is one pass over the weights and scales like the decode step;
- a MIG instance gets `compute_slices / 7` of the compute and `memory_slices / 8` of the bandwidth
  (NVIDIA MIG user guide: memory bandwidth is partitioned with the memory slices' L2 and DRAM
  channels); a time-sliced share or an AMD CPX partition gets `1 / n` of both, because with n
  replicas busy each gets the GPU a 1/n of the time (time-slicing) or is 1/n of the die (CPX).

L4, L40S, H100-NVL and MI300X have no measured vLLM profile on file (FACTS.md section 7); they are
ratio derivations. tests/test_profiles.py checks the derivation against the published
LambdaLabs vLLM figures of FACTS.md section 7 and states the tolerance.

One published MI300X measurement corrects the MI300X derivation (`PER_SEQUENCE_FACTOR`):
Oracle's vLLM latency runs of Llama 3.1 405B FP8 on 8x MI300X, batch 1 to 256 at 128 tokens in
and out (`serving/data/published_mi300x.json`). Derived from the anchor MI300X profiles take
(the A100 llama2-70b fits: nearest size, no MI300X anchor, A100 listed first) at the run's own
TP8, each added sequence costs 1.20x what the derivation says (the slope of latency over batch:
prefill plus per-sequence decode, which that run cannot tell apart, so both get the factor); the
batch-independent decode step measures 0.53x, a speed-up left unclaimed (conservative). The
factor corrects the GPU, not the derivation's TP scaling: against the TP2 or TP4 fits, which
assume TP speeds up linearly, the same run needs 3.33x or 1.98x (the H100 fits: 2.13x, 1.48x,
0.83x at TP8), so an MI300X claim at TP2, prod's 70B, stays unverified until a TP2 measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from serving._calibration import REFERENCES, Reference
from serving.hardware import GPUS, GpuModel, GpuSpec
from serving.models import ModelCard, Quantization
from serving.slices import SharingMode


@dataclass(frozen=True)
class SliceKind:
    """A kind of slice a replica runs on: a whole GPU or TP group, a MIG instance, a time-sliced
    share of a GPU or an AMD compute partition."""

    gpu: GpuModel
    mode: SharingMode = SharingMode.WHOLE
    tensor_parallel: int = 1
    mig_profile: str | None = None
    shares: int = 1  # time-slice replicas per GPU, or AMD partitions per GPU

    def __post_init__(self) -> None:
        if self.mode is SharingMode.MIG and self.spec.mig_profile(self.mig_profile or "") is None:
            raise ValueError(f"{self.gpu} has no MIG profile {self.mig_profile!r}")
        if self.tensor_parallel > 1 and self.mode is not SharingMode.WHOLE:
            raise ValueError("tensor parallelism spans whole GPUs only")

    @property
    def spec(self) -> GpuSpec:
        return GPUS[self.gpu]

    @property
    def compute_share(self) -> float:
        """Share of one GPU's compute (per GPU of a TP group)."""
        if self.mode is SharingMode.MIG:
            return self.spec.mig_profile(self.mig_profile or "").compute_slices / 7  # type: ignore[union-attr]
        return 1.0 / self.shares

    @property
    def bandwidth_share(self) -> float:
        if self.mode is SharingMode.MIG:
            return self.spec.mig_profile(self.mig_profile or "").memory_slices / 8  # type: ignore[union-attr]
        return 1.0 / self.shares

    @property
    def memory_gb(self) -> float:
        """Memory the replica may use, over all GPUs of a TP group."""
        if self.mode is SharingMode.MIG:
            return self.spec.mig_profile(self.mig_profile or "").usable_gb  # type: ignore[union-attr]
        return self.spec.memory_gb * self.tensor_parallel / self.shares

    @property
    def label(self) -> str:
        if self.mode is SharingMode.MIG:
            return f"{self.gpu}:mig-{self.mig_profile}"
        if self.mode in (SharingMode.TIME_SLICE, SharingMode.PARTITION):
            return f"{self.gpu}:{self.mode}/{self.shares}"
        return f"{self.gpu}:x{self.tensor_parallel}"


@dataclass(frozen=True)
class Profile:
    """Two straight lines, in seconds: prefill(tokens) and time per output token(batch)."""

    model: str
    slice: SliceKind
    quantization: Quantization
    prefill_fixed_s: float
    prefill_per_token_s: float
    tpot_fixed_s: float
    tpot_per_seq_s: float
    source: str

    def prefill_s(self, tokens: float) -> float:
        return self.prefill_fixed_s + self.prefill_per_token_s * tokens

    def tpot_s(self, batch: float) -> float:
        return self.tpot_fixed_s + self.tpot_per_seq_s * batch


# Per-sequence work (prefill per token and decode per sequence) measured over the ratio derivation,
# per GPU without an anchor of its own; tests/test_profiles.py refits it from the published data.
PER_SEQUENCE_FACTOR: dict[GpuModel, float] = {GpuModel.MI300X: 1.20}


def _reference(card: ModelCard, gpu: GpuModel, tp: int) -> Reference:
    """The anchor closest in model size first (architecture matters more than the source of the
    measurement), then on the same GPU, then at the nearest TP degree."""
    return min(REFERENCES, key=lambda r: (
        round(abs(math.log(r.params_b / card.params_b)), 3),
        r.gpu is not gpu,
        abs(math.log2(r.tensor_parallel / tp)),
    ))


def _tflops(spec: GpuSpec, quantization: Quantization) -> float:
    eight_bit = quantization in (Quantization.FP8, Quantization.INT8)
    if eight_bit and spec.fp8_dense_tflops is not None:
        return spec.fp8_dense_tflops
    return spec.fp16_dense_tflops


def profile(card: ModelCard, kind: SliceKind, quantization: Quantization = Quantization.NONE) -> Profile:
    """The derived profile of `card` with `quantization` on `kind`, with the GPU's measured
    per-sequence correction where it has one."""
    derived = ratio_profile(card, kind, quantization)
    factor = PER_SEQUENCE_FACTOR.get(kind.gpu)
    if factor is None:
        return derived
    return replace(derived, prefill_per_token_s=derived.prefill_per_token_s * factor,
                   tpot_per_seq_s=derived.tpot_per_seq_s * factor,
                   source=f"{derived.source}; per-sequence work x{factor:g} (published {kind.gpu} run)")


def ratio_profile(card: ModelCard, kind: SliceKind,
                  quantization: Quantization = Quantization.NONE) -> Profile:
    """`card` on `kind` derived from its nearest anchor by the ratios alone."""
    weights = card.variant_weights_gb(quantization)
    tp = kind.tensor_parallel
    ref = _reference(card, kind.gpu, tp)
    ref_gpu = GPUS[ref.gpu]
    bw_ratio = ref_gpu.bandwidth_gb_s / (kind.spec.bandwidth_gb_s * kind.bandwidth_share)
    weight_ratio = (weights / tp) / (ref.weights_gb / ref.tensor_parallel)
    kv_ratio = (card.kv_bytes_per_token / tp) / (ref.kv_bytes_per_token / ref.tensor_parallel)
    # References are BF16 runs, so their compute rate is the FP16 dense figure.
    flops_ratio = ref_gpu.fp16_dense_tflops / (_tflops(kind.spec, quantization) * kind.compute_share)
    params_ratio = (card.params_b / tp) / (ref.params_b / ref.tensor_parallel)
    pass_ratio = weight_ratio * bw_ratio
    return Profile(
        model=card.id,
        slice=kind,
        quantization=quantization,
        prefill_fixed_s=ref.prefill_fixed_s * pass_ratio,
        prefill_per_token_s=ref.prefill_per_token_s * params_ratio * flops_ratio,
        tpot_fixed_s=ref.tpot_fixed_s * pass_ratio,
        tpot_per_seq_s=ref.tpot_per_seq_s * kv_ratio * bw_ratio,
        source=(f"SageServe {ref.model} {ref.gpu} TP{ref.tensor_parallel} fit, scaled to {kind.label} "
                f"{quantization}: weights x{weight_ratio:.3g}, bandwidth x{1 / bw_ratio:.3g}, "
                f"compute x{1 / flops_ratio:.3g}"),
    )


__all__ = ["PER_SEQUENCE_FACTOR", "Profile", "SliceKind", "profile", "ratio_profile"]
