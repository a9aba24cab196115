"""benchmarks/persistence.py: the windows it replays change only the trigger's persistence, a
one-scrape window reads as the trigger read at once, and its committed emitted-window rows are
the autoscaling table's plan rows (two runs of the same replay)."""

from __future__ import annotations

import json

import pytest

from serving.autoscaling import RUNNING, SUCCESS, WAITING
from serving.simulator.prometheus import Store
from serving.simulator.promql import evaluate
from tests.conftest import PROJECT_DIR
from tests.test_benchmarks import _deployment, _load

RESULTS = PROJECT_DIR / "benchmarks" / "results"


def _query(dep) -> str:
    return dep.scaled_object["triggers"][0]["metadata"]["query"]


def test_a_window_changes_only_the_persistence_and_one_scrape_reads_the_last() -> None:
    predictive = _load("predictive")
    _, dep = _deployment("prod", "llama-3b")
    emitted = _query(dep)
    assert predictive.variant_query(dep, "predict-5m", 60) == emitted  # the plan's query, rebuilt
    one = predictive.variant_query(dep, "predict-5m", 15)
    # Only the window differs.
    assert emitted.count(")[60s:15s])") == 1 and one == emitted.replace(")[60s:15s])", ")[15s:15s])")
    # The lost-pod term stays outside the window, read at once.
    assert one.startswith("clamp_min(min_over_time((")
    assert one.endswith(f"+ {dep.plan.autoscaling.threshold:g} * ({dep.plan.autoscaling.lost})")
    # In flight 400 at the 300 s scrape only, 4 before, completions steady at 1 req/s: one
    # scrape's window reads 400 there; the emitted minute reads what the scrape before it read
    # (the zone branch and the floor's worth, above 4).
    store = Store()
    for t in range(0, 301, 15):
        labels = (("model_name", "llama-3b"), ("namespace", "rtip-models"), ("pod", "p1"))
        store.add(float(t), RUNNING, labels, 400.0 if t == 300 else 4.0)
        store.add(float(t), WAITING, labels, 0.0)
        store.add(float(t), SUCCESS, labels, float(t))
    (at_once,) = evaluate(one, store, 300.0).values()  # type: ignore[union-attr]
    (held,) = evaluate(emitted, store, 300.0).values()  # type: ignore[union-attr]
    assert at_once == pytest.approx(400.0) and held < 400.0
    (before,) = evaluate(one, store, 285.0).values()  # type: ignore[union-attr]
    assert held == pytest.approx(before)


def test_the_committed_emitted_window_rows_are_the_autoscaling_tables_plan_rows() -> None:
    persistence = json.loads((RESULTS / "persistence.json").read_text())
    # One scrape's window is the trigger read at once: the table as published before the
    # persistence (README, read off benchmarks/results/autoscaling.json at commit 19c2008).
    at_once = {("llama-70b", "conv"): 0.717, ("llama-8b", "conv"): 0.674, ("qwen-vl", "conv"): 0.771,
               ("llama-3b", "conv"): 0.647, ("llama-70b", "code"): 0.578, ("llama-8b", "code"): 0.619,
               ("qwen-vl", "code"): 0.578, ("llama-3b", "code"): 0.751}
    assert {(r["model"], r["trace"]): r["over_static_gpu_hours"] for r in persistence["rows"]
            if r["window_s"] == 15} == at_once
    table = json.loads((RESULTS / "autoscaling.json").read_text())
    plan_rows = {(r["model"], r["trace"]): r for r in table["rows"] if r["policy"] == "plan"}
    emitted = [r for r in persistence["rows"] if r["emitted"]]
    assert {(r["model"], r["trace"]) for r in emitted} == set(plan_rows)
    for r in emitted:
        plan = plan_rows[(r["model"], r["trace"])]
        assert r["gpu_hours"] == pytest.approx(plan["gpu_hours"], rel=1e-9), r["model"]
        assert r["passes_checklist"] and r["zone_loss_at_peak"]["status"] == plan["zone_loss"]["status"]
    assert persistence["emitted_s"] in persistence["passing_every_run"]
