"""How long a node its pods no longer need stays (billed by the simulator as the plan's GPU time)
is what each cluster states: AKS's autoscaler profile, GKE's autoscaling profile, and on EKS the
consolidateAfter of the pool's Karpenter NodePool as emitted."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

import components.azure.cluster as aks
from rtip.deploycheck.graph import cluster_of
from serving.hardware import Cloud
from serving.nodescaling import NODE_AUTOSCALER
from stacks.simulation import deployment
from tests.conftest import plan_of, record_of

# AKS's autoscaler profile reference: scale-down-unneeded-time "The default is '10m'"; the
# upstream cluster-autoscaler's --scale-down-unneeded-time default is 10 minutes (its FAQ).
UPSTREAM_UNNEEDED_S = 600.0


def _duration_s(text: str) -> float:
    """A Go duration of whole units as Karpenter's CRD takes it ('90s', '10m', '1h30m')."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([hms])", text)
    assert "".join(n + u for n, u in parts) == text, text
    return float(sum(int(n) * units[u] for n, u in parts))


def test_every_cluster_states_how_long_an_unneeded_node_stays() -> None:
    record = record_of("prod")
    aks = record.by_type("azure-native:containerservice:ManagedCluster")
    gke = record.by_type("gcp:container/cluster:Cluster")
    assert aks and gke
    for cluster in aks:
        assert cluster.inputs["autoScalerProfile"]["scaleDownUnneededTime"] == "10m"
    for cluster in gke:
        # Node auto-provisioning off (GKE Standard must say so) and the default profile stated.
        assert cluster.inputs["clusterAutoscaling"] == {"enabled": False, "autoscalingProfile": "BALANCED"}


def test_the_simulator_keeps_an_empty_node_as_its_cluster_does() -> None:
    """Every prod model's simulated fleet, in each of its regions, keeps an empty node for the
    cluster autoscaler's 10 minutes on AKS and GKE, and on EKS for the consolidateAfter that the
    NodePool of its pool states in the record."""
    plan, record = plan_of("prod"), record_of("prod")
    nodepools = record.by_type("kubernetes:karpenter.sh/v1:NodePool")
    checked = {"aws": 0, "azure": 0, "gcp": 0}
    for mp in plan.models:  # every region of every model
        region = plan.region(mp.region)
        ttl = deployment(plan, mp).fleet.node_empty_ttl_s
        cloud = region.cloud.value
        if cloud == "aws":
            (pool,) = [n for n in nodepools
                       if n.inputs["spec"]["template"]["metadata"]["labels"]["rtip.dev/pool"] == mp.pool
                       and (c := cluster_of(record, n)) is not None and c.name.startswith(region.cluster)]
            assert ttl == _duration_s(pool.inputs["spec"]["disruption"]["consolidateAfter"]), mp.model
        else:
            assert ttl == UPSTREAM_UNNEEDED_S, mp.model
        checked[cloud] += 1
    assert all(checked.values()), checked


def test_the_aks_wait_is_written_in_whole_minutes_or_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """AKS takes scale-down-unneeded-time in whole minutes ('10m', its reference): the row's
    seconds become minutes, and a row whose wait is no whole number of minutes, or that states
    none, stops the program with the file to fix rather than emitting a value AKS refuses."""
    row = NODE_AUTOSCALER[Cloud.AZURE]
    for seconds, written in ((600.0, "10m"), (660.0, "11m"), (3600.0, "60m")):
        monkeypatch.setitem(NODE_AUTOSCALER, Cloud.AZURE, replace(row, empty_node_s=seconds))
        assert aks._aks_unneeded_time() == written
    for bad in (90.0, None):
        monkeypatch.setitem(NODE_AUTOSCALER, Cloud.AZURE, replace(row, empty_node_s=bad))
        with pytest.raises(RuntimeError, match=r"serving/nodescaling.py: the AKS row's empty_node_s"):
            aks._aks_unneeded_time()
