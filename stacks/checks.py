"""Checks that span fields or need the catalogs; each problem names its key path.

They run on a StackSpec that already has the right shape (schema.py), strictly before any
resource is registered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from itertools import combinations

from serving import mig
from serving.geo import ZONES, zones_of
from serving.hardware import MACHINES, Cloud, GpuModel, GpuSpec, Vendor, machine
from serving.models import CATALOG
from serving.posture import posture
from serving.sharing import Mig
from stacks.checks_base import Problem
from stacks.checks_deployer import check_deployer
from stacks.checks_limits import check_limits
from stacks.checks_values import check_values
from stacks.layout import models_in
from stacks.naming import AKS_POOL_NAME, AKS_POOL_NAME_MAX, AKS_SYSTEM_POOL, aks_pool_name
from stacks.netplan import address_plan
from stacks.pools import SINGLE_PROFILE_CLOUDS, aks_mig_profile, stated_sharing
from stacks.schema import (
    AmdPartitioning,
    GcpRegion,
    GpuPoolSpec,
    MigSharing,
    ModelSpec,
    PlannedSharing,
    StackSpec,
    SystemPoolSpec,
    TimeSlicing,
)
from stacks.tiers import known, resolve_tiers, tier_of, tier_problems

SYSTEM_POOL_NAME = "system"

# Room for one subnet pair per zone: the network is split into 2 x zones subnets.
MIN_PREFIX, MAX_PREFIX = 16, 20


def _choices(values: object) -> str:
    return ", ".join(sorted(str(v) for v in values))  # type: ignore[attr-defined]


def check(spec: StackSpec) -> list[Problem]:
    # Whether the models can be served within their tiers is the planner's question
    # (stacks.plan.plan_stack), asked once this stack is known to be well formed.
    return [
        *_check_tiers(spec),
        *_check_regions(spec),
        *_check_models(spec),
        *_check_tenants(spec),
        *_check_heartbeats(spec),
        *_check_aks_pools(spec),
        *check_values(spec),
        *check_limits(spec),
        *check_deployer(spec),
    ]


def _check_tiers(spec: StackSpec) -> Iterator[Problem]:
    for path, message in tier_problems(spec):
        yield Problem(path, message)
    tiers = resolve_tiers(spec)
    if spec.default_tier not in tiers:
        yield Problem("default_tier", f"unknown tier {spec.default_tier!r}; expected one of: "
                      f"{known(tiers)}")


def _check_regions(spec: StackSpec) -> Iterator[Problem]:
    seen = Counter((r.cloud, r.region) for r in spec.regions)
    for i, region in enumerate(spec.regions):
        at = f"regions[{i}]"
        cloud = Cloud(region.cloud)
        if seen[(region.cloud, region.region)] > 1:
            yield Problem(f"{at}.region", f"{region.cloud} region {region.region!r} appears more "
                          "than once; each region is listed once")
        known = zones_of(cloud, region.region)
        if known is None:
            yield Problem(f"{at}.region", f"unknown {cloud} region {region.region!r}; expected "
                          f"one of: {_choices(ZONES[cloud])}")
        for z, count in Counter(region.zones).items():
            if count > 1:
                yield Problem(f"{at}.zones", f"zone {z!r} is listed {count} times")
        for j, zone in enumerate(region.zones):
            if known is not None and zone not in known:
                yield Problem(f"{at}.zones[{j}]", f"zone {zone!r} is not in {cloud} region "
                              f"{region.region}; expected one of: {_choices(known)}")
        env = posture(spec.environment)
        yield from _check_zones_down(at, region)
        if len(set(region.zones)) < env.min_zones:
            yield Problem(f"{at}.zones", f"{env.environment} needs at least {env.min_zones} zones per "
                          f"region (got {len(set(region.zones))}) so losing one zone still serves")
        keys = env.secrets_customer_key or env.stores_customer_key
        if keys and isinstance(region, GcpRegion) and region.project_number is None:
            yield Problem(f"{at}.project_number", f"{env.environment} encrypts with customer keys, "
                          "which the project's service agents must be granted: give the project "
                          "number (gcloud projects describe PROJECT --format='value(projectNumber)')")
        if env.private_api and region.api_access_cidrs:
            yield Problem(f"{at}.api_access_cidrs", f"{env.environment} clusters have a private API "
                          "endpoint only; remove the list (reach the API from inside the network)")
        prefix = region.network.cidr.prefixlen
        if not MIN_PREFIX <= prefix <= MAX_PREFIX:
            yield Problem(f"{at}.network.cidr", f"{region.network.cidr} is a /{prefix}; expected a "
                          f"/{MIN_PREFIX} to /{MAX_PREFIX} to hold two subnets per zone")
        yield from _check_system_pool(at, region.system_pool)
        names = Counter(p.name for p in region.gpu_pools)
        if isinstance(region, GcpRegion):
            yield from _check_gke_capacity(at, region)
        for j, pool in enumerate(region.gpu_pools):
            if pool.name == SYSTEM_POOL_NAME:
                yield Problem(f"{at}.gpu_pools[{j}].name", f"{SYSTEM_POOL_NAME!r} names the system "
                              "node pool of every cluster; pick another GPU pool name")
            if names[pool.name] > 1:
                yield Problem(f"{at}.gpu_pools[{j}].name", f"pool name {pool.name!r} is used "
                              "twice in this region; pool names are identities")
            yield from _check_pool(f"{at}.gpu_pools[{j}]", cloud, region.zones, pool)
    for (i, a), (j, b) in combinations(enumerate(spec.regions), 2):
        if a.network.cidr.overlaps(b.network.cidr):
            yield Problem(f"regions[{j}].network.cidr", f"{b.network.cidr} overlaps "
                          f"regions[{i}] ({a.network.cidr}); regions must not overlap so they can "
                          "be peered")


def _check_zones_down(at: str, region: object) -> Iterator[Problem]:
    down = getattr(region, "zones_down", [])
    if not down:
        return
    zones = list(region.zones)  # type: ignore[attr-defined]
    for z, count in Counter(down).items():
        if count > 1:
            yield Problem(f"{at}.zones_down", f"zone {z!r} is listed {count} times")
    for k, zone in enumerate(down):
        if zone not in zones:
            yield Problem(f"{at}.zones_down[{k}]", f"zone {zone!r} is not one of this region's zones "
                          f"({', '.join(zones)})")
    if set(zones) <= set(down):
        yield Problem(f"{at}.zones_down", "every zone of the region is listed as down; at least one "
                      "must stay up to serve")
        return
    for j, pool in enumerate(region.gpu_pools):  # type: ignore[attr-defined]
        if pool.zones and set(pool.zones) <= set(down):
            yield Problem(f"{at}.gpu_pools[{j}].zones", f"pool {pool.name!r} runs only in "
                          f"{', '.join(pool.zones)}, all listed in zones_down: its Karpenter NodePool "
                          f"would allow no zone; leave one of them out of zones_down")


def _check_gke_capacity(at: str, region: GcpRegion) -> Iterator[Problem]:
    """GKE gives each node a /24 of the pod range, so the region's CIDR caps the node count."""
    room = address_plan(region.network.cidr).max_nodes
    # One surge node for rolling upgrades on top of every pool at its maximum.
    wanted = region.system_pool.max_nodes + 1 + sum(p.max_nodes for p in region.gpu_pools)
    if wanted > room:
        yield Problem(f"{at}.network.cidr", f"{region.network.cidr} leaves pod addresses for {room} "
                      f"GKE nodes (a /24 each) but the pools may grow to {wanted}; use a larger "
                      "network (smaller prefix) or lower max_nodes")


