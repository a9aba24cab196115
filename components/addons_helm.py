"""Helpers every add-on module builds with: pinned Helm releases, namespaces, container resources."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from serving.charts import ChartKey, chart


def resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    """Container requests and limits in the shape every chart's `resources` value takes."""
    return {"requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory_limit}}


def namespace(name: str, ns: str, level: str, parent: pulumi.Resource,
              provider: k8s.Provider) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(name, metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={
        "app.kubernetes.io/managed-by": "rtip",
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/warn": level,
    }), opts=pulumi.ResourceOptions(parent=parent, provider=provider))


def helm_release(name: str, key: ChartKey, ns: str, values: dict[str, Any], parent: pulumi.Resource,
                 provider: k8s.Provider, after: list[pulumi.Resource]) -> k8s.helm.v3.Release:
    """A release of a pinned chart; `after` are the resources it must not start before."""
    pinned = chart(key)
    return k8s.helm.v3.Release(name, k8s.helm.v3.ReleaseArgs(
        name=pinned.name,
        chart=pinned.reference,
        version=pinned.version,
        repository_opts=None if pinned.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=pinned.repo),
        namespace=ns,
        values=values,
        # A half-installed operator is worse than none: roll back and fail the update instead.
        atomic=True,
        cleanup_on_fail=True,
        timeout=900,
    ), opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=after))


__all__ = ["helm_release", "namespace", "resources"]
