"""The issue's acceptance run: the prod plan, as `rtip simulate` replays it, passes every item of
the checklist on the Azure conversation trace scaled (by rate, on its own clock) to each model's
peak, with one of its zones lost as the busiest minute begins (the worst time): the lost pods
picked until the picker's staleness filter drops them and replaced only once evicted, as the
plan's picker configuration and Kubernetes' defaults have it (serving/failover.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rtip.cli import main
from serving.failover import failover
from serving.simulator import load_azure_2023
from stacks.simulation import deployment, select, trace_for
from tests.conftest import SHARED, plan_of, record_of
from tests.test_gateway import HELM, kind

CONV = SHARED / "traces" / "azure2023_AzureLLMInferenceTrace_conv.csv"
# prod's models (stacks/Pulumi.prod.yaml); a test below checks the list is complete.
MODELS = ["llama-70b", "llama-8b", "qwen-vl", "llama-3b"]


def test_every_prod_model_is_run() -> None:
    assert sorted(mp.model for mp in select(plan_of("prod"), None)) == sorted(MODELS)


def _busiest_minute_start(times: np.ndarray) -> float:
    counts = np.searchsorted(times, times + 60.0, side="left") - np.arange(len(times))
    return float(times[int(np.argmax(counts))])


@pytest.mark.parametrize("model", MODELS)
def test_prod_passes_every_item_on_the_conversation_trace(model: str, capsys) -> None:
    plan = plan_of("prod")
    (mp,) = select(plan, model)
    trace = trace_for(mp, load_azure_2023(CONV))
    zone = deployment(plan, mp).fleet.zones[0]
    at = _busiest_minute_start(trace.arrival_s)
    code = main(["simulate", "prod", "--trace", str(CONV), "--model", model,
                 "--zone-loss", f"{zone}@{at:.1f}", "--json"])
    doc = json.loads(capsys.readouterr().out)
    (run,) = doc["models"]
    failed = {i["item"]: i["detail"] for i in run["checklist"] if i["status"] != "PASS"}
    assert code == 0 and not failed, failed
    assert [i["status"] for i in run["checklist"]] == ["PASS"] * 4  # zone loss simulated, not skipped
    # ... as it unfolds, from what prod's record emits: the picker's filter and the predictor's
    # tolerations (each with its own test in tests/test_failover.py).
    record = record_of("prod")
    (pool,) = [r for r in record.by_type(HELM) if r.inputs["chart"].endswith("/inferencepool")
               and r.inputs["name"] == model][:1]
    (isvc,) = [r for r in kind(record, "InferenceService") if r.inputs["metadata"]["name"] == model][:1]
    emitted = failover(pool.inputs["values"]["inferenceExtension"],
                       isvc.inputs["spec"]["predictor"]["tolerations"])
    assert run["inputs"]["zone_loss_s"] == {"routed_until": emitted.route_s, "not_ready": emitted.not_ready_s,
                                            "replaced_from": emitted.evict_s} == {
        "routed_until": 1.0, "not_ready": 55.0, "replaced_from": 90.0}
    # A zone lost within its error budget pages nobody: the model's burn-rate alerts, evaluated as
    # Prometheus would over the run, stay quiet.
    assert len(run["slo_alerts"]) == 3
    assert [a for a in run["slo_alerts"] if a["first_fired_s"] is not None] == []
