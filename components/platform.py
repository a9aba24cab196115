"""Platform: every region's cluster on its own cloud, and what runs on each cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

from components.aws import AwsCluster, aws_provider
from components.contract import ClusterFacts
from components.namespaces import ClusterNamespaces
from serving.hardware import Cloud
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
}


def cluster_name(spec: StackSpec, region: str) -> str:
    return f"rtip-{spec.environment}-{region}"


def stack_labels(spec: StackSpec, cluster: str) -> dict[str, str]:
    """Tags/labels every cloud resource carries (keys valid on all three clouds)."""
    return {"rtip-environment": spec.environment, "rtip-cluster": cluster,
            "managed-by": "pulumi-rtip"}


class Platform(pulumi.ComponentResource):
    clusters: list[ClusterFacts]
    unbuilt: list[str]

    def __init__(self, name: str, spec: StackSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        self.unbuilt = [f"{r.cloud}/{r.region}" for r in spec.regions if Cloud(r.cloud) not in CLUSTERS]
        super().__init__("rtip:platform:Platform", name, {
            "environment": spec.environment,
            "regions": [f"{r.cloud}/{r.region}" for r in spec.regions],
            "unbuiltRegions": self.unbuilt,
        }, opts)
        self.clusters = []
        for region in spec.regions:
            cname = cluster_name(spec, region.region)
            builder = CLUSTERS.get(Cloud(region.cloud))
            if builder is None:
                pulumi.log.warn(
                    f"region {region.cloud}/{region.region} is validated and planned but not built: "
                    f"the {region.cloud} cluster component is not implemented yet", self,
                )
                continue
            provider = builder.provider(f"{region.cloud}-{region.region}", region,
                                        stack_labels(spec, cname), pulumi.ResourceOptions(parent=self))
            cluster = builder.cluster(cname, region, spec.kubernetes_version, spec.is_prod, provider,
                                      opts=pulumi.ResourceOptions(parent=self))
            ClusterNamespaces(f"{cname}-ns", cluster.facts, opts=pulumi.ResourceOptions(parent=cluster))
            self.clusters.append(cluster.facts)
        self.register_outputs({})


__all__ = ["CLUSTERS", "CloudBuilder", "Platform", "cluster_name", "stack_labels"]
