"""Capacity: every GPU pool can grow to its peak, keeps its cache on its NVMe, and the cluster's
operators and Prometheus run as the platform needs (issue 10, classes 4, 5, 6 and 9a).

- autoscaler: a pool whose `maxNodes` is above its floor is owned by a node autoscaler that exists
  in the record. EKS managed node groups never scale by themselves (they stay at `desiredSize`
  until something changes it), so an EKS pool needs a Karpenter NodePool (karpenter.sh/v1) for
  its nodes, the EC2NodeClass it references, a ceiling (`limits.nodes`, Karpenter's nodepools.md:
  limits cap all nodes the NodePool launched) that reaches the peak above the node group's floor,
  and the Karpenter controller release on the cluster. GKE scales a node pool only with its
  `autoscaling` block (total_*/per-zone min/max, gcp.container.NodePool); AKS an agent pool only
  with `enableAutoScaling` and `maxCount` (AgentPool, azure-native containerservice).
- prometheus: kube-prometheus-stack's Prometheus keeps its TSDB on an emptyDir unless
  `prometheus.prometheusSpec.storageSpec` names a volume (chart 88.5.3 values.yaml:
  `storageSpec: {}`, "Using PersistentVolumeClaim: volumeClaimTemplate"; prometheus-operator
  Documentation/platform/storage.md): a restart loses the autoscaling signal's history.
- nvme: an AKS node mounts only its temp disk (at /mnt); the local NVMe drives stay raw until the
  node-prep DaemonSet (serving/nodeprep.py) assembles them into one RAID0 array and mounts it at
  the pool's cache path, which therefore must not be /mnt itself.
- amd: the NVIDIA and AMD GPU operator charts each install node-feature-discovery by default
  (nvidia gpu-operator v26.7.0 values.yaml `nfd.enabled: true`, amd gpu-operator v1.5.1
  values.yaml `node-feature-discovery.enabled: true`); with both operators on a cluster one of
  the two must be off (shared/FACTS.md, AMD GPU Operator v1.5.1), and with none left the
  operators get no node labels, so exactly one runs. An enabled driver is built in the cluster and
  pushed to `spec.driver.image`, whose default is `image-registry:5000/...`, an in-cluster
  registry only OpenShift-like setups have (v1.5.1 deviceconfig-crd.yaml, spec.driver.image), so
  it must name a repository in a registry of the cluster's own cloud.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rtip.deploycheck.findings import Finding
from rtip.deploycheck.graph import HELM_RELEASE, cluster_of, object_name
from rtip.deploycheck.images import PRIVATE_REGISTRIES, split
from rtip.offline import Record, Resource
from serving.manifests import POOL_LABEL
from serving.nodeprep import NODE_PREP_NAME

CHECK = "capacity"
GPU_POOL = "rtip:k8s:GpuPool"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
AKS_AGENT_POOL = "azure-native:containerservice:AgentPool"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
DEVICE_CONFIG = "kubernetes:amd.com/v1alpha1:DeviceConfig"
# Azure Linux VMs mount the temporary (resource) disk at /mnt (learn.microsoft.com, "Azure VM
# temporary disk"); that is not the NVMe.
AZURE_TEMP_DISK = "/mnt"


def _chart(release: Resource) -> str:
    """The chart's own name: the last path element of an OCI reference, else the name."""
    return str(release.inputs.get("chart") or "").rstrip("/").rsplit("/", 1)[-1]


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _on(record: Record, cluster: Resource, type_: str) -> Iterator[Resource]:
    """The cluster's Kubernetes objects (or releases) of one type."""
    for r in record.by_type(type_):
        found = cluster_of(record, r)
        if found is not None and found.urn == cluster.urn:
            yield r


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def nodepools_of(record: Record, cluster: Resource, pool: str | None) -> list[Resource]:
    """The cluster's Karpenter NodePools that launch nodes of `pool` (their template's label)."""
    return [n for n in _on(record, cluster, NODE_POOL)
            if _get(n.inputs, "spec", "template", "metadata", "labels", POOL_LABEL) == pool]


