"""The typed seam between the cloud-neutral platform and one cloud's components.

Every cloud provides the same four steps (a provider per region, a cluster per region, the
registries of all its regions, the model servers' identity per cluster), each typed with that
cloud's own cluster and store classes, so what only one cloud knows (an AKS kubelet identity, an
S3 bucket ARN) passes from its cluster and its registries to its identity binding without
optional fields or string parsing. `components/platform.py` holds one row per cloud.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import pulumi

from components.cluster import KubernetesCluster
from components.contract import RegionStore
from serving.hardware import Cloud
from stacks.plan import Plan, RegionPlan
from stacks.schema import RegionSpec, StackSpec

C = TypeVar("C", bound=KubernetesCluster)
S = TypeVar("S", bound=RegionStore)
S_co = TypeVar("S_co", bound=RegionStore, covariant=True)
C_contra = TypeVar("C_contra", bound=KubernetesCluster, contravariant=True)
S_contra = TypeVar("S_contra", bound=RegionStore, contravariant=True)


class ProviderFactory(Protocol):
    """A region's provider, pinned to the account, project or subscription the stack names."""

    def __call__(self, name: str, region: RegionSpec, labels: dict[str, str],
                 opts: pulumi.ResourceOptions, spec: StackSpec) -> pulumi.ProviderResource: ...


class HasStores(Protocol[S_co]):
    @property
    def stores(self) -> Mapping[str, S_co]: ...


class RegistriesFactory(Protocol[S_co]):
    def __call__(self, name: str, plan: Plan, region_plans: Sequence[RegionPlan],
                 providers: Mapping[str, pulumi.ProviderResource],
                 opts: pulumi.ResourceOptions | None = None) -> HasStores[S_co]: ...


class IdentityFactory(Protocol[C_contra, S_contra]):
    def __call__(self, name: str, cluster: C_contra, store: S_contra, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> object: ...


@dataclass(frozen=True)
class CloudKit(Generic[C, S]):
    cloud: Cloud
    provider: ProviderFactory
    cluster: type[C]  # a KubernetesCluster: (name, region plan, plan, provider, opts)
    registries: RegistriesFactory[S]
    identity: IdentityFactory[C, S]


__all__ = ["CloudKit", "HasStores", "IdentityFactory", "ProviderFactory", "RegistriesFactory"]
