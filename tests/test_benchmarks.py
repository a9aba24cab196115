"""The benchmark scripts still run against the current code (on their smallest inputs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from rtip.stackfile import PROJECT_DIR


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", PROJECT_DIR / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plan_speed_generates_valid_multi_cloud_stacks(tmp_path: Path) -> None:
    bench = _load("plan_speed")
    path = tmp_path / "Pulumi.bench.yaml"
    path.write_text(yaml.safe_dump(bench.stack(3, 4, 4, bench.MULTI_CLOUD)))
    seconds, resources = bench.plan_once(path)
    assert seconds > 0 and resources > 100


def test_packing_rows_compare_against_the_bound() -> None:
    row = _load("packing").run(10, seed=7)
    assert row["ratio_planner"] >= 0.999  # never below the lower bound
    assert row["ratio_planner"] <= row["ratio_one_model_per_gpu"]
    assert row["ratio_planner"] <= row["ratio_first_fit_decreasing"]
    # One layout per pool only adds a constraint: on this catalog it costs no less than the planner.
    assert row["ratio_planner_one_layout_per_pool"] >= row["ratio_planner"] - 1e-9
