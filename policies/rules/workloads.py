"""What runs on the clusters: hardened model servers, namespaces with a Pod Security level and a
default-deny NetworkPolicy, disruption budgets and zone-surviving replica floors."""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules.base import Config, Props, StackResource, get, of_types

ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


@of_types({ISVC})
def model_servers_hardened(type_: str, props: Props, config: Config) -> Iterator[str]:
    predictor = get(props, "spec", "predictor", default={})
    container = predictor.get("model", {})
    resources = container.get("resources", {})
    if not resources.get("requests") or resources.get("requests") != resources.get("limits"):
        yield "the model container's requests and limits are missing or differ (not Guaranteed QoS)"
    ctx = container.get("securityContext", {})
    if ctx.get("allowPrivilegeEscalation", True):
        yield "the model container may escalate privileges"
    if ctx.get("privileged", False):
        yield "the model container is privileged"
    # ROCm's device nodes belong to host groups whose IDs differ between node images, so a model
    # server on AMD GPUs may be allow-listed to run as root (config `rootAllowedGpuVendors`).
    gpu_vendors = {k.split("/")[0].split(".")[0] for k in resources.get("limits", {}) if "/" in k}
    root_ok = bool(gpu_vendors & set(config.get("rootAllowedGpuVendors", [])))
    if not ctx.get("runAsNonRoot", False) and not get(predictor, "securityContext", "runAsNonRoot",
                                                       default=False) and not root_ok:
        yield "the model container may run as root and its runtime is not allow-listed"
    if predictor.get("automountServiceAccountToken", True):
        yield "the predictor pods mount a Kubernetes API token they never use"


@of_types({NAMESPACE})
def namespaces_pod_security(type_: str, props: Props, config: Config) -> Iterator[str]:
    labels = get(props, "metadata", "labels", default={})
    if "pod-security.kubernetes.io/enforce" not in labels:
        yield "the namespace enforces no Pod Security level"


def namespaces_default_deny(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    """Every namespace the toolkit creates carries a NetworkPolicy that denies all ingress and
    egress by default (podSelector {}), on the same cluster."""
    denied = set()
    for r in resources:
        selector = get(r.props, "spec", "podSelector", default=None)
        if r.type == NETPOL and selector in ({}, {"matchLabels": {}}):
            types = set(get(r.props, "spec", "policyTypes", default=[]))
            if {"Ingress", "Egress"} <= types:
                denied.add((r.parent, get(r.props, "metadata", "namespace")))
    for ns in (r for r in resources if r.type == NAMESPACE):
        name = get(ns.props, "metadata", "name")
        if not any(n == name for _, n in denied):
            yield ns.urn, f"namespace {name} has no default-deny NetworkPolicy"


def isvc_disruption_and_zones(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    """Every InferenceService has a PodDisruptionBudget for its pods, and outside dev its replica
    floor keeps at least one replica in every zone, so losing one zone leaves the others serving."""
    by_urn = {r.urn: r for r in resources}

    def cluster_zones(r: StackResource) -> int:
        parent = r.parent
        while parent and parent in by_urn:
            node = by_urn[parent]
            if node.type.startswith("rtip:") and node.type.endswith(":Cluster"):
                return len(get(node.props, "zones", default=[]))
            parent = node.parent
        return 0

    pdbs = [r for r in resources if r.type == PDB]
    scaled = {(r.parent, get(r.props, "metadata", "name")): r for r in resources if r.type == SCALED_OBJECT}
    for isvc in (r for r in resources if r.type == ISVC):
        labels = get(isvc.props, "spec", "predictor", "labels", default={})
        ns = get(isvc.props, "metadata", "namespace")
        covered = [p for p in pdbs if get(p.props, "metadata", "namespace") == ns and p.parent == isvc.parent
                   and get(p.props, "spec", "selector", "matchLabels", default={}).items() <= labels.items()]
        if not covered:
            yield isvc.urn, "no PodDisruptionBudget covers the model's pods"
        if not config.get("requireZoneFloor"):
            continue
        zones = cluster_zones(isvc)
        so = scaled.get((isvc.parent, get(isvc.props, "metadata", "name")))
        floor = get(so.props, "spec", "minReplicaCount", default=0) if so else \
            get(isvc.props, "spec", "predictor", "minReplicas", default=0)
        if zones and floor < zones:
            yield isvc.urn, f"its replica floor {floor} leaves a zone of {zones} without a replica"


__all__ = ["isvc_disruption_and_zones", "model_servers_hardened", "namespaces_default_deny",
           "namespaces_pod_security"]
