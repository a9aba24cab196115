"""The plan's autoscaling signal sees decode overload; the waiting-requests signal does not.

Issue 11's scenario: prod's 70B on 4x H100 from its replica floor at a rate the floor cannot carry
(1.6 x what its replicas were sized for). vLLM admits the overload into the running batch, so
almost nothing waits while TPOT blows past the tier: a trigger on `vllm:num_requests_waiting`
(threshold 5, the production-stack tutorial) never fires, one on requests in flight (the plan's
ScaledObject, run verbatim) scales out. Expected values are from the arithmetic of the scenario:
the fleet needs at least ceil(rate / rate a replica) replicas, and once they are ready nearly
every request meets the tier.
"""

from __future__ import annotations

import copy
import math

from serving.simulator import KedaAutoscaler, load_azure_2023, poisson, simulate
from stacks.simulation import deployment
from tests.conftest import SHARED, plan_of

OVERLOAD = 1.6  # times what the floor's replicas were sized for
DURATION_S = 1500.0


def _run(waiting_only: bool):
    plan = plan_of("prod")
    mp = next(m for m in plan.models if m.model == "llama-70b" and m.region == "us-east-1")
    rate = OVERLOAD * mp.min_replicas * mp.capacity.qps
    dep = deployment(plan, mp)
    spec = copy.deepcopy(dep.scaled_object)
    if waiting_only:
        meta = spec["triggers"][0]["metadata"]
        meta["query"] = f'sum(vllm:num_requests_waiting{{namespace="rtip-models",model_name="{mp.model}"}})'
        meta["threshold"] = "5"
    conv = load_azure_2023(SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv")
    trace = poisson(rate, DURATION_S, conv, seed=3)
    return mp, rate, simulate(trace, dep.sim_config(), "least-loaded", KedaAutoscaler(spec))


def test_in_flight_trigger_scales_out_of_decode_overload() -> None:
    mp, rate, result = _run(waiting_only=False)
    needed = math.ceil(rate / mp.capacity.qps)
    assert mp.min_replicas < needed <= mp.max_replicas
    assert result.series["ready"].max() >= needed
    # After the scale-out has had one full cold start to land, the tier holds.
    late = result.arrival_s > mp.cold_start.total_s + 120
    assert late.any() and result.attained()[late].mean() >= 0.99


def test_waiting_trigger_stalls_at_the_floor() -> None:
    mp, rate, result = _run(waiting_only=True)
    assert result.series["ready"].max() < math.ceil(rate / mp.capacity.qps)
    assert result.attainment < 0.5
