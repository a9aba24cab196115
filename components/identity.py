"""The model servers' cloud identity: the skeleton every cloud's binding follows.

Per cluster, the Kubernetes service account `rtip-models/model-server` gets exactly one cloud
identity, which may read that cluster's own regional weights store and nothing else. Where the
cluster runs KServe's local model cache, the same identity also trusts the download Jobs'
service account `kserve-localmodel-jobs/model-download` (the LocalModelCaches name it), read-only
on the same store. Each cloud (components/<cloud>/identity.py) fills in `bind`: create the
identity, grant it the store, trust the cluster for exactly those service accounts, and return the
annotations the service accounts need.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from components.addons_cache import DOWNLOAD_SERVICE_ACCOUNT, JOBS_NAMESPACE, has_cache
from components.addons_helm import namespace
from components.cluster import KubernetesCluster
from components.contract import RegionStore
from components.namespaces import MODEL_SERVICE_ACCOUNT, MODELS_NAMESPACE, model_service_account

C = TypeVar("C", bound=KubernetesCluster)
S = TypeVar("S", bound=RegionStore)


@dataclass(frozen=True)
class Subject:
    """A Kubernetes service account the cloud identity trusts."""

    namespace: str
    service_account: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.service_account}"

    @property
    def oidc_subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


MODEL_SERVER = Subject(MODELS_NAMESPACE, MODEL_SERVICE_ACCOUNT)
MODEL_DOWNLOAD = Subject(JOBS_NAMESPACE, DOWNLOAD_SERVICE_ACCOUNT)


def subjects(cluster: KubernetesCluster) -> tuple[Subject, ...]:
    """The model servers always; the cache's download Jobs where the cluster has a cache."""
    return (MODEL_SERVER, MODEL_DOWNLOAD) if has_cache(cluster.facts) else (MODEL_SERVER,)


class ModelIdentity(pulumi.ComponentResource, ABC, Generic[C, S]):
    TYPE: ClassVar[str]

    def __init__(self, name: str, cluster: C, store: S, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        trusted = subjects(cluster)
        super().__init__(self.TYPE, name, {
            "cluster": cluster.cluster_name, "region": store.region,
            "serviceAccount": MODEL_SERVER.ref,
            "serviceAccounts": [s.ref for s in trusted]}, opts)
        self.child = pulumi.ResourceOptions(parent=self, provider=cluster.cloud_provider)
        annotations = self.bind(name, cluster, store, trusted)
        model_service_account(f"{name}-sa", cluster.facts, list(after), self, annotations=annotations)
        if MODEL_DOWNLOAD in trusted:
            self._download_account(name, cluster, annotations)
        self.register_outputs({})

    def _download_account(self, name: str, cluster: C,
                          annotations: Mapping[str, pulumi.Input[str]] | None) -> None:
        # KServe runs the download Jobs in this namespace (kserve-resources value
        # `kserve.localmodel.jobNamespace`) and creates none itself.
        ns = namespace(f"{name}-ns-jobs", JOBS_NAMESPACE, "baseline", self, cluster.facts.provider)
        k8s.core.v1.ServiceAccount(f"{name}-download-sa", metadata=k8s.meta.v1.ObjectMetaArgs(
            name=DOWNLOAD_SERVICE_ACCOUNT, namespace=JOBS_NAMESPACE,
            labels={"app.kubernetes.io/managed-by": "rtip"},
            annotations=dict(annotations) if annotations else None),
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.facts.provider, depends_on=[ns]))

    @abstractmethod
    def bind(self, name: str, cluster: C, store: S,
             trusted: Sequence[Subject]) -> Mapping[str, pulumi.Input[str]] | None:
        """The cloud identity, its grant on the store and its trust of the cluster's `trusted`
        service accounts; returns the service accounts' annotations."""


__all__ = ["MODEL_DOWNLOAD", "MODEL_SERVER", "ModelIdentity", "Subject", "subjects"]
