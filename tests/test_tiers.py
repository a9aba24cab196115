"""Stack-defined SLO tiers: added or overridden in the stack file, validated, shown in the plan and
used by the planner."""

from __future__ import annotations

import json

import pytest

from rtip.cli import main
from stacks.loader import load_spec
from stacks.plan import plan_stack
from tests.conftest import DEPLOYER_INSIDE, write_stack

POOL = {"name": "h100", "machine_type": "p5.48xlarge", "max_nodes": 6, "sharing": {"mode": "whole"}}


def _doc(tiers: dict | None = None, tier: str = "standard", **model: object) -> dict:
    doc: dict = {
        "environment": "dev",
        "regions": [{"cloud": "aws", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"],
                     "network": {"cidr": "10.70.0.0/16"}, "gpu_pools": [POOL]}],
        "models": [{"name": "chat", "catalog": "llama-3.1-8b-instruct", "tier": tier, "peak_qps": 4,
                    **model}],
        "deployer": {k: v for k, v in DEPLOYER_INSIDE.items() if k in ("network", "aws")},
    }
    if tiers is not None:
        doc["tiers"] = tiers
    return doc


def _qps(doc: dict) -> float:
    (model,) = plan_stack(load_spec(doc, "test")).models
    return model.capacity.qps


def test_a_stricter_override_of_a_built_in_tier_lowers_what_a_replica_carries() -> None:
    # The same replica (one H100, pinned) meeting 300 ms instead of 2 s TTFT carries less. At
    # 1 s TPOT still binds first, so it carries the same, within the sizing's 2 % bisection.
    base = _qps(_doc(tensor_parallel=1))
    assert _qps(_doc({"standard": {"ttft_ms": 300}}, tensor_parallel=1)) < base
    assert _qps(_doc({"standard": {"ttft_ms": 1000}}, tensor_parallel=1)) <= base * 1.02
    (model,) = plan_stack(load_spec(_doc({"standard": {"ttft_ms": 1000}}), "test")).models
    assert model.tier_spec.ttft_ms == 1000 and model.tier_spec.tpot_ms == 100  # TPOT kept
    assert model.capacity.ttft_tail_s <= 1.0


def test_a_looser_percentile_carries_more() -> None:
    # Same targets at p90 instead of p99: the tail prompt is shorter and the queue may be longer.
    p99 = _qps(_doc({"fast": {"ttft_ms": 800, "tpot_ms": 40}}, tier="fast"))
    p90 = _qps(_doc({"fast": {"ttft_ms": 800, "tpot_ms": 40, "percentile": 90}}, tier="fast"))
    assert p90 > p99


def test_the_plan_shows_the_stack_tiers(tmp_path, capsys) -> None:
    doc = _doc({"fast": {"ttft_ms": 800, "tpot_ms": 40, "percentile": 95, "availability": 0.999}},
               tier="fast")
    assert main(["plan", str(write_stack(tmp_path, doc)), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    fast = next(t for t in plan["tiers"] if t["name"] == "fast")
    assert fast == {"name": "fast", "ttft_ms": 800, "tpot_ms": 40, "percentile": 95, "availability": 0.999,
                    "burst_headroom": 0.2, "allows_time_slicing": False, "stack_defined": True,
                    "used": True,
                    # vLLM 0.11's buckets at or below the targets: TTFT 0.75 s, TPOT 0.025 s
                    "alert_bounds_ms": {"ttft": 750, "tpot": 25}}
    (model,) = plan["models"]
    assert (model["tier"], model["percentile"]) == ("fast", 95)
    assert model["throughput"]["ttft_ms"] <= 800 and model["throughput"]["tpot_ms"] <= 40
    assert main(["plan", str(write_stack(tmp_path, doc))]) == 0
    assert "SLO tiers" in capsys.readouterr().out


@pytest.mark.parametrize(("tiers", "tier", "path", "words"), [
    ({"fast": {"ttft_ms": 800}}, "fast", "tiers.fast.tpot_ms", "tier 'fast' is new"),
    ({}, "fast", "models[0].tier", "unknown tier 'fast'"),
    ({"fast": {"ttft_ms": 800, "tpot_ms": 40, "percentile": 99.99}}, "fast", "tiers.fast.percentile",
     "99.9"),
    ({"fast": {"ttft_ms": -1, "tpot_ms": 40}}, "fast", "tiers.fast.ttft_ms", "at least 1 (got -1)"),
    # below vLLM's smallest TPOT bucket (10 ms): no SLO alert could measure it
    ({"fast": {"ttft_ms": 800, "tpot_ms": 5}}, "fast", "tiers.fast.tpot_ms", "at least 10 (got 5)"),
    ({"Fast": {"ttft_ms": 800, "tpot_ms": 40}}, "standard", "tiers", "lowercase"),
])
def test_bad_tiers_are_named(tmp_path, capsys, tiers, tier, path, words) -> None:
    assert main(["plan", str(write_stack(tmp_path, _doc(tiers, tier=tier)))]) == 2
    err = capsys.readouterr().err
    assert f"rtip:platform.{path}" in err and words in err and "Traceback" not in err


def test_a_new_tier_refuses_time_slicing_unless_it_says_so(tmp_path, capsys) -> None:
    doc = _doc({"cheap": {"ttft_ms": 6000, "tpot_ms": 175}}, tier="cheap", pool="l4")
    doc["regions"][0]["gpu_pools"] = [{"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 6,
                                       "sharing": {"mode": "time_slice", "replicas": 2}}]
    doc["models"][0].update(catalog="llama-3.2-1b-instruct", peak_qps=0.2)
    assert main(["plan", str(write_stack(tmp_path, doc))]) == 2
    assert "does not allow time-sliced GPUs" in capsys.readouterr().err
    doc["tiers"]["cheap"]["allows_time_slicing"] = True
    assert main(["plan", str(write_stack(tmp_path, doc))]) == 0
