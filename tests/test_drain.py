"""The predictor's preStop drain (serving/drain.py): the script the plan emits, run as the
kubelet would run it, against a /metrics server on 127.0.0.1 whose in-flight gauges move."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from serving import drain
from serving._model_pod import VLLM_PORT
from tests.conftest import record_of

# What vLLM 0.11's /metrics prints for the two gauges (labels as its Prometheus logger sets them),
# with other series around them.
PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
vllm:num_requests_running_total_lookalike 7.0
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
"""


class _Metrics:
    def __init__(self, states: list[tuple[float, float]]) -> None:
        self.states = states  # (running, waiting) per request; the last one repeats
        self.served = 0
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                running, waiting = metrics.states[min(metrics.served, len(metrics.states) - 1)]
                metrics.served += 1
                body = PAGE.format(running=running, waiting=waiting).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass
        return Handler


@pytest.fixture
def metrics(request: pytest.FixtureRequest) -> Iterator[_Metrics]:
    served = _Metrics(request.param)
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def _run(port: int, bound_s: float) -> subprocess.CompletedProcess[str]:
    script = drain.drain_script(port, settle_s=0, bound_s=bound_s, poll_s=0.05)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("metrics", [[(3, 1), (2, 0), (0, 1), (0, 0)]], indirect=True)
def test_the_drain_waits_until_nothing_runs_or_waits(metrics: _Metrics) -> None:
    # Running and waiting both count: (0, 1) is not drained. The lookalike series is not read.
    done = _run(metrics.port, bound_s=30)
    assert done.returncode == 0, done.stderr
    assert metrics.served == 4


@pytest.mark.parametrize("metrics", [[(5, 0)]], indirect=True)
def test_the_drain_gives_up_at_its_bound(metrics: _Metrics) -> None:
    done = _run(metrics.port, bound_s=0.5)
    assert done.returncode == 0, done.stderr
    assert 2 <= metrics.served < 100  # polled, then stopped by the bound, not by a drained server


def test_the_drain_ends_when_the_server_does_not_answer() -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there now: refused at once
    done = _run(port, bound_s=30)
    assert done.returncode == 0, done.stderr


def test_every_predictor_drains_within_its_grace_period() -> None:
    """The prod InferenceServices carry the hook on vLLM's port, bounded to end before the grace
    period they set, and the settle and the bound leave time to drain."""
    services = [r for r in record_of("prod").resources if r.inputs.get("kind") == "InferenceService"]
    assert services
    for svc in services:
        predictor = svc.inputs["spec"]["predictor"]
        grace = predictor["terminationGracePeriodSeconds"]
        command = predictor["model"]["lifecycle"]["preStop"]["exec"]["command"]
        assert command[:2] == ["python3", "-c"]
        script = command[2]
        assert f"127.0.0.1:{VLLM_PORT}/metrics" in script
        settle = float(script.split("time.sleep(")[1].split(")")[0])
        bound = float(script.split("time.monotonic() + ")[1].split("\n")[0])
        assert settle > 0 and bound >= 60 and settle + bound < grace
    with pytest.raises(ValueError, match="no time to drain"):
        drain.lifecycle(grace_s=10)
