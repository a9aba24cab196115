"""The memory vLLM's start-up profile run takes beside the weights: a lower bound per GPU.

vLLM 0.11 sizes its KV cache at start (vllm/v1/worker/gpu_worker.py `determine_available_memory`):
it loads the weights, runs `GPUModelRunner.profile_run` under `memory_profiling` and sets

    KV cache = total memory x gpu_memory_utilization - weights - peak torch increase - non-torch increase

`profile_run` is one dummy forward pass of `max_num_batched_tokens` tokens spread over
min(max_num_seqs, tokens) requests (`_dummy_run`), then `_dummy_sampler_run` on the last token of
each request. The KV manager then refuses to start when one `max_model_len` sequence does not fit
(vllm/v1/core/kv_cache_utils.py `check_enough_kv_cache_memory`: "To serve at least one request
with the model's max seq len (N), (X GiB KV cache is needed, which is larger than the available
KV cache memory (Y GiB). Based on the available memory, the estimated maximum model length is M").

`activation_reserve_gb` counts only tensors the profile run must hold at once, so it is a lower
bound on vLLM's "peak torch increase" (the real one adds attention workspaces, the sampler's
sort buffers, allocator rounding):

- forward pass, in a Llama/Qwen2 decoder layer's MLP (`LlamaMLP`: merged gate_up_proj, then
  SiluAndMul, then down_proj): the gate/up output, tokens x 2 x intermediate/TP, and SiluAndMul's
  output, tokens x intermediate/TP, both alive while the activation kernel runs, plus the two
  tokens x hidden tensors every layer carries (the residual and the normed MLP input; hidden is
  not split by tensor parallelism). All in the model dtype (BF16 for every catalog model): a
  quantized GEMM (FP8, w8a8, AWQ) still writes its output in the model dtype. Attention's
  q/k/v output (tokens x (heads + 2 kv_heads) x head_dim / TP) is smaller than the MLP's for
  every catalog model, so the MLP is the peak.
- sampler: the logits of every dummy request, max_num_seqs x vocab, in FP32 (vLLM's Sampler
  casts them to float32; the logits processor gathers the vocabulary shards of a TP group, so
  tensor parallelism does not split them), while the forward pass's tokens x hidden output
  is still referenced.
- the two happen one after the other: the reserve is the larger.

Left out, for want of a figure in vLLM's source or docs to base them on: the non-torch increase
(NCCL and cuBLAS workspaces, measured at start only) and, for the vision-language model, the
vision encoder's own profile over its largest image (model-specific: Qwen2.5-VL's processor
settings decide the image size); both only add to the reserve. CUDA graphs are captured after
the KV cache is allocated (`compile_or_warm_up_model`), outside the gpu_memory_utilization
budget, so they take from the 10% vLLM leaves, not from the KV cache.

Sources: vllm-project/vllm vllm/v1/worker/gpu_worker.py (determine_available_memory,
compile_or_warm_up_model) as stored at commit 0012cf69, an earlier V1 release than the v0.11.0
tag the toolkit pins (whose snapshot was too large to fetch here), and gpu_model_runner.py
`profile_run`/`_dummy_run`/`_dummy_sampler_run` as quoted from later V1 copies; the start-up
error text as vLLM users quote it. The batch limits are v0.11.0's (serving.simulator.config).
"""

from __future__ import annotations

from serving.hardware import GIB_GB
from serving.models import ModelCard, Quantization
from serving.simulator.config import default_batch_limits

ACTIVATION_BYTES = 2  # BF16, the `torch_dtype` of every catalog model's config.json
LOGITS_BYTES = 4  # vLLM's Sampler works on float32 logits


def activation_reserve_gb(card: ModelCard, quantization: Quantization, tensor_parallel: int,
                          max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """Peak memory of vLLM's profile run on one GPU of a replica, in GB (a lower bound; the
    module docstring lists the terms). `quantization` must be a variant the card has; it does
    not change the figure, since quantized GEMMs write their outputs in the model dtype."""
    card.variant_weights_gb(quantization)  # an unknown variant is a programming error
    if tensor_parallel < 1 or max_num_batched_tokens < 1 or max_num_seqs < 1:
        raise ValueError(f"tensor_parallel, max_num_batched_tokens and max_num_seqs must be >= 1, "
                         f"got {tensor_parallel}, {max_num_batched_tokens}, {max_num_seqs}")
    tokens = max_num_batched_tokens
    requests = min(max_num_seqs, tokens)  # _dummy_run spreads the tokens over this many requests
    hidden_bytes = tokens * card.hidden_size * ACTIVATION_BYTES
    mlp_bytes = tokens * 3 * card.intermediate_size / tensor_parallel * ACTIVATION_BYTES
    forward = mlp_bytes + 2 * hidden_bytes
    sampler = requests * card.vocab_size * LOGITS_BYTES + hidden_bytes
    return max(forward, sampler) / 1e9


def replica_reserve_gb(card: ModelCard, quantization: Quantization, tensor_parallel: int,
                       device_memory_gb: float, device_name: str) -> float:
    """The reserve over all GPUs of a replica, with the batch limits vLLM 0.11 picks by default
    for a device reporting `device_memory_gb` (serving.simulator.default_batch_limits compares
    GiB; the catalogs are in GB)."""
    tokens, seqs = default_batch_limits(device_memory_gb / GIB_GB, device_name)
    return tensor_parallel * activation_reserve_gb(card, quantization, tensor_parallel, tokens, seqs)


def kv_cache_tokens(card: ModelCard, quantization: Quantization, usable_gb: float,
                    reserve_gb: float) -> int:
    """Tokens the KV cache holds: what vLLM may fill (`usable_gb`, all GPUs of the replica) less
    the weights and the profile run's reserve."""
    free_gb = usable_gb - card.variant_weights_gb(quantization) - reserve_gb
    return max(0, int(free_gb * 1e9 // card.kv_bytes_per_token))


__all__ = ["activation_reserve_gb", "kv_cache_tokens", "replica_reserve_gb"]
