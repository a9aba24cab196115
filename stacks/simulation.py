"""The simulator's inputs for one model in one region, read off the plan as `pulumi up` deploys it.

`serving.simulator` knows nothing of stacks; this module is the one bridge (serving must not
import stacks). Per `ModelRegionPlan`:

- engine: the step time is the plan's slice profile (`serving.profiles.profile(card, slice,
  quantization)`, the same function the planner sized with); the KV blocks are what vLLM gets
  from the memory its `--gpu-memory-utilization` leaves after the weights (the fraction is the one
  the model pod's args carry, `serving._model_pod.gpu_memory_utilization`, applied to the memory
  the device reports: a MIG instance reports its own memory, a time-sliced share the whole GPU's);
  `max_num_seqs` / `max_num_batched_tokens` are vLLM 0.11.0's defaults for that device
  (`default_batch_limits`); `--max-model-len` is the plan's. Activation memory is not subtracted
  (the planner does not either), so the KV cache is an upper bound.
- fleet: the pool's zones; `min_replicas` running at t = 0 (the Deployment starts at KEDA's
  minimum), on as many nodes per zone as the topology spread needs; slots per node from the
  slice (GPUs per node x slices of this kind per GPU / TP); the plan's cold-start budget; an
  empty node kept as long as the cluster's node autoscaler keeps it (`empty_node_ttl_s`); every
  zone a domain of the zone spread where other models keep the pool's nodes there (`zones_kept`),
  else only the zones holding a node of the model's own; a lost
  zone's pods picked, counted and replaced as the endpoint picker's configuration and
  Kubernetes' defaults have it (`serving.failover`).
- autoscaler: `KedaAutoscaler(plan.autoscaling.scaled_object_spec(...))`, the very dict the
  ScaledObject manifest carries (`serving.deployments.scaled_object`); the simulated Prometheus
  labels the metrics with the served model name and the models namespace, and each target with
  the PodMonitor's podTargetLabels (`Deployment.pod_monitor`, the emitted spec), as the query
  expects, and with its node's zone where the PodMonitor relabels one (`monitor_zone_label`: the
  plan's does not; benchmarks/zone_skew.py's drift variant does).
- targets: the tier's TTFT / TPOT, its percentile and availability.

GPU-hours of one replica count the share of the GPUs its slice is (a MIG instance its memory
slices over 8, a time-slice share 1/n, a TP group its n GPUs): the pool's nodes carry other
models too, so whole-node hours would charge this model for its neighbours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from serving._model_pod import device_memory_gb, gpu_memory_utilization
from serving.activation import kv_cache_tokens, replica_reserve_gb
from serving.autoscaling import SCRAPE_TIMEOUT_S
from serving.deployments import node_selector, pod_monitor_spec, predictor_deployment
from serving.drain import drain_limit_s
from serving.failover import predictor_failover
from serving.karpenter import consolidate_after_s
from serving.models import CATALOG
from serving.nodescaling import NODE_AUTOSCALER
from serving.replica_sim import replica_engine
from serving.sharing import Mig, TimeSlice
from serving.simulator import (
    ColdStartSpec,
    EngineConfig,
    FleetConfig,
    KedaAutoscaler,
    SimConfig,
    Targets,
    Trace,
    ZoneFailure,
)
from serving.simulator.prometheus import monitor_target_labels, monitor_zone_label
from serving.slices import SharingMode
from stacks.model_plan import ModelRegionPlan
from stacks.naming import MODELS_NAMESPACE
from stacks.plan import Plan, PlannedPool

# The Prometheus address only labels the trigger; the simulated store answers any address.
PROMETHEUS = "http://prometheus.simulated:9090"
def empty_node_ttl_s(plan: Plan, mp: ModelRegionPlan) -> float:
    """How long the node autoscaler keeps an empty node of `mp`'s pool, as the cluster is built:
    Karpenter's `consolidateAfter` as emitted on EKS, the cluster autoscaler's unneeded time as
    AKS's profile states it and as GKE's stated profile keeps it (serving/nodescaling.py)."""
    region = plan.region(mp.region)
    wait = NODE_AUTOSCALER[region.cloud].empty_node_s
    if wait is None:
        return float(consolidate_after_s(region.pool_cold_start_s(mp.pool)))
    return wait


class SimulationInputError(ValueError):
    """The command's input names something the plan does not have."""


