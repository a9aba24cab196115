"""The typed seam between the cloud-neutral platform and one cloud's components.

Every cloud implements the same four steps, each typed with that cloud's own cluster and store
classes, so what only one cloud knows (an AKS kubelet identity, an S3 bucket ARN) passes from its
cluster and its registries to its identity binding without optional fields or string parsing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

import pulumi

from components.cluster import KubernetesCluster
from components.contract import RegionStore
from serving.hardware import Cloud
from stacks.plan import Plan, RegionPlan

C = TypeVar("C", bound=KubernetesCluster)
S = TypeVar("S", bound=RegionStore)


class CloudKit(ABC, Generic[C, S]):
    cloud: ClassVar[Cloud]

    @abstractmethod
    def provider(self, name: str, region: RegionPlan, labels: dict[str, str],
                 opts: pulumi.ResourceOptions) -> pulumi.ProviderResource:
        """The region's provider; every resource of the region goes through it."""

    @abstractmethod
    def cluster(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                opts: pulumi.ResourceOptions) -> C:
        """The region's cluster (components/cluster.py skeleton)."""

    @abstractmethod
    def stores(self, name: str, plan: Plan, regions: Sequence[RegionPlan],
               providers: Mapping[str, pulumi.ProviderResource],
               opts: pulumi.ResourceOptions) -> Mapping[str, S]:
        """The image registry and weights store of every region of this cloud, by region."""

    @abstractmethod
    def identity(self, name: str, cluster: C, store: S, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions) -> None:
        """The model servers' identity on `cluster`, reading `store` only."""


__all__ = ["CloudKit"]
