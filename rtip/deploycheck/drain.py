"""Drain: every predictor waits out its longest response when it is scaled in, the kubelet lets
it, and the node autoscaler that removes its node waits as long (serving/drain.py).

- cap: the InferenceService's vLLM arguments cap one response (`--override-generation-config`
  with `max_new_tokens`, which vLLM 0.11 applies to every chat and completion request); without
  it a response may run to the served context, and no grace period bounds the drain;
- hook: after its settle (during which the picker may still route a request to it), its preStop
  hook waits (the bound, read off the script the kubelet runs) at least the tier's TTFT plus that
  many tokens at the tier's TPOT, the tier being the plan's for the model (the record's plan);
- grace: the pod's `terminationGracePeriodSeconds` holds the settle, the bound and the hook's
  margin (without one Kubernetes gives 30 s, and the kubelet stops vLLM when it runs out);
- autoscaler: the grace period is within the wait of the node autoscaler that removes its node
  (serving/nodescaling.py `pod_grace_limit_s`: the cluster autoscaler's 600 s on GKE and AKS,
  where the AKS cluster's `autoScalerProfile.maxGracefulTerminationSec` overrides it). Karpenter
  waits for the pod's own, unless a NodePool that launches the predictor's pool (`rtip.dev/pool`)
  sets `spec.template.spec.terminationGracePeriod`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from rtip.deploycheck.capacity import nodepools_of
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import cluster_of, descendants, object_name
from rtip.offline import Record, Resource
from serving._model_pod import GENERATION_CONFIG_ARG, TIER_ANNOTATION
from serving.drain import HOOK_MARGIN_S
from serving.hardware import Cloud
from serving.manifests import POOL_LABEL  # the predictors' node selector, the NodePools' label
from serving.nodescaling import NODE_AUTOSCALER

CHECK = "drain"
AKS_CLUSTER = "azure-native:containerservice:ManagedCluster"
# The NodePool CRD's pattern for terminationGracePeriod (karpenter-crd 1.14.1 nodepools.yaml).
_KARPENTER_DURATION = re.compile(r"(?:[0-9]+[smh])+")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def _karpenter_duration_s(text: str) -> float | None:
    """A NodePool duration (`48h`, `1h30m`, `90s`) in seconds; None when the CRD would refuse it."""
    if not _KARPENTER_DURATION.fullmatch(text):
        return None
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)([smh])", text))


def _hook_s(container: dict[str, Any]) -> tuple[float, float] | None:
    """The emitted preStop drain's settle and the bound it then waits: a request the picker
    routes to the pod at the end of the settle has the bound to finish in."""
    command = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command")
    if not command or len(command) < 3:
        return None
    settle = re.search(r"time\.sleep\(([\d.]+)\)", str(command[2]))
    bound = re.search(r"time\.monotonic\(\) \+ ([\d.]+)", str(command[2]))
    return (float(settle.group(1)), float(bound.group(1))) if settle and bound else None


def _cap(args: list[str]) -> int | None:
    """The `max_new_tokens` of vLLM's generation-config override; None without a readable one."""
    for arg in args:
        if arg.startswith(GENERATION_CONFIG_ARG):
            try:
                value = json.loads(arg[len(GENERATION_CONFIG_ARG):]).get("max_new_tokens")
                return int(value) if value is not None else None
            except (ValueError, TypeError, AttributeError):
                return None
    return None


