"""Memory a model replica needs on a GPU slice, and the sharing modes a slice comes from.

A slice is the unit the device plugin advertises: a whole GPU (`nvidia.com/gpu`, `amd.com/gpu`),
a MIG instance (`nvidia.com/mig-3g.40gb` under the mixed strategy), a time-sliced share of a GPU,
or an AMD compute partition (serving.profiles.SliceKind describes one).
"""

from __future__ import annotations

from enum import StrEnum

from serving.activation import kv_cache_tokens, replica_reserve_gb
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
    card: ModelCard, quantization: Quantization, reserve_gb: float,
    context_tokens: int = MIN_CONTEXT_TOKENS,
) -> float:
    """What vLLM must fit under its utilization cap to start: the weights, the activation
    reserve of its profile run (`reserve_gb`, all GPUs of the replica: serving.activation) and
    the KV cache of one sequence of `context_tokens` (vLLM refuses to start without it)."""
    return (card.variant_weights_gb(quantization) + reserve_gb
            + card.kv_bytes_per_token * context_tokens / 1e9)


def fits(card: ModelCard, quantization: Quantization, slice_memory_gb: float,
         tensor_parallel: int = 1, context_tokens: int = MIN_CONTEXT_TOKENS,
         device_name: str = "") -> bool:
    """Whether vLLM starts on `tensor_parallel` devices reporting `slice_memory_gb` each, with
    vLLM's default batch limits for such a device (`device_name` matters only for an A100)."""
    usable = slice_memory_gb * tensor_parallel * GPU_MEMORY_UTILIZATION
    reserve = replica_reserve_gb(card, quantization, tensor_parallel, slice_memory_gb, device_name)
    return required_memory_gb(card, quantization, reserve, context_tokens) <= usable


def served_context(card: ModelCard, quantization: Quantization, replica_memory_gb: float,
                   requested: int | None, *, tensor_parallel: int = 1,
                   device_memory_gb: float | None = None, device_name: str = "") -> int:
    """The --max-model-len vLLM serves: the spec's, else the longest context whose KV cache fits
    beside the weights and the activation reserve in the replica's memory (all GPUs of its TP
    group together). `device_memory_gb`: what one device reports, which sets vLLM's default
    batch limits and so the reserve (default: the replica's memory over its GPUs; a time-sliced
    share reports the whole GPU). Whether a requested context starts is checked where the
    placement is sized (serving.measured: vLLM refuses to start when one full-length sequence
    does not fit)."""
    if requested is not None:
        return requested
    device = device_memory_gb if device_memory_gb is not None else replica_memory_gb / tensor_parallel
    reserve = replica_reserve_gb(card, quantization, tensor_parallel, device, device_name)
    fits_tokens = kv_cache_tokens(card, quantization, replica_memory_gb * GPU_MEMORY_UTILIZATION, reserve)
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
