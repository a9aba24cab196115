"""Names the program and the tools must agree on: clusters, weights buckets, their object keys."""

from __future__ import annotations

from stacks.schema import RegionSpec, StackSpec

MODELS_PREFIX = "models"
# The namespace every model server runs in; its metrics carry it, so the autoscaling queries do.
MODELS_NAMESPACE = "rtip-models"


def cluster_name(spec: StackSpec, region: str) -> str:
    return f"rtip-{spec.environment}-{region}"


def weights_bucket(spec: StackSpec, region: RegionSpec) -> str:
    """The weights store of one region (S3 bucket, GCS bucket, or storage account container).

    GCP keeps one bucket for all its regions of a stack (regional, dual- or multi-region by how
    many regions there are), named after the first; every GCP region reads its local copy."""
    if region.cloud == "gcp":
        region = weights_regions(spec, "gcp")[0]
    return f"{spec.registries.name_prefix}-{spec.environment}-weights-{region.region}"


def weights_regions(spec: StackSpec, cloud: str) -> list[RegionSpec]:
    """The regions of one cloud in stack order; the first is where models are published and
    replication starts."""
    return [r for r in spec.regions if r.cloud == cloud]


def model_prefix(model: str) -> str:
    return f"{MODELS_PREFIX}/{model}"


WEIGHTS_CONTAINER = "weights"  # the Blob container inside an Azure weights storage account


def weights_root(spec: StackSpec, region: RegionSpec) -> str:
    """The root of a region's weights store as model servers address it."""
    if region.cloud == "azure":
        return f"https://{storage_account(spec, region)}.blob.core.windows.net/{WEIGHTS_CONTAINER}"
    scheme = "s3" if region.cloud == "aws" else "gs"
    return f"{scheme}://{weights_bucket(spec, region)}"


def source_uri(spec: StackSpec, region: RegionSpec, model: str) -> str:
    """Where a cluster in `region` reads the model from: its own region's copy."""
    return f"{weights_root(spec, region)}/{model_prefix(model)}"


def storage_account(spec: StackSpec, region: RegionSpec) -> str:
    """Azure storage account names: 3-24 lowercase letters and digits, globally unique."""
    raw = f"{spec.registries.name_prefix}{spec.environment}w{region.region}"
    return "".join(c for c in raw.lower() if c.isalnum())[:24]


__all__ = [
    "MODELS_NAMESPACE",
    "MODELS_PREFIX",
    "WEIGHTS_CONTAINER",
    "cluster_name",
    "model_prefix",
    "source_uri",
    "storage_account",
    "weights_bucket",
    "weights_regions",
    "weights_root",
]