@dataclass(frozen=True)
class Deployment:
    """What the simulator needs of one model in one region, with where each number came from."""

    plan: ModelRegionPlan
    engine: EngineConfig
    fleet: FleetConfig
    targets: Targets
    percentile: float
    availability: float
    scaled_object: dict[str, Any]
    gpu_share: float  # GPUs one replica holds (fractional for a slice)
    kv_tokens: int
    device_memory_gb: float  # what one device reports to vLLM
    memory_utilization: float  # --gpu-memory-utilization of the pod
    autoscale_offset_s: float = 0.0  # SimConfig's: the autoscaler reads at the scrapes' instants
    scrape_phase_s: float = 0.0  # SimConfig's: the scrapes fall on the subqueries' steps
    # The spec of the PodMonitor Prometheus scrapes the model by; None: the emitted one.
    pod_monitor: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return f"{self.plan.model}@{self.plan.region}"

    @property
    def monitor(self) -> dict[str, Any]:
        """The PodMonitor spec the simulated Prometheus scrapes the model by."""
        return pod_monitor_spec(self.plan.model) if self.pod_monitor is None else self.pod_monitor

    def autoscaler(self) -> KedaAutoscaler:
        """A fresh KEDA + HPA (they keep state, so one per run)."""
        return KedaAutoscaler(self.scaled_object)

    def sim_config(self, zone_failures: tuple[ZoneFailure, ...] = (), end_s: float | None = None,
                   fleet: FleetConfig | None = None) -> SimConfig:
        # Prometheus scrapes the PodMonitor as often as KEDA polls, with its timeout
        # (serving/deployments.py).
        return SimConfig(engine=self.engine, fleet=fleet or self.fleet, targets=self.targets,
                         scrape_interval_s=float(self.scaled_object["pollingInterval"]),
                         scrape_timeout_s=float(SCRAPE_TIMEOUT_S),
                         zone_failures=zone_failures, model_name=self.plan.model,
                         namespace=MODELS_NAMESPACE,
                         target_labels=tuple(monitor_target_labels(self.monitor).items()),
                         zone_label=monitor_zone_label(self.monitor),
                         end_s=end_s, autoscale_offset_s=self.autoscale_offset_s,
                         scrape_phase_s=self.scrape_phase_s)

    def inputs(self) -> dict[str, object]:
        """The mapping plan -> simulator, for the report."""
        step = self.engine.step
        return {
            "slice": self.plan.slice.label, "quantization": str(self.plan.quantization),
            "step_time": {"prefill_fixed_s": step.prefill_fixed_s,
                          "prefill_per_token_s": step.prefill_per_token_s,
                          "tpot_fixed_s": step.tpot_fixed_s, "tpot_per_seq_s": step.tpot_per_seq_s},
            "device_memory_gb": self.device_memory_gb, "gpu_memory_utilization": self.memory_utilization,
            "kv_tokens": self.kv_tokens, "kv_blocks": self.engine.kv_blocks,
            "max_num_batched_tokens": self.engine.max_num_batched_tokens,
            "max_num_seqs": self.engine.max_num_seqs, "max_model_len": self.engine.max_model_len,
            "zones": list(self.fleet.zones), "initial_replicas": self.fleet.initial_replicas,
            "initial_nodes": self.fleet.initial_nodes, "slots_per_node": self.fleet.slots_per_node,
            "min_replicas": self.plan.min_replicas, "max_replicas": self.plan.max_replicas,
            "cold_start_s": {"full": self.fleet.cold_start.full_s, "warm": self.fleet.cold_start.warm_s,
                             "node_ready": self.fleet.cold_start.node_ready_s},
            "zone_loss_s": {"routed_until": self.fleet.failover.route_s,
                            "not_ready": self.fleet.failover.not_ready_s,
                            "replaced_from": self.fleet.failover.evict_s},
            # An outage the stack lists (AwsRegion.zones_down): no new node there.
            "zones_out_of_pools": list(self.fleet.failover.zones_out_of_pools),
            "keda_threshold": self.plan.autoscaling.threshold,
            "keda_polling_s": self.plan.autoscaling.polling_interval_s,
            "targets": {"ttft_s": self.targets.ttft_s, "tpot_s": self.targets.tpot_s,
                        "percentile": self.percentile, "availability": self.availability},
            "replica_qps_claimed": self.plan.capacity.qps,
        }


