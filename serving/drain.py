"""A predictor that is scaled in finishes its requests before vLLM is stopped.

vLLM 0.11 has no graceful shutdown: on SIGTERM its API server cancels the uvicorn task and shuts
the engine down at once (vllm/entrypoints/launcher.py `serve_http`'s signal handler, then
api_server.py leaves `build_async_engine_client` before awaiting the server's shutdown), so every
generation in flight stops mid-stream, whatever `terminationGracePeriodSeconds` says; the flag
that drains (`--shutdown-timeout`) came in vLLM 0.18. KServe v0.20 adds no lifecycle hook to a
Standard-mode predictor. The plan scales in one pod per sync, many times an hour, so without a
drain each scale-in would cut the longest streams of the pod it removes; the simulator's
draining replica (serving/simulator/fleet.py) finishes them, which is what this hook makes true.

Kubernetes runs a container's preStop hook before it sends SIGTERM, within the grace period. The
hook here waits `PICKER_SETTLE_S` (the endpoint picker drops a pod once its informer sees the
deletion timestamp: gateway-api-inference-extension v1.5.0 `pkg/epp/util/pod/pod.go` IsPodReady,
so requests already routed still arrive), then polls the server's own /metrics until its running
and waiting requests are 0, or the server stops answering, or `bound_s` passes; vLLM serves
/metrics meanwhile, so the autoscaling query keeps seeing the pod. python3 is in both the CUDA and
the ROCm image (the runtime starts vLLM with it); nothing is written to the read-only root.
"""

from __future__ import annotations

from typing import Any

from serving._model_pod import VLLM_PORT

TERMINATION_GRACE_S = 120  # how long a generation may take to finish once its pod is scaled in
PICKER_SETTLE_S = 5
DRAIN_POLL_S = 1
# The hook must end before the grace period does (the kubelet then sends SIGTERM at once, and
# SIGKILL 2 s later if the hook overran: pod termination's minimum extension).
HOOK_MARGIN_S = 5
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def drain_script(port: int, settle_s: float, bound_s: float, poll_s: float = DRAIN_POLL_S) -> str:
    """Python source that waits `settle_s`, then until the server on `port` has nothing running
    or waiting, stops answering, or `bound_s` more seconds pass."""
    return "\n".join([
        "import time, urllib.request",
        f"time.sleep({settle_s:g})",
        f"deadline = time.monotonic() + {bound_s:g}",
        "while time.monotonic() < deadline:",
        "    try:",
        f"        page = urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=2).read()",
        "    except OSError:",
        "        break",
        "    left = sum(float(line.rsplit(' ', 1)[1]) for line in page.decode().splitlines()",
        f"               if line.split('{{', 1)[0].split(' ', 1)[0] in {GAUGES!r})",
        "    if left == 0:",
        "        break",
        f"    time.sleep({poll_s:g})",
    ])


def lifecycle(grace_s: int = TERMINATION_GRACE_S) -> dict[str, Any]:
    """The predictor container's `lifecycle`: the drain as its preStop hook, bounded to end
    `HOOK_MARGIN_S` before the grace period does."""
    bound = grace_s - PICKER_SETTLE_S - HOOK_MARGIN_S
    if bound <= 0:
        raise ValueError(f"a {grace_s} s grace period leaves no time to drain")
    script = drain_script(VLLM_PORT, PICKER_SETTLE_S, bound)
    return {"preStop": {"exec": {"command": ["python3", "-c", script]}}}


__all__ = ["GAUGES", "HOOK_MARGIN_S", "PICKER_SETTLE_S", "TERMINATION_GRACE_S", "drain_script", "lifecycle"]
