"""The GKE address plan, pure so validation can check a region's size before anything is built.

See components/gcp_network.py for the layout and why pods get half the region's range.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

# GKE reserves twice a node's max pods, rounded up to a power of two: 110 pods -> a /24.
POD_ADDRESSES_PER_NODE = 256


@dataclass(frozen=True)
class AddressPlan:
    nodes: IPv4Network
    pods: IPv4Network
    services: IPv4Network

    @property
    def max_nodes(self) -> int:
        """How many nodes the pod range holds at GKE's default of 110 pods a node."""
        return self.pods.num_addresses // POD_ADDRESSES_PER_NODE


def address_plan(cidr: IPv4Network) -> AddressPlan:
    pods, rest = cidr.subnets(prefixlen_diff=1)
    nodes, tail = rest.subnets(prefixlen_diff=1)
    services = next(tail.subnets(prefixlen_diff=2))
    return AddressPlan(nodes=nodes, pods=pods, services=services)


__all__ = ["POD_ADDRESSES_PER_NODE", "AddressPlan", "address_plan"]
