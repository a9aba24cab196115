"""The predictor pod of one model: container resources, vLLM arguments, probes, scheduling.

Pure: plain values in, plain dicts out (serving/deployments.py assembles them into the
InferenceService). Split from it so each module stays small.
"""

from __future__ import annotations

import json
import math
from typing import Any

from serving.coldstart import ColdStart
from serving.hardware import MachineShape
from serving.kube_names import ZONE_KEY
from serving.logpipeline import vllm_request_logging_args
from serving.profiles import SliceKind
from serving.sharing import Partition, Sharing
from serving.slices import GPU_MEMORY_UTILIZATION, SharingMode

VLLM_PORT = 8080
HEALTH_PATH = "/health"  # vLLM answers 200 once the engine is up, 5xx when it has died
MODEL_DIR = "/mnt/models"  # where KServe mounts the model (storage initializer or local cache)
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"  # the node lifecycle controller's, on a silent node
HOST_KEY = "kubernetes.io/hostname"
MODEL_LABEL = "rtip.dev/model"  # on every predictor pod and on the plan's objects of a model
TIER_ANNOTATION = "rtip.dev/tier"  # on every predictor: the tier its drain is sized for
GENERATION_CONFIG_ARG = "--override-generation-config="  # vLLM's; carries the cap on a response

# Probes: the startup probe holds off readiness and liveness until the engine is up, so it must
# allow the whole cold start after the node joined, with margin: a replica killed at 90 % of its
# load restarts from zero and never becomes ready.
PROBE_PERIOD_S = 10
PROBE_RESTART_GRACE_S = 10  # how long a probe's restart waits for the container to stop
STARTUP_MARGIN = 1.5
# Kubelet, containerd, daemonsets and the OS keep this share of a node's CPU and memory.
NODE_RESERVED = 0.15
# vLLM needs little CPU: the API server, tokenization and one worker per GPU of its TP group.
CPU_BASE = 4
CPU_PER_GPU = 4
# Host memory beyond the weights: Python, CUDA/ROCm context, tokenizer, request buffers.
HOST_MEMORY_BASE_GIB = 16
HOST_MEMORY_WEIGHTS_FACTOR = 1.25
# /dev/shm: NCCL/RCCL exchange buffers between the workers of a TP group through it; a single
# GPU replica needs only PyTorch's small IPC segments. It is RAM and counts against the limit.
SHM_GIB_TP = 8
SHM_GIB_SINGLE = 1
# Writable scratch for /tmp and $HOME (compile caches), on the node's disk.
SCRATCH_GIB = 20
HOME = "/home/vllm"
# A high UID no host account uses (checkov CKV_K8S_40); NVIDIA device nodes are world-usable.
RUN_AS = 10001


def node_share(kind: SliceKind, node: MachineShape) -> float:
    """The share of one node a replica's slices account for: its GPUs' compute share over the
    node's GPUs (a 3g MIG slice is 3/7 of a GPU, a time-sliced share 1/n)."""
    return kind.tensor_parallel * kind.compute_share / node.gpu_count


def shm_gib(kind: SliceKind) -> int:
    return SHM_GIB_TP if kind.tensor_parallel > 1 else SHM_GIB_SINGLE


def container_resources(kind: SliceKind, node: MachineShape, resource: str,
                        weights_gb: float) -> dict[str, Any]:
    """Requests equal limits (Guaranteed QoS: a serving pod is never the first one evicted or
    throttled), sized from the replica's share of the node and capped at what vLLM uses."""
    share = node_share(kind, node) * (1 - NODE_RESERVED)
    cpu = max(1, min(math.floor(node.vcpus * share), CPU_BASE + CPU_PER_GPU * kind.tensor_parallel))
    want_gib = math.ceil(weights_gb * HOST_MEMORY_WEIGHTS_FACTOR) + HOST_MEMORY_BASE_GIB + shm_gib(kind)
    memory = max(shm_gib(kind) + 2, min(math.floor(node.memory_gib * share), want_gib))
    amounts = {"cpu": str(cpu), "memory": f"{memory}Gi", resource: str(kind.tensor_parallel)}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def gpu_memory_utilization(kind: SliceKind, pool_sharing: Sharing) -> float:
    """vLLM's --gpu-memory-utilization is a fraction of the memory the device reports. A MIG
    instance or an NPS4 partition reports only its own memory; a time-sliced share, or a CPX
    partition in NPS1, sees the whole GPU's memory although it owns only its share of it."""
    whole_visible = kind.mode is SharingMode.TIME_SLICE
    if kind.mode is SharingMode.PARTITION:
        whole_visible = isinstance(pool_sharing, Partition) and pool_sharing.partition.memory_mode == "NPS1"
    factor = 1 / kind.shares if whole_visible else 1.0
    return round(GPU_MEMORY_UTILIZATION * factor, 3)


