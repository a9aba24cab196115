"""A predictor that is scaled in finishes its requests before vLLM is stopped.

vLLM 0.11 has no graceful shutdown: on SIGTERM its API server cancels the uvicorn task and shuts
the engine down at once (vllm/entrypoints/launcher.py `serve_http`'s signal handler, then
api_server.py leaves `build_async_engine_client` before awaiting the server's shutdown), so every
generation in flight stops mid-stream, whatever `terminationGracePeriodSeconds` says; the flag
that drains (`--shutdown-timeout`) came in vLLM 0.18. KServe v0.20 adds no lifecycle hook to a
Standard-mode predictor. The plan scales in one pod per sync, many times an hour, so without a
drain each scale-in would cut the longest streams of the pod it removes; the simulator's
draining replica (serving/simulator/fleet.py) finishes them, as this hook lets vLLM do within the
grace period (the simulator stops a draining replica at `drain_limit_s`, cutting what it still
runs; it takes the pod out of the router at once, without the settle).

Kubernetes runs a container's preStop hook before it sends SIGTERM, within the grace period. The
hook here waits `PICKER_SETTLE_S` (the endpoint picker drops a pod once its informer sees the
deletion timestamp: gateway-api-inference-extension v1.5.0 `pkg/epp/util/pod/pod.go` IsPodReady,
so requests already routed still arrive), then polls the server's own /metrics until its running
and waiting requests are 0, or the server stops answering, or `bound_s` passes; vLLM serves
/metrics meanwhile, so the autoscaling query keeps seeing the pod. python3 is in both the CUDA and
the ROCm image (the runtime starts vLLM with it); nothing is written to the read-only root. A
probe's restart would run the hook too, so the probes that restart carry a short grace period of
their own (serving/_model_pod.py).

The grace period is sized to the longest response the model serves (`grace_s`), and that length
is capped in vLLM itself (`max_output_tokens`, serving/_model_pod.py `vllm_args`): without a cap a
request may generate up to its context (131,072 tokens for the Llama 3 models), hours at a tier's
pace, and no bound on the drain would hold. The default cap is the longest response whose drain
fits the cluster autoscaler's wait (`output_cap`).
"""

from __future__ import annotations

import math
from typing import Any

from serving._model_pod import VLLM_PORT
from serving.nodescaling import NODE_AUTOSCALER
from serving.tiers import TierSpec

PICKER_SETTLE_S = 5
DRAIN_POLL_S = 1
# vLLM's event loop answers /metrics late under the very load being drained: a slow answer, an
# error status or a cut body is waited out (until the bound); only a refused connection (the
# server is gone) ends the drain early. The same 5 s the probes allow.
METRICS_TIMEOUT_S = 5
# The hook must end before the grace period does (the kubelet then sends SIGTERM at once, and
# SIGKILL 2 s later if the hook overran): its last poll may start at the bound and take a
# timeout and a pause more.
HOOK_MARGIN_S = DRAIN_POLL_S + METRICS_TIMEOUT_S + 2
# The default cap's drain: the shortest wait of any node autoscaler that bounds it
# (serving/nodescaling.py; the cluster autoscaler's 600 s on GKE and AKS), so one default serves a
# model on every cloud a stack may span. A stated cap is held to it too, on EKS as well, where
# nothing cuts a drain: the plan's other clocks (the overdue window, rollouts) assume none longer.
NODE_DRAIN_LIMIT_S = min(a.pod_grace_limit_s for a in NODE_AUTOSCALER.values() if a.pod_grace_limit_s)
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
CONTAINER_LOG = "/proc/1/fd/1"


