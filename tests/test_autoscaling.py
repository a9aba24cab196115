"""Autoscaling parameters: KEDA trigger, thresholds from the profile, HPA behavior, bounds."""

from __future__ import annotations

import jsonschema
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.autoscaling import METRIC, autoscaling, waiting_threshold
from serving.capacity import prompt_factor, region_replicas, replica_capacity
from serving.hardware import GpuModel
from serving.models import CATALOG, Quantization
from serving.profiles import SliceKind, profile
from serving.tiers import TIERS, Tier
from tests.conftest import SHARED

CRD = SHARED / "crds" / "keda" / "keda.sh_scaledobjects.yaml"
LLAMA_8B = CATALOG["llama-3.1-8b-instruct"]
PROF = profile(LLAMA_8B, SliceKind(GpuModel.H100_80GB), Quantization.FP8)


def _scaling(tier: Tier, peak: float = 30.0, cold_s: float = 900.0):
    spec = TIERS[tier]
    cap = replica_capacity(LLAMA_8B, PROF, spec, 1155, 211)
    reps = region_replicas(peak, cap.qps, 3, spec, cold_s)
    return autoscaling("chat", "chat", "models", cap, PROF, spec, reps, cold_s, 1155, 211), cap, reps


def test_trigger_is_one_series_of_waiting_requests() -> None:
    scaling, _, _ = _scaling(Tier.STANDARD)
    assert scaling.query.startswith("sum(") and METRIC in scaling.query
    assert 'model_name="chat"' in scaling.query and 'namespace="models"' in scaling.query


def test_threshold_keeps_queueing_within_half_the_ttft_slack() -> None:
    for tier in Tier:
        scaling, cap, _ = _scaling(tier)
        slack = TIERS[tier].ttft_ms / 1000 - PROF.prefill_s(prompt_factor(99) * 1155)
        service = PROF.prefill_s(1155) + 211 * cap.tpot_tail_s
        wait_at_threshold = (scaling.threshold + 1) * service / cap.batch
        assert scaling.threshold == 1 or wait_at_threshold <= slack / 2 + 1e-9
    tight, _, _ = _scaling(Tier.INTERACTIVE)
    loose, _, _ = _scaling(Tier.BATCH)
    assert 1 <= tight.threshold < loose.threshold


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
    assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == str(scaling.threshold)


@settings(max_examples=30, deadline=None)
@given(card=st.sampled_from([c for c in CATALOG.values() if c.params_b < 30]),
       tier=st.sampled_from(list(TIERS.values())), tokens_in=st.integers(100, 3000),
       tokens_out=st.integers(10, 800))
def test_threshold_is_at_least_one(card, tier, tokens_in, tokens_out) -> None:
    prof = profile(card, SliceKind(GpuModel.H100_80GB))
    try:
        cap = replica_capacity(card, prof, tier, tokens_in, tokens_out)
    except ValueError:
        return
    assert waiting_threshold(cap, prof, tier, tokens_in, tokens_out) >= 1
