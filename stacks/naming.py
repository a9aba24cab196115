"""Every cloud-side name the program, the validator and the tools must agree on, in one place:
clusters, node pools, service accounts, registries, key vaults, weights buckets and their keys.

Names are identities (renaming one is a replacement), so a name that does not fit a cloud's rule
is either rejected by validation (AKS pool names) or shortened by one stable rule with a hash of
the full name (GCP service accounts), never cut at a length where two names could meet.
"""

from __future__ import annotations

import hashlib
import re

from stacks.schema import RegionSpec, StackSpec

MODELS_PREFIX = "models"
# The namespace every model server runs in; its metrics carry it, so the autoscaling queries do.
MODELS_NAMESPACE = "rtip-models"


def cluster_name(spec: StackSpec, region: str) -> str:
    return f"rtip-{spec.environment}-{region}"


# AKS names a Linux agent pool with 1-12 lowercase letters and digits, starting with a letter
# (learn.microsoft.com/azure/aks/use-system-pools, "Limitations"). A pool's agent pool name is its
# name without hyphens; one that does not fit is rejected by stacks.checks, never shortened.
AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
AKS_POOL_NAME_MAX = 12
# The cluster's own System-mode pool; a GPU pool deriving the same name would collide with it.
AKS_SYSTEM_POOL = "system"
# GCP service account IDs: 6-30 characters, a lowercase letter first, then letters, digits, '-'.
GCP_ACCOUNT_ID_MAX = 30


def aks_pool_name(pool_name: str) -> str:
    """The AKS agent pool name of a stack pool: its name without hyphens (`h100-mig` -> `h100mig`)."""
    return re.sub(r"[^a-z0-9]", "", pool_name.lower())


def fit(wanted: str, limit: int) -> str:
    """`wanted` when it fits `limit` characters; else its head and a hash of the whole, so two
    long names that share a head never become one name."""
    if len(wanted) <= limit:
        return wanted
    suffix = hashlib.sha256(wanted.encode()).hexdigest()[:6]
    return f"{wanted[:limit - len(suffix) - 1].rstrip('-')}-{suffix}"


def gcp_account_id(cluster: str, purpose: str) -> str:
    """A service account ID for one purpose of one cluster (`<cluster>-<purpose>`)."""
    return fit(f"{cluster}-{purpose}", GCP_ACCOUNT_ID_MAX)


def registry_name(spec: StackSpec) -> str:
    """ACR names: 5-50 letters and digits, globally unique; the login server is `<name>.azurecr.io`."""
    raw = f"{spec.registries.name_prefix}{spec.environment}images"
    return "".join(c for c in raw.lower() if c.isalnum())[:50]


def vault_name(spec: StackSpec, region: str, purpose: str) -> str:
    """Key Vault names: 3-24 letters, digits and single hyphens, globally unique."""
    return fit(f"{spec.registries.name_prefix}-{spec.environment}-{region}-{purpose}", 24)


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
    "AKS_POOL_NAME",
    "AKS_POOL_NAME_MAX",
    "AKS_SYSTEM_POOL",
    "GCP_ACCOUNT_ID_MAX",
    "MODELS_NAMESPACE",
    "MODELS_PREFIX",
    "WEIGHTS_CONTAINER",
    "aks_pool_name",
    "cluster_name",
    "fit",
    "gcp_account_id",
    "model_prefix",
    "registry_name",
    "source_uri",
    "storage_account",
    "vault_name",
    "weights_bucket",
    "weights_regions",
    "weights_root",
]
