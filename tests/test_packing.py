"""Packing: plans respect memory, MIG geometry, zone loss, tiers and pool bounds, beat the
baselines, and never beat the lower bound; impossible demands fail naming the model."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving import mig
from serving._migpack import pack, valid_layouts
from serving.hardware import GPUS, MACHINES, Cloud, GpuModel
from serving.models import CATALOG, Quantization
from serving.packing import (
    ModelDemand,
    PlanError,
    PoolSpec,
    first_fit_decreasing,
    lower_bound,
    one_model_per_gpu,
    plan,
)
from serving.profiles import profile
from serving.slices import GPU_MEMORY_UTILIZATION, SharingMode
from serving.tiers import TIERS, Tier

AWS = MACHINES[Cloud.AWS]
POOLS = [
    PoolSpec("l4", AWS["g6.xlarge"], max_nodes=300),
    PoolSpec("l40s", AWS["g6e.xlarge"], max_nodes=300),
    PoolSpec("a100", AWS["p4de.24xlarge"], max_nodes=60),
    PoolSpec("h100", AWS["p5.48xlarge"], max_nodes=60),
]
CARDS = [c for c in CATALOG.values() if c.params_b < 30]  # 70B is tested on its own below
ALL_Q = (Quantization.FP8, Quantization.INT8, Quantization.INT4)


def demand(name: str, card: str = "llama-3.1-8b-instruct", tier: Tier = Tier.STANDARD,
           qps: float = 2.0, **kw: object) -> ModelDemand:
    return ModelDemand(name, CATALOG[card], TIERS[tier], qps, **kw)  # type: ignore[arg-type]


demands_strategy = st.lists(
    st.builds(
        lambda card, tier, qps, quant, mix: (card, tier, qps, quant, mix),
        st.sampled_from(CARDS), st.sampled_from([Tier.STANDARD, Tier.BATCH, Tier.INTERACTIVE]),
        st.floats(0.1, 20), st.sets(st.sampled_from(ALL_Q)), st.sampled_from([(1155, 211), (2048, 28)]),
    ),
    min_size=1, max_size=12,
).map(lambda rows: [
    ModelDemand(f"m{i}", card, TIERS[tier], round(qps, 2), mix[0], mix[1], tuple(sorted(quant)))
    for i, (card, tier, qps, quant, mix) in enumerate(rows)
])


def _check(demands: list[ModelDemand], result) -> None:
    by_name = {d.name: d for d in demands}
    pools = {p.name: p for p in POOLS}
    assert [m.model for m in result.models] == [d.name for d in demands]
    for m in result.models:
        d = by_name[m.model]
        # Memory, recomputed from the catalog: the variant's weights plus the KV cache of the
        # operating batch (K and V, every layer, 2 bytes a value) fit vLLM's share of the slice.
        card = d.card
        kv_gb = 2 * card.layers * card.kv_heads * card.head_dim * 2 * m.capacity.batch * (
            d.input_tokens + d.output_tokens) / 1e9
        weights = card.weights_gb if not m.quantized else next(
            v.weights_gb for v in card.variants if v.quantization == m.quantization)
        assert weights + kv_gb <= m.slice.memory_gb * m.slice.tensor_parallel * 0.90 + 1e-6
        assert m.capacity.memory_needed_gb <= m.slice.memory_gb * GPU_MEMORY_UTILIZATION + 1e-6
        # Zone loss: max less its fullest zone (ceil(max / zones) under maxSkew 1) serves the peak.
        zones = pools[m.pool].zones
        fullest = -(-m.replicas.max_replicas // zones)
        assert (m.replicas.max_replicas - fullest) * m.capacity.qps >= d.peak_qps * (1 - 1e-9)
        assert m.capacity.ttft_tail_s <= d.tier.ttft_ms / 1000 + 1e-9
        # TPOT, recomputed from the profile: the batch's decode step, stretched by the prefills of
        # the other requests arriving at the replica's rate, within the tier.
        prof = profile(card, m.slice, m.quantization)
        stall = m.capacity.qps * prof.prefill_s(d.input_tokens)
        assert stall < 1 and prof.tpot_s(m.capacity.batch) / (1 - stall) <= d.tier.tpot_ms / 1000 + 1e-9
        if m.slice.mode is SharingMode.TIME_SLICE:
            assert d.tier.allows_time_slicing
        if m.quantized:
            assert m.quantization in d.allowed_quantization and m.note
    for p in result.pools:
        pool = pools[p.pool]
        assert 0 < p.nodes_per_zone <= pool.max_nodes_per_zone
        assert p.nodes == p.nodes_per_zone * pool.zones
        assert p.cost_per_hour == pytest.approx(p.nodes * pool.shape.price_per_hour)
        assert sum(g.nodes_per_zone for g in p.groups) == p.nodes_per_zone
        for g in p.groups:
            if g.sharing is SharingMode.MIG:
                assert len(g.mig_layouts) + g.whole_gpus_per_zone == g.nodes_per_zone * pool.gpus_per_node
                for layout in g.mig_layouts:  # geometry: every GPU's layout can be placed
                    assert mig.is_valid(pool.gpu, layout), layout
    assert result.cost_per_hour == pytest.approx(sum(p.cost_per_hour for p in result.pools))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(demands=demands_strategy)
def test_plans_respect_memory_geometry_zones_and_bounds(demands) -> None:
    try:
        result = plan(demands, POOLS)
    except PlanError:
        return  # an interactive draw no pool here can serve; the message is tested below
    _check(demands, result)
    bound, _ = lower_bound(demands, POOLS)
    assert result.cost_per_hour >= bound - 1e-6
    assert result.cost_per_hour <= first_fit_decreasing(demands, POOLS).cost_per_hour + 1e-6
    assert result.cost_per_hour <= one_model_per_gpu(demands, POOLS).cost_per_hour + 1e-6


def test_baselines_are_valid_plans_too() -> None:
    demands = [demand("a"), demand("b", "llama-3.2-1b-instruct", qps=0.5),
               demand("c", "qwen2.5-7b-instruct", Tier.INTERACTIVE, allowed_quantization=(Quantization.FP8,))]
    for result in (one_model_per_gpu(demands, POOLS), first_fit_decreasing(demands, POOLS)):
        _check(demands, result)
    naive = one_model_per_gpu(demands, POOLS)
    assert all(m.slice.mode is SharingMode.WHOLE for m in naive.models)


def test_small_models_share_gpus_and_quantization_is_reported() -> None:
    demands = [demand(f"m{i}", "llama-3.2-1b-instruct", qps=0.3, allowed_quantization=(Quantization.FP8,))
               for i in range(6)]
    result = plan(demands, POOLS)
    _check(demands, result)
    assert any(m.slice.mode is not SharingMode.WHOLE for m in result.models)
    assert result.cost_per_hour < one_model_per_gpu(demands, POOLS).cost_per_hour


def test_big_model_gets_a_tensor_parallel_group_and_fp8_only_on_fp8_gpus() -> None:
    # FP8 70B is 72.7 GB: more than one 80 GB GPU holds beside a KV cache, and L40S nodes here
    # have one GPU, so it must be a TP group on the 8-GPU pools.
    demands = [demand("big", "llama-3.3-70b-instruct", Tier.BATCH, qps=1.0,
                      allowed_quantization=(Quantization.FP8,))]
    result = plan(demands, POOLS)
    _check(demands, result)
    (m,) = result.models
    assert m.pool in ("a100", "h100") and m.slice.tensor_parallel >= 2
    if m.quantization is Quantization.FP8:
        assert GPUS[m.slice.gpu].fp8
    a100_only = plan(demands, [POOLS[2]])
    assert a100_only.models[0].quantization is not Quantization.FP8


def test_interactive_tier_never_time_slices() -> None:
    demands = [demand(f"m{i}", "llama-3.2-1b-instruct", Tier.INTERACTIVE, qps=0.2) for i in range(4)]
    result = plan(demands, POOLS[:2])
    assert all(m.slice.mode is not SharingMode.TIME_SLICE for m in result.models)


def test_model_too_big_for_any_slice_fails_naming_it() -> None:
    with pytest.raises(PlanError, match=r"model huge .*fits no slice.*bigger"):
        plan([demand("huge", "llama-3.3-70b-instruct", Tier.BATCH)], POOLS[:2])


def test_tier_unmeetable_fails_naming_the_model_and_fix() -> None:
    with pytest.raises(PlanError, match=r"model fast: no slice.*interactive.*looser tier"):
        plan([demand("fast", "llama-3.3-70b-instruct", Tier.INTERACTIVE, input_tokens=4000)],
             [PoolSpec("a100", AWS["p4de.24xlarge"], max_nodes=60)])


def test_peak_beyond_pool_bounds_fails() -> None:
    with pytest.raises(PlanError, match=r"model busy: pools \['l4'\] cannot serve its peak.*max_nodes"):
        plan([demand("busy", "llama-3.2-1b-instruct", qps=500)], [PoolSpec("l4", AWS["g6.xlarge"], 6)])
    many = [demand(f"m{i}", "llama-3.1-8b-instruct", qps=3) for i in range(6)]
    with pytest.raises(PlanError, match="more nodes than the pools allow"):
        plan(many, [PoolSpec("l40s", AWS["g6e.xlarge"], max_nodes=18)])


def test_pins_are_obeyed() -> None:
    demands = [demand("pinned", pool="l40s"), demand("tp", "llama-3.1-8b-instruct", tensor_parallel=2)]
    result = plan(demands, POOLS)
    assert result.models[0].pool == "l40s"
    assert result.models[1].slice.tensor_parallel == 2


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(PlanError, match="unique"):
        plan([demand("a"), demand("a")], POOLS)


@given(gpu=st.sampled_from([g.model for g in GPUS.values() if g.mig_capable]),
       counts=st.lists(st.integers(0, 9), min_size=6, max_size=6))
def test_mig_packer_only_emits_valid_layouts(gpu, counts) -> None:
    layouts = pack(gpu, tuple(counts))
    assert [sum(col) for col in zip(*layouts, strict=True)] == counts if layouts else not any(counts)
    assert all(layout in valid_layouts(gpu) for layout in layouts)
    spec = GPUS[gpu]
    names = [p.name for p in spec.mig_profiles]
    for layout in layouts:
        assert mig.is_valid(spec, dict(zip(names, layout, strict=True)))
    compute = sum(c * p.compute_slices for c, p in zip(counts, spec.mig_profiles, strict=True))
    assert len(layouts) >= math.ceil(compute / 7)


def test_mixed_layouts_beat_single_profile_ones() -> None:
    # 2x 3g.40gb + 2x 4g.40gb + 4x 1g.10gb: all-<profile> layouts need 2 + 2 + 1 = 5 GPUs.
    demand_counts = (4, 0, 0, 2, 2, 0)
    layouts = pack(GpuModel.A100_80GB, demand_counts)
    assert len(layouts) <= 4 and any(sum(1 for n in layout if n) > 1 for layout in layouts)