def _slots_per_node(mp: ModelRegionPlan, pool: PlannedPool) -> int:
    """Replicas of this model's slice one node of the pool holds."""
    kind, gpus, sharing = mp.slice, pool.gpus_per_node, pool.sharing
    if kind.mode is SharingMode.MIG and isinstance(sharing, Mig):
        per_gpu = sharing.profiles.get(kind.mig_profile or "", 0)
    elif kind.mode is SharingMode.TIME_SLICE and isinstance(sharing, TimeSlice):
        per_gpu = sharing.replicas
    elif kind.mode is SharingMode.PARTITION:
        per_gpu = kind.shares
    else:
        return max(1, gpus // kind.tensor_parallel)
    return max(1, gpus * per_gpu)


def _gpu_share(mp: ModelRegionPlan) -> float:
    kind = mp.slice
    if kind.mode is SharingMode.MIG:
        mig = kind.spec.mig_profile(kind.mig_profile or "")
        return mig.memory_slices / 8 if mig else 1.0
    return kind.tensor_parallel / kind.shares


def zones_kept(plan: Plan, mp: ModelRegionPlan) -> bool:
    """Whether other models keep a node that `mp`'s pods select in every zone of its pool, so
    each zone stays a domain of its zone spread (`FleetConfig.every_zone_a_domain`): a model in
    the same region with the same node selector (serving/deployments.py `node_selector`) whose
    floor is one replica a zone or more. Such a floor can still leave a zone between a scale-in
    and the next, which this ignores; the node autoscaler keeps an emptied node minutes longer."""
    region = plan.region(mp.region)
    zones, mine = len(region.pool(mp.pool).zones), node_selector(mp, region.cloud)
    return any(other is not mp and other.region == mp.region and other.min_replicas >= zones
               and node_selector(other, region.cloud) == mine for other in plan.models)


def deployment(plan: Plan, mp: ModelRegionPlan) -> Deployment:
    """The simulator's inputs for `mp` (one of `plan.models`)."""
    card = CATALOG[mp.catalog]
    region = plan.region(mp.region)
    pool = region.pool(mp.pool)
    kind = mp.slice
    device_gb = device_memory_gb(kind, pool.sharing)
    utilization = gpu_memory_utilization(kind, pool.sharing)
    usable_gb = device_gb * kind.tensor_parallel * utilization
    reserve_gb = replica_reserve_gb(card, mp.quantization, kind.tensor_parallel, device_gb, str(kind.gpu))
    kv_tokens = kv_cache_tokens(card, mp.quantization, usable_gb, reserve_gb)  # as replica_engine
    engine = replace(replica_engine(card, kind, mp.quantization, mp.max_model_len, device_gb, usable_gb),
                     max_output_tokens=mp.max_output_tokens)
    zones = pool.zones
    slots = _slots_per_node(mp, pool)
    # Whether the pool's node autoscaler launches in the zones up while one is lost (Karpenter
    # does not); kube-scheduler still places replicas on free slots there.
    launches = NODE_AUTOSCALER[region.cloud].launches_while_zone_down
    per_zone = math.ceil(mp.min_replicas / len(zones))
    fleet = FleetConfig(zones=zones, initial_replicas=mp.min_replicas, slots_per_node=slots,
                        gpus_per_node=pool.gpus_per_node, cold_start=ColdStartSpec.from_budget(mp.cold_start),
                        initial_nodes=len(zones) * math.ceil(per_zone / slots),
                        node_empty_ttl_s=empty_node_ttl_s(plan, mp),
                        every_zone_a_domain=zones_kept(plan, mp),
                        # The predictor's drain: its preStop hook's bound in its grace period.
                        drain_limit_s=drain_limit_s(mp.grace_s),
                        # The picker as the inferencepool release configures it, and the
                        # predictor's toleration of an unreachable node (its pool's own taints,
                        # the rest of its list, have no say in a zone loss).
                        failover=replace(predictor_failover(), new_nodes_while_down=launches,
                                         zones_out_of_pools=tuple(getattr(region.region, "zones_down", ()))))
    tier = mp.tier_spec
    return Deployment(
        plan=mp, engine=engine, fleet=fleet,
        targets=Targets(tier.ttft_s, tier.tpot_s),
        percentile=tier.percentile, availability=tier.availability,
        scaled_object=mp.autoscaling.scaled_object_spec(predictor_deployment(mp), PROMETHEUS),
        gpu_share=_gpu_share(mp), kv_tokens=kv_tokens, device_memory_gb=device_gb,
        memory_utilization=utilization,
    )


def select(plan: Plan, model: str | None) -> list[ModelRegionPlan]:
    """`model` in its first region, or every model of the stack in its first region."""
    first: dict[str, ModelRegionPlan] = {}
    for mp in plan.models:
        first.setdefault(mp.model, mp)
    if model is None:
        return list(first.values())
    if model not in first:
        raise SimulationInputError(f"model {model!r} is not in this stack (models: {', '.join(first)})")
    return [first[model]]


SCALINGS = ("rate", "time")


def trace_for(mp: ModelRegionPlan, trace: Trace, scaling: str = "rate", seed: int = 0) -> Trace:
    """`trace` scaled so its busiest minute is the model's peak_qps: by rate on the trace's own
    clock (the default: traffic then grows per real minute as it did, which is what the plan's
    burst headroom is sized for; `seed` draws which requests a thinned or replicated bin keeps),
    or by compressing time (every request kept, k times faster)."""
    if scaling == "rate":
        return trace.rate_scaled_to_peak(mp.peak_qps, seed=seed)
    if scaling == "time":
        return trace.scaled_to_peak(mp.peak_qps)
    raise ValueError(f"trace scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")


__all__ = ["PROMETHEUS", "SCALINGS", "Deployment", "SimulationInputError", "deployment",
           "select", "trace_for"]
