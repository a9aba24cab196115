"""The namespaces every cluster carries, created through the cluster's Kubernetes provider."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.contract import ClusterFacts

SYSTEM_NAMESPACE = "rtip-system"
MODELS_NAMESPACE = "rtip-models"

# Pod Security admission: nothing of ours here needs privilege, so both namespaces enforce
# `baseline` and warn on anything short of `restricted`. Node-level operators get their own.
_POD_SECURITY = {
    SYSTEM_NAMESPACE: "baseline",
    MODELS_NAMESPACE: "baseline",
}


class ClusterNamespaces(pulumi.ComponentResource):
    def __init__(self, name: str, cluster: ClusterFacts,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:k8s:Namespaces", name, {"cluster": cluster.name}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        for ns, level in _POD_SECURITY.items():
            self.namespaces[ns] = k8s.core.v1.Namespace(
                f"{name}-{ns}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={
                    "app.kubernetes.io/managed-by": "rtip",
                    "pod-security.kubernetes.io/enforce": level,
                    "pod-security.kubernetes.io/warn": "restricted",
                }),
                opts=child,
            )
        self.register_outputs({})


__all__ = ["MODELS_NAMESPACE", "SYSTEM_NAMESPACE", "ClusterNamespaces"]
