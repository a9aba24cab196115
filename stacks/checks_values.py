"""Value checks that need no planning: repeats in lists, network ranges, the system pool's machine.

Each yields `Problem`s with the key path of the offending item; `stacks.checks.check` runs them
with the others, before any planning.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from ipaddress import IPv4Network

from serving.hardware import MACHINES, SYSTEM_MACHINES, Cloud
from stacks.checks_base import Problem
from stacks.checks_images import check_images
from stacks.schema import RegionSpec, StackSpec

# RFC 1918 private address space: where every region's network lies.
PRIVATE_RANGES = tuple(IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
# Carrier-grade NAT space (RFC 6598), not RFC 1918: the AKS clusters take their pod and service
# ranges from it (components/azure_network.py), and carriers and VPNs route it, so a region network
# there would collide. It is rejected with its own reason.
SHARED_RANGE = IPv4Network("100.64.0.0/10")
# Sources that can never reach a public API endpoint from outside the network.
NOT_PUBLIC = (
    *PRIVATE_RANGES, SHARED_RANGE,
    IPv4Network("0.0.0.0/8"), IPv4Network("127.0.0.0/8"), IPv4Network("169.254.0.0/16"),
    IPv4Network("224.0.0.0/4"), IPv4Network("240.0.0.0/4"),
)
# The widest API access range accepted: a /8 is 16.7 million addresses, already more than any
# office, VPN or CI fleet needs; wider is the internet by another name.
MIN_API_PREFIX = 8


def repeats(at: str, items: Sequence[Hashable], shown: str = "{!r}") -> Iterator[Problem]:
    """A problem at `at[j]` for every item already listed earlier in the same list."""
    first: dict[Hashable, int] = {}
    for j, item in enumerate(items):
        k = first.setdefault(item, j)
        if k != j:
            yield Problem(f"{at}[{j}]", f"{shown.format(str(item))} is listed twice (also at "
                          f"[{k}]); list each once")


def check_values(spec: StackSpec) -> Iterator[Problem]:
    for i, region in enumerate(spec.regions):
        at = f"regions[{i}]"
        yield from _network(at, region)
        yield from _api_access(at, region)
        yield from _system_machine(at, region)
        for j, pool in enumerate(region.gpu_pools):
            yield from repeats(f"{at}.gpu_pools[{j}].zones", pool.zones or [])
            allow = getattr(pool.sharing, "allow", None) or []
            yield from repeats(f"{at}.gpu_pools[{j}].sharing.allow", allow)
    for i, model in enumerate(spec.models):
        yield from repeats(f"models[{i}].regions", model.regions or [])
        yield from repeats(f"models[{i}].allowed_quantization", [str(q) for q in
                                                                  model.allowed_quantization])
    for i, tenant in enumerate(spec.tenants):
        yield from repeats(f"tenants[{i}].models", tenant.models)
    yield from repeats("registries.images", spec.registries.images)
    yield from check_images(spec)


def _network(at: str, region: RegionSpec) -> Iterator[Problem]:
    cidr = region.network.cidr
    if cidr.overlaps(SHARED_RANGE):
        yield Problem(f"{at}.network.cidr", f"{cidr} is in 100.64.0.0/10, carrier-grade NAT space "
                      "(RFC 6598) where the AKS clusters keep their pod and service addresses; use "
                      "private address space: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
    elif not any(cidr.subnet_of(r) for r in PRIVATE_RANGES):
        yield Problem(f"{at}.network.cidr", f"{cidr} is not in private address space; use a range "
                      "inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")


def _api_access(at: str, region: RegionSpec) -> Iterator[Problem]:
    cidrs = region.api_access_cidrs
    yield from repeats(f"{at}.api_access_cidrs", cidrs, "{}")
    for j, cidr in enumerate(cidrs):
        where = f"{at}.api_access_cidrs[{j}]"
        if cidr.prefixlen == 0:
            yield Problem(where, f"{cidr} opens the Kubernetes API to the whole internet; list the "
                          "networks that need it (offices, VPN, CI runners)")
        elif cidr.prefixlen < MIN_API_PREFIX:
            yield Problem(where, f"{cidr} is {cidr.num_addresses:,} addresses, too wide for API "
                          f"access (at most a /{MIN_API_PREFIX}); list the networks that need it")
        elif any(cidr.overlaps(r) for r in NOT_PUBLIC):
            yield Problem(where, f"{cidr} is not a public network; the API's public endpoint only "
                          "sees public source addresses (inside the network the cluster's API is "
                          "reached privately): list public ranges")
        else:
            outer = next((k for k, c in enumerate(cidrs) if c != cidr and cidr.subnet_of(c)), None)
            if outer is not None:
                yield Problem(where, f"{cidr} lies inside {cidrs[outer]} (also at [{outer}]); list "
                              "each network once")


def _system_machine(at: str, region: RegionSpec) -> Iterator[Problem]:
    name = region.system_pool.machine_type
    cloud = Cloud(region.cloud)
    if name is None or name in SYSTEM_MACHINES[cloud]:
        return
    known = ", ".join(sorted(SYSTEM_MACHINES[cloud]))
    if name in MACHINES[cloud]:
        yield Problem(f"{at}.system_pool.machine_type", f"{name!r} is a GPU machine type; the "
                      f"system pool runs on CPU machines of {cloud}: one of {known}")
    else:
        yield Problem(f"{at}.system_pool.machine_type", f"{name!r} is not a system-pool machine "
                      f"type of {cloud}; expected one of: {known}")


__all__ = ["MIN_API_PREFIX", "PRIVATE_RANGES", "SHARED_RANGE", "check_values", "repeats"]
