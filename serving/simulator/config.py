"""Plain, frozen inputs of the simulator: the engine of one replica, the fleet, cold starts, targets,
and the settings of one run (`SimConfig`).

Everything here is a number a caller can set by hand; `StepTime.from_profile` and
`EngineConfig.vllm_defaults` are the only bridges to the rest of the toolkit, so later code (the
planner, a what-if CLI) can drive the simulator without touching Pulumi.

vLLM defaults are those of the pinned image, vllm/vllm-openai:v0.11.0 (vllm 0.11.0, commit
f71952c1c), read from the wheel's sources:
- `vllm/engine/arg_utils.py` `EngineArgs._set_default_args` (lines 1540-1686): V1 always enables
  chunked prefill and, for generative models, prefix caching; for the OpenAI server
  (`UsageContext.OPENAI_API_SERVER`) on a device with >= 70 GiB whose name does not contain
  "a100", `max_num_batched_tokens` = 8192 and `max_num_seqs` = 1024; otherwise 2048 and 256.
  `max_num_seqs` is then capped at `max_num_batched_tokens`.
- `vllm/v1/core/block_pool.py` `get_usage` (line 393): KV usage = 1 - free / total blocks; blocks
  of finished requests kept only for prefix caching count as free.
- The KV block size is 16 tokens (vLLM's CacheConfig default on CUDA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

BLOCK_SIZE = 16
_GIB = 1024**3


class _ProfileLike(Protocol):
    """The fields of `serving.profiles.Profile` the step-time rule needs (duck-typed, so a test or
    a measured profile need not build a full Profile)."""

    prefill_fixed_s: float
    prefill_per_token_s: float
    tpot_fixed_s: float
    tpot_per_seq_s: float


@dataclass(frozen=True)
class StepTime:
    """Duration of one engine step (iteration) from the profile's two straight lines.

    A step that decodes B sequences (one token each) and computes C prefill tokens (any number of
    chunks of any requests) takes

        fixed + tpot_per_seq_s x B + prefill_per_token_s x C

    where fixed = tpot_fixed_s when C = 0, prefill_fixed_s when B = 0 and the larger of the two
    when both are present. Why: in the profile both fixed parts stand for one pass over the weights
    (serving/profiles.py derives them from the same weight-bytes / bandwidth ratio), and a mixed
    chunked-prefill step runs one forward pass over the concatenated tokens, so it reads the weights
    once; the per-sequence decode cost (reading each sequence's KV cache) and the per-token prefill
    compute add up. The rule reproduces the profile exactly at its two ends: a lone prompt that fits
    one chunk costs prefill_s(prompt) and a pure decode step of B sequences costs tpot_s(B).
    """

    prefill_fixed_s: float
    prefill_per_token_s: float
    tpot_fixed_s: float
    tpot_per_seq_s: float

    def __post_init__(self) -> None:
        for name in ("prefill_fixed_s", "prefill_per_token_s", "tpot_fixed_s", "tpot_per_seq_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"StepTime.{name} must be a finite number >= 0, got {value!r}")
        if (self.prefill_fixed_s + self.prefill_per_token_s <= 0
                or self.tpot_fixed_s + self.tpot_per_seq_s <= 0):
            raise ValueError("StepTime: a step must take time (prefill and decode lines both zero)")

    @classmethod
    def from_profile(cls, prof: _ProfileLike) -> StepTime:
        return cls(prof.prefill_fixed_s, prof.prefill_per_token_s, prof.tpot_fixed_s, prof.tpot_per_seq_s)

    def step_s(self, decode_seqs: int, prefill_tokens: int) -> float:
        if prefill_tokens == 0:
            return self.tpot_fixed_s + self.tpot_per_seq_s * decode_seqs
        fixed = self.prefill_fixed_s if decode_seqs == 0 else max(self.prefill_fixed_s, self.tpot_fixed_s)
        return fixed + self.tpot_per_seq_s * decode_seqs + self.prefill_per_token_s * prefill_tokens


def default_batch_limits(device_memory_gib: float, device_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.11.0 picks for the OpenAI server on a device
    with `device_memory_gib` GiB named `device_name` (arg_utils.py lines 1601-1624, 1654-1683)."""
    if device_memory_gib <= 0:
        raise ValueError(f"device_memory_gib must be positive, got {device_memory_gib!r}")
    large = device_memory_gib * _GIB >= 70 * _GIB and "a100" not in device_name.lower()
    tokens, seqs = (8192, 1024) if large else (2048, 256)
    return tokens, min(seqs, tokens)


@dataclass(frozen=True)
class EngineConfig:
    """One vLLM replica: the step-time rule and the V1 scheduler's limits."""

    step: StepTime
    kv_blocks: int  # usable KV-cache blocks of BLOCK_SIZE tokens (vLLM's num_gpu_blocks - 1)
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    max_model_len: int | None = None  # None: whatever the KV cache holds
    # The server-wide cap on one response (vLLM's generation-config `max_new_tokens`); None: none.
    max_output_tokens: int | None = None
    enable_prefix_caching: bool = True  # V1 default for generative models
    block_size: int = BLOCK_SIZE

    def __post_init__(self) -> None:
        for name in ("kv_blocks", "max_num_batched_tokens", "max_num_seqs", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"EngineConfig.{name} must be an integer >= 1, got {value!r}")
        if self.max_model_len is not None and (
                not isinstance(self.max_model_len, int) or self.max_model_len < 2):
            raise ValueError(f"EngineConfig.max_model_len must be an integer >= 2, "
                             f"got {self.max_model_len!r}")
        if self.max_output_tokens is not None and (
                not isinstance(self.max_output_tokens, int) or self.max_output_tokens < 1):
            raise ValueError(f"EngineConfig.max_output_tokens must be an integer >= 1, "
                             f"got {self.max_output_tokens!r}")
        if self.max_model_len is not None and self.max_model_len > self.kv_blocks * self.block_size:
            # vLLM refuses to start when one max-length sequence does not fit the KV cache.
            raise ValueError(f"EngineConfig: max_model_len {self.max_model_len} exceeds the KV cache "
                             f"({self.kv_blocks} blocks x {self.block_size} tokens)")

    @property
    def context_limit(self) -> int:
        return self.max_model_len or self.kv_blocks * self.block_size

    @classmethod
    def vllm_defaults(cls, step: StepTime, kv_blocks: int, device_memory_gib: float, device_name: str,
                      **overrides: object) -> EngineConfig:
        tokens, seqs = default_batch_limits(device_memory_gib, device_name)
        args: dict[str, object] = {"max_num_batched_tokens": tokens, "max_num_seqs": seqs, **overrides}
        return cls(step=step, kv_blocks=kv_blocks, **args)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ColdStartSpec:
    """Seconds from a scale-up decision to a ready replica (serving/coldstart.py's budget)."""

    full_s: float  # a new node: provisioning + init + image pull + weights + engine start
    warm_s: float  # a node of the pool with a free slot: weights + engine start
    node_ready_s: float = 0.0  # part of full_s until the new node accepts pods (provisioning + init)
    # Part of full_s after node readiness: the image pull, while the pod is Pending (a warm node
    # has the image, so a warm start's pod runs at once and loads its model, not ready).
    image_pull_s: float = 0.0

    def __post_init__(self) -> None:
        if not (0 <= self.warm_s <= self.full_s and 0 <= self.node_ready_s <= self.full_s
                and 0 <= self.image_pull_s <= self.full_s - self.node_ready_s):
            raise ValueError(f"ColdStartSpec expects 0 <= warm_s <= full_s, 0 <= node_ready_s <= full_s and "
                             f"0 <= image_pull_s <= full_s - node_ready_s, got {self}")

    @classmethod
    def from_budget(cls, cold: object) -> ColdStartSpec:
        """From a `serving.coldstart.ColdStart` (duck-typed)."""
        node = float(cold.node_provisioning_s) + float(cold.node_init_s)  # type: ignore[attr-defined]
        return cls(full_s=float(cold.total_s), warm_s=float(cold.warm_node_s),  # type: ignore[attr-defined]
                   node_ready_s=node, image_pull_s=float(cold.image_pull_s))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Failover:
    """How long a lost zone's replicas linger after the zone goes (seconds from the loss). All
    zero: gone at once, replaced at once (a test's idealisation). serving/failover.py derives
    the real figures from what the plan emits and Kubernetes' defaults.

    - `route_s`: the router still picks a lost replica until then, and each request it sends
      there fails (its pod's address no longer answers);
    - `not_ready_s`: the API marks the lost pods NotReady then (node lifecycle controller), and
      the ReplicaSet deletes NotReady pods first on a scale-in;
    - `evict_s`: the first lost node's pods are deleted then (the unreachable taint's toleration
      runs out), `evict_every_s` later for each further node of the zone (the node eviction rate):
      until its pod is deleted, a lost replica still counts for the ReplicaSet, which replaces it
      only then;
    - `new_nodes_while_down`: whether the node autoscaler launches nodes in the surviving zones
      while a zone is down. A replica that finds no free slot there waits for a node; without
      one it stays Pending (counted by the ReplicaSet, never ready) for the rest of the run;
    - `zones_out_of_pools`: zones the node autoscaler's pools no longer name (an outage the stack
      lists, AwsRegion.zones_down): no new node starts there, and a lost zone among them pins no
      new node elsewhere, so launches go on in the zones up;
    - `picker_stall_s`: every request arriving within this after the loss fails, as when the
      model's endpoint-picker leader was in the lost zone and the gateway's stream to it never
      answers (serving/failover.py); 0, the default, has the leader elsewhere.
    """

    route_s: float = 0.0
    not_ready_s: float = 0.0
    evict_s: float = 0.0
    evict_every_s: float = 0.0
    new_nodes_while_down: bool = True
    zones_out_of_pools: tuple[str, ...] = ()
    picker_stall_s: float = 0.0

    def __post_init__(self) -> None:
        if min(self.route_s, self.not_ready_s, self.evict_s, self.evict_every_s, self.picker_stall_s) < 0:
            raise ValueError(f"Failover expects non-negative seconds, got {self}")

    @property
    def instant(self) -> bool:
        """Lost replicas gone and replaced at once (the picker's stall is apart: it fails the
        model's requests whatever happens to its replicas)."""
        return self.route_s == self.evict_s == self.not_ready_s == 0


@dataclass(frozen=True)
class FleetConfig:
    """Nodes, zones and the starting replicas of one model in one region."""

    zones: tuple[str, ...]
    initial_replicas: int
    slots_per_node: int = 1  # replicas a node holds (GPUs per node / GPUs per replica)
    gpus_per_node: int = 1
    cold_start: ColdStartSpec = field(default_factory=lambda: ColdStartSpec(full_s=0.0, warm_s=0.0))
    initial_nodes: int | None = None  # None: just enough for the initial replicas
    node_empty_ttl_s: float = 300.0  # Karpenter consolidates an empty GPU node after 300 s (FACTS 9)
    drain: bool = True  # a replica scaled in finishes its in-flight requests before it goes
    # How long after its deletion a draining replica is stopped, cutting what it still runs (the
    # preStop hook's bound, after which the kubelet's SIGTERM stops vLLM at once); None: never.
    drain_limit_s: float | None = None
    failover: Failover = field(default_factory=Failover)  # how long a lost zone's replicas linger
    # A what-if, not emitted: a controller keeps `controller.kubernetes.io/pod-deletion-cost` at
    # minus the model's pods in each pod's zone, so a scale-in takes the fullest zone's first. The
    # costs are read once a scale-in, as the ReplicaSet sorts once a sync (the HPA's one pod a
    # step leaves a tie no room to empty one zone), and count pods whose node has not joined yet,
    # which a controller reading node zones would not see.
    deletion_cost_by_zone: bool = False
    # Whether other models' replicas keep a node of the pool (one the pods' node selector also
    # matches) in every zone, so that each zone up stays a domain of the zone spread however few
    # of this fleet's nodes it holds. Otherwise a zone is one only while it holds a node of this
    # fleet (Fleet._domains).
    every_zone_a_domain: bool = False

    def __post_init__(self) -> None:
        if not self.zones or len(set(self.zones)) != len(self.zones):
            raise ValueError(f"FleetConfig.zones must be distinct zone names, got {self.zones!r}")
        if self.initial_replicas < 0 or self.slots_per_node < 1 or self.gpus_per_node < 1:
            raise ValueError("FleetConfig expects initial_replicas >= 0, slots_per_node >= 1, "
                             "gpus_per_node >= 1")
        nodes = self.initial_nodes
        if nodes is not None and nodes * self.slots_per_node < self.initial_replicas:
            raise ValueError(f"FleetConfig: {self.initial_nodes} initial nodes x {self.slots_per_node} slots "
                             f"cannot hold {self.initial_replicas} replicas")


# A ZoneFailure's zone chosen when it fails: the one holding the most ready replicas then (ties:
# the first listed), which loses the most serving capacity at once. Scale-in keeps zones only
# roughly even (serving.simulator.fleet), so a fixed zone is not always the worst to lose.
FULLEST = "fullest"


@dataclass(frozen=True)
class ZoneFailure:
    zone: str  # a zone of the fleet, or FULLEST
    at_s: float


@dataclass(frozen=True)
class Targets:
    """Latency targets a request must meet to count as attained (seconds)."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        if self.ttft_s <= 0 or self.tpot_s <= 0:
            raise ValueError(f"Targets expects positive ttft_s and tpot_s, got {self}")


@dataclass(frozen=True)
class SimConfig:
    engine: EngineConfig
    fleet: FleetConfig
    targets: Targets
    scrape_interval_s: float = 15.0  # the PodMonitor interval (deployments.py: as often as KEDA polls)
    scrape_timeout_s: float = 10.0  # its scrapeTimeout: what a scrape of a lost pod takes to fail
    sample_interval_s: float = 5.0
    zone_failures: tuple[ZoneFailure, ...] = ()
    metric_outages: tuple[tuple[float, float], ...] = ()  # [start, end) windows Prometheus cannot answer
    model_name: str = "model"
    namespace: str = "default"
    # Labels Prometheus adds to each of the model's targets (`up`, `scrape_duration_seconds`):
    # the PodMonitor's podTargetLabels (stacks/simulation.py reads them off the emitted spec).
    target_labels: tuple[tuple[str, str], ...] = ()
    # The target label Prometheus writes each target's node's zone into (the PodMonitor's
    # relabelling of its attached node metadata), if any: a replica's zone is its node's.
    zone_label: str | None = None
    end_s: float | None = None  # stop here; None: when every request is served
    log_steps: bool = False
    # How long after each scrape the autoscaler reads. 0: at the scrape's instant, the freshest
    # data there can be. In a cluster the HPA's syncs and Prometheus's scrapes keep clocks of their
    # own, so the read falls anywhere in [0, scrape_interval_s) after the last scrape.
    autoscale_offset_s: float = 0.0
    # Where the scrapes fall on Prometheus's evaluation grid: the first at this instant, then one
    # an interval. A subquery's steps sit on whole multiples of its step from the epoch (the
    # simulator's 0; Prometheus 3 engine.go), while each target keeps the phase its scrape loop
    # started with, pinned to absolute time (scrape/target.go `offset`: the target's hash XOR the
    # server's offset seed, modulo the interval; one phase here for every pod, the bounding case).
    # At 0 every step holds the scrape of its instant; past it, the last step holds the scrape
    # before the newest (an interval older) unless the read falls after the next step (phase +
    # autoscale_offset_s >= the interval).
    scrape_phase_s: float = 0.0

    def __post_init__(self) -> None:
        if self.scrape_interval_s <= 0 or self.sample_interval_s <= 0:
            raise ValueError("SimConfig expects positive scrape_interval_s and sample_interval_s")
        if not 0.0 <= self.autoscale_offset_s < self.scrape_interval_s:
            raise ValueError(f"SimConfig expects 0 <= autoscale_offset_s < scrape_interval_s "
                             f"({self.scrape_interval_s:g}), got {self.autoscale_offset_s:g}")
        if not 0.0 <= self.scrape_phase_s < self.scrape_interval_s:
            raise ValueError(f"SimConfig expects 0 <= scrape_phase_s < scrape_interval_s "
                             f"({self.scrape_interval_s:g}), got {self.scrape_phase_s:g}")
        for failure in self.zone_failures:
            if failure.zone not in self.fleet.zones and failure.zone != FULLEST:
                raise ValueError(f"zone failure names {failure.zone!r}, not one of {self.fleet.zones} "
                                 f"or {FULLEST!r}")
        if len(self.zone_failures) >= len(self.fleet.zones):
            raise ValueError(f"{len(self.zone_failures)} zone failures leave none of {self.fleet.zones} up")
        for start, end in self.metric_outages:
            if not start < end:
                raise ValueError(f"metric outage window must have start < end, got {(start, end)}")


__all__ = ["BLOCK_SIZE", "FULLEST", "ColdStartSpec", "EngineConfig", "FleetConfig", "SimConfig", "StepTime",
           "Targets", "ZoneFailure", "default_batch_limits"]
