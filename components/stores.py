"""Per cloud: the registries of its regions and the identity that lets model pods read them.

Each row builds, for one cloud, the replicated image registry and weights store of all its
regions in the stack (`registries`), then per cluster the workload identity of the model pods
with read access to that cluster's own regional copy and nothing else (`identity`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.identity_aws import AwsModelIdentity
from components.identity_azure import AzureModelIdentity
from components.identity_gcp import GcpModelIdentity
from components.registries_aws import AwsRegistries
from components.registries_azure import AzureRegistries
from components.registries_gcp import GcpRegistries
from serving.hardware import Cloud


@dataclass(frozen=True)
class StoreBuilder:
    """registries(name, spec, regions, providers, opts) -> component with .stores per region
    identity(name, cluster_facts, region_store, provider, after, opts) -> component"""

    registries: Callable[..., Any]
    identity: Callable[..., Any]


STORES: dict[Cloud, StoreBuilder] = {
    Cloud.AWS: StoreBuilder(AwsRegistries, AwsModelIdentity),
    Cloud.GCP: StoreBuilder(GcpRegistries, GcpModelIdentity),
    Cloud.AZURE: StoreBuilder(AzureRegistries, AzureModelIdentity),
}

__all__ = ["STORES", "StoreBuilder"]
