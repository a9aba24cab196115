"""Memory a model replica needs on a GPU slice, and the sharing modes a slice comes from.

A slice is the unit the device plugin advertises: a whole GPU (`nvidia.com/gpu`, `amd.com/gpu`),
a MIG instance (`nvidia.com/mig-3g.40gb` under the mixed strategy), a time-sliced share of a GPU,
or an AMD compute partition (serving.profiles.SliceKind describes one).
"""

from __future__ import annotations

from enum import StrEnum

from serving.models import ModelCard, Quantization

# vLLM's default --gpu-memory-utilization: the share of a slice vLLM may take for weights, KV
# cache and activations; the rest is CUDA context and allocator slack.
GPU_MEMORY_UTILIZATION = 0.90
# A replica must hold at least this much context in its KV cache to be worth starting.
MIN_CONTEXT_TOKENS = 4096


class SharingMode(StrEnum):
    WHOLE = "whole"
    MIG = "mig"
    TIME_SLICE = "time_slice"
    PARTITION = "partition"


def required_memory_gb(
    card: ModelCard, quantization: Quantization, context_tokens: int = MIN_CONTEXT_TOKENS
) -> float:
    """Weights plus the KV cache of one sequence of `context_tokens`, before the utilization cap."""
    return card.variant_weights_gb(quantization) + card.kv_bytes_per_token * context_tokens / 1e9


def fits(card: ModelCard, quantization: Quantization, slice_memory_gb: float,
         tensor_parallel: int = 1, context_tokens: int = MIN_CONTEXT_TOKENS) -> bool:
    usable = slice_memory_gb * tensor_parallel * GPU_MEMORY_UTILIZATION
    return required_memory_gb(card, quantization, context_tokens) <= usable


def served_context(card: ModelCard, quantization: Quantization, replica_memory_gb: float,
                   requested: int | None) -> int:
    """The --max-model-len vLLM serves: the spec's, else the longest context whose KV cache fits
    beside the weights in the replica's memory (all GPUs of its TP group together: vLLM refuses to
    start when one full-length sequence does not fit)."""
    if requested is not None:
        return requested
    free_gb = replica_memory_gb * GPU_MEMORY_UTILIZATION - card.variant_weights_gb(quantization)
    fits_tokens = int(free_gb * 1e9 // card.kv_bytes_per_token)
    # vLLM's KV blocks hold 16 tokens; a multiple of 256 keeps the number readable.
    return max(MIN_CONTEXT_TOKENS, min(card.context_max, fits_tokens // 256 * 256))


__all__ = [
    "GPU_MEMORY_UTILIZATION",
    "MIN_CONTEXT_TOKENS",
    "SharingMode",
    "fits",
    "required_memory_gb",
    "served_context",
]
