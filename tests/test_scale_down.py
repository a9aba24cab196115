"""The scale-down window the plan emits (serving/scale_down.py): each model's warm start, within
what the API accepts and what the node autoscalers keep a node for."""

from __future__ import annotations

import math

import pytest

from serving.coldstart import budget
from serving.hardware import Cloud
from serving.karpenter import consolidate_after_s
from serving.models import CATALOG
from serving.nodescaling import NODE_AUTOSCALER
from serving.scale_down import scale_down_window_s
from stacks.simulation import empty_node_ttl_s
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
    outlast the window. How long it stays is what the simulator bills (`empty_node_ttl_s`, held
    to the emitted NodePools' `consolidateAfter` by tests/test_karpenter.py): Karpenter's on EKS,
    the cluster autoscalers' 600 s on GKE and AKS. Every model of every shipped stack gives a
    replica back sooner."""
    plan = plan_of(stack)
    for mp in plan.models:
        keep = empty_node_ttl_s(plan, mp)
        window = mp.autoscaling.behavior["scaleDown"]["stabilizationWindowSeconds"]
        assert window < keep, (stack, mp.model, mp.region, window, keep)


def test_every_catalog_model_returns_within_the_cluster_autoscalers_wait() -> None:
    """Not only the shipped stacks: any stack names models from the catalog, so the heaviest
    weights any card ships (its native BF16), read from the NVMe cache or the bucket, whichever
    is slower, still give a window under the 600 s the cluster autoscalers keep an empty node on
    every cloud that uses them. On EKS Karpenter keeps it for the pool's cold start (whole
    minutes up), which reads the same weights from the bucket after a node and an image pull."""
    heaviest = max(card.weights_gb for card in CATALOG.values())
    for cloud in Cloud:
        budgets = [budget(cloud, heaviest, nvme_cache=cached) for cached in (True, False)]
        window = max(scale_down_window_s(b.warm_node_s) for b in budgets)
        keep = NODE_AUTOSCALER[cloud].empty_node_s
        assert window < (keep if keep is not None else consolidate_after_s(budgets[1].total_s)), cloud