def _karpenter(record: Record, pool: Resource, cluster: Resource, floor: int, peak: int) -> list[str]:
    name = str(pool.inputs.get("pool"))
    owned = nodepools_of(record, cluster, name)
    if not owned:
        return [f"no Karpenter NodePool on the cluster launches `{POOL_LABEL}={name}` nodes, and its "
                f"managed node group stays at {floor}"]
    problems: list[str] = []
    group_floor = sum(_int(_get(g.inputs, "scalingConfig", "maxSize")) or 0
                      for g in record.children(pool.urn) if g.type == EKS_NODE_GROUP)
    # No `nodes` limit: the NodePool may launch any number of nodes.
    limits = [_int(_get(n.inputs, "spec", "limits", "nodes")) for n in owned]
    ceiling = peak if None in limits else group_floor + sum(n or 0 for n in limits)
    for nodepool in owned:
        ref = _get(nodepool.inputs, "spec", "template", "spec", "nodeClassRef", "name")
        if not any(object_name(c) == ref for c in _on(record, cluster, EC2_NODE_CLASS)):
            problems.append(f"its NodePool {object_name(nodepool)} references EC2NodeClass {ref}, "
                            "which is not on the cluster")
    if ceiling < peak:
        problems.append(f"node group ({group_floor}) plus NodePool limits reach {ceiling} nodes, "
                        f"not its peak of {peak}")
    if not any(_chart(r) == "karpenter" for r in _on(record, cluster, HELM_RELEASE)):
        problems.append("the Karpenter controller release (chart karpenter) is not on the cluster")
    return problems


def _gke(record: Record, pool: Resource, peak: int) -> list[str]:
    zones = len(pool.inputs.get("zones") or []) or 1
    for np in (c for c in record.children(pool.urn) if c.type == GKE_NODE_POOL):
        auto = np.inputs.get("autoscaling") or {}
        total = _int(auto.get("totalMaxNodeCount"))
        per_zone = _int(auto.get("maxNodeCount"))
        top = total if total is not None else (per_zone * zones if per_zone is not None else 0)
        if top < peak:
            return [f"node pool {np.name} autoscales to {top} nodes (autoscaling block), not its "
                    f"peak of {peak}"]
        return []
    return ["no GKE node pool in the record"]


def _aks(record: Record, pool: Resource, peak: int) -> list[str]:
    for ap in (c for c in record.children(pool.urn) if c.type == AKS_AGENT_POOL):
        if not ap.inputs.get("enableAutoScaling"):
            return [f"agent pool {ap.name} has enableAutoScaling off"]
        top = _int(ap.inputs.get("maxCount")) or 0
        if top < peak:
            return [f"agent pool {ap.name} maxCount is {top}, not its peak of {peak}"]
        return []
    return ["no AKS agent pool in the record"]


