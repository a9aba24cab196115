"""Platform: every region's cluster on its own cloud, and what runs on each cluster."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.aws import AwsCluster
from components.contract import ClusterFacts
from components.namespaces import ClusterNamespaces
from stacks.schema import AwsRegion, StackSpec


def cluster_name(spec: StackSpec, region: str) -> str:
    return f"rtip-{spec.environment}-{region}"


class Platform(pulumi.ComponentResource):
    clusters: list[ClusterFacts]
    unbuilt: list[str]

    def __init__(self, name: str, spec: StackSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        # Regions on clouds whose cluster component has not landed yet are planned but not built;
        # the plan lists them and the engine logs a warning for each, never a silent skip.
        self.unbuilt = [f"{r.cloud}/{r.region}" for r in spec.regions if not isinstance(r, AwsRegion)]
        super().__init__("rtip:platform:Platform", name, {
            "environment": spec.environment,
            "regions": [f"{r.cloud}/{r.region}" for r in spec.regions],
            "unbuiltRegions": self.unbuilt,
        }, opts)
        self.clusters = []
        for region in spec.regions:
            cname = cluster_name(spec, region.region)
            if not isinstance(region, AwsRegion):
                pulumi.log.warn(
                    f"region {region.cloud}/{region.region} is validated and planned but not built: "
                    f"the {region.cloud} cluster component is not implemented yet", self,
                )
                continue
            provider = aws.Provider(
                f"aws-{region.region}",
                aws.ProviderArgs(
                    region=region.region,
                    default_tags=aws.ProviderDefaultTagsArgs(tags={
                        "rtip:environment": spec.environment, "rtip:cluster": cname,
                        "managed-by": "pulumi-rtip",
                    }),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            cluster = AwsCluster(cname, region, spec.kubernetes_version, spec.is_prod, provider,
                                 opts=pulumi.ResourceOptions(parent=self))
            ClusterNamespaces(f"{cname}-ns", cluster.facts, opts=pulumi.ResourceOptions(parent=cluster))
            self.clusters.append(cluster.facts)
        self.register_outputs({})


__all__ = ["Platform", "cluster_name"]
