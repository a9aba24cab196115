"""The scale-down window the plan emits (serving/scale_down.py): each model's warm start, within
what the API accepts and what the node autoscalers keep a node for."""

from __future__ import annotations

import math

import pytest

from serving.hardware import Cloud
from serving.karpenter import consolidate_after_s
from serving.nodescaling import NODE_AUTOSCALER
from serving.scale_down import scale_down_window_s
from tests.conftest import SHARED, STACKS, plan_of


def test_each_prod_model_gives_a_replica_back_after_its_warm_start() -> None:
    """The emitted scale-down window of every prod model in every region is the time a replica
    takes to come back on a warm node, by hand from FACTS.md's figures: its weights from the
    NVMe cache at the GP3 rate (Llama-3-8B's 15 GB in 14 s) plus the 195 s engine warm-up, whole
    seconds up. So the 70B (141.1 GB) waits longer before it gives a replica back than the 8B."""
    windows = {}
    for mp in plan_of("prod").models:
        down = mp.autoscaling.behavior["scaleDown"]["stabilizationWindowSeconds"]
        assert down == math.ceil(mp.weights_gb * 14 / 15 + 195), (mp.model, mp.region)
        windows[mp.model] = down
    assert windows["llama-70b"] == 327 and windows["llama-70b"] > windows["llama-8b"] > windows["llama-3b"]


def test_a_window_past_an_hour_is_held_at_what_the_api_accepts() -> None:
    """autoscaling/v2 refuses a stabilisation window over 3600 s (the KEDA CRD's own field text
    says so, read here), so a warm start past an hour is held at it; under it, whole seconds up."""
    crd = (SHARED / "crds" / "keda" / "keda.sh_scaledobjects.yaml").read_text()
    assert "less than or equal to 3600 (one hour)" in crd
    assert scale_down_window_s(5000.0) == 3600
    assert scale_down_window_s(3600.0) == 3600
    assert scale_down_window_s(203.5) == 204 and scale_down_window_s(204.0) == 204


@pytest.mark.parametrize("stack", STACKS)
def test_a_replica_given_back_returns_to_a_node_still_there(stack: str) -> None:
    """The window's break-even assumes a replica wanted again returns warm: an emptied node must
    outlast the window. On EKS Karpenter keeps it for its NodePool's `consolidateAfter`, the
    pool's slowest cold start in whole minutes; the cluster autoscalers of GKE and AKS for their
    unneeded time (600 s). Every model of every shipped stack gives a replica back sooner."""
    plan = plan_of(stack)
    for mp in plan.models:
        keep = NODE_AUTOSCALER[Cloud(mp.cloud)].empty_node_s
        if keep is None:  # Karpenter, as components/aws/cluster.py emits each NodePool
            keep = consolidate_after_s(plan.region(mp.region).pool_cold_start_s(mp.pool))
        window = mp.autoscaling.behavior["scaleDown"]["stabilizationWindowSeconds"]
        assert window < keep, (stack, mp.model, mp.region, window, keep)
