"""The placements a model's weights fit: pool, slice, tensor-parallel degree and weights variant.

Memory only: a placement holds the weights and a minimum KV cache, priced by the share of the
node it takes, with `max_replicas` what the pool can hold. Which one serves the tier at peak,
and with how many replicas, is stacks.sizing's decision on the calibrated capacity model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from serving.hardware import GpuSpec
from serving.models import ModelCard, Quantization, quantizations
from serving.slices import SharingMode, Slice, fits, required_memory_gb

TENSOR_PARALLEL_DEGREES = (1, 2, 4, 8)


@dataclass(frozen=True)
class PoolOption:
    pool: str
    gpus_per_node: int
    max_nodes: int
    zones: int
    slices: tuple[Slice, ...]
    gpu: GpuSpec  # which weights variants it has kernels for (serving._options.quantizations)


@dataclass(frozen=True)
class Placement:
    pool: str
    slice: Slice
    tensor_parallel: int
    quantization: Quantization
    memory_needed_gb: float
    cost_per_replica_hour: float
    max_replicas: int


def candidates(
    card: ModelCard,
    options: Sequence[PoolOption],
    allowed_quantization: Sequence[Quantization] = (),
    tensor_parallel: int | None = None,
    context_tokens: int | None = None,
    exhaustive: bool = False,
) -> list[Placement]:
    """Feasible (pool, slice, TP, variant) placements for the model, cheapest first.

    By default only the smallest fit per slice: the lowest TP degree and the native weights where
    they fit. `exhaustive` keeps every TP degree and every allowed variant, for callers that rank
    by latency-limited throughput (a higher TP or an FP8 variant can be what meets a tier)."""
    found: list[Placement] = []
    for option in options:
        for sl in option.slices:
            degrees = [tensor_parallel] if tensor_parallel else list(TENSOR_PARALLEL_DEGREES)
            for tp in degrees:
                # Tensor parallelism spans whole GPUs of one node only.
                if tp > 1 and (sl.mode is not SharingMode.WHOLE or tp > option.gpus_per_node):
                    continue
                if tp > sl.per_node:
                    continue
                for q in quantizations(card, tuple(allowed_quantization), option.gpu):
                    ctx = context_tokens or 0
                    kwargs = {"context_tokens": ctx} if ctx else {}
                    if not fits(card, q, sl.memory_gb, tp, **kwargs):
                        continue
                    per_node = sl.per_node // tp
                    found.append(Placement(
                        pool=option.pool, slice=sl, tensor_parallel=tp, quantization=q,
                        memory_needed_gb=round(required_memory_gb(card, q, **kwargs), 2),
                        cost_per_replica_hour=round(sl.node_price_share * tp, 4),
                        max_replicas=per_node * option.max_nodes,
                    ))
                    if not exhaustive:
                        break  # the smallest fitting variant at this TP is native-first by design
                else:
                    continue
                if not exhaustive:
                    break  # the lowest TP that fits this slice is the cheapest for it
    return sorted(found, key=lambda p: (p.cost_per_replica_hour, p.tensor_parallel, p.pool))


__all__ = ["TENSOR_PARALLEL_DEGREES", "Placement", "PoolOption", "candidates"]