def _check_system_pool(at: str, system: SystemPoolSpec) -> Iterator[Problem]:
    if system.min_nodes > system.max_nodes:
        yield Problem(f"{at}.system_pool", f"min_nodes {system.min_nodes} is above max_nodes "
                      f"{system.max_nodes}")


def _check_pool(at: str, cloud: Cloud, region_zones: list[str], pool: GpuPoolSpec) -> Iterator[Problem]:
    shape = machine(cloud, pool.machine_type)
    if shape is None:
        yield Problem(f"{at}.machine_type", f"{pool.machine_type!r} is not a GPU machine type "
                      f"of {cloud}; expected one of: {_choices(MACHINES[cloud])}")
        return
    gpu = shape.gpu_spec
    if pool.gpu is not None:
        if pool.gpu not in set(GpuModel):
            yield Problem(f"{at}.gpu", f"unknown GPU {pool.gpu!r}; expected one of: "
                          f"{_choices(GpuModel)}")
        elif pool.gpu != gpu.model:
            yield Problem(f"{at}.gpu", f"{pool.machine_type} carries {gpu.model}, not {pool.gpu}")
    if pool.min_nodes > pool.max_nodes:
        yield Problem(f"{at}.min_nodes", f"min_nodes {pool.min_nodes} is above max_nodes "
                      f"{pool.max_nodes}")
    for k, zone in enumerate(pool.zones or []):
        if zone not in region_zones:
            yield Problem(f"{at}.zones[{k}]", f"zone {zone!r} is not one of this region's zones "
                          f"({', '.join(region_zones)})")
    s = pool.sharing
    if isinstance(s, MigSharing):
        if not gpu.mig_capable:
            yield Problem(f"{at}.sharing.mode", f"{gpu.model} ({pool.machine_type}) has no MIG; "
                          "use time_slice or whole")
            return
        yield from _mig_problems(at, gpu, s)
        if cloud in SINGLE_PROFILE_CLOUDS and not list(_mig_problems(at, gpu, s)):
            used = [p for p, n in mig.resolve(gpu, s.layout, s.profiles).items() if n]
            if len(used) > 1:
                yield Problem(f"{at}.sharing", f"{SINGLE_PROFILE_CLOUDS[cloud]} partitions every GPU "
                              f"of a pool with one MIG profile; this layout mixes {', '.join(used)}: "
                              "use a single-profile layout (all-<profile>) or one pool per profile")
    elif isinstance(s, PlannedSharing):
        yield from _allow_problems(at, gpu, s)
    elif isinstance(s, TimeSlicing) and gpu.vendor is not Vendor.NVIDIA:
        yield Problem(f"{at}.sharing.mode", f"time-slicing is an NVIDIA device-plugin feature; "
                      f"{gpu.model} is {gpu.vendor}: use partition or whole")
    elif isinstance(s, AmdPartitioning) and gpu.vendor is not Vendor.AMD:
        yield Problem(f"{at}.sharing.mode", f"partition profiles are for AMD GPUs; {gpu.model} "
                      "uses mig or time_slice")


