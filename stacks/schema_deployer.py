"""The stack's `deployer` block: where `pulumi up` runs and as whom (see stacks/checks_deployer.py).

Kept apart from stacks/schema.py, which re-exports it; the same rules hold: frozen, no unknown
keys, every field described, patterns with their plain-words reading.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

AWS_ROLE_ARN_PATTERN = r"^arn:aws:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$"
GCP_ACCOUNT_EMAIL_PATTERN = (r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]"
                             r"\.iam\.gserviceaccount\.com$")
UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

DEPLOYER_PATTERN_WORDS: dict[str, str] = {
    AWS_ROLE_ARN_PATTERN: "an IAM role ARN: arn:aws:iam::<12-digit account>:role/<name>",
    GCP_ACCOUNT_EMAIL_PATTERN: "a service account e-mail: <account>@<project>.iam.gserviceaccount.com",
    UUID_PATTERN: "a GUID in lowercase, e.g. 0f5e3c1a-7b2d-4c9e-8a61-3d2f4b5c6e7f",
}
UNIQUE: dict[str, Any] = {"uniqueItems": True}


def _network(value: Any) -> Any:
    from stacks.schema_base import _network_text  # one parser and one message for every network field

    return _network_text(value)


Network = Annotated[IPv4Network, BeforeValidator(_network)]


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AwsDeployer(_Spec):
    """Who runs `pulumi up` on AWS: an IAM role, granted cluster admin on every EKS cluster
    through an access entry. Its account names the stack's globally unique AWS names and is the
    only account the AWS providers accept (allowed_account_ids)."""

    role_arn: Annotated[str, Field(pattern=AWS_ROLE_ARN_PATTERN)] = Field(description=(
        "The IAM role `pulumi up` runs as (arn:aws:iam::<account>:role/<name>); every EKS cluster "
        "gets an access entry for it with AmazonEKSClusterAdminPolicy. Its account is the one the "
        "stack deploys into (the AWS providers refuse any other) and ends the S3 bucket names."))


class GcpDeployer(_Spec):
    """Who runs `pulumi up` on GCP: a service account, granted Kubernetes Engine Admin in each
    cluster's project."""

    service_account: Annotated[str, Field(pattern=GCP_ACCOUNT_EMAIL_PATTERN)] = Field(description=(
        "The service account e-mail `pulumi up` runs as; granted roles/container.admin in every "
        "GKE region's project (the narrowest predefined role that may create CRDs and ClusterRoles)."))


class AzureDeployer(_Spec):
    """Who runs `pulumi up` on Azure, and in which subscription."""

    object_id: Annotated[str, Field(pattern=UUID_PATTERN)] = Field(description=(
        "The Entra ID object ID of the identity `pulumi up` runs as (a service principal or managed "
        "identity); granted 'Azure Kubernetes Service RBAC Cluster Admin' on every AKS cluster."))
    subscription_id: Annotated[str, Field(pattern=UUID_PATTERN)] = Field(description=(
        "The subscription the stack deploys into (the Azure provider is pinned to it); a hash of "
        "it is part of the globally unique Azure names (registry, storage accounts). Key vaults "
        "take a random suffix instead, so a re-created stack never meets a soft-deleted vault."))


class DeployerSpec(_Spec):
    """Where `pulumi up` runs and as whom: every cluster's API must be reachable from there and
    grant that identity what the program does through it."""

    network: Literal["inside", "public"] = Field(default="public", description=(
        "inside: a runner inside each region's network, or connected to it by peering or VPN, "
        "reaching private API endpoints (required where the posture's API is private, prod); "
        "public (the default): a runner on the internet whose egress ranges are `cidrs`."))
    cidrs: list[Network] = Field(default_factory=list, json_schema_extra=UNIQUE, description=(
        "With network: public, the runner's public egress ranges, each once; every region's "
        "api_access_cidrs must admit them."))
    aws: AwsDeployer | None = Field(default=None, description=(
        "The AWS identity; required when the stack has AWS regions."))
    gcp: GcpDeployer | None = Field(default=None, description=(
        "The GCP identity; required when the stack has GCP regions."))
    azure: AzureDeployer | None = Field(default=None, description=(
        "The Azure identity and subscription; required when the stack has Azure regions."))



__all__ = ["DEPLOYER_PATTERN_WORDS", "AwsDeployer", "AzureDeployer", "DeployerSpec", "GcpDeployer"]
