"""GCP registries: Artifact Registry for images, one GCS bucket for weights.

Images: a Docker repository in each GCP region of the stack, or a single multi-region
repository (`us`, `europe`, `asia`) when all of them share one: Artifact Registry has no
replication between repositories (FACTS.md section 4), so locality comes from placement.
Weights: one bucket for every GCP region: regional with one region, dual-region with two in one
continent (turbo replication in prod), multi-region otherwise. Objects of a dual- or multi-region
bucket are stored in each of its regions, so every cluster reads a local copy.
Prod encrypts both with customer keys; the project's service agents get use of exactly that key.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.contract import RegionStore
from serving.hardware import Cloud
from stacks.naming import MODELS_PREFIX, weights_bucket, weights_root
from stacks.schema import GcpRegion, StackSpec

# Artifact Registry and GCS multi-regions, by the region name's prefix.
MULTI_REGION = {"us": "us", "northamerica": "us", "europe": "europe", "asia": "asia"}
KEY_ROTATION = "7776000s"  # 90 days
UNTAGGED_TTL = "604800s"  # 7 days


def multi_region(region: str) -> str | None:
    return MULTI_REGION.get(region.split("-")[0])


def shared_location(regions: list[GcpRegion]) -> str | None:
    """The multi-region holding all the regions, when there is one and more than one region."""
    places = {multi_region(r.region) for r in regions}
    return places.pop() if len(regions) > 1 and len(places) == 1 and None not in places else None


class GcpRegistries(pulumi.ComponentResource):
    stores: dict[str, RegionStore]

    def __init__(self, name: str, spec: StackSpec, regions: list[GcpRegion],
                 providers: dict[str, pulumi.ProviderResource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rtip:gcp:Registries", name, {
            "regions": [r.region for r in regions], "source": regions[0].region}, opts)
        first = regions[0]
        project, number = first.project, first.project_number
        popts = pulumi.ResourceOptions(parent=self, provider=providers[first.region])
        prefix = spec.registries.name_prefix
        shared = shared_location(regions)
        bucket_location = (shared or first.region).upper()
        keys: dict[str, gcp.kms.CryptoKey] = {}

        def key_for(location: str, purpose: str, agents: list[str]) -> gcp.kms.CryptoKey | None:
            if not spec.is_prod:
                return None
            if location in keys:
                return keys[location]
            ring = gcp.kms.KeyRing(f"{name}-{location}", gcp.kms.KeyRingArgs(
                name=f"{prefix}-{spec.environment}-{location}", location=location, project=project),
                opts=popts)
            key = gcp.kms.CryptoKey(f"{name}-{location}", gcp.kms.CryptoKeyArgs(
                name=purpose, key_ring=ring.id, rotation_period=KEY_ROTATION), opts=popts)
            for agent in agents:
                gcp.kms.CryptoKeyIAMMember(f"{name}-{location}-{agent.split('@')[1].split('.')[0]}",
                    gcp.kms.CryptoKeyIAMMemberArgs(
                        crypto_key_id=key.id, role="roles/cloudkms.cryptoKeyEncrypterDecrypter",
                        member=f"serviceAccount:{agent}"), opts=popts)
            keys[location] = key
            return key

        ar_agent = f"service-{number}@gcp-sa-artifactregistry.iam.gserviceaccount.com"
        gcs_agent = f"service-{number}@gs-project-accounts.iam.gserviceaccount.com"
        repo_locations = [shared] if shared else [r.region for r in regions]
        repos: dict[str, gcp.artifactregistry.Repository] = {}
        for location in repo_locations:
            key = key_for(location, "registries", [ar_agent, gcs_agent])
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
        bucket_key = key_for((shared or first.region), "registries", [ar_agent, gcs_agent])
        dual = len(regions) == 2 and shared is not None
        bucket = gcp.storage.Bucket(f"{name}-weights", gcp.storage.BucketArgs(
            name=weights_bucket(spec, first), project=project, location=bucket_location,
            custom_placement_config=gcp.storage.BucketCustomPlacementConfigArgs(
                data_locations=[r.region.upper() for r in regions]) if dual else None,
            rpo="ASYNC_TURBO" if dual and spec.is_prod else None,
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
            repo = repos[location]
            self.stores[region.region] = RegionStore(
                cloud=Cloud.GCP, region=region.region,
                image_registry=repo.repository_id.apply(
                    lambda rid, loc=location: f"{loc}-docker.pkg.dev/{project}/{rid}"),
                weights_uri=weights_root(spec, region),
                weights_bucket=bucket.name, weights_scope=bucket.name,
                weights_key=bucket_key.id if bucket_key else None,
            )
        self.register_outputs({"bucket": bucket.name})


__all__ = ["GcpRegistries", "multi_region", "shared_location"]
