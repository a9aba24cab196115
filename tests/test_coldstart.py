"""Cold-start budgets: parts from the stated figures, in the plan per model and region."""

from __future__ import annotations

import pytest

from rtip.report import document
from serving import coldstart
from serving.hardware import Cloud
from tests.conftest import record_of


def test_parts_follow_the_stated_rates() -> None:
    cs = coldstart.budget(Cloud.AWS, weights_gb=15.0, nvme_cache=True)
    assert cs.weights_load_s == pytest.approx(4.9, abs=0.05)  # Run:ai streamer from S3
    assert cs.image_pull_s == pytest.approx(101, abs=0.5)
    assert (cs.node_provisioning_s, cs.node_init_s, cs.engine_start_s) == (284, 126, 195)
    assert cs.total_s == pytest.approx(284 + 126 + 101 + 4.9 + 195, abs=0.2)
    assert cs.warm_node_s == pytest.approx(14 + 195, abs=0.1)  # NVMe at the GP3 floor rate


def test_without_a_cache_warm_nodes_stream_from_the_bucket() -> None:
    cached = coldstart.budget(Cloud.GCP, 141.1, nvme_cache=True)
    uncached = coldstart.budget(Cloud.GCP, 141.1, nvme_cache=False)
    assert uncached.warm_node_s < cached.warm_node_s  # the bucket streams faster than the floor
    assert cached.total_s == uncached.total_s  # a new node's cache is empty either way


def test_bigger_weights_take_longer() -> None:
    small, big = (coldstart.budget(Cloud.AZURE, w, True) for w in (2.5, 141.1))
    assert big.total_s > small.total_s and big.warm_node_s > small.warm_node_s


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_plan_carries_cold_start_per_model(stack) -> None:
    doc = document(record_of(stack).plan, record_of(stack))
    for m in doc["models"]:
        cs = m["cold_start_s"]
        parts = ("node_provisioning_s", "node_init_s", "image_pull_s", "weights_load_s", "engine_start_s")
        assert cs["total_s"] == pytest.approx(sum(cs[p] for p in parts), abs=0.2)
        assert cs["warm_node_s"] < cs["total_s"]
