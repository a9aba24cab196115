"""The Gcp side of the cloud seam (components/kit.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi

from components.gcp.cluster import GcpCluster, gcp_provider
from components.gcp.identity import GcpModelIdentity
from components.gcp.registries import GcpRegistries, GcpStore
from components.kit import CloudKit
from serving.hardware import Cloud
from stacks.plan import Plan, RegionPlan
from stacks.schema import GcpRegion


class GcpKit(CloudKit[GcpCluster, GcpStore]):
    cloud = Cloud.GCP

    def provider(self, name: str, region: RegionPlan, labels: dict[str, str],
                 opts: pulumi.ResourceOptions) -> pulumi.ProviderResource:
        assert isinstance(region.region, GcpRegion)
        return gcp_provider(name, region.region, labels, opts)

    def cluster(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                opts: pulumi.ResourceOptions) -> GcpCluster:
        return GcpCluster(name, region, plan, provider, opts)

    def stores(self, name: str, plan: Plan, regions: Sequence[RegionPlan],
               providers: Mapping[str, pulumi.ProviderResource],
               opts: pulumi.ResourceOptions) -> Mapping[str, GcpStore]:
        return GcpRegistries(name, plan, regions, providers, opts).stores  # type: ignore[arg-type]

    def identity(self, name: str, cluster: GcpCluster, store: GcpStore, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions) -> None:
        GcpModelIdentity(name, cluster, store, after, opts)


__all__ = ["GcpKit"]
