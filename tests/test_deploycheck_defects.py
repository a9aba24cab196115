"""Issue 10's defect classes 4, 5, 6 and 9a re-introduced into a copy of prod's record: each is
found by `run_checks` (what `rtip plan` runs) and names the resource and why."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

from rtip.deploycheck import Severity, run_checks
from rtip.deploycheck.capacity import check_capacity
from rtip.offline import Record, Resource
from tests.conftest import plan_of, record_of

RELEASE = "kubernetes:helm.sh/v3:Release"


def _replace(record: Record, resources: list[Resource]) -> Record:
    return Record(record.stack, resources, record.outputs, record.warnings, record.plan)


def _edit(record: Record, pick: Callable[[Resource], bool], change: Callable[[dict], None]) -> Resource:
    """The first resource `pick` accepts, with `change(inputs)` applied to a copy of its inputs."""
    target = next(r for r in record.resources if pick(r))
    inputs = copy.deepcopy(target.inputs)
    change(inputs)
    return dataclasses.replace(target, inputs=inputs)


def _with(record: Record, edited: Resource) -> Record:
    return _replace(record, [edited if r.urn == edited.urn else r for r in record.resources])


def _errors(record: Record, urn: str) -> list[str]:
    return [f.message for f in run_checks(record)
            if f.check == "capacity" and f.urn == urn and f.severity is Severity.ERROR]


def test_shipped_stacks_have_no_capacity_findings() -> None:
    for stack in ("dev", "staging", "prod"):
        assert check_capacity(record_of(stack)) == [], stack


def test_eks_pool_without_its_karpenter_nodepool_cannot_scale() -> None:
    # Class 4: prod's us-east-1 h100 pool is 3 nodes at floor, 8 at peak (stacks/Pulumi.prod.yaml
    # plan); its managed node group is fixed at 3, so only the NodePool adds the other 5.
    record = record_of("prod")
    pool = next(r for r in record.by_type("rtip:k8s:GpuPool") if r.name == "rtip-prod-us-east-1-h100")
    kept = [r for r in record.resources
            if not (r.type == "kubernetes:karpenter.sh/v1:NodePool" and r.parent == pool.urn)]
    assert len(kept) == len(record.resources) - 1
    (message,) = _errors(_replace(record, kept), pool.urn)
    assert pool.name in message and "no Karpenter NodePool" in message and "rtip.dev/pool=h100" in message


def test_eks_cluster_without_the_karpenter_controller_cannot_scale() -> None:
    record = record_of("prod")
    kept = [r for r in record.resources if r.name != "rtip-prod-us-west-2-karpenter-controller"]
    pools = [p for p in record.by_type("rtip:k8s:GpuPool") if "us-west-2" in p.name]
    for pool in pools:
        (message,) = _errors(_replace(record, kept), pool.urn)
        assert "Karpenter controller release" in message


def test_nodepool_limit_below_the_peak_is_found() -> None:
    # us-west-2 h100: floor 3 (node group maxSize 3) + limit 2 = 5 < peak 8.
    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-us-west-2-h100-nodepool",
                   lambda i: i["spec"]["limits"].update({"nodes": "2"}))
    (message,) = _errors(_with(record, edited), edited.parent)
    assert "reach 5 nodes, not its peak of 8" in message


def test_aks_and_gke_pools_without_autoscaling_are_found() -> None:
    record = record_of("prod")
    ap = _edit(record, lambda r: r.name == "rtip-prod-eastus-h100-mig-ap",
               lambda i: i.update({"enableAutoScaling": False}))
    (message,) = _errors(_with(record, ap), ap.parent)
    assert "enableAutoScaling off" in message and "rtip-prod-eastus-h100-mig" in message
    np = _edit(record, lambda r: r.name == "rtip-prod-us-central1-h100-np",
               lambda i: i.update({"autoscaling": None}))
    (message,) = _errors(_with(record, np), np.parent)
    peak = plan_of("prod").region("us-central1").pool("h100").nodes_at_peak
    assert "autoscales to 0 nodes" in message and f"peak of {peak}" in message


def test_prometheus_on_emptydir_is_found() -> None:
    # Class 9a.
    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-us-east-1-addons-kube-prometheus-stack",
                   lambda i: i["values"]["prometheus"]["prometheusSpec"].pop("storageSpec"))
    (message,) = _errors(_with(record, edited), edited.urn)
    assert edited.name in message and "emptyDir" in message


def test_aks_node_prep_that_does_not_assemble_the_nvme_is_found() -> None:
    # Class 6: the DaemonSet on the AKS cluster written as on EKS/GKE (bind only, no RAID0).
    from serving.nodeprep import prep_script

    def bind_only(inputs: dict) -> None:
        (prepare,) = inputs["spec"]["template"]["spec"]["initContainers"]
        prepare["command"][-1] = prep_script("/mnt/rtip-nvme", assemble=False)

    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-eastus-addons-cache-node-prep", bind_only)
    messages = _errors(_with(record, edited), edited.urn)
    assert messages and all("does not assemble the NVMe drives" in m and "rtip-prod-eastus" in m
                            for m in messages)


def test_aks_cache_on_the_temp_disk_is_found() -> None:
    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-eastus-mi300x",
                   lambda i: i.update({"nvmePath": "/mnt"}))
    (message,) = _errors(_with(record, edited), edited.urn)
    assert "temp disk" in message and edited.name in message


def test_two_node_feature_discoveries_are_found() -> None:
    # Class 5: the AMD chart's NFD back on beside the NVIDIA operator's default one.
    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-eastus-addons-gpu-amd-gpu-operator",
                   lambda i: i["values"]["node-feature-discovery"].update({"enabled": True}))
    (message,) = _errors(_with(record, edited), edited.urn)
    assert "2 node-feature-discovery" in message and "rtip-prod-eastus" in message


def test_amd_driver_without_a_registry_image_is_found() -> None:
    record = record_of("prod")
    edited = _edit(record, lambda r: r.type == "kubernetes:amd.com/v1alpha1:DeviceConfig",
                   lambda i: i["spec"]["driver"].pop("image"))
    (message,) = _errors(_with(record, edited), edited.urn)
    assert "image unset" in message and "rtip-mi300x" in message


def test_no_node_feature_discovery_at_all_is_found() -> None:
    # Class 5 the other way: NVIDIA's NFD switched off where it is the only one (us-east-1 runs
    # the NVIDIA operator alone), so nothing labels the GPU nodes for the device plugin.
    record = record_of("prod")
    edited = _edit(record, lambda r: r.name == "rtip-prod-us-east-1-addons-gpu-nvidia-gpu-operator",
                   lambda i: i["values"].setdefault("nfd", {}).update({"enabled": False}))
    (message,) = _errors(_with(record, edited), edited.urn)
    assert "0 node-feature-discovery" in message and "rtip-prod-us-east-1" in message
