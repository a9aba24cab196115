"""Scheduling: every pod the platform will run fits some pool of its cluster.

The pods are those of the pod templates in the record (Deployments, StatefulSets, DaemonSets,
Jobs, CronJobs), the predictor pod KServe makes from each InferenceService, and the KServe
local-model node agent the `kserve-localmodel-resources` chart runs from its values (its node
selector always includes `kserve/localmodel: worker`, merged with
`kserve.localmodelnode.controller.nodeSelector`; FACTS.md section 9). A pod fits a pool when its
node selector and required node affinity match the pool's labels, it tolerates every NoSchedule
and NoExecute taint, and its requests fit one node's allocatable (rtip/deploycheck/nodes.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rtip.deploycheck.findings import Finding
from rtip.deploycheck.graph import LABEL_OPERATORS, cluster_of, object_name
from rtip.deploycheck.nodes import AUTO_LABEL_PREFIXES, NodeShape, Taint, cluster_nodes
from rtip.offline import Record, Resource

CHECK = "scheduling"
AGENT_CHART = "kserve-localmodel-resources"
AGENT_LABEL = {"kserve/localmodel": "worker"}
_TEMPLATE_PATHS = {"Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
                   "DaemonSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
                   "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}
_BINARY = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2}
_DECIMAL = {"k": 1000 / 1024**2, "M": 1e6 / 1024**2, "G": 1e9 / 1024**2, "T": 1e12 / 1024**2}


@dataclass(frozen=True)
class Pod:
    resource: Resource
    what: str  # "Deployment x", "predictor of InferenceService y"
    spec: dict[str, Any]  # a PodSpec (or a predictor spec: same scheduling fields)
    requests: dict[str, int]
    daemon: bool = False


def quantity(name: str, value: object) -> int:
    """A resource quantity as an int: CPU in millicores, memory in Mi, anything else a count."""
    text = str(value)
    if name == "cpu":
        return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)
    if name in ("memory", "ephemeral-storage"):
        m = re.fullmatch(r"([0-9.]+)([KMGT]i?|k)?", text)
        if m is None:
            raise ValueError(f"{name} quantity {text!r}")
        unit = m.group(2) or ""
        scale = _BINARY.get(unit) or _DECIMAL.get(unit) or 1 / 1024**2
        return int(float(m.group(1)) * scale + 0.999)
    return int(float(text))


def _requests(containers: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in containers:
        res = c.get("resources") or {}
        # Kubernetes defaults requests to limits where only limits are given.
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k, v in asked.items():
            total[k] = total.get(k, 0) + quantity(k, v)
    return total


def _dig(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def pods(record: Record) -> Iterator[Pod]:
    for r in record.resources:
        kind = r.type.rsplit(":", 1)[-1]
        if r.type.startswith("kubernetes:") and kind in _TEMPLATE_PATHS:
            spec = _dig(r.inputs, _TEMPLATE_PATHS[kind])
            if isinstance(spec, dict):
                yield Pod(r, f"{kind} {object_name(r)}", spec,
                          _requests([*spec.get("containers", []), *spec.get("initContainers", [])]),
                          daemon=kind == "DaemonSet")
        elif r.type == "kubernetes:serving.kserve.io/v1beta1:InferenceService":
            predictor = _dig(r.inputs, ("spec", "predictor")) or {}
            containers = [predictor["model"]] if isinstance(predictor.get("model"), dict) else []
            containers += predictor.get("containers") or []
            yield Pod(r, f"the predictor of InferenceService {object_name(r)}", predictor,
                      _requests(containers))
        elif r.type == "kubernetes:helm.sh/v3:Release" and AGENT_CHART in str(r.inputs.get("chart")):
            controller = _dig(r.inputs, ("values", "kserve", "localmodelnode", "controller")) or {}
            spec = {"nodeSelector": {**(controller.get("nodeSelector") or {}), **AGENT_LABEL},
                    "tolerations": controller.get("tolerations") or [],
                    "affinity": controller.get("affinity") or {}}
            yield Pod(r, f"the local-model node agent of release {r.name}", spec, {}, daemon=True)


def tolerates(tolerations: list[dict[str, Any]], taint: Taint) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.effect):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint.key):
            return True
        if t.get("key") == taint.key and str(t.get("value") or "") == taint.value:
            return True
    return False


def _label_ok(labels: dict[str, str], key: str, test: Any) -> bool:
    if key.startswith(AUTO_LABEL_PREFIXES):
        return True  # set by the kubelet, the cloud or an operator: not decided here
    return test(labels.get(key))


def _affinity_ok(labels: dict[str, str], affinity: Any) -> bool:
    terms = _dig(affinity, ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                            "nodeSelectorTerms"))
    if not terms:
        return True
    ops = LABEL_OPERATORS  # Gt and Lt (numeric) are read as Exists: not decided here
    return any(all(_label_ok(labels, e["key"], lambda v, e=e: ops.get(e["operator"], ops["Exists"])(
        v, e.get("values") or [])) for e in term.get("matchExpressions") or []) for term in terms)


def misfit(pod: Pod, node: NodeShape) -> str | None:
    """Why the pod cannot run on the pool's nodes, or None when it can."""
    for key, value in (pod.spec.get("nodeSelector") or {}).items():
        if not _label_ok(node.labels, key, lambda v, value=value: v == value):
            return f"node selector {key}={value} (its nodes have {key}={node.labels.get(key)})"
    if not _affinity_ok(node.labels, pod.spec.get("affinity")):
        return "required node affinity"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(pod.spec.get("tolerations") or [],
                                                                           taint):
            return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    for name, amount in pod.requests.items():
        have = node.allocatable.get(name, 0)
        if amount > have and (name in node.allocatable or "/" in name):
            unit = {"cpu": "m", "memory": "Mi"}.get(name, "")
            return f"requests {amount}{unit} {name}, a node has {have}{unit}"
    return None


def check_scheduling(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    nodes_of: dict[str, list[NodeShape]] = {}
    for pod in pods(record):
        cluster = cluster_of(record, pod.resource)
        if cluster is None:
            continue
        if cluster.urn not in nodes_of:
            nodes_of[cluster.urn] = cluster_nodes(record, cluster)
        nodes = nodes_of[cluster.urn]
        why = {n.pool: misfit(pod, n) for n in nodes}
        if not nodes or all(why.values()):
            reasons = "; ".join(f"{pool}: {reason}" for pool, reason in why.items()) or "no pools"
            findings.append(Finding(CHECK, pod.resource.urn, f"{pod.what} on cluster {cluster.name} "
                                    f"fits no pool ({reasons})"))
    return findings


__all__ = ["CHECK", "Pod", "check_scheduling", "misfit", "pods", "quantity", "tolerates"]
