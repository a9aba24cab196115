"""The Aws side of the cloud seam (components/kit.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi

from components.aws.cluster import AwsCluster, aws_provider
from components.aws.identity import AwsModelIdentity
from components.aws.registries import AwsRegistries, AwsStore
from components.kit import CloudKit
from serving.hardware import Cloud
from stacks.plan import Plan, RegionPlan
from stacks.schema import AwsRegion


class AwsKit(CloudKit[AwsCluster, AwsStore]):
    cloud = Cloud.AWS

    def provider(self, name: str, region: RegionPlan, labels: dict[str, str],
                 opts: pulumi.ResourceOptions) -> pulumi.ProviderResource:
        assert isinstance(region.region, AwsRegion)
        return aws_provider(name, region.region, labels, opts)

    def cluster(self, name: str, region: RegionPlan, plan: Plan, provider: pulumi.ProviderResource,
                opts: pulumi.ResourceOptions) -> AwsCluster:
        return AwsCluster(name, region, plan, provider, opts)

    def stores(self, name: str, plan: Plan, regions: Sequence[RegionPlan],
               providers: Mapping[str, pulumi.ProviderResource],
               opts: pulumi.ResourceOptions) -> Mapping[str, AwsStore]:
        return AwsRegistries(name, plan, regions, providers, opts).stores  # type: ignore[arg-type]

    def identity(self, name: str, cluster: AwsCluster, store: AwsStore, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions) -> None:
        AwsModelIdentity(name, cluster, store, after, opts)


__all__ = ["AwsKit"]
