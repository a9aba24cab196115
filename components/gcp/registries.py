"""GCP registries: Artifact Registry for images, one GCS bucket for weights.

Pulled images: an Artifact Registry remote repository per public registry the toolkit's images
come from (Docker Hub today), in the same location as the standard repository, so a cluster pulls
`<loc>-docker.pkg.dev/<project>/<prefix>-docker-hub/<upstream path>` (serving/images.py).

Images: a Docker repository in each GCP region of the stack, or a single multi-region
repository (`us`, `europe`, `asia`) when all of them share one: Artifact Registry has no
replication between repositories (FACTS.md section 4), so locality comes from placement.
Weights: one bucket for every GCP region: regional with one region, dual-region with two in one
continent (turbo replication in prod), multi-region otherwise. Objects of a dual- or multi-region
bucket are stored in each of its regions, so every cluster reads a local copy.
Where the posture says so both are encrypted with customer keys; the project's service agents get
use of exactly that key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.contract import RegionStore
from components.gcp.keys import customer_key, service_agent
from serving.charts import IMAGES, Upstream
from serving.hardware import Cloud
from serving.images import upstreams_of
from stacks.naming import MODELS_PREFIX, weights_bucket, weights_root
from stacks.plan import Plan, RegionPlan
from stacks.schema import GcpRegion

# Artifact Registry and GCS multi-regions, by the region name's prefix.
MULTI_REGION = {"us": "us", "northamerica": "us", "europe": "europe", "asia": "asia"}
UNTAGGED_TTL = "604800s"  # 7 days


def multi_region(region: str) -> str | None:
    return MULTI_REGION.get(region.split("-")[0])


def shared_location(regions: list[GcpRegion]) -> str | None:
    """The multi-region holding all the regions, when there is one and more than one region."""
    places = {multi_region(r.region) for r in regions}
    return places.pop() if len(regions) > 1 and len(places) == 1 and None not in places else None


@dataclass(frozen=True)
class GcpStore(RegionStore):
    bucket: pulumi.Output[str]  # the stack's one GCS weights bucket (every GCP region reads it)


class GcpRegistries(pulumi.ComponentResource):
    stores: dict[str, GcpStore]

    def __init__(self, name: str, plan: Plan, region_plans: Sequence[RegionPlan],
                 providers: Mapping[str, pulumi.ProviderResource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        regions = [r.region for r in region_plans if isinstance(r.region, GcpRegion)]
        spec, env = plan.spec, plan.posture
        super().__init__("rtip:gcp:Registries", name, {
            "regions": [r.region for r in regions], "source": regions[0].region}, opts)
        first = regions[0]
        project, number = first.project, first.project_number
        popts = pulumi.ResourceOptions(parent=self, provider=providers[first.region])
        prefix = spec.registries.name_prefix
        shared = shared_location(regions)
        bucket_location = (shared or first.region).upper()
        keys: dict[str, gcp.kms.CryptoKey] = {}

        def key_for(location: str) -> gcp.kms.CryptoKey | None:
            if not env.stores_customer_key:
                return None
            if location not in keys:
                keys[location], _ = customer_key(
                    f"{name}-{location}", project, location, "registries",
                    [service_agent(number, "artifactregistry"), service_agent(number, "storage")], popts)
            return keys[location]

        repo_locations = [shared] if shared else [r.region for r in regions]
        repos: dict[str, gcp.artifactregistry.Repository] = {}
        remotes: dict[str, list[gcp.artifactregistry.Repository]] = {}
        for location in repo_locations:
            key = key_for(location)
            repos[location] = gcp.artifactregistry.Repository(f"{name}-images-{location}",
                gcp.artifactregistry.RepositoryArgs(
                    repository_id=f"{prefix}-images", location=location, project=project,
                    format="DOCKER",
                    # Runtime images are pinned by tag: a tag must never move.
                    docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
                    cleanup_policies=[gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                        id="drop-untagged", action="DELETE",
                        condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                            tag_state="UNTAGGED", older_than=UNTAGGED_TTL))],
                    kms_key_name=key.id if key else None,
                ), opts=popts)
            remotes[location] = [remote_repository(f"{name}-{location}", project, location, prefix, upstream,
                                              key, popts)
                                 for upstream in upstreams_of(tuple(IMAGES)).values()]
        bucket_key = key_for(shared or first.region)
        dual = len(regions) == 2 and shared is not None
        bucket = gcp.storage.Bucket(f"{name}-weights", gcp.storage.BucketArgs(
            name=weights_bucket(spec, first), project=project, location=bucket_location,
            custom_placement_config=gcp.storage.BucketCustomPlacementConfigArgs(
                data_locations=[r.region.upper() for r in regions]) if dual else None,
            rpo="ASYNC_TURBO" if dual and env.replication_sla else None,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    num_newer_versions=spec.registries.weights_versions_kept, with_state="ARCHIVED",
                    matches_prefixes=[f"{MODELS_PREFIX}/"]))],
            encryption=gcp.storage.BucketEncryptionArgs(default_kms_key_name=bucket_key.id)
            if bucket_key else None,
        ), opts=popts)
        self.repositories = repos
        self.stores = {}
        for region in regions:
            location = shared or region.region
            # The root the remote repositories `<prefix>-<namespace>` hang off (serving/images.py
            # joins it and the namespace with `-`); it resolves once they exist.
            root = f"{location}-docker.pkg.dev/{project}/{prefix}"
            self.stores[region.region] = GcpStore(
                cloud=Cloud.GCP, region=region.region,
                image_registry=pulumi.Output.all(*(r.id for r in remotes[location])).apply(
                    lambda _, root=root: root),
                weights_uri=weights_root(spec, region), bucket=bucket.name,
            )
        self.register_outputs({"bucket": bucket.name})


def remote_repository(name: str, project: str, location: str, prefix: str, upstream: Upstream,
                      key: gcp.kms.CryptoKey | None,
                      opts: pulumi.ResourceOptions) -> gcp.artifactregistry.Repository:
    """An Artifact Registry remote repository caching one public registry in one location.

    Docker Hub is the `DOCKER_HUB` preset, any other registry its URI (`commonRepository`);
    an image is pulled as `<loc>-docker.pkg.dev/<project>/<repo>/<upstream path>` and fetched
    upstream on the first pull. Without upstream credentials the repository pulls
    anonymously, within Docker Hub's anonymous rate limit per the project's egress address.
    """
    docker = gcp.artifactregistry.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
        public_repository="DOCKER_HUB") if upstream.gcp_uri is None else None
    common = gcp.artifactregistry.RepositoryRemoteRepositoryConfigCommonRepositoryArgs(
        uri=upstream.gcp_uri) if upstream.gcp_uri is not None else None
    args = gcp.artifactregistry.RepositoryArgs(
        # One repository per upstream and location: `<prefix>-<namespace>`.
        repository_id=f"{prefix}-{upstream.namespace}", location=location, project=project,
        format="DOCKER", mode="REMOTE_REPOSITORY",
        description=f"cache of {upstream.host}",
        remote_repository_config=gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
            description=upstream.host, docker_repository=docker, common_repository=common),
        kms_key_name=key.id if key else None)
    return gcp.artifactregistry.Repository(f"{name}-{upstream.namespace}", args, opts=opts)


__all__ = ["GcpRegistries", "GcpStore", "multi_region", "remote_repository", "shared_location"]
