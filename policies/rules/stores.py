"""Registries and weights stores: immutable and scanned, encrypted, never public, TLS only,
replicated to every serving region."""

from __future__ import annotations

import json
from collections.abc import Iterator

from policies.rules.base import Config, Props, StackResource, get, of_types

ECR = "aws:ecr/repository:Repository"
AR = "gcp:artifactregistry/repository:Repository"
ACR = "azure-native:containerregistry:Registry"
S3 = "aws:s3/bucket:Bucket"
GCS = "gcp:storage/bucket:Bucket"
BLOB = "azure-native:storage:StorageAccount"


def _public_network(props: Props) -> bool:
    """Whether an Azure registry or storage account answers on public networks at all.

    `publicNetworkAccess: Disabled` shuts the public endpoint (ACR and Storage both default to
    Enabled); otherwise only a firewall whose `networkRuleSet.defaultAction` is Deny keeps the
    internet out (both default to Allow). Private endpoints are not affected by either."""
    if props.get("publicNetworkAccess", "Enabled") == "Disabled":
        return False
    return get(props, "networkRuleSet", "defaultAction", default="Allow") != "Deny"


@of_types({ECR, AR, ACR})
def registries_hardened(type_: str, props: Props, config: Config) -> Iterator[str]:
    if type_ == ECR:
        if props.get("imageTagMutability") != "IMMUTABLE":
            yield "image tags can be moved (imageTagMutability is not IMMUTABLE)"
        if not get(props, "imageScanningConfiguration", "scanOnPush", default=False):
            yield "images are not scanned on push"
        kms = [e.get("encryptionType") for e in get(props, "encryptionConfigurations", default=[])]
        if config.get("requireStoreKeys") and "KMS" not in kms:
            yield "the repository is not encrypted with a customer-managed key"
    elif type_ == AR:
        if props.get("mode", "STANDARD_REPOSITORY") == "STANDARD_REPOSITORY" and \
                not get(props, "dockerConfig", "immutableTags", default=False):
            yield "image tags can be moved (dockerConfig.immutableTags is off)"
        if config.get("requireStoreKeys") and not props.get("kmsKeyName"):
            yield "the repository is not encrypted with a customer-managed key"
    else:
        if props.get("adminUserEnabled", False):
            yield "the registry's admin user (a shared password) is enabled"
        if props.get("anonymousPullEnabled", False):
            yield "anyone can pull from the registry anonymously"
        if _public_network(props):
            yield ("the registry is reachable from the internet (publicNetworkAccess is not Disabled "
                   "and networkRuleSet.defaultAction is not Deny); reach it through private endpoints")
        if config.get("requireStoreKeys") and get(props, "encryption", "status") != "enabled":
            yield "the registry is not encrypted with a customer-managed key"


@of_types({GCS, BLOB})
def object_stores_hardened(type_: str, props: Props, config: Config) -> Iterator[str]:
    if type_ == GCS:
        if props.get("publicAccessPrevention") != "enforced":
            yield "public access to the bucket is not prevented"
        if not props.get("uniformBucketLevelAccess"):
            yield "object ACLs are on (uniformBucketLevelAccess is off)"
        if not get(props, "versioning", "enabled", default=False):
            yield "the bucket is not versioned"
        if config.get("requireStoreKeys") and not get(props, "encryption", "defaultKmsKeyName"):
            yield "the bucket is not encrypted with a customer-managed key"
    else:
        if not props.get("enableHttpsTrafficOnly", True):
            yield "the storage account accepts plain HTTP"
        if props.get("minimumTlsVersion") != "TLS1_2":
            yield "the storage account accepts TLS older than 1.2"
        if props.get("allowBlobPublicAccess", True):
            yield "blobs may be made public"
        if props.get("allowSharedKeyAccess", True):
            yield "shared keys bypass Entra ID authorization"
        if _public_network(props):
            yield ("the account is reachable from the internet (publicNetworkAccess is not Disabled "
                   "and networkRuleSet.defaultAction is not Deny); reach it through private endpoints")
        if config.get("requireStoreKeys") and get(props, "encryption", "keySource") != "Microsoft.Keyvault":
            yield "the account is not encrypted with a customer-managed key"


def _denies_plain_http(policy: str, bucket_arn: str) -> bool:
    try:
        doc = json.loads(policy)
    except (TypeError, ValueError):
        return False
    for s in doc.get("Statement", []):
        cond = s.get("Condition", {}).get("Bool", {})
        resources = s.get("Resource", [])
        resources = [resources] if isinstance(resources, str) else resources
        if s.get("Effect") == "Deny" and str(cond.get("aws:SecureTransport")).lower() == "false" \
                and bucket_arn in resources and f"{bucket_arn}/*" in resources:
            return True
    return False


def s3_buckets_hardened(resources: list[StackResource], config: Config) -> Iterator[tuple[str, str]]:
    """Every S3 bucket: versioned, public access blocked on all four switches, encrypted, and a
    bucket policy that refuses requests without TLS."""
    by_bucket: dict[str, dict[str, StackResource]] = {}
    for r in resources:
        bucket = get(r.props, "bucket")
        if r.type.startswith("aws:s3/") and r.type != S3 and isinstance(bucket, str):
            by_bucket.setdefault(bucket, {})[r.type.split(":")[-1]] = r
    for b in (r for r in resources if r.type == S3):
        name, arn = get(b.props, "bucket", default=""), get(b.props, "arn", default="")
        parts = by_bucket.get(name, {}) | by_bucket.get(get(b.props, "id", default=""), {})
        versioning = parts.get("BucketVersioning")
        if versioning is None or get(versioning.props, "versioningConfiguration", "status") != "Enabled":
            yield b.urn, "the bucket is not versioned"
        block = parts.get("BucketPublicAccessBlock")
        flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        if block is None or not all(block.props.get(f) for f in flags):
            yield b.urn, "public access is not blocked on all four switches"
        if "BucketServerSideEncryptionConfiguration" not in parts:
            yield b.urn, "the bucket has no default encryption configuration"
        policy = parts.get("BucketPolicy")
        if policy is None or not _denies_plain_http(policy.props.get("policy", ""), arn):
            yield b.urn, "no bucket policy refuses requests made without TLS (aws:SecureTransport)"


__all__ = ["object_stores_hardened", "registries_hardened", "s3_buckets_hardened"]
