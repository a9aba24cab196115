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
from serving.capacity import DoesNotFit, ReplicaCapacity, TierUnmeetable, slice_capacity
from serving.models import Quantization
from serving.profiles import SliceKind
from serving.replica_sim import Unservable, replica_engine, simulated_capacity
from serving.sharing import Partition, Sharing, TimeSlice, Whole
from serving.simulator import Targets
from serving.slices import SharingMode, served_context

# How the planner sizes the placements it keeps: `measure` (the simulator, the default) or
# `closed_form` (the screening model alone: for tests of packing invariants over many generated
# stacks, where a simulation per example would bound how many stacks are tried).
Sizing = Callable[["ModelDemand", SliceKind, Quantization], "ReplicaCapacity | None"]


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


def measure(demand: ModelDemand, kind: SliceKind, quantization: Quantization) -> ReplicaCapacity | None:
    """The simulated capacity of one option; None when the simulator finds the tier unservable
    on it (the option is then dropped)."""
    card = demand.card
    closed = slice_capacity(card, kind, quantization, demand.tier, demand.input_tokens,
                            demand.output_tokens, demand.context_tokens)
    if isinstance(closed, DoesNotFit | TierUnmeetable):
        return None
    sharing = _sharing(kind)
    visible = device_memory_gb(kind, sharing)
    usable = visible * kind.tensor_parallel * gpu_memory_utilization(kind, sharing)
    context = served_context(card, quantization, kind.memory_gb, demand.context_tokens)
    engine = replica_engine(card, kind, quantization, context, visible, usable)
    tier = demand.tier
    try:
        sim = simulated_capacity(engine, Targets(tier.ttft_ms / 1000, tier.tpot_ms / 1000), tier.percentile,
                                 demand.input_tokens, demand.output_tokens, closed.qps)
    except Unservable:
        return None
    return replace(closed, qps=sim.qps, output_tokens_per_s=sim.qps * demand.output_tokens,
                   ttft_tail_s=sim.ttft_tail_s, tpot_tail_s=sim.tpot_tail_s, source="simulated",
                   closed_form_qps=closed.qps, in_flight_curve=sim.curve)


__all__ = ["Sizing", "closed_form", "measure"]