def device_memory_gb(kind: SliceKind, pool_sharing: Sharing) -> float:
    """The memory one device of the replica reports to vLLM (torch's total memory): a MIG
    instance its own, a time-sliced share or an NPS1 partition the whole GPU's, a whole GPU its
    own (a TP group's memory over its GPUs)."""
    if kind.mode is SharingMode.MIG:
        return kind.memory_gb
    if kind.mode is SharingMode.TIME_SLICE:
        return kind.spec.memory_gb
    if kind.mode is SharingMode.PARTITION and isinstance(pool_sharing, Partition) \
            and pool_sharing.partition.memory_mode == "NPS1":
        return kind.spec.memory_gb
    return kind.memory_gb / kind.tensor_parallel


def vllm_args(model: str, kind: SliceKind, pool_sharing: Sharing, max_model_len: int,
              max_output_tokens: int, stream_from: str | None, log_requests: bool = False) -> list[str]:
    """The InferenceService's arguments (KServe appends them to the runtime's).

    `stream_from`: the bucket URI vLLM streams the weights from (Run:ai streamer) when the pool
    has no local cache; None reads the model KServe mounted from its local cache.
    `log_requests`: log prompts and outputs to stdout (serving/logpipeline.py), for the cluster's
    redacting collector to pick up; only a cluster that runs one may ask for it.
    `max_output_tokens`: the server-wide cap on one response. vLLM 0.11 reads the generation
    config's `max_new_tokens` as its default sampling parameter `max_tokens`
    (vllm/config/model.py `get_diff_sampling_param`, which also says "it sets a server-wide limit
    on the number of output tokens for all requests"), and its chat and completion endpoints take
    the least of that, the request's own `max_tokens` and what the context leaves
    (vllm/entrypoints/utils.py `get_max_tokens`). Its Responses endpoint does not
    (protocol.py `ResponsesRequest.to_sampling_params`), so the gateway refuses that path
    (serving/gateway.py `refused_paths_route`)."""
    source = ([f"--model={stream_from}", "--load-format=runai_streamer"] if stream_from
              else [f"--model={MODEL_DIR}"])
    return [
        *source,
        f"--served-model-name={model}",  # the `model_name` label of its metrics; KEDA queries it
        f"--tensor-parallel-size={kind.tensor_parallel}",
        f"--max-model-len={max_model_len}",
        GENERATION_CONFIG_ARG + json.dumps({"max_new_tokens": max_output_tokens}),
        f"--gpu-memory-utilization={gpu_memory_utilization(kind, pool_sharing)}",
        *(vllm_request_logging_args() if log_requests else []),
    ]


def startup_allowance_s(cold: ColdStart) -> int:
    """Seconds the startup probe allows: everything after the node is up, with margin."""
    return math.ceil((cold.image_pull_s + cold.weights_load_s + cold.engine_start_s) * STARTUP_MARGIN)


def replica_overdue_s(cold: ColdStart) -> int:
    """How long after its creation a predictor pod must serve, in whole seconds (rounded up, as a
    PromQL range is written): a new node (provisioned and joined), then whatever the startup probe
    allows (after that it restarts the container)."""
    return math.ceil(cold.node_provisioning_s + cold.node_init_s + startup_allowance_s(cold))


def probes(cold: ColdStart) -> dict[str, Any]:
    def http(period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": HEALTH_PATH, "port": VLLM_PORT}, "periodSeconds": period,
                "timeoutSeconds": 5, "failureThreshold": failures}

    # A probe's restart runs the preStop drain too (serving/drain.py), under the pod's grace period
    # (up to 600 s) unless the probe sets its own: a wedged or never-started engine has nothing to
    # drain.
    restart = {"terminationGracePeriodSeconds": PROBE_RESTART_GRACE_S}
    return {
        "startupProbe": {**http(PROBE_PERIOD_S, math.ceil(startup_allowance_s(cold) / PROBE_PERIOD_S)),
                         **restart},
        "readinessProbe": http(PROBE_PERIOD_S, 3),
        # A wedged engine (dead worker, stuck NCCL) only shows as a failing /health: restart it.
        "livenessProbe": {**http(15, 4), **restart},
    }


