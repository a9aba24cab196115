"""Every cloud-side name the program, the validator and the tools must agree on, in one place:
clusters, node pools, service accounts, registries, key vaults, weights buckets and their keys.

Names are identities (renaming one is a replacement), so a name that does not fit a cloud's rule
is either rejected by validation (AKS pool names) or shortened by one stable rule with a hash of
the full name (GCP service accounts), never cut at a length where two names could meet.

Globally unique names (S3 and GCS buckets, the ACR, storage accounts) carry the owner they are
created in, so two organisations deploying the same stack with the same `name_prefix` never ask for
one name: S3 buckets end in the deployer's AWS account (`deployer.aws.role_arn`), the GCS bucket in
a hash of its project, Azure names in a hash of the name and `deployer.azure.subscription_id`.
A stack without a deployer block (allowed only where the API is public) has no account or
subscription to name: its S3 and Azure names are `name_prefix`-only, so that prefix must then be
the organisation's own. Names that can never be freed (Key Vaults kept for the soft-delete
retention, GCP key rings that cannot be deleted) are not derived here at all: the engine names them
with a random suffix (components/azure/keys.py, components/gcp/keys.py), so destroying and
re-creating a stack asks for new ones.
"""

from __future__ import annotations

import hashlib
import re

from stacks.schema import GcpRegion, RegionSpec, StackSpec

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


# Cloud name limits: S3 general purpose bucket naming rules (3-63 lowercase letters, digits, '.',
# '-'); Cloud Storage bucket naming (3-63 without dots; never starting "goog" nor containing
# "google"); Azure resource name rules (learn.microsoft.com/azure/azure-resource-manager/management/
# resource-name-rules): registries 5-50 alphanumerics, storage accounts 3-24 lowercase letters and
# digits, key vaults 3-24 letters, digits and single hyphens, starting with a letter.
S3_BUCKET_MAX = 63
GCS_BUCKET_MAX = 63
ACR_NAME_MAX = 50
STORAGE_ACCOUNT_MAX = 24
KEY_VAULT_MAX = 24
HASH_HEX = 6
# azure-native names a resource given no name `<logical name><8 random hex>`, no separator
# (pulumi-azure-native provider/pkg/provider/autonaming_test.go: "test" -> "test614742c2").
AZURE_AUTONAME_HEX = 8


def short_hash(*parts: str) -> str:
    """Six hex digits of SHA-256 over the parts joined by '/'."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:HASH_HEX]


def fit(wanted: str, limit: int) -> str:
    """`wanted` when it fits `limit` characters; else its head and a hash of the whole, so two
    long names that share a head never become one name."""
    if len(wanted) <= limit:
        return wanted
    return f"{wanted[:limit - HASH_HEX - 1].rstrip('-')}-{short_hash(wanted)}"


def _alnum(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def fit_scoped(wanted: str, limit: int, scope: str | None) -> str:
    """A letters-and-digits name unique to `scope` (an Azure subscription): the head of `wanted`
    and a hash of the whole name and the scope, within `limit`. Without a scope, `fit` without
    the separator."""
    if scope is None:
        return wanted if len(wanted) <= limit else f"{wanted[:limit - HASH_HEX]}{short_hash(wanted)}"
    return f"{wanted[:limit - HASH_HEX]}{short_hash(wanted, scope)}"


def aws_account(spec: StackSpec) -> str | None:
    """The 12-digit account of the deployer's role: where the stack deploys on AWS."""
    deployer = spec.deployer
    return deployer.aws.role_arn.split(":")[4] if deployer and deployer.aws else None


def azure_subscription(spec: StackSpec) -> str | None:
    deployer = spec.deployer
    return deployer.azure.subscription_id if deployer and deployer.azure else None


def gcp_account_id(cluster: str, purpose: str) -> str:
    """A service account ID for one purpose of one cluster (`<cluster>-<purpose>`)."""
    return fit(f"{cluster}-{purpose}", GCP_ACCOUNT_ID_MAX)


def registry_name(spec: StackSpec) -> str:
    """ACR names: 5-50 letters and digits, globally unique; the login server is `<name>.azurecr.io`."""
    return fit_scoped(_alnum(f"{spec.registries.name_prefix}{spec.environment}images"), ACR_NAME_MAX,
                      azure_subscription(spec))


def vault_stem(spec: StackSpec, region: str, purpose: str) -> str:
    """The logical name of a Key Vault, which azure-native completes with 8 random hex digits.

    A purge-protected vault keeps its name for the soft-delete retention after it is deleted, so a
    fixed name would refuse a re-created stack ("already exists"); a random one cannot. The stem
    leaves room for the suffix within the 24 characters: at most 15, and a '-' before the suffix.
    """
    limit = KEY_VAULT_MAX - AZURE_AUTONAME_HEX - 1
    return fit(f"{spec.registries.name_prefix}-{spec.environment}-{region}-{purpose}", limit) + "-"


def weights_bucket(spec: StackSpec, region: RegionSpec) -> str:
    """The weights store of one region (S3 bucket, GCS bucket, or storage account container).

    S3: `<prefix>-<env>-weights-<region>-<account>`; GCS: `<prefix>-<env>-weights-<region>-<hash of
    the project>` (Cloud Storage asks that bucket names carry no project IDs, which anyone can
    probe for). GCP keeps one bucket for all its regions of a stack (regional, dual- or multi-region
    by how many regions there are), named after the first; every GCP region reads its local copy."""
    if region.cloud == "gcp":
        first = weights_regions(spec, "gcp")[0]
        assert isinstance(first, GcpRegion)
        head = f"{spec.registries.name_prefix}-{spec.environment}-weights-{first.region}"
        return f"{fit(head, GCS_BUCKET_MAX - HASH_HEX - 1)}-{short_hash(first.project)}"
    head = f"{spec.registries.name_prefix}-{spec.environment}-weights-{region.region}"
    account = aws_account(spec)
    if account is None:
        return fit(head, S3_BUCKET_MAX)
    return f"{fit(head, S3_BUCKET_MAX - len(account) - 1)}-{account}"


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
    return fit_scoped(_alnum(f"{spec.registries.name_prefix}{spec.environment}w{region.region}"),
                      STORAGE_ACCOUNT_MAX, azure_subscription(spec))


__all__ = [
    "ACR_NAME_MAX",
    "AKS_POOL_NAME",
    "AKS_POOL_NAME_MAX",
    "AKS_SYSTEM_POOL",
    "AZURE_AUTONAME_HEX",
    "GCP_ACCOUNT_ID_MAX",
    "GCS_BUCKET_MAX",
    "HASH_HEX",
    "KEY_VAULT_MAX",
    "MODELS_NAMESPACE",
    "MODELS_PREFIX",
    "S3_BUCKET_MAX",
    "STORAGE_ACCOUNT_MAX",
    "WEIGHTS_CONTAINER",
    "aks_pool_name",
    "aws_account",
    "azure_subscription",
    "cluster_name",
    "fit",
    "fit_scoped",
    "gcp_account_id",
    "model_prefix",
    "registry_name",
    "short_hash",
    "source_uri",
    "storage_account",
    "vault_stem",
    "weights_bucket",
    "weights_regions",
    "weights_root",
]
