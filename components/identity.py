"""The model servers' cloud identity: the skeleton every cloud's binding follows.

Per cluster, the Kubernetes service account `rtip-models/model-server` gets exactly one cloud
identity, which may read that cluster's own regional weights store and nothing else. Each cloud
(components/<cloud>/identity.py) fills in `bind`: create the identity, grant it the store, trust
the cluster for that one service account, and return the annotations the service account needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

import pulumi

from components.cluster import KubernetesCluster
from components.contract import RegionStore
from components.namespaces import MODEL_SERVICE_ACCOUNT, MODELS_NAMESPACE, model_service_account

C = TypeVar("C", bound=KubernetesCluster)
S = TypeVar("S", bound=RegionStore)


class ModelIdentity(pulumi.ComponentResource, ABC, Generic[C, S]):
    TYPE: ClassVar[str]

    def __init__(self, name: str, cluster: C, store: S, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, {
            "cluster": cluster.cluster_name, "region": store.region,
            "serviceAccount": f"{MODELS_NAMESPACE}/{MODEL_SERVICE_ACCOUNT}"}, opts)
        self.child = pulumi.ResourceOptions(parent=self, provider=cluster.cloud_provider)
        annotations = self.bind(name, cluster, store)
        model_service_account(f"{name}-sa", cluster.facts, list(after), self, annotations=annotations)
        self.register_outputs({})

    @abstractmethod
    def bind(self, name: str, cluster: C, store: S) -> Mapping[str, pulumi.Input[str]] | None:
        """The cloud identity, its grant on the store and its trust of the cluster; returns the
        service account's annotations."""


__all__ = ["ModelIdentity"]
