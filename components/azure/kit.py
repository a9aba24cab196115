"""The Azure side of the cloud seam (components/kit.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi

from components.azure.cluster import AzureCluster, azure_provider
from components.azure.identity import AzureModelIdentity
from components.azure.registries import AzureRegistries, AzureStore
from components.kit import CloudKit
from serving.hardware import Cloud
from stacks.plan import Plan, RegionPlan
from stacks.schema import AzureRegion


class AzureKit(CloudKit[AzureCluster, AzureStore]):
    cloud = Cloud.AZURE

    def provider(self, name: str, region: RegionPlan, labels: dict[str, str],
                 opts: pulumi.ResourceOptions) -> pulumi.ProviderResource:
        assert isinstance(region.region, AzureRegion)
        return azure_provider(name, region.region, labels, opts)

    def cluster(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                opts: pulumi.ResourceOptions) -> AzureCluster:
        return AzureCluster(name, region, plan, provider, opts)

    def stores(self, name: str, plan: Plan, regions: Sequence[RegionPlan],
               providers: Mapping[str, pulumi.ProviderResource],
               opts: pulumi.ResourceOptions) -> Mapping[str, AzureStore]:
        return AzureRegistries(name, plan, regions, providers, opts).stores  # type: ignore[arg-type]

    def identity(self, name: str, cluster: AzureCluster, store: AzureStore, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions) -> None:
        AzureModelIdentity(name, cluster, store, after, opts)


__all__ = ["AzureKit"]
