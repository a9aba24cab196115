"""KV-cache blocks of one replica, with an optional cache of shared prompt prefixes.

vLLM 0.11.0 (`vllm/v1/core/kv_cache_manager.py`, `allocate_slots` lines 193-300): a request holds
ceil(tokens / block_size) blocks for the tokens computed so far plus those scheduled this step;
an allocation that needs more blocks than are free returns None and the scheduler preempts.
Blocks of finished requests that prefix caching keeps stay in the free queue (evictable, LRU) and
count as free for allocation and for `vllm:kv_cache_usage_perc` (`block_pool.py` line 393).

Prefix caching is modelled at the granularity of a *prefix group* (a shared system prompt of
`prefix_tokens` tokens): only full blocks are cached (`get_computed_blocks`, lines 154-190, "the
computed blocks must be full"), a hit leaves at least the last prompt token to compute (`max_cache_hit_length
= request.num_tokens - 1`), and a request's blocks beyond the shared prefix are private. A group's
entry is created when the first request of the group has computed past the prefix, the point at
which vLLM would have hashed those full blocks. What is not modelled: hits on a preempted request's
own freed blocks and partial-prefix matches between different groups.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True)
class PrefixEntry:
    blocks: int
    refs: int = 0


class KVPool:
    """Block accounting: private blocks of live requests, shared prefix blocks (pinned while a
    live request uses them, evictable otherwise)."""

    __slots__ = ("_entries", "_evictable", "_pinned", "_private", "total")

    def __init__(self, total_blocks: int) -> None:
        if total_blocks < 1:
            raise ValueError(f"KVPool needs at least one block, got {total_blocks!r}")
        self.total = total_blocks
        self._private = 0
        self._pinned = 0  # blocks of prefix entries with refs > 0
        self._evictable = 0  # blocks of prefix entries with refs == 0
        self._entries: OrderedDict[int, PrefixEntry] = OrderedDict()  # LRU order: oldest first

    # -- reads -------------------------------------------------------------------------------
    @property
    def free(self) -> int:
        """Blocks an allocation may take (evictable cached prefixes included, as in vLLM)."""
        return self.total - self._private - self._pinned

    @property
    def used(self) -> int:
        return self._private + self._pinned

    @property
    def usage(self) -> float:
        return self.used / self.total

    def cached_blocks(self, group: int) -> int:
        entry = self._entries.get(group)
        return entry.blocks if entry is not None else 0

    def has_prefix(self, group: int) -> bool:
        return group in self._entries

    # -- writes ------------------------------------------------------------------------------
    def take(self, blocks: int) -> bool:
        """Allocate `blocks` private blocks; False (and nothing changes) when they are not free."""
        if blocks <= 0:
            return True
        if blocks > self.free:
            return False
        self._private += blocks
        self._evict_to_fit()
        return True

    def give_back(self, blocks: int) -> None:
        self._private -= blocks
        if self._private < 0:
            raise AssertionError("KVPool: more private blocks freed than taken")

    def acquire_prefix(self, group: int) -> int:
        """Reference a cached prefix (a hit); returns its blocks. Pinning an evictable entry takes
        free blocks, so the caller checks `cached_blocks` against `free` first."""
        entry = self._entries[group]
        if entry.refs == 0:
            self._evictable -= entry.blocks
            self._pinned += entry.blocks
        entry.refs += 1
        self._entries.move_to_end(group)
        return entry.blocks

    def release_prefix(self, group: int) -> None:
        entry = self._entries[group]
        entry.refs -= 1
        if entry.refs == 0:
            self._pinned -= entry.blocks
            self._evictable += entry.blocks
            self._entries.move_to_end(group)  # freed blocks join the free queue's tail (LRU)

    def donate_prefix(self, group: int, blocks: int) -> bool:
        """Turn `blocks` of a request's private blocks into the cached prefix of `group` (the
        request keeps referencing them). False when the group is already cached."""
        if group in self._entries or blocks <= 0:
            return False
        self._private -= blocks
        self._pinned += blocks
        self._entries[group] = PrefixEntry(blocks=blocks, refs=1)
        return True

    def _evict_to_fit(self) -> None:
        """Drop least recently used unreferenced prefixes until every block is accounted once."""
        while self._private + self._pinned + self._evictable > self.total:
            for group, entry in self._entries.items():
                if entry.refs == 0:
                    self._evictable -= entry.blocks
                    del self._entries[group]
                    break
            else:
                raise AssertionError("KVPool: over-allocated with nothing evictable")


__all__ = ["KVPool", "PrefixEntry"]
