"""The predictor's preStop drain (serving/drain.py): the script the plan emits, run as the
kubelet would run it, against a /metrics server on 127.0.0.1 whose in-flight gauges move."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
    """A /metrics server whose answers follow `states`: (running, waiting), or "slow" (answers
    after 2.5 s, past a 2 s client timeout, with 3 running), "error" (HTTP 500), "cut" (a body
    shorter than its Content-Length); the last state repeats."""

    def __init__(self, states: list[object]) -> None:
        self.states = states
        self.served = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                state = metrics.states[min(metrics.served, len(metrics.states) - 1)]
                metrics.served += 1
                if state == "error":
                    self.send_error(500)
                    return
                if state == "slow":
                    time.sleep(2.5)
                    state = (3, 0)
                running, waiting = state if isinstance(state, tuple) else (3, 0)
                body = PAGE.format(running=running, waiting=waiting).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + (100 if state == "cut" else 0)))
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


def _drain(port: int, bound_s: float, log: Path) -> str:
    """Run the script as the kubelet would; what it logged. A run past 60 s fails the test."""
    script = drain.drain_script(port, settle_s=0, bound_s=bound_s, poll_s=0.05, timeout_s=2, log=str(log))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return log.read_text()


@pytest.mark.parametrize("metrics", [[(3, 1), (2, 0), (0, 1), (0, 0)]], indirect=True)
def test_the_drain_waits_until_nothing_runs_or_waits(metrics: _Metrics, tmp_path: Path) -> None:
    # Running and waiting both count: (0, 1) is not drained. The lookalike series is not read.
    assert _drain(metrics.port, 30, tmp_path / "log") == "rtip preStop drain: drained\n"
    assert metrics.served == 4


@pytest.mark.parametrize("metrics", [["slow", "error", "cut", (0, 0)]], indirect=True)
def test_a_slow_failing_or_cut_answer_is_waited_out(metrics: _Metrics, tmp_path: Path) -> None:
    """vLLM answers /metrics late under the load being drained: a timeout, a 500 and a cut body
    each mean "ask again", not "nothing left"."""
    assert _drain(metrics.port, 30, tmp_path / "log") == "rtip preStop drain: drained\n"
    assert metrics.served == 4


@pytest.mark.parametrize("metrics", [[(5, 0)]], indirect=True)
def test_the_drain_gives_up_at_its_bound(metrics: _Metrics, tmp_path: Path) -> None:
    log = _drain(metrics.port, 0.5, tmp_path / "log")
    assert log == "rtip preStop drain: bound reached with requests in flight\n"
    assert 2 <= metrics.served < 100  # polled, then stopped by the bound


def test_the_drain_ends_when_the_server_is_gone(tmp_path: Path) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there now: refused at once
    # A bound far past the run's 60 s limit: only the refusal can end it in time.
    assert _drain(port, 600, tmp_path / "log") == "rtip preStop drain: server gone\n"


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
        timeout = float(script.split("timeout=")[1].split(")")[0])
        # The last poll may start at the bound: a timeout and a pause later the hook must be done.
        assert settle > 0 and bound >= 60 and settle + bound + timeout + 1 < grace
        assert "'/proc/1/fd/1'" in script  # its reason goes to the container's log
        model = predictor["model"]
        for probe in ("livenessProbe", "startupProbe"):  # a restart has nothing to drain
            assert model[probe]["terminationGracePeriodSeconds"] <= 10
    with pytest.raises(ValueError, match="no time to drain"):
        drain.lifecycle(grace_s=10)


def test_the_simulator_stops_a_draining_replica_when_the_emitted_hook_gives_up() -> None:
    """In every region of every prod model, the simulated drain limit is the emitted grace period
    less the hook's last poll (1 s), its timeout (5 s) and a 2 s pause: past it the kubelet's
    SIGTERM stops vLLM at once, cutting what still runs. And the emitted hook's settle plus its
    bound ends there too."""
    from rtip.deploycheck.graph import cluster_of
    from stacks.simulation import deployment
    from tests.conftest import plan_of

    plan = plan_of("prod")
    record = record_of("prod")
    for mp in plan.models:
        cluster = plan.region(mp.region).cluster
        (svc,) = [r.inputs for r in record.resources if r.inputs.get("kind") == "InferenceService"
                  and r.inputs["metadata"]["name"] == mp.model
                  and (c := cluster_of(record, r)) is not None and c.name == cluster]
        predictor = svc["spec"]["predictor"]
        script = predictor["model"]["lifecycle"]["preStop"]["exec"]["command"][2]
        settle = float(script.split("time.sleep(")[1].split(")")[0])
        bound = float(script.split("time.monotonic() + ")[1].split("\n")[0])
        limit = deployment(plan, mp).fleet.drain_limit_s
        assert limit == pytest.approx(predictor["terminationGracePeriodSeconds"] - (1 + 5 + 2))
        assert limit == pytest.approx(settle + bound)
