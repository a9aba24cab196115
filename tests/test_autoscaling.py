"""Autoscaling parameters: KEDA trigger, its target from the replica's capacity, HPA behavior,
bounds."""

from __future__ import annotations

import math
from dataclasses import replace

import jsonschema
import yaml

from serving.autoscaling import RUNNING, WAITING, autoscaling, in_flight_target
from serving.capacity import region_replicas, replica_capacity
from serving.hardware import GpuModel
from serving.models import CATALOG, Quantization
from serving.profiles import SliceKind, profile
from serving.simulator.prometheus import Store
from serving.simulator.promql import evaluate
from serving.tiers import TIERS, Tier
from tests.conftest import SHARED

CRD = SHARED / "crds" / "keda" / "keda.sh_scaledobjects.yaml"
LLAMA_8B = CATALOG["llama-3.1-8b-instruct"]
PROF = profile(LLAMA_8B, SliceKind(GpuModel.H100_80GB), Quantization.FP8)


def _scaling(tier: Tier, peak: float = 30.0, cold_s: float = 900.0, zones: int = 3):
    spec = TIERS[tier]
    cap = replica_capacity(LLAMA_8B, PROF, spec, 1155, 211)
    reps = region_replicas(peak, cap.qps, zones, spec, cold_s)
    return autoscaling("chat", "chat", "models", cap, PROF, reps, cold_s, 1155, 211), cap, reps


def test_trigger_is_the_models_requests_in_flight() -> None:
    """The query, run by the simulated Prometheus, adds running and waiting over this model's
    pods only: 7 + 2 + 5 + 0 = 14, not the other model's or namespace's. (One zone: no zone-loss
    branch; the next test covers it.)"""
    scaling, _, _ = _scaling(Tier.STANDARD, zones=1)
    store = Store()
    rows = [("chat", "models", "p1", 7, 2), ("chat", "models", "p2", 5, 0), ("other", "models", "p3", 40, 9),
            ("chat", "elsewhere", "p4", 30, 30)]
    for model, ns, pod, running, waiting in rows:
        labels = (("model_name", model), ("namespace", ns), ("pod", pod))
        store.add(10.0, RUNNING, labels, running)
        store.add(10.0, WAITING, labels, waiting)
    value = evaluate(scaling.query, store, 12.0)
    assert value == {(): 14.0}


def test_zone_branch_keeps_enough_replicas_to_lose_a_zone() -> None:
    """Curve (1, 10), (2, 40) req/s -> in flight, q = 2, 25 % headroom, three zones. By hand: the
    headroom branch's target is 28 in flight (1.6 req/s on the curve); the zone branch's rate is
    2 x 2/3 = 1.333 req/s, 20 in flight, and it asks for 1 + in flight / 20 replicas."""
    _, cap, reps = _scaling(Tier.STANDARD)
    measured = replace(cap, qps=2.0, in_flight_curve=((1.0, 10.0), (2.0, 40.0)))
    zoned = autoscaling("chat", "chat", "models", measured, PROF, replace(reps, headroom=0.25, zones=3),
                        900.0, 1155, 211)
    assert zoned.threshold == 28.0
    for in_flight, replicas in ((14, 2), (100, 6), (300, 16), (0, 1)):
        store = Store()
        labels = (("model_name", "chat"), ("namespace", "models"), ("pod", "p1"))
        store.add(10.0, RUNNING, labels, in_flight)
        store.add(10.0, WAITING, labels, 0)
        (value,) = evaluate(zoned.query, store, 12.0).values()
        # desired = ceil(value / 28) = max(ceil(S / 28), ceil(S / 20 + 1))
        assert math.ceil(value / zoned.threshold - 1e-9) == replicas
        # ... which leaves enough when the worst zone (ceil(R / 3) replicas) goes: the survivors,
        # each at most at its sized rate q (40 in flight), hold the load the fleet held at the
        # zone branch's rate (20 in flight a replica): (R - ceil(R/3)) x 2 >= (R - 1) x 4/3.
        assert (replicas - math.ceil(replicas / 3)) * 2.0 >= (replicas - 1) * 2.0 * 2 / 3 - 1e-9
        assert (replicas - 1) * 20 >= in_flight
    # One zone: nothing to survive, the plain sum.
    single = autoscaling("chat", "chat", "models", measured, PROF, replace(reps, headroom=0.25, zones=1),
                         900.0, 1155, 211)
    assert single.query.startswith("sum(") and "clamp_min" not in single.query


def test_target_is_in_flight_at_capacity_less_the_headroom() -> None:
    _, cap, _ = _scaling(Tier.STANDARD)
    measured = replace(cap, qps=2.0, in_flight_curve=((1.0, 10.0), (2.0, 40.0)))
    # 25 % headroom: the load is 2.0 / 1.25 = 1.6 req/s, on the curve 10 + 0.6 x (40 - 10) = 28.
    assert in_flight_target(measured, PROF, 1155, 211, 0.25) == 28.0
    # 100 %: 1.0 req/s, a point of the curve; 300 %: 0.5 req/s, on the chord from the origin.
    assert in_flight_target(measured, PROF, 1155, 211, 1.0) == 10.0
    assert in_flight_target(measured, PROF, 1155, 211, 3.0) == 5.0
    # Closed form: Little's law, rate x (prefill of the mean prompt + 211 x tail TPOT).
    little = cap.qps * (PROF.prefill_s(1155) + 211 * cap.tpot_tail_s)
    assert in_flight_target(replace(cap, in_flight_curve=()), PROF, 1155, 211, 0.0) == round(little, 1)
    # More headroom, a lower target: the fleet scales out earlier.
    assert in_flight_target(cap, PROF, 1155, 211, 0.5) < in_flight_target(cap, PROF, 1155, 211, 0.1)


def test_bounds_fallback_and_behavior_follow_the_replicas_and_cold_start() -> None:
    scaling, _, reps = _scaling(Tier.STANDARD, peak=80, cold_s=1200)
    assert (scaling.min_replicas, scaling.max_replicas) == (reps.min_replicas, reps.max_replicas)
    assert scaling.fallback_replicas == reps.max_replicas
    up, down = scaling.behavior["scaleUp"], scaling.behavior["scaleDown"]
    assert up["stabilizationWindowSeconds"] == 0
    assert max(p["value"] for p in up["policies"] if p["type"] == "Pods") >= 4  # HPA default floor
    assert down["stabilizationWindowSeconds"] >= 1200  # never faster than a replica comes back
    assert down["policies"][0]["value"] == reps.zones


def test_scaled_object_validates_against_the_keda_crd() -> None:
    scaling, _, _ = _scaling(Tier.INTERACTIVE)
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    body = {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "chat", "namespace": "models"},
        "spec": scaling.scaled_object_spec("chat-predictor", "http://prometheus.monitoring:9090"),
    }
    jsonschema.validate(body, version["schema"]["openAPIV3Schema"])
    trigger = body["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and float(trigger["metadata"]["threshold"]) == scaling.threshold
