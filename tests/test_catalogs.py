"""Catalog tables are complete and consistent; MIG geometry holds for every layout."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from serving import mig
from serving.geo import ZONES
from serving.hardware import GPUS, MACHINES, Cloud, GpuModel, Vendor
from serving.models import CATALOG, Quantization
from serving.slices import fits
from serving.tiers import TIERS, Tier

MIG_GPUS = [g for g in GPUS.values() if g.mig_capable]


def test_every_enum_member_has_a_row() -> None:
    assert set(GPUS) == set(GpuModel)
    assert set(TIERS) == set(Tier)
    assert set(MACHINES) == set(Cloud) == set(ZONES)


def test_machine_shapes_are_sane() -> None:
    for cloud, shapes in MACHINES.items():
        assert shapes, cloud
        for name, shape in shapes.items():
            assert shape.cloud is cloud and shape.name == name
            assert shape.gpu_count in (1, 2, 4, 8) and shape.price_per_hour > 0
            assert shape.local_nvme_gb >= 0 and shape.vcpus > 0
    gke = [s for s in MACHINES[Cloud.GCP].values()]
    assert all(s.accelerator.startswith("nvidia-") for s in gke)


def test_mig_only_where_nvidia_offers_it() -> None:
    assert {g.model for g in MIG_GPUS} == {GpuModel.A100_80GB, GpuModel.H100_80GB, GpuModel.H100_NVL}
    assert not GPUS[GpuModel.L4].mig_capable and not GPUS[GpuModel.L40S].mig_capable
    assert GPUS[GpuModel.MI300X].vendor is Vendor.AMD and GPUS[GpuModel.MI300X].amd_partitions


def test_single_profile_maxima_match_mig_parted() -> None:
    # FACTS.md section 5: 1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1.
    h100 = GPUS[GpuModel.H100_80GB]
    for profile, most in {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1,
                          "7g.80gb": 1}.items():
        assert mig.is_valid(h100, {profile: most})
        assert not mig.is_valid(h100, {profile: most + 1})


def test_named_layouts_are_valid_geometry() -> None:
    for gpu in MIG_GPUS:
        for name, layout in gpu.mig_layouts.items():
            assert mig.is_valid(gpu, layout), (gpu.model, name)
    balanced = GPUS[GpuModel.H100_80GB].mig_layouts["all-balanced"]
    assert balanced == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert mig.placement(GPUS[GpuModel.H100_80GB], balanced) == {0: "2g.20gb", 2: "1g.10gb",
                                                                  3: "1g.10gb", 4: "3g.40gb"}


def test_nine_memory_slices_never_fit() -> None:
    # The mistake FACTS.md warns of: an A100-80 layout needing 9 memory slices.
    assert not mig.is_valid(GPUS[GpuModel.A100_80GB], {"3g.40gb": 2, "1g.10gb": 1})


@given(st.sampled_from(MIG_GPUS), st.dictionaries(
    st.sampled_from(["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
    st.integers(min_value=0, max_value=7), max_size=6))
def test_any_accepted_layout_has_a_disjoint_placement(gpu, layout) -> None:
    placed = mig.placement(gpu, layout)
    if placed is None:
        return
    used: set[int] = set()
    for start, name in placed.items():
        profile = gpu.mig_profile(name)
        assert profile is not None and start in profile.starts
        span = set(range(start, start + profile.memory_slices))
        assert not used & span and max(span) < mig.MEMORY_SLICES
        used |= span
    assert sum(gpu.mig_profile(n).compute_slices for n in placed.values()) <= mig.COMPUTE_SLICES
    assert sorted(placed.values()) == sorted(mig.expand(layout))


def test_tiers_anchor_on_mlperf_and_tighten_monotonically() -> None:
    i, s, b = (TIERS[t] for t in (Tier.INTERACTIVE, Tier.STANDARD, Tier.BATCH))
    assert (i.ttft_ms, i.tpot_ms) == (500, 30)
    assert (s.ttft_ms, s.tpot_ms) == (2000, 100)
    assert i.ttft_ms < s.ttft_ms < b.ttft_ms
    assert i.availability > s.availability > b.availability
    assert not i.allows_time_slicing
    assert round(s.error_budget_minutes, 1) == 216.0  # 0.5% of 30 days


def test_model_catalog() -> None:
    sizes = {c.id: c.params_b for c in CATALOG.values()}
    assert any(1 <= p <= 3.5 for p in sizes.values()) and any(7 <= p <= 8.5 for p in sizes.values())
    assert any(p >= 65 for p in sizes.values())
    assert any(c.modality == "vision-language" for c in CATALOG.values())
    for card in CATALOG.values():
        for v in card.variants:
            assert v.weights_gb < card.weights_gb and v.quantization is not Quantization.NONE
    assert CATALOG["llama-3.1-8b-instruct"].kv_bytes_per_token == 131072  # 128 KiB


def test_memory_fit() -> None:
    # Hand calculation: 70B BF16 141.1 GB + one 4,096-token KV cache (80 layers x 8 heads x 128 x
    # 2 x 2 B = 327,680 B/token, 1.34 GB) + vLLM's profile-run reserve against 90% of 80 GB
    # (72 GB) per GPU. The reserve per GPU on an H100 (8192 tokens, 1024 sequences): TP 1, MLP
    # 8192 x 3 x 28,672 x 2 B + 2 x 8192 x 8192 x 2 B = 1.678 GB; TP 2, 0.973 GB each.
    card = CATALOG["llama-3.3-70b-instruct"]
    h100 = "H100-80GB"
    assert not fits(card, Quantization.NONE, 80, 1, device_name=h100)
    assert not fits(card, Quantization.NONE, 80, 2, device_name=h100)  # 144.39 GB > 144 GB
    assert fits(card, Quantization.NONE, 80, 4, device_name=h100)  # 145.9 GB <= 288 GB
    assert not fits(card, Quantization.FP8, 80, 1, device_name=h100)  # 72.7 + 1.7 + 1.3 > 72 GB
    assert fits(card, Quantization.INT4, 80, 1, device_name=h100)  # 39.9 + 1.7 + 1.3 GB


def test_served_context_counts_a_tp_group_once() -> None:
    """Llama-3.3-70B FP8 on two H100s: 2 x 80 GB x 0.9 = 144 GB, less 72.7 GB of weights
    (serving/models.py card) and 2 x 0.973 GB of activation reserve: 69.354 GB of KV cache at
    327,680 B a token, 211,650 tokens, so the 131,072 model maximum; on one H100 72 GB less
    72.7 GB leaves nothing (the 4,096 floor, which vLLM would refuse: serving.measured.starts).
    A double-counted TP group (2 x 160 GB) would claim the maximum on one GPU too."""
    from serving.profiles import SliceKind
    from serving.slices import served_context

    card = CATALOG["llama-3.3-70b-instruct"]
    kind = SliceKind(GpuModel.H100_80GB, tensor_parallel=2)
    assert kind.memory_gb == 160
    assert served_context(card, Quantization.FP8, kind.memory_gb, None, tensor_parallel=2,
                          device_name=str(kind.gpu)) == 131072
    one = SliceKind(GpuModel.H100_80GB)
    assert served_context(card, Quantization.FP8, one.memory_gb, None, device_name=str(one.gpu)) == 4096
    # BF16 on the pair: 144 - 141.1 - 1.946 = 0.954 GB, 2,910 tokens, so the 4,096 floor.
    free_gb = 160 * 0.9 - card.variant_weights_gb(Quantization.NONE) - 2 * 0.973078528
    assert int(free_gb * 1e9 // card.kv_bytes_per_token) == 2910
    assert served_context(card, Quantization.NONE, kind.memory_gb, None, tensor_parallel=2,
                          device_name=str(kind.gpu)) == 4096