def _allow_problems(at: str, gpu: GpuSpec, s: PlannedSharing) -> Iterator[Problem]:
    supported = {"whole"}
    if gpu.mig_capable:
        supported.add("mig")
    if gpu.vendor is Vendor.NVIDIA:
        supported.add("time_slice")
    if gpu.amd_partitions:
        supported.add("partition")
    for k, mode in enumerate(s.allow or []):
        if mode not in supported:
            yield Problem(f"{at}.sharing.allow[{k}]", f"{gpu.model} cannot run {mode}; it supports: "
                          f"{_choices(supported)}")


def _mig_problems(at: str, gpu: GpuSpec, s: MigSharing) -> Iterator[Problem]:
    if (s.layout is None) == (s.profiles is None):
        yield Problem(f"{at}.sharing", "give exactly one of `layout` (a named layout) or "
                      "`profiles` (counts per MIG profile)")
    elif s.layout is not None and s.layout not in gpu.mig_layouts:
        yield Problem(f"{at}.sharing.layout", f"unknown MIG layout {s.layout!r} for "
                      f"{gpu.model}; expected one of: {_choices(gpu.mig_layouts)}")
    elif s.profiles is not None:
        bad = [p for p in s.profiles if gpu.mig_profile(p) is None]
        if bad:
            yield Problem(f"{at}.sharing.profiles", f"unknown MIG profile(s) {_choices(bad)} "
                          f"for {gpu.model}; expected: "
                          f"{', '.join(p.name for p in gpu.mig_profiles)}")
        elif not mig.is_valid(gpu, s.profiles):
            yield Problem(f"{at}.sharing.profiles", f"{dict(s.profiles)} does not fit one "
                          f"{gpu.model}: at most {mig.COMPUTE_SLICES} compute and "
                          f"{mig.MEMORY_SLICES} memory slices, at NVIDIA's placement positions")


