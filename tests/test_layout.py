"""The stack path of the planner (stacks.layout): pools that state only a machine type and bounds
get their sharing and node floor from the packing, every pool runs one mode and one MIG layout,
and what the clusters are built from holds every model's peak with a zone lost."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from serving import mig
from serving.hardware import Cloud, machine
from serving.packing import PlanError
from serving.slices import GPU_MEMORY_UTILIZATION, SharingMode
from serving.tiers import TIERS
from stacks.checks import check
from stacks.layout import plan_region, resolve, tier_of
from stacks.plan import plan_models
from stacks.pools import SINGLE_PROFILE_CLOUDS
from stacks.schema import MigSharing, PlannedSharing, StackSpec, TimeSlicing, WholeGpu
from tests.conftest import spec_of

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


def _verify(spec: StackSpec) -> None:
    """What every plan of every stack must hold."""
    built = resolve(spec)
    assert not check(built), "the resolved stack is a valid stack"
    for region, built_region in zip(spec.regions, built.regions, strict=True):
        layout = plan_region(spec, region)
        cloud = Cloud(region.cloud)
        pools = {p.name: p for p in built_region.gpu_pools}
        for decision, pool in zip(layout.pools, built_region.gpu_pools, strict=True):
            assert not isinstance(pool.sharing, PlannedSharing)
            assert decision.nodes_at_floor <= decision.nodes_at_peak <= pool.max_nodes
            assert pool.min_nodes <= pool.max_nodes
            shape = machine(cloud, pool.machine_type)
            assert shape is not None
            if isinstance(pool.sharing, MigSharing):
                profiles = mig.resolve(shape.gpu_spec, pool.sharing.layout, pool.sharing.profiles)
                assert mig.is_valid(shape.gpu_spec, profiles)  # NVIDIA's placement rules
                if cloud in SINGLE_PROFILE_CLOUDS:
                    assert len([n for n in profiles.values() if n]) == 1
        for m in layout.packing.models:
            pool = pools[m.pool]
            s = pool.sharing
            # One mode per pool, and every model's slice is what the pool's nodes offer.
            if isinstance(s, MigSharing):
                assert m.slice.mode is SharingMode.MIG
                profiles = mig.resolve(machine(cloud, pool.machine_type).gpu_spec,  # type: ignore[union-attr]
                                       s.layout, s.profiles)
                assert profiles.get(m.slice.mig_profile or "", 0) > 0
            elif isinstance(s, TimeSlicing):
                assert (m.slice.mode, m.slice.shares) == (SharingMode.TIME_SLICE, s.replicas)
            elif isinstance(s, WholeGpu):
                assert m.slice.mode is SharingMode.WHOLE
            # Memory: weights and the KV cache of the operating batch fit the slice (x TP).
            assert m.capacity.memory_needed_gb <= \
                m.slice.memory_gb * m.slice.tensor_parallel * GPU_MEMORY_UTILIZATION + 1e-6
            # Zone loss: the replicas left in the other zones serve peak.
            demand = next(d for d in layout.demands if d.name == m.model)
            if demand.replicas is None:
                zones = m.replicas.zones
                assert m.replicas.per_zone_max * max(1, zones - 1) * m.capacity.qps >= demand.peak_qps - 1e-9
            # The tier: the operating point meets its p99 targets.
            tier = TIERS[tier_of(spec, next(x for x in spec.models if x.name == m.model))]
            assert m.capacity.ttft_tail_s * 1000 <= tier.ttft_ms + 1e-6
            assert m.capacity.tpot_tail_s * 1000 <= tier.tpot_ms + 1e-6


def test_every_stack_file_plans_to_a_buildable_stack(stack: str) -> None:
    _verify(spec_of(stack))


def test_planned_pools_get_a_sharing_and_a_node_floor() -> None:
    spec = spec_of("prod")
    built = {r.region: {p.name: p for p in r.gpu_pools} for r in resolve(spec).regions}
    # us-west-2 states only the machine type and bounds for both pools.
    west = next(r for r in spec.regions if r.region == "us-west-2")
    assert all(isinstance(p.sharing, PlannedSharing) for p in west.gpu_pools)
    placed = plan_region(spec, west).packing.models
    zones, gpus_per_node = len(west.zones), 8  # p5.48xlarge
    # Whole GPUs: the floor is the TP groups of every model's minimum replicas, per zone.
    h100 = built["us-west-2"]["h100"]
    assert h100.sharing == WholeGpu()
    gpus = sum(math.ceil(m.replicas.min_replicas / zones) * m.slice.tensor_parallel
               for m in placed if m.pool == "h100")
    assert h100.min_nodes == math.ceil(gpus / gpus_per_node) * zones
    # MIG (allow: [mig]): one layout on every GPU; the floor holds each profile's minimum replicas.
    mig_pool = built["us-west-2"]["h100-mig"]
    assert isinstance(mig_pool.sharing, MigSharing)
    layout = mig.resolve(machine(Cloud.AWS, "p5.48xlarge").gpu_spec,  # type: ignore[union-attr]
                         mig_pool.sharing.layout, mig_pool.sharing.profiles)
    per_profile: dict[str, int] = {}
    for m in placed:
        if m.pool == "h100-mig":
            profile = m.slice.mig_profile or ""
            per_profile[profile] = per_profile.get(profile, 0) + math.ceil(m.replicas.min_replicas / zones)
    mig_gpus = max(math.ceil(n / layout[p]) for p, n in per_profile.items())
    assert mig_pool.min_nodes == math.ceil(mig_gpus / gpus_per_node) * zones
    # GKE: the planner chose one profile for the whole pool.
    gke = built["us-central1"]["h100-mig"].sharing
    assert isinstance(gke, MigSharing) and gke.layout is not None and gke.layout.startswith("all-")


def test_stated_sharing_is_kept() -> None:
    spec = spec_of("prod")
    east = next(r for r in spec.regions if r.region == "us-east-1")
    stated = next(p for p in east.gpu_pools if p.name == "h100-mig").sharing
    assert isinstance(stated, MigSharing)
    (built,) = [p for r in resolve(spec).regions if r.region == "us-east-1" for p in r.gpu_pools
                if p.name == "h100-mig"]
    assert built.sharing == stated


def test_models_of_the_program_are_the_ones_planned() -> None:
    spec = spec_of("prod")
    for plan in plan_models(spec):
        region = next(r for r in spec.regions if r.region == plan.region)
        placed = plan_region(spec, region).placement(plan.model)
        assert (plan.pool, plan.slice, plan.quantization) == (placed.pool, placed.slice, placed.quantization)
        assert (plan.min_replicas, plan.max_replicas) == (placed.replicas.min_replicas,
                                                          placed.replicas.max_replicas)


def test_time_slicing_is_chosen_for_small_models_on_a_planned_l4_pool() -> None:
    spec = _stack("aws", [{"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 30}],
                  [{"name": "ma", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.3},
                   {"name": "mb", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.3}])
    (decision,) = plan_region(spec, spec.regions[0]).pools
    assert isinstance(decision.sharing, TimeSlicing)
    _verify(spec)


def test_replicas_stated_in_the_stack_override_the_sizing() -> None:
    spec = _stack("aws", [{"name": "h100", "machine_type": "p5.48xlarge", "max_nodes": 6}],
                  [{"name": "mm", "catalog": "llama-3.1-8b-instruct", "peak_qps": 1,
                    "replicas": {"min": 5, "max": 11}}])
    (plan,) = plan_models(spec)
    assert (plan.min_replicas, plan.max_replicas, plan.replicas_source) == (5, 11, "spec")
    assert plan.autoscaling.max_replicas == 11
    placed = plan_region(spec, spec.regions[0]).placement("mm")
    # Eleven replicas over three zones: room for four a zone is packed.
    assert placed.replicas.per_zone_max == math.ceil(11 / 3)


def test_an_unused_planned_pool_is_whole_gpus_at_its_stated_floor() -> None:
    spec = _stack("aws", [{"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 9},
                          {"name": "h100", "machine_type": "p5.48xlarge", "min_nodes": 0, "max_nodes": 3}],
                  [{"name": "ma", "catalog": "llama-3.2-1b-instruct", "tier": "batch", "peak_qps": 0.2,
                    "pool": "l4"}])
    decided = {d.pool: d for d in plan_region(spec, spec.regions[0]).pools}
    assert decided["h100"].sharing == WholeGpu() and decided["h100"].nodes_at_peak == 0
    assert decided["h100"].min_nodes == 0


def test_a_region_the_pools_cannot_hold_names_the_pools() -> None:
    spec = _stack("aws", [{"name": "h100", "machine_type": "p5.48xlarge", "max_nodes": 3}],
                  [{"name": f"m{i}", "catalog": "llama-3.1-8b-instruct", "tier": "interactive",
                    "peak_qps": 30} for i in range(3)])
    problems = check(spec)
    assert problems and all(p.path.startswith(("models[", "regions[0].gpu_pools")) for p in problems)
    assert "us-east-1" in problems[0].message
    try:
        plan_region(spec, spec.regions[0])
    except PlanError as err:
        assert "max_nodes" in str(err)
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
    assert not [p for p in check(spec) if not p.path.startswith(("models[", "regions[0].gpu_pools"))]
    try:
        plan_region(spec, spec.regions[0])
    except PlanError as err:
        # A stack the pools cannot serve is an error naming a model or the pools, never a bad plan.
        assert "model" in str(err) or "pools" in str(err)
        event("the pools cannot serve the models")
        return
    event("planned")
    _verify(spec)