def drain_script(port: int, settle_s: float, bound_s: float, poll_s: float = DRAIN_POLL_S,
                 timeout_s: float = METRICS_TIMEOUT_S, log: str = CONTAINER_LOG) -> str:
    """Python source that waits `settle_s`, then until the server on `port` has nothing running
    or waiting, refuses connections, or `bound_s` more seconds pass; it writes why it stopped to
    `log` (the container's: PID 1's stdout, where `kubectl logs` shows it)."""
    return "\n".join([
        "import time, urllib.error, urllib.request",
        f"time.sleep({settle_s:g})",
        f"deadline = time.monotonic() + {bound_s:g}",
        "why = 'bound reached with requests in flight'",
        "while time.monotonic() < deadline:",
        "    try:",
        f"        url = 'http://127.0.0.1:{port}/metrics'",
        f"        page = urllib.request.urlopen(url, timeout={timeout_s:g}).read()",
        "        left = sum(float(line.rsplit(' ', 1)[1]) for line in page.decode().splitlines()",
        f"                   if line.split('{{', 1)[0].split(' ', 1)[0] in {GAUGES!r})",
        "    except Exception as err:",
        "        if isinstance(getattr(err, 'reason', err), ConnectionRefusedError):",
        "            why = 'server gone'",
        "            break",
        "        left = None",
        "    if left == 0:",
        "        why = 'drained'",
        "        break",
        f"    time.sleep({poll_s:g})",
        "try:",
        f"    with open({log!r}, 'w') as log:",
        "        log.write(f'rtip preStop drain: {why}\\n')",
        "except OSError:",
        "    pass",
    ])


def grace_s(ttft_s: float, tpot_s: float, output_tokens: int) -> int:
    """The grace period in which a generation of `output_tokens` at the tier's TTFT and TPOT,
    routed to the pod up to the picker's settle after its deletion, ends before the hook does:
    settle + TTFT + tokens x TPOT + `HOOK_MARGIN_S`, in whole seconds (one token more than the
    first-token-then-TPOT count, which errs long). A draining replica takes no new requests, so its
    running ones go no slower than the load it was sized for lets them."""
    return math.ceil(PICKER_SETTLE_S + ttft_s + output_tokens * tpot_s + HOOK_MARGIN_S - 1e-9)


def output_cap(ttft_s: float, tpot_s: float, limit_s: float = NODE_DRAIN_LIMIT_S) -> int:
    """The most output tokens a response may have so that `grace_s` stays within `limit_s`: the
    default `max_output_tokens` of a model at this TTFT and TPOT."""
    return math.floor((limit_s - PICKER_SETTLE_S - HOOK_MARGIN_S - ttft_s) / tpot_s + 1e-9)


def response_cap(tier: TierSpec, stated: int | None, context: int) -> int:
    """The cap on one response of a model of `tier`: the stack's, or the longest whose drain
    fits NODE_DRAIN_LIMIT_S at the tier's pace, within the served `context`."""
    return min(stated or output_cap(tier.ttft_s, tier.tpot_s), context)


def drain_limit_s(grace_s: int) -> float:
    """How long after its deletion a predictor finishes generations: the hook ends
    `HOOK_MARGIN_S` before the grace period does, and the SIGTERM that follows stops vLLM at
    once, cutting what it still runs (the simulator's `FleetConfig.drain_limit_s`)."""
    return float(grace_s - HOOK_MARGIN_S)


def lifecycle(grace_s: int) -> dict[str, Any]:
    """The predictor container's `lifecycle`: the drain as its preStop hook, bounded to end
    `HOOK_MARGIN_S` before the grace period does."""
    bound = drain_limit_s(grace_s) - PICKER_SETTLE_S
    if bound <= 0:
        raise ValueError(f"a {grace_s} s grace period leaves no time to drain")
    script = drain_script(VLLM_PORT, PICKER_SETTLE_S, bound)
    return {"preStop": {"exec": {"command": ["python3", "-c", script]}}}


__all__ = ["CONTAINER_LOG", "GAUGES", "HOOK_MARGIN_S", "METRICS_TIMEOUT_S", "NODE_DRAIN_LIMIT_S",
           "PICKER_SETTLE_S", "drain_limit_s", "drain_script", "grace_s", "lifecycle", "output_cap",
           "response_cap"]
