"""Routers: which ready replica gets a request.

- `RoundRobin`: the next replica in turn (Kubernetes Service / kube-proxy style spreading).
- `LeastLoaded`: fewest running + waiting requests (vLLM's own two queue gauges); ties go round
  robin so equal replicas share the load.
- `PrefixAware`: requests of a prefix group stick to the replica that last served the group, where
  its prefix is likely cached, unless that replica holds more than `slack` requests above the
  least-loaded one; then least-loaded, and the group moves there. This is the shape of the Gateway
  API Inference Extension / llm-d endpoint picker's prefix-cache scorer balanced against a
  queue scorer, with the router keeping its own index of where a prefix went.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from serving.simulator.engine import SimRequest


class Routable(Protocol):
    rid: int

    @property
    def load(self) -> int: ...


class Router(Protocol):
    def choose(self, req: SimRequest, replicas: Sequence[Routable]) -> Routable: ...


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def choose(self, req: SimRequest, replicas: Sequence[Routable]) -> Routable:
        pick = replicas[self._next % len(replicas)]
        self._next += 1
        return pick


class LeastLoaded:
    def __init__(self) -> None:
        self._turn = 0

    def choose(self, req: SimRequest, replicas: Sequence[Routable]) -> Routable:
        n = len(replicas)
        start = self._turn % n
        self._turn += 1
        best = replicas[start]
        best_load = best.load
        for j in range(1, n):
            r = replicas[(start + j) % n]
            load = r.load
            if load < best_load:
                best, best_load = r, load
        return best


class PrefixAware:
    def __init__(self, slack: int = 4) -> None:
        if slack < 0:
            raise ValueError(f"PrefixAware slack must be >= 0, got {slack}")
        self.slack = slack
        self._least = LeastLoaded()
        self._home: dict[int, int] = {}  # prefix group -> replica id

    def choose(self, req: SimRequest, replicas: Sequence[Routable]) -> Routable:
        least = self._least.choose(req, replicas)
        if req.group < 0:
            return least
        home = self._home.get(req.group)
        if home is not None:
            for r in replicas:
                if r.rid == home:
                    if r.load <= least.load + self.slack:
                        return r
                    break
        self._home[req.group] = least.rid
        return least


ROUTERS = {"round-robin": RoundRobin, "least-loaded": LeastLoaded, "prefix-aware": PrefixAware}


def make_router(name: str) -> Router:
    try:
        return ROUTERS[name]()
    except KeyError:
        raise ValueError(f"router must be one of {sorted(ROUTERS)}, got {name!r}") from None


__all__ = ["ROUTERS", "LeastLoaded", "PrefixAware", "RoundRobin", "Routable", "Router", "make_router"]
