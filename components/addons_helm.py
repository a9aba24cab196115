"""Helpers every add-on module builds with: pinned Helm releases, namespaces, container resources.

Every namespace the toolkit creates is born with its NetworkPolicies (serving/netpol.py): the
default deny and the flows its components need, applied right after the namespace. A Helm release
waits for the policies of every namespace it waits for, so its pods (and its hooks) start under
the deny with their allowances already in place, webhooks reachable before anything calls them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from serving.charts import ChartKey, chart
from serving.netpol import ClusterNetwork, namespace_policies

# Each cluster's network, by its Kubernetes provider: set once per cluster (`use_network`) before
# any namespace of it is made, so the add-on modules keep calling `namespace(..., provider)`.
_NETWORKS: weakref.WeakKeyDictionary[k8s.Provider, ClusterNetwork] = weakref.WeakKeyDictionary()
# A namespace's NetworkPolicies: whatever waits for the namespace's pods waits for these too.
_POLICIES: weakref.WeakKeyDictionary[pulumi.Resource, list[pulumi.Resource]] = \
    weakref.WeakKeyDictionary()


def resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    """Container requests and limits in the shape every chart's `resources` value takes."""
    return {"requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory_limit}}


def use_network(provider: k8s.Provider, network: ClusterNetwork) -> None:
    """Tell the namespaces made through `provider` which cluster network their policies name."""
    _NETWORKS[provider] = network


def network_of(provider: k8s.Provider) -> ClusterNetwork:
    try:
        return _NETWORKS[provider]
    except KeyError:
        raise ValueError("no cluster network is known for this Kubernetes provider: call "
                         "components.addons_helm.use_network first") from None


def network_policies(name: str, namespace_: pulumi.Resource, ns: str, parent: pulumi.Resource,
                     provider: k8s.Provider) -> list[pulumi.Resource]:
    """The NetworkPolicies of namespace `ns` (created as `namespace_`), right after it."""
    policies: list[pulumi.Resource] = []
    for body in namespace_policies(ns, network_of(provider)):
        meta = body["metadata"]
        policies.append(k8s.networking.v1.NetworkPolicy(
            f"{name}-{meta['name'].removeprefix('rtip-')}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=ns, labels=meta["labels"]),
            spec=body["spec"],
            opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[namespace_])))
    _POLICIES[namespace_] = policies
    return policies


def ready(after: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
    """`after` plus the NetworkPolicies of every namespace in it: what pods must wait for."""
    return [x for r in after for x in (r, *_POLICIES.get(r, ()))]


def namespace(name: str, ns: str, level: str, parent: pulumi.Resource,
              provider: k8s.Provider) -> k8s.core.v1.Namespace:
    """Namespace `ns` with Pod Security `level` and its NetworkPolicies (`ready` finds them)."""
    made = k8s.core.v1.Namespace(name, metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={
        "app.kubernetes.io/managed-by": "rtip",
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/warn": level,
    }), opts=pulumi.ResourceOptions(parent=parent, provider=provider))
    network_policies(f"{name}-netpol", made, ns, parent, provider)
    return made


def helm_release(name: str, key: ChartKey, ns: str, values: pulumi.Input[dict[str, Any]],
                 parent: pulumi.Resource, provider: k8s.Provider, after: list[pulumi.Resource],
                 release: str | None = None) -> k8s.helm.v3.Release:
    """A release of a pinned chart; `after` are the resources it must not start before.
    `release` names the Helm release where one chart is installed more than once in a namespace
    (default: the chart's name)."""
    pinned = chart(key)
    return k8s.helm.v3.Release(name, k8s.helm.v3.ReleaseArgs(
        name=release or pinned.name,
        chart=pinned.reference,
        version=pinned.version,
        repository_opts=None if pinned.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=pinned.repo),
        namespace=ns,
        values=values,
        # A half-installed operator is worse than none: roll back and fail the update instead.
        atomic=True,
        cleanup_on_fail=True,
        timeout=900,
    ), opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=ready(after)))


__all__ = ["helm_release", "namespace", "network_of", "network_policies", "ready", "resources",
           "use_network"]