def _autoscaler_wait_s(record: Record, cluster: Resource, pool: str | None) -> tuple[float | None, str]:
    """The node autoscaler's wait for a pod of a node of `pool` it removes (inf: the pod's own
    grace period), and where it comes from; None when what bounds it cannot be read."""
    cloud = Cloud(cluster.type.split(":")[1])
    limit = NODE_AUTOSCALER[cloud].pod_grace_limit_s
    name = NODE_AUTOSCALER[cloud].name
    if cloud is Cloud.AZURE:
        for aks in (r for r in descendants(record, cluster.urn) if r.type == AKS_CLUSTER):
            value = (aks.inputs.get("autoScalerProfile") or {}).get("maxGracefulTerminationSec")
            if value is not None:
                where = "its AKS autoscaler profile's maxGracefulTerminationSec"
                try:
                    return float(value), where
                except (TypeError, ValueError):
                    return None, f"{where} {value!r} is no number"
    waits = []
    for nodepool in nodepools_of(record, cluster, pool):
        template = (nodepool.inputs.get("spec") or {}).get("template") or {}
        value = (template.get("spec") or {}).get("terminationGracePeriod")
        if value is not None:
            where = f"Karpenter NodePool {object_name(nodepool)}'s terminationGracePeriod"
            wait = _karpenter_duration_s(str(value))
            if wait is None:
                return None, f"{where} {value!r} is no duration"
            waits.append((wait, where))
    if waits:
        return min(waits)
    return (math.inf, f"{name} waits for the pod's own") if limit is None else (limit, f"{name}'s default")


def _tier_targets(record: Record) -> dict[str, tuple[float, float]]:
    """Each tier the plan uses: its TTFT and TPOT targets in seconds."""
    models = getattr(record.plan, "models", None) or []
    return {str(m.tier): (m.tier_spec.ttft_s, m.tier_spec.tpot_s) for m in models}


def _check(record: Record, svc: Resource, tiers: dict[str, tuple[float, float]]) -> Iterator[Finding]:
    predictor = (svc.inputs.get("spec") or {}).get("predictor") or {}
    container = predictor.get("model") or {}
    what = f"InferenceService {object_name(svc)}"
    cap = _cap(list(container.get("args") or []))
    if cap is None:
        yield Finding(CHECK, svc.urn, f"{what}: vLLM's arguments set no `max_new_tokens` "
                      f"({GENERATION_CONFIG_ARG}...), so a response may run to the served context and "
                      "no grace period bounds its drain")
        return
    tier = (predictor.get("annotations") or {}).get(TIER_ANNOTATION)
    if tier not in tiers:
        yield Finding(CHECK, svc.urn, f"{what}: its tier ({TIER_ANNOTATION} {tier!r}) is not one the "
                      "plan has, so its drain was not checked", Severity.WARNING)
        return
    ttft_s, tpot_s = tiers[tier]
    need = ttft_s + cap * tpot_s
    hook = _hook_s(container)
    if hook is None or hook[1] < need:
        yield Finding(CHECK, svc.urn, f"{what}: a {cap}-token response at the {tier} tier's pace "
                      f"takes {need:.1f} s, but after its settle its preStop drain waits "
                      f"{'nothing' if hook is None else f'{hook[1]:g} s'}; it would be cut at a scale-in")
    grace = predictor.get("terminationGracePeriodSeconds")
    if hook is not None and (grace is None or sum(hook) + HOOK_MARGIN_S > float(grace)):
        given = "Kubernetes' default 30 s" if grace is None else f"{grace} s"
        yield Finding(CHECK, svc.urn, f"{what}: its grace period ({given}) ends before its preStop drain "
                      f"({sum(hook):g} s and the hook's {HOOK_MARGIN_S:g} s margin): the kubelet stops vLLM "
                      "mid-drain")
    cluster = cluster_of(record, svc)
    if grace is None or cluster is None:
        return
    limit, source = _autoscaler_wait_s(record, cluster, (predictor.get("nodeSelector") or {}).get(POOL_LABEL))
    if limit is None:
        yield Finding(CHECK, svc.urn, f"{what}: the node autoscaler's wait was not checked: {source}",
                      Severity.WARNING)
    elif float(grace) > limit:
        yield Finding(CHECK, svc.urn, f"{what}: its {grace} s grace period is longer than the "
                      f"{limit:g} s the node autoscaler waits ({source}); a node scale-down would "
                      "cut its longest responses")


def check_drain(record: Record) -> list[Finding]:
    tiers = _tier_targets(record)
    return [f for svc in record.resources if svc.inputs.get("kind") == "InferenceService"
            for f in _check(record, svc, tiers)]


__all__ = ["check_drain"]