def security_context(as_root: bool) -> dict[str, Any]:
    """The model container's: no privilege, no capabilities, a read-only root filesystem (the
    writable paths are the emptyDirs of `volumes`), and a non-root user unless `as_root`."""
    ctx: dict[str, Any] = {"allowPrivilegeEscalation": False, "privileged": False,
                           "readOnlyRootFilesystem": True,
                           "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    if not as_root:
        ctx.update(runAsNonRoot=True, runAsUser=RUN_AS, runAsGroup=RUN_AS)
    return ctx


def volumes(kind: SliceKind) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's mounts: shared memory, /tmp, and $HOME, where vLLM,
    Triton and torch.compile keep their caches (the root filesystem is read-only)."""
    vols = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib(kind)}Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": f"{SCRATCH_GIB}Gi"}},
        {"name": "home", "emptyDir": {"sizeLimit": f"{SCRATCH_GIB}Gi"}},
    ]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "tmp", "mountPath": "/tmp"},
              {"name": "home", "mountPath": HOME}]
    return vols, mounts


def env() -> list[dict[str, str]]:
    # Telemetry off and no calls to the Hugging Face Hub: weights come from the stack's own
    # store. HOME and the cache root point at the writable emptyDir.
    values = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
              "HOME": HOME, "XDG_CACHE_HOME": f"{HOME}/.cache"}
    return [{"name": k, "value": v} for k, v in values.items()]


# How long a replica stays bound to a node the control plane cannot reach, once the node is
# tainted unreachable (55-60 s after it went silent): then the pod is deleted and the ReplicaSet
# replaces it. Kubernetes' default is 300 s, through which a lost zone's replicas count and are
# not replaced unless the autoscaling query's lost-pod term adds replicas for them (it can only
# within max: serving/capacity.py lost_zone_room). Where it could not (the 8B's old code plan at
# min = max = 3; serving/failover.py), a zone lost at the code trace's busiest minute cost 1.63 %
# of the window's requests with the default, 2.10 % with 60 s, 0.46 % with 30 s, 0.26 % with 0 s
# (budget 1.10 %). With the term's room, the eviction's timing changes at most two requests of a
# window in benchmarks/failover.py's seven cases; 30 s stays for what the term cannot do (add
# replicas to a fleet at max, or count while the metrics path is lost with the zone). 30 s: a
# node silent for 90 s is taken for gone, a shorter blip keeps its pods. Only `unreachable`: a
# node that reports NotReady (a kubelet restart, an upgrade) keeps the default, as a replica's
# cold start costs minutes.
UNREACHABLE_TOLERATION_S = 30


def unreachable_toleration() -> dict[str, object]:
    """Bound to an unreachable node for UNREACHABLE_TOLERATION_S, then evicted and replaced."""
    return {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": UNREACHABLE_TOLERATION_S}


def tolerations(taints: tuple[tuple[str, str, str], ...]) -> list[dict[str, object]]:
    """Tolerate exactly the pool's taints (key, value, effect), nothing broader, and an
    unreachable node for UNREACHABLE_TOLERATION_S."""
    return [*({"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in taints),
            unreachable_toleration()]


def zone_spread(selector: dict[str, str]) -> dict[str, Any]:
    """A hard zone rule for the pods `selector` matches: no zone holds two more than another.

    It counts only nodes whose taints the pod tolerates (`nodeTaintsPolicy: Honor`, default
    Ignore): a lost zone's nodes are tainted unreachable:NoSchedule 50-55 s after they go silent,
    and with Ignore that zone stays a domain holding none of the pods once they are evicted, so a
    replacement in a surviving zone would break maxSkew 1 and stay Pending until the Node objects
    are deleted (kubernetes/kubernetes#123019, KEP-5980). With one zone it always holds."""
    return {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": "Honor", "labelSelector": {"matchLabels": dict(selector)}}


def spread(selector: dict[str, str]) -> list[dict[str, Any]]:
    """Replicas evenly over zones (the sizing assumes a zone can be lost), then over nodes.

    The zone rule is hard: a replica piled into one zone silently breaks the N-1 zone margin the
    replica count was sized for. Spreading over nodes is best effort, since MIG and time-sliced
    pools host several replicas on one node by design."""
    # Count only the current rollout's pods, so a rolling update is not blocked by the pods it
    # is about to replace.
    rollout = {"matchLabelKeys": ["pod-template-hash"]}
    return [
        {**zone_spread(selector), **rollout},
        {"maxSkew": 1, "labelSelector": {"matchLabels": dict(selector)}, **rollout,
         "topologyKey": HOST_KEY, "whenUnsatisfiable": "ScheduleAnyway"},
    ]


__all__ = [
    "GENERATION_CONFIG_ARG",
    "HEALTH_PATH",
    "HOME",
    "HOST_KEY",
    "MODEL_DIR",
    "PROBE_PERIOD_S",
    "RUN_AS",
    "STARTUP_MARGIN",
    "TIER_ANNOTATION",
    "UNREACHABLE_TAINT",
    "UNREACHABLE_TOLERATION_S",
    "VLLM_PORT",
    "container_resources",
    "device_memory_gb",
    "env",
    "gpu_memory_utilization",
    "node_share",
    "probes",
    "replica_overdue_s",
    "security_context",
    "shm_gib",
    "spread",
    "startup_allowance_s",
    "tolerations",
    "unreachable_toleration",
    "vllm_args",
    "volumes",
    "zone_spread",
]
