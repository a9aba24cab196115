"""The namespaces every cluster carries, created through the cluster's Kubernetes provider."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.contract import ClusterFacts
from stacks.naming import MODELS_NAMESPACE

SYSTEM_NAMESPACE = "rtip-system"
# The Kubernetes identity of every model server; each cloud federates it with its own identity.
MODEL_SERVICE_ACCOUNT = "model-server"

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


def model_service_account(
    name: str, cluster: ClusterFacts, after: list[pulumi.Resource], parent: pulumi.Resource,
    annotations: dict[str, pulumi.Input[str]] | None = None,
) -> k8s.core.v1.ServiceAccount:
    """The model servers' service account; `annotations` bind it to the cloud identity."""
    return k8s.core.v1.ServiceAccount(name, metadata=k8s.meta.v1.ObjectMetaArgs(
        name=MODEL_SERVICE_ACCOUNT, namespace=MODELS_NAMESPACE,
        labels={"app.kubernetes.io/managed-by": "rtip"}, annotations=annotations),
        # Model servers never call the Kubernetes API.
        automount_service_account_token=False,
        opts=pulumi.ResourceOptions(parent=parent, provider=cluster.provider, depends_on=after))


__all__ = ["MODELS_NAMESPACE", "MODEL_SERVICE_ACCOUNT", "SYSTEM_NAMESPACE", "ClusterNamespaces",
           "model_service_account"]