def check_autoscalers(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for pool in record.by_type(GPU_POOL):
        floor, peak = _int(pool.inputs.get("minNodes")) or 0, _int(pool.inputs.get("maxNodes")) or 0
        if peak <= floor or pool.parent is None:
            continue
        cluster = record.get(pool.parent)
        cloud = cluster.type.split(":")[1]
        if cloud == "aws":
            problems = _karpenter(record, pool, cluster, floor, peak)
        elif cloud == "gcp":
            problems = _gke(record, pool, peak)
        else:
            problems = _aks(record, pool, peak)
        findings += [Finding(CHECK, pool.urn, f"GPU pool {pool.name} ({floor} to {peak} nodes) cannot "
                             f"scale: {p}") for p in problems]
    return findings


def check_prometheus(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for release in record.by_type(HELM_RELEASE):
        if _chart(release) != "kube-prometheus-stack":
            continue
        values = release.inputs.get("values") or {}
        if not _get(values, "prometheus", "prometheusSpec", "storageSpec", "volumeClaimTemplate"):
            findings.append(Finding(CHECK, release.urn, f"release {release.name}: Prometheus stores on "
                                    "an emptyDir (no prometheus.prometheusSpec.storageSpec."
                                    "volumeClaimTemplate); a restart loses the autoscaling signal"))
    return findings


_VAR = re.compile(r'^(CACHE|MD)="([^"]*)"$', re.MULTILINE)


def _prep(ds: Resource) -> tuple[str | None, bool]:
    """(cache path, whether the script assembles and mounts the NVMe array there)."""
    for c in _get(ds.inputs, "spec", "template", "spec", "initContainers") or []:
        script = "\n".join(str(a) for a in (c.get("command") or []) + (c.get("args") or []))
        found = dict(_VAR.findall(script))
        if "CACHE" in found:
            assembles = ("mdadm --create" in script and "--level=0" in script
                         and 'mount -o noatime "$MD" "$CACHE"' in script)
            return found["CACHE"], assembles
    return None, False


def check_nvme(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for pool in record.by_type(GPU_POOL):
        path = pool.inputs.get("nvmePath")
        if not path or pool.parent is None or not record.get(pool.parent).type.startswith("rtip:azure:"):
            continue
        cluster = record.get(pool.parent)
        where = f"AKS GPU pool {pool.name}: cache path {path}"
        if str(path).rstrip("/") == AZURE_TEMP_DISK:
            findings.append(Finding(CHECK, pool.urn, f"{where} is the temp disk, not the NVMe"))
            continue
        labels = pool.inputs.get("labels") or {}
        preps = [d for d in _on(record, cluster, DAEMONSET) if object_name(d) == NODE_PREP_NAME
                 and (_get(d.inputs, "spec", "template", "spec", "nodeSelector") or {}).items()
                 <= labels.items()]
        if not preps:
            findings.append(Finding(CHECK, pool.urn, f"{where}: no {NODE_PREP_NAME} DaemonSet runs on "
                                    "its nodes, so the NVMe drives stay raw"))
        for ds in preps:
            cache, assembles = _prep(ds)
            if cache != str(path).rstrip("/") or not assembles:
                findings.append(Finding(CHECK, ds.urn, f"DaemonSet {object_name(ds)} on {cluster.name} "
                                        f"does not assemble the NVMe drives (RAID0) and mount them at "
                                        f"{path} for pool {pool.name} (script: CACHE={cache}, "
                                        f"assembles={assembles})"))
    return findings


def check_amd(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[str] = set()
    for release in record.by_type(HELM_RELEASE):
        cluster = cluster_of(record, release)
        if cluster is None or cluster.urn in seen:
            continue
        seen.add(cluster.urn)
        on = list(_on(record, cluster, HELM_RELEASE))
        nfd: list[str] = []
        operators = 0
        for r in on:
            values = r.inputs.get("values") or {}
            if _chart(r) == "gpu-operator":
                operators += 1
                if _get(values, "nfd", "enabled") is not False:
                    nfd.append(r.name)
            elif _chart(r) == "gpu-operator-charts":
                operators += 1
                if _get(values, "node-feature-discovery", "enabled") is not False:
                    nfd.append(r.name)
        # Every GPU operator labels nodes through node-feature-discovery: with one or two operators
        # on the cluster, exactly one NFD (none leaves the device plugins unscheduled).
        if operators and len(nfd) != 1:
            target = next((r for r in on if _chart(r) == "gpu-operator-charts"),
                          next(r for r in on if _chart(r) == "gpu-operator"))
            findings.append(Finding(CHECK, target.urn, f"cluster {cluster.name} runs {len(nfd)} "
                                    f"node-feature-discovery installs ({', '.join(nfd) or 'none'}); "
                                    "exactly one must run"))
        cloud = str(cluster.inputs.get("cloud"))
        for dc in _on(record, cluster, DEVICE_CONFIG):
            if not _get(dc.inputs, "spec", "driver", "enable"):
                continue
            image = _get(dc.inputs, "spec", "driver", "image")
            host = split(str(image))[0] if image else None
            owner = next((c for p, c in PRIVATE_REGISTRIES if host and p.match(host)), None)
            if owner != cloud:
                findings.append(Finding(CHECK, dc.urn, f"DeviceConfig {object_name(dc)} enables the "
                                        f"driver with image {image or 'unset'}, not a repository in "
                                        f"the {cloud} cluster's own registry"))
    return findings


def check_capacity(record: Record) -> list[Finding]:
    return [*check_autoscalers(record), *check_prometheus(record), *check_nvme(record),
            *check_amd(record)]


__all__ = ["check_amd", "check_autoscalers", "check_capacity", "check_nvme", "check_prometheus",
           "nodepools_of"]
