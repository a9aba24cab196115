"""Platform: every region's cluster on its own cloud, and what runs on each cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components.addons import ClusterAddons
from components.aws import AwsCluster, aws_provider
from components.azure import AzureCluster, azure_provider
from components.contract import ClusterFacts, RegionStore
from components.gcp import GcpCluster, gcp_provider
from components.models import ModelDeployment
from components.namespaces import MODELS_NAMESPACE, ClusterNamespaces
from components.stores import STORES
from serving.hardware import Cloud
from stacks.layout import resolve
from stacks.naming import cluster_name
from stacks.plan import plan_models
from stacks.schema import StackSpec


@dataclass(frozen=True)
class CloudBuilder:
    """How one cloud builds a region: its provider, then its cluster component.

    provider(name, region_spec, labels, opts) -> ProviderResource
    cluster(name, region_spec, kubernetes_version, prod, provider, opts) -> component with .facts
    """

    provider: Callable[..., pulumi.ProviderResource]
    cluster: Callable[..., Any]


# One row per cloud whose cluster component exists; a region of any other cloud is validated and
# planned, listed as unbuilt, and warned about, never skipped silently.
CLUSTERS: dict[Cloud, CloudBuilder] = {
    Cloud.AWS: CloudBuilder(aws_provider, AwsCluster),
    Cloud.GCP: CloudBuilder(gcp_provider, GcpCluster),
    Cloud.AZURE: CloudBuilder(azure_provider, AzureCluster),
}


def stack_labels(spec: StackSpec, cluster: str) -> dict[str, str]:
    """Tags/labels every cloud resource carries (keys valid on all three clouds)."""
    return {"rtip-environment": spec.environment, "rtip-cluster": cluster,
            "managed-by": "pulumi-rtip"}


class Platform(pulumi.ComponentResource):
    clusters: list[ClusterFacts]
    unbuilt: list[str]
    stores: dict[str, RegionStore]

    def __init__(self, name: str, spec: StackSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        # Models are placed by the region plans of the stack as written; clusters are built from
        # the stack as planned: every pool with a concrete sharing and a node floor from the
        # models' minimum replicas (stacks.layout). Both come from the same plan_region answers.
        plans = plan_models(spec)
        spec = resolve(spec)
        built = [r for r in spec.regions if Cloud(r.cloud) in CLUSTERS]
        self.unbuilt = [f"{r.cloud}/{r.region}" for r in spec.regions if r not in built]
        super().__init__("rtip:platform:Platform", name, {
            "environment": spec.environment,
            "regions": [f"{r.cloud}/{r.region}" for r in spec.regions],
            "unbuiltRegions": self.unbuilt,
        }, opts)
        for region in spec.regions:
            if region not in built:
                pulumi.log.warn(
                    f"region {region.cloud}/{region.region} is validated and planned but not built: "
                    f"the {region.cloud} cluster component is not implemented yet", self,
                )
        providers = {
            r.region: CLUSTERS[Cloud(r.cloud)].provider(
                f"{r.cloud}-{r.region}", r, stack_labels(spec, cluster_name(spec, r.region)),
                pulumi.ResourceOptions(parent=self))
            for r in built
        }
        # Registries first: every cluster pulls images and weights from its own region's copy.
        stores: dict[str, RegionStore] = {}
        for cloud in dict.fromkeys(Cloud(r.cloud) for r in built):
            regions = [r for r in built if r.cloud == cloud]
            builder = STORES.get(cloud)
            if builder is None:
                pulumi.log.warn(f"{cloud} registries are not built yet: regions "
                                f"{', '.join(r.region for r in regions)} have no weights store", self)
                continue
            registries = builder.registries(f"{name}-{cloud}", spec, regions,
                                            {r.region: providers[r.region] for r in regions},
                                            opts=pulumi.ResourceOptions(parent=self))
            stores.update(registries.stores)
        self.clusters = []
        for region in built:
            cname = cluster_name(spec, region.region)
            provider = providers[region.region]
            cluster = CLUSTERS[Cloud(region.cloud)].cluster(
                cname, region, spec.kubernetes_version, spec.is_prod, provider,
                opts=pulumi.ResourceOptions(parent=self))
            namespaces = ClusterNamespaces(f"{cname}-ns", cluster.facts,
                                           opts=pulumi.ResourceOptions(parent=cluster))
            addons = ClusterAddons(f"{cname}-addons", cluster.facts, spec.is_prod,
                                   opts=pulumi.ResourceOptions(parent=cluster))
            if region.region in stores:
                STORES[Cloud(region.cloud)].identity(
                    f"{cname}-models", cluster.facts, stores[region.region], provider,
                    [namespaces.namespaces[MODELS_NAMESPACE]], opts=pulumi.ResourceOptions(parent=cluster))
            for plan in (p for p in plans if p.region == region.region):
                ModelDeployment(f"{cname}-model-{plan.model}", plan, cluster.facts, addons.releases,
                                [namespaces.namespaces[MODELS_NAMESPACE]],
                                opts=pulumi.ResourceOptions(parent=cluster))
            self.clusters.append(cluster.facts)
        self.stores = stores
        self.register_outputs({})


__all__ = ["CLUSTERS", "CloudBuilder", "Platform", "stack_labels"]
