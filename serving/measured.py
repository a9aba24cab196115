"""The planner's placements sized by the simulator (serving.replica_sim), not the closed form.

`measure` turns one option (model, slice kind, quantization) into the capacity the
simulator measures for a replica deployed as the plan would deploy it: the device memory and
--gpu-memory-utilization of the pod (`serving._model_pod`), the served context
(`serving.slices.served_context`), vLLM's default batch limits for the device, the tier's targets
and percentile, and the model's token means. The closed form's answer seeds the search and stays
beside the measured one (`closed_form_qps`) so the plan can show how far apart they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from serving._model_pod import device_memory_gb, gpu_memory_utilization
from serving._options import ModelDemand
from serving.activation import kv_cache_tokens, replica_reserve_gb
from serving.capacity import DoesNotFit, ReplicaCapacity, TierUnmeetable, slice_capacity
from serving.models import ModelCard, Quantization
from serving.profiles import SliceKind
from serving.replica_sim import Unservable, replica_engine, simulated_capacity
from serving.sharing import Partition, Sharing, TimeSlice, Whole
from serving.simulator import Targets
from serving.slices import SharingMode, served_context

# How the planner sizes the placements it keeps: `measure` (the simulator, the default) or
# `closed_form` (the screening model alone: for tests of packing invariants over many generated
# stacks, where a simulation per example would bound how many stacks are tried).
Sizing = Callable[["ModelDemand", SliceKind, Quantization], "ReplicaCapacity | DoesNotFit | None"]


def closed_form(demand: ModelDemand, kind: SliceKind, quantization: Quantization) -> ReplicaCapacity | None:
    got = slice_capacity(demand.card, kind, quantization, demand.tier, demand.input_tokens,
                         demand.output_tokens, demand.context_tokens)
    return got if isinstance(got, ReplicaCapacity) else None


def _sharing(kind: SliceKind) -> Sharing:
    """The pool sharing a kind implies for memory: a time-slice width, or the CPX-NPS1 partition
    the layout chooses for a planned AMD pool (stacks.layout._decide); NPS1 shows the whole GPU."""
    if kind.mode is SharingMode.TIME_SLICE:
        return TimeSlice(kind.shares)
    if kind.mode is SharingMode.PARTITION:
        return Partition(next(p for p in kind.spec.amd_partitions if p.partitions_per_gpu == kind.shares))
    return Whole()


def visible_memory_gb(kind: SliceKind) -> float:
    """What one device of a replica of `kind` reports to vLLM, under the sharing the kind implies."""
    return device_memory_gb(kind, _sharing(kind))


def starts(card: ModelCard, kind: SliceKind, quantization: Quantization, context: int) -> DoesNotFit | None:
    """vLLM 0.11's start-up check as a plan check: None when one `context`-token sequence fits the
    KV cache the replica's memory leaves after the weights and the activation reserve
    (serving.activation), else why not, in the terms of vLLM's own error
    (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory)."""
    visible = visible_memory_gb(kind)
    usable = visible * kind.tensor_parallel * gpu_memory_utilization(kind, _sharing(kind))
    reserve = replica_reserve_gb(card, quantization, kind.tensor_parallel, visible, str(kind.gpu))
    kv_tokens = kv_cache_tokens(card, quantization, usable, reserve)
    if context <= kv_tokens:
        return None
    weights = card.variant_weights_gb(quantization)
    return DoesNotFit(
        f"{card.id} ({quantization}) on {kind.label}: vLLM would not start: max_model_len {context} "
        f"needs {context * card.kv_bytes_per_token / 1e9:.2f} GB of KV cache, and {usable:.2f} GB "
        f"usable less {weights:.2f} GB weights and a {reserve:.2f} GB activation reserve leaves "
        f"{max(0.0, usable - weights - reserve):.2f} GB ({kv_tokens} tokens); use a bigger slice, "
        f"more tensor parallelism, a quantized variant or max_model_len <= {kv_tokens}")


def measure(demand: ModelDemand, kind: SliceKind,
            quantization: Quantization) -> ReplicaCapacity | DoesNotFit | None:
    """The simulated capacity of one option; DoesNotFit when vLLM would not start on it with the
    served context (`starts`), None when the simulator finds the tier unservable on it (either
    way the option is dropped: serving._options reports the first as a memory misfit)."""
    card = demand.card
    closed = slice_capacity(card, kind, quantization, demand.tier, demand.input_tokens,
                            demand.output_tokens, demand.context_tokens)
    if isinstance(closed, DoesNotFit | TierUnmeetable):
        return None
    sharing = _sharing(kind)
    visible = device_memory_gb(kind, sharing)
    usable = visible * kind.tensor_parallel * gpu_memory_utilization(kind, sharing)
    context = served_context(card, quantization, kind.memory_gb, demand.context_tokens,
                             tensor_parallel=kind.tensor_parallel, device_memory_gb=visible,
                             device_name=str(kind.gpu))
    refused = starts(card, kind, quantization, context)
    if refused is not None:
        return refused
    engine = replica_engine(card, kind, quantization, context, visible, usable)
    tier = demand.tier
    try:
        sim = simulated_capacity(engine, Targets(tier.ttft_s, tier.tpot_s), tier.percentile,
                                 demand.input_tokens, demand.output_tokens, closed.qps,
                                 replicas=demand.fleet)
    except Unservable:
        return None
    return replace(closed, qps=sim.qps, output_tokens_per_s=sim.qps * demand.output_tokens,
                   ttft_tail_s=sim.ttft_tail_s, tpot_tail_s=sim.tpot_tail_s, source="simulated",
                   closed_form_qps=closed.qps, in_flight_curve=sim.curve)


__all__ = ["Sizing", "closed_form", "measure", "starts", "visible_memory_gb"]
