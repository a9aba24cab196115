"""The stack path of the planner (stacks.layout): pools that state only a machine type and bounds
get their sharing and node floor from the packing, every pool runs one mode and one MIG layout,
and what the clusters are built from holds every model's peak with a zone lost."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from serving.capacity import prompt_factor
from serving.hardware import Cloud, machine
from serving.measured import Sizing, closed_form, measure
from serving.models import CATALOG
from serving.profiles import profile
from serving.sharing import Mig, TimeSlice, Whole
from serving.slices import SharingMode
from stacks.checks import check
from stacks.layout import plan_region
from stacks.plan import Plan, PlanningError, plan_stack
from stacks.schema import MigSharing, PlannedSharing, StackSpec
from stacks.tiers import resolve_tiers
from tests.conftest import spec_of

# vLLM's default --gpu-memory-utilization (vllm EngineArgs): the share of a slice vLLM may use.
VLLM_MEMORY_SHARE = 0.90


def _mig_slices(name: str) -> tuple[int, int]:
    """(compute, memory GB) of a profile from its NVIDIA name: `3g.40gb` is 3 compute slices and
    40 GB, i.e. 4 of the 8 memory slices of an 80 GB GPU."""
    compute, memory = name.split(".")
    return int(compute.removesuffix("g")), int(memory.removesuffix("gb"))


# One machine shape per (cloud, GPU) the generated stacks draw from.
SHAPES = {
    "aws": ["g6.xlarge", "g6e.12xlarge", "p5.48xlarge"],
    "gcp": ["g2-standard-8", "a3-highgpu-8g"],
    "azure": ["Standard_NC40ads_H100_v5", "Standard_ND96isr_MI300X_v5"],
}
ZONES = {"aws": ["us-east-1a", "us-east-1b", "us-east-1c"],
         "gcp": ["us-central1-a", "us-central1-b", "us-central1-c"], "azure": ["1", "2", "3"]}
REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
SMALL_MODELS = ["llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "llama-3.1-8b-instruct",
                "qwen2.5-7b-instruct"]


def _stack(cloud: str, pools: list[dict], models: list[dict]) -> StackSpec:
    region: dict = {"cloud": cloud, "region": REGION[cloud], "zones": ZONES[cloud],
                    "network": {"cidr": "10.50.0.0/16"}, "gpu_pools": pools}
    if cloud == "gcp":
        region["project"] = "rtip-test-project"
    return StackSpec.model_validate({"environment": "dev", "regions": [region], "models": models})


def _verify(spec: StackSpec, sizing: Sizing = measure) -> Plan:
    """What every plan of every stack must hold, recomputed from the catalogs and the profiles."""
    plan = plan_stack(spec, sizing)
    tiers = resolve_tiers(spec)
    for region in plan.regions:
        cloud = region.cloud
        for pool in region.pools:
            assert pool.nodes_at_floor <= pool.nodes_at_peak <= pool.max_nodes
            assert pool.stated_min_nodes <= pool.min_nodes <= pool.max_nodes
            if isinstance(pool.sharing, Mig):
                gpu_gb = pool.shape.gpu_spec.memory_gb
                used = [(_mig_slices(p), n) for p, n in pool.sharing.profiles.items()]
                # NVIDIA MIG: at most 7 compute and 8 memory slices on one GPU.
                assert sum(c * n for (c, _), n in used) <= 7
                assert sum(round(m / (gpu_gb / 8)) * n for (_, m), n in used) <= 8
                if cloud in (Cloud.GCP, Cloud.AZURE):  # one partition size per pool
                    assert len(used) == 1
        for m in region.models:
            pool = region.pool(m.pool)
            s = pool.sharing
            # One mode per pool, and every model's slice is what the pool's nodes offer.
            if isinstance(s, Mig):
                assert m.slice.mode is SharingMode.MIG and s.profiles.get(m.slice.mig_profile or "", 0) > 0
            elif isinstance(s, TimeSlice):
                assert (m.slice.mode, m.slice.shares) == (SharingMode.TIME_SLICE, s.replicas)
            elif isinstance(s, Whole):
                assert m.slice.mode is SharingMode.WHOLE
            card = CATALOG[m.catalog]
            model = next(x for x in spec.models if x.name == m.model)
            tokens_in, tokens_out = model.tokens.input_tokens, model.tokens.output_tokens
            # Memory from the catalog: weights of the variant plus the KV cache of the operating
            # batch (K and V, every layer, 2 bytes) fit the slice under vLLM's share.
            kv_gb = 2 * card.layers * card.kv_heads * card.head_dim * 2 * m.capacity.batch * (
                tokens_in + tokens_out) / 1e9
            weights = card.weights_gb if m.quantization == "none" else next(
                v.weights_gb for v in card.variants if v.quantization == m.quantization)
            assert weights + kv_gb <= m.slice.memory_gb * m.slice.tensor_parallel * VLLM_MEMORY_SHARE + 1e-6
            # Zone loss: the replicas left in the other zones serve peak.
            if model.replicas is None:
                zones = len(pool.zones)
                per_zone = math.ceil(m.max_replicas / zones)
                assert per_zone * max(1, zones - 1) * m.capacity.qps >= m.peak_qps - 1e-9
            tier = tiers[m.tier]
            if m.capacity.source == "simulated":
                # Sized by the simulator: its tails at the sized rate are within the tier (a rerun
                # with other random draws is tests/test_measured.py's independent check).
                assert m.capacity.ttft_tail_s <= tier.ttft_ms / 1000
                assert m.capacity.tpot_tail_s <= tier.tpot_ms / 1000
                continue
            # The closed form, recomputed from the profile: the tail prompt's prefill within TTFT,
            # and the batch's decode step stretched by the prefills of other requests within TPOT.
            prof = profile(card, m.slice, m.quantization)
            tail_prompt = min(prompt_factor(tier.percentile) * tokens_in, card.context_max)
            assert prof.prefill_s(tail_prompt) <= tier.ttft_ms / 1000 + 1e-9
            share = m.capacity.qps * prof.prefill_s(tokens_in)
            assert share < 1
            assert prof.tpot_s(m.capacity.batch) / (1 - share) <= tier.tpot_ms / 1000 + 1e-9
    return plan


def test_every_stack_file_plans_to_a_buildable_stack(stack: str) -> None:
    _verify(spec_of(stack))


def test_planned_pools_get_a_sharing_and_a_node_floor() -> None:
    spec = spec_of("prod")
    plan = plan_stack(spec)
    # us-west-2 states only the machine type and bounds for both pools.
    west = next(r for r in spec.regions if r.region == "us-west-2")
    assert all(isinstance(p.sharing, PlannedSharing) for p in west.gpu_pools)
    region = plan.region("us-west-2")
    zones, gpus_per_node = len(west.zones), 8  # p5.48xlarge
    # Whole GPUs: the floor is the TP groups of every model's minimum replicas, per zone.
    h100 = region.pool("h100")
    assert h100.sharing == Whole() and h100.planned
    gpus = sum(math.ceil(m.min_replicas / zones) * m.slice.tensor_parallel
               for m in region.models if m.pool == "h100")
    assert h100.min_nodes == math.ceil(gpus / gpus_per_node) * zones
    # MIG (allow: [mig]): one layout on every GPU; the floor holds each profile's minimum replicas.
    mig_pool = region.pool("h100-mig")
    assert isinstance(mig_pool.sharing, Mig)
    layout = mig_pool.sharing.profiles
    per_profile: dict[str, int] = {}
    for m in region.models:
        if m.pool == "h100-mig":
            p = m.slice.mig_profile or ""
            per_profile[p] = per_profile.get(p, 0) + math.ceil(m.min_replicas / zones)
    mig_gpus = max(math.ceil(n / layout[p]) for p, n in per_profile.items())
    assert mig_pool.min_nodes == math.ceil(mig_gpus / gpus_per_node) * zones
    # GKE: the planner chose one profile for the whole pool, a named mig-parted layout.
    gke = plan.region("us-central1").pool("h100-mig").sharing
    assert isinstance(gke, Mig) and gke.layout is not None and gke.layout.startswith("all-")


def test_stated_sharing_is_kept() -> None:
    spec = spec_of("prod")
    east = next(r for r in spec.regions if r.region == "us-east-1")
    stated = next(p for p in east.gpu_pools if p.name == "h100-mig").sharing
    assert isinstance(stated, MigSharing) and stated.layout == "all-balanced"
    built = plan_stack(spec).region("us-east-1").pool("h100-mig")
    # NVIDIA's all-balanced on an 80 GB GPU: 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb (FACTS.md section 5).
    assert not built.planned and built.sharing == Mig(
        (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)), "all-balanced")


def test_the_spec_stays_what_the_user_wrote() -> None:
    spec = spec_of("prod")
    before = spec.model_dump_json()
    plan = plan_stack(spec)
    assert plan.spec.model_dump_json() == before
    west = next(r for r in plan.spec.regions if r.region == "us-west-2")
    assert all(isinstance(p.sharing, PlannedSharing) and p.min_nodes == 0 for p in west.gpu_pools)


def test_time_slicing_is_chosen_for_small_models_on_a_planned_l4_pool() -> None:
    spec = _stack("aws", [{"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 30}],
                  [{"name": "ma", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.3},
                   {"name": "mb", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.3}])
    (decision,) = plan_region(spec, spec.regions[0], resolve_tiers(spec)).pools
    assert isinstance(decision.sharing, TimeSlice)
    _verify(spec)


def test_replicas_stated_in_the_stack_override_the_sizing() -> None:
    spec = _stack("aws", [{"name": "h100", "machine_type": "p5.48xlarge", "max_nodes": 6}],
                  [{"name": "mm", "catalog": "llama-3.1-8b-instruct", "peak_qps": 1,
                    "replicas": {"min": 5, "max": 11}}])
    (plan,) = plan_stack(spec).models
    assert (plan.min_replicas, plan.max_replicas, plan.replicas_source) == (5, 11, "spec")
    assert plan.autoscaling.max_replicas == 11
    placed = plan_region(spec, spec.regions[0], resolve_tiers(spec)).placement("mm")
    # Eleven replicas over three zones: room for four a zone is packed.
    assert placed.replicas.per_zone_max == math.ceil(11 / 3)


def test_an_unused_planned_pool_is_whole_gpus_at_its_stated_floor() -> None:
    spec = _stack("aws", [{"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 9},
                          {"name": "h100", "machine_type": "p5.48xlarge", "min_nodes": 0, "max_nodes": 3}],
                  [{"name": "ma", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.2,
                    "pool": "l4"}])
    decided = {d.pool: d for d in plan_region(spec, spec.regions[0], resolve_tiers(spec)).pools}
    assert decided["h100"].sharing == Whole() and decided["h100"].nodes_at_peak == 0
    assert decided["h100"].min_nodes == 0


def test_a_region_the_pools_cannot_hold_names_the_pools() -> None:
    spec = _stack("aws", [{"name": "h100", "machine_type": "p5.48xlarge", "max_nodes": 3}],
                  [{"name": f"m{i}", "catalog": "llama-3.1-8b-instruct", "tier": "interactive",
                    "peak_qps": 30} for i in range(3)])
    assert not check(spec)  # well formed: what fails is the plan
    try:
        plan_stack(spec)
    except PlanningError as err:
        assert err.problems and all(p.path.startswith(("models[", "regions[0].gpu_pools"))
                                    for p in err.problems)
        assert "us-east-1" in err.problems[0].message and "max_nodes" in err.problems[0].message
    else:
        raise AssertionError("three interactive 8B models at 30 QPS fit one H100 node a zone")


ALLOW = [None, ["mig"], ["whole"], ["whole", "time_slice"], ["partition", "whole"]]
TIER_NAMES = ["interactive", "standard", "batch"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SHAPES)),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, len(ALLOW) - 1)), min_size=1, max_size=2),
       st.lists(st.tuples(st.sampled_from(SMALL_MODELS), st.sampled_from(TIER_NAMES), st.floats(0.2, 12)),
                min_size=1, max_size=4))
def test_any_planned_stack_resolves_to_valid_pools(cloud: str, picks: list[tuple[int, int]],
                                                   rows: list[tuple[str, str, float]]) -> None:
    shapes = SHAPES[cloud]
    pools = []
    for i, (k, a) in enumerate(picks):
        shape = machine(Cloud(cloud), shapes[k % len(shapes)])
        assert shape is not None
        allow = [m for m in ALLOW[a] or [] if m == "whole" or (m == "mig" and shape.gpu_spec.mig_capable)
                 or (m == "partition" and shape.gpu_spec.amd_partitions)
                 or (m == "time_slice" and shape.gpu_spec.vendor == "nvidia")]
        pools.append({"name": f"p{i}", "machine_type": shape.name, "max_nodes": 24,
                      "sharing": {"mode": "auto", **({"allow": allow} if allow else {})}})
    models = [{"name": f"m{i}", "catalog": c, "tier": t, "peak_qps": round(q, 2),
               "allowed_quantization": ["fp8"]} for i, (c, t, q) in enumerate(rows)]
    spec = _stack(cloud, pools, models)
    assert not check(spec)
    try:
        plan_stack(spec, closed_form)
    except PlanningError as err:
        # A stack the pools cannot serve is an error naming a model or the pools, never a bad plan.
        assert all(p.path.startswith(("models[", "regions[0].gpu_pools")) for p in err.problems)
        event("the pools cannot serve the models")
        return
    event("planned")
    _verify(spec, closed_form)
