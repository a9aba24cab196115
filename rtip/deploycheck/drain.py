"""Drain: every predictor waits out its longest response when it is scaled in, and the node
autoscaler that removes its node waits as long (serving/drain.py).

- cap: the InferenceService's vLLM arguments cap one response (`--override-generation-config`
  with `max_new_tokens`, which vLLM 0.11 applies to every chat and completion request); without
  it a response may run to the served context, and no grace period bounds the drain;
- hook: after its settle (during which the picker may still route a request to it), its preStop
  hook waits (the bound, read off the script the kubelet runs) at least the tier's TTFT plus that
  many tokens at the tier's TPOT, the tier being the plan's for the model (the record's plan);
- autoscaler: its grace period is within the wait of the node autoscaler that removes its nodes.
  On AKS that is the cluster's autoscaler profile `maxGracefulTerminationSec`, 600 when unset (the
  AKS API documents the default). On GKE it is 600: GKE documents that at a scale-down the grace
  period can be up to 10 minutes (the upstream `--max-graceful-termination-sec` default). On EKS
  it is the `spec.template.spec.terminationGracePeriod` of the Karpenter NodePool that launches
  the predictor's pool (`rtip.dev/pool`), when set; Karpenter otherwise waits for the pod's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import cluster_of, object_name
from rtip.offline import Record, Resource
from serving.manifests import POOL_LABEL  # the predictors' node selector, the NodePools' label

CHECK = "drain"
CAP_ARG = "--override-generation-config="
TIER_ANNOTATION = "rtip.dev/tier"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
AKS_CLUSTER = "azure-native:containerservice:ManagedCluster"
CLUSTER_AUTOSCALER_WAIT_S = 600  # --max-graceful-termination-sec's default
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _go_duration_s(text: str) -> float | None:
    """A Go duration (`48h`, `1h30m`, `90s`) in seconds; None when it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def _hook_bound_s(container: dict[str, Any]) -> float | None:
    """How long the emitted preStop drain waits after its settle: a request the picker routes to
    the pod at the end of the settle has this long."""
    command = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command")
    if not command or len(command) < 3:
        return None
    bound = re.search(r"time\.monotonic\(\) \+ ([\d.]+)", str(command[2]))
    return float(bound.group(1)) if bound else None


def _cap(args: list[str]) -> int | None:
    """The `max_new_tokens` of vLLM's generation-config override; None without a readable one."""
    for arg in args:
        if arg.startswith(CAP_ARG):
            try:
                value = json.loads(arg[len(CAP_ARG):]).get("max_new_tokens")
                return int(value) if value is not None else None
            except (ValueError, TypeError, AttributeError):
                return None
    return None


def _descendants(record: Record, urn: str, type_: str) -> Iterator[Resource]:
    for child in record.children(urn):
        if child.type == type_:
            yield child
        yield from _descendants(record, child.urn, type_)


def _autoscaler_wait_s(record: Record, cluster: Resource, pool: str | None) -> tuple[float | None, str]:
    """The node autoscaler's wait for a pod of a node of `pool` it removes, and where it comes
    from; (None, why) when nothing bounds it, or when what bounds it cannot be read."""
    cloud = cluster.type.split(":")[1]
    if cloud == "azure":
        for aks in _descendants(record, cluster.urn, AKS_CLUSTER):
            value = (aks.inputs.get("autoScalerProfile") or {}).get("maxGracefulTerminationSec")
            if value is not None:
                try:
                    return float(value), "its AKS autoscaler profile's maxGracefulTerminationSec"
                except (TypeError, ValueError):
                    return None, (f"its AKS autoscaler profile's maxGracefulTerminationSec {value!r} "
                                  "is no number")
        return CLUSTER_AUTOSCALER_WAIT_S, "the AKS cluster autoscaler's default"
    if cloud == "gcp":
        return CLUSTER_AUTOSCALER_WAIT_S, "GKE's cluster autoscaler"
    for nodepool in record.by_type(NODE_POOL):
        found = cluster_of(record, nodepool)
        template = (nodepool.inputs.get("spec") or {}).get("template") or {}
        if found is None or found.urn != cluster.urn or \
                ((template.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) != pool:
            continue
        value = (template.get("spec") or {}).get("terminationGracePeriod")
        if value is None:
            continue
        wait = _go_duration_s(str(value))
        name = f"Karpenter NodePool {object_name(nodepool)}'s terminationGracePeriod"
        return (wait, name) if wait is not None else (None, f"{name} {value!r} is no duration")
    return None, "Karpenter waits for the pod's own grace period"


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
                      f"({CAP_ARG}...), so a response may run to the served context and no grace "
                      "period bounds its drain")
        return
    tier = (predictor.get("annotations") or {}).get(TIER_ANNOTATION)
    if tier not in tiers:
        yield Finding(CHECK, svc.urn, f"{what}: its tier ({TIER_ANNOTATION} {tier!r}) is not one the "
                      "plan has, so its drain was not checked", Severity.WARNING)
        return
    ttft_s, tpot_s = tiers[tier]
    need = ttft_s + cap * tpot_s
    wait = _hook_bound_s(container)
    if wait is None or wait < need:
        yield Finding(CHECK, svc.urn, f"{what}: a {cap}-token response at the {tier} tier's pace "
                      f"takes {need:.1f} s, but after its settle its preStop drain waits "
                      f"{'nothing' if wait is None else f'{wait:g} s'}; it would be cut at a scale-in")
    grace = predictor.get("terminationGracePeriodSeconds")
    cluster = cluster_of(record, svc)
    if grace is None or cluster is None:
        return
    limit, source = _autoscaler_wait_s(record, cluster, (predictor.get("nodeSelector") or {}).get(POOL_LABEL))
    if limit is None and "Karpenter waits" not in source:
        yield Finding(CHECK, svc.urn, f"{what}: the node autoscaler's wait was not checked: {source}",
                      Severity.WARNING)
    elif limit is not None and float(grace) > limit:
        yield Finding(CHECK, svc.urn, f"{what}: its {grace} s grace period is longer than the "
                      f"{limit:g} s the node autoscaler waits ({source}); a node scale-down would "
                      "cut its longest responses")


def check_drain(record: Record) -> list[Finding]:
    tiers = _tier_targets(record)
    return [f for svc in record.resources if svc.inputs.get("kind") == "InferenceService"
            for f in _check(record, svc, tiers)]


__all__ = ["check_drain"]