def _pool_ok(cloud: Cloud, pool: GpuPoolSpec, region_zones: list[str]) -> bool:
    return not list(_check_pool("", cloud, region_zones, pool))


def _check_models(spec: StackSpec) -> Iterator[Problem]:
    regions = {r.region: r for r in spec.regions}
    tiers = resolve_tiers(spec)
    bad_regions = {id(r) for r in spec.regions
                   if any(not _pool_ok(Cloud(r.cloud), p, r.zones) for p in r.gpu_pools)}
    names = Counter(m.name for m in spec.models)
    for i, model in enumerate(spec.models):
        at = f"models[{i}]"
        if names[model.name] > 1:
            yield Problem(f"{at}.name", f"model name {model.name!r} is used twice; names are "
                          "identities")
        if model.growth_per_minute is not None and "traffic" in model.model_fields_set:
            yield Problem(f"{at}.growth_per_minute", "states the traffic's growth, and so does "
                          f"`traffic: {model.traffic}`; keep one of the two")
        if model.tier is not None and model.tier not in tiers:
            yield Problem(f"{at}.tier", f"unknown tier {model.tier!r}; expected one of: "
                          f"{known(tiers)}")
        card = CATALOG.get(model.catalog)
        if card is None:
            yield Problem(f"{at}.catalog", f"unknown model {model.catalog!r}; expected one of: "
                          f"{_choices(CATALOG)}")
            continue
        for q in model.allowed_quantization:
            if q not in card.quantizations:
                yield Problem(f"{at}.allowed_quantization", f"{card.id} has no {q} variant; it "
                              f"has: {_choices(card.quantizations)}")
        if model.max_model_len is not None and model.max_model_len > card.context_max:
            yield Problem(f"{at}.max_model_len", f"{model.max_model_len} exceeds {card.id}'s "
                          f"context of {card.context_max} tokens")
        if model.tensor_parallel is not None and model.tensor_parallel & (model.tensor_parallel - 1):
            yield Problem(f"{at}.tensor_parallel", f"{model.tensor_parallel} is not a power of two "
                          "(1, 2, 4 or 8)")
        if model.replicas is not None and model.replicas.min > model.replicas.max:
            yield Problem(f"{at}.replicas", f"min {model.replicas.min} is above max "
                          f"{model.replicas.max}")
        for j, name in enumerate(model.regions or []):
            if name not in regions:
                yield Problem(f"{at}.regions[{j}]", f"region {name!r} is not in this stack; "
                              f"expected one of: {_choices(regions)}")
        yield from _check_model_pool(at, spec, model, bad_regions)


def _check_model_pool(at: str, spec: StackSpec, model: ModelSpec, bad_regions: set[int]) -> Iterator[Problem]:
    """The model's pool pin against each region it runs in; whether it fits and meets its tier is
    the region plan's question (`_check_plans`)."""
    tiers = resolve_tiers(spec)
    tier = tier_of(spec, model)
    if model.pool is None or tier not in tiers:
        return  # an unknown tier is reported at its path; the pin's check depends on the tier
    for region in spec.regions:
        if model not in models_in(spec, region):
            continue
        if id(region) in bad_regions:
            continue  # the pool's own problems come first
        named = [p for p in region.gpu_pools if p.name == model.pool]
        if not named:
            yield Problem(f"{at}.pool", f"pool {model.pool!r} does not exist in "
                          f"{region.region}; expected one of: "
                          f"{_choices(p.name for p in region.gpu_pools) or '(no GPU pools)'}")
        elif isinstance(named[0].sharing, TimeSlicing) and not tiers[tier].allows_time_slicing:
            yield Problem(f"{at}.pool", f"tier {tier} does not allow time-sliced GPUs (no "
                          f"isolation, wider tail latency) and pool {model.pool!r} is "
                          "time-sliced; pick a MIG or whole-GPU pool, or a looser tier")

