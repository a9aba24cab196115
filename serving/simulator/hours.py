"""GPU time a simulated fleet held: the slots its replicas took, and the fewest nodes that could
have held them."""

from __future__ import annotations

import math

from serving.simulator.fleet import Fleet


def slot_seconds(fleet: Fleet, end: float) -> float:
    """Seconds the fleet's replicas held a GPU slot up to `end`: from placement (a Pending
    replica's binding, not its creation) to removal; one that never bound held none."""
    return sum((r.gone_s if r.gone_s is not None else end) - r.placed_s
               for r in fleet.replicas if r.scheduled)


def packed_node_seconds(fleet: Fleet, end: float) -> float:
    """Node-seconds had every zone held its replicas (from placement to removal, draining
    included) on the fewest nodes, and freed a node the moment it emptied: the floor any
    scale-in order or consolidation could reach with this replica history."""
    slots = fleet.cfg.slots_per_node
    total = 0.0
    for zone in fleet.cfg.zones:
        mine = [r for r in fleet.replicas if r.zone == zone and r.scheduled]
        steps = sorted([(r.placed_s, 1) for r in mine]
                       + [(r.gone_s, -1) for r in mine if r.gone_s is not None])
        live, since = 0, 0.0
        for t, step in steps:
            total += math.ceil(live / slots) * (min(t, end) - since)
            live, since = live + step, min(t, end)
        total += math.ceil(live / slots) * max(0.0, end - since)
    return total


__all__ = ["packed_node_seconds", "slot_seconds"]