def _check_tenants(spec: StackSpec) -> Iterator[Problem]:
    models = {m.name for m in spec.models}
    names = Counter(t.name for t in spec.tenants)
    for i, tenant in enumerate(spec.tenants):
        if names[tenant.name] > 1:
            yield Problem(f"tenants[{i}].name", f"tenant name {tenant.name!r} is used twice")
        for j, m in enumerate(tenant.models):
            if m != "*" and m not in models:
                yield Problem(f"tenants[{i}].models[{j}]", f"model {m!r} is not in this stack; "
                              f"expected one of: {_choices(models | {'*'})}")


def _check_heartbeats(spec: StackSpec) -> Iterator[Problem]:
    """Each cluster its own dead man's switch: keyed by the stack's regions, all of them or none
    (a region without one could lose its Prometheus or Alertmanager unnoticed), each URL a secret
    of its own (two clusters pinging one switch would hide either's silence)."""
    if not spec.heartbeat_webhooks:
        return
    regions = [r.region for r in spec.regions]
    for region in spec.heartbeat_webhooks:
        if region not in regions:
            yield Problem(f"heartbeat_webhooks.{region}", f"region {region!r} is not in this stack; "
                          f"expected one of: {_choices(set(regions))}")
    missing = [r for r in regions if r not in spec.heartbeat_webhooks]
    if missing:
        yield Problem("heartbeat_webhooks", f"names no heartbeat for {', '.join(missing)}: give every "
                      "region's cluster its own, or none")
    shared = Counter(spec.heartbeat_webhooks.values())
    alerting = set(spec.alert_webhooks.values())
    for region, name in spec.heartbeat_webhooks.items():
        if shared[name] > 1:
            yield Problem(f"heartbeat_webhooks.{region}", f"secret {name!r} is named for more than one "
                          "region: one switch would keep hearing the other clusters")
        if name in alerting:
            yield Problem(f"heartbeat_webhooks.{region}", f"secret {name!r} is also an alert_webhooks "
                          "URL: the heartbeat would post there every two minutes")


# --- AKS agent pools ---------------------------------------------------------------------------
def _check_aks_pools(spec: StackSpec) -> Iterator[Problem]:
    for i, region in enumerate(spec.regions):
        if Cloud(region.cloud) is not Cloud.AZURE:
            continue
        derived = Counter(aks_pool_name(p.name) for p in region.gpu_pools)
        for j, pool in enumerate(region.gpu_pools):
            at = f"regions[{i}].gpu_pools[{j}]"
            name = aks_pool_name(pool.name)
            if not AKS_POOL_NAME.match(name):
                yield Problem(f"{at}.name", f"pool {pool.name!r} becomes AKS agent pool {name!r}, "
                              f"which is not 1-{AKS_POOL_NAME_MAX} lowercase letters and digits "
                              "starting with a letter; use a shorter pool name")
            elif name == AKS_SYSTEM_POOL:
                yield Problem(f"{at}.name", f"pool {pool.name!r} becomes AKS agent pool {name!r}, "
                              "the name of the cluster's system pool; rename the pool")
            elif derived[name] > 1:
                others = [p.name for p in region.gpu_pools if aks_pool_name(p.name) == name]
                yield Problem(f"{at}.name", f"pools {', '.join(repr(o) for o in others)} all become "
                              f"AKS agent pool {name!r} (hyphens are dropped); rename one of them")
            s = pool.sharing
            shape = machine(Cloud.AZURE, pool.machine_type)
            if not isinstance(s, MigSharing) or shape is None or not shape.gpu_spec.mig_capable:
                continue  # _check_pool reports an unknown machine or a GPU without MIG
            gpu = shape.gpu_spec
            if list(_mig_problems(at, gpu, s)):
                continue  # the layout's own problems come first
            typed = stated_sharing(gpu, pool)
            used = [p for p, n in mig.resolve(gpu, s.layout, s.profiles).items() if n]
            if len(used) == 1 and isinstance(typed, Mig) and aks_mig_profile(gpu, typed) is None:
                smallest = next(p.name for p in gpu.mig_profiles if p.compute_slices == 1)
                yield Problem(f"{at}.sharing", f"AKS gpu_instance_profile cannot select {used[0]} on "
                              f"{gpu.model}: it gets the smallest-memory profile of each compute "
                              f"size (MIG1g is {smallest}); use one of those or another cloud")


__all__ = ["Problem", "check"]
