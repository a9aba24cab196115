"""Supply chain and blast radius: Helm releases pinned to exact versions from allow-listed
repositories, images pinned and pulled from the stack's own registries, providers pinned to
their account, subscription or project."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from policies.rules.base import Config, Props, get, of_types

RELEASE = "kubernetes:helm.sh/v3:Release"
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+$")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# The stack's own registries: ECR, Artifact Registry and ACR hosts.
OWN_REGISTRY = re.compile(r"^(\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com|[a-z0-9-]+-docker\.pkg\.dev"
                          r"|[a-z0-9]+\.azurecr\.io)/")


@of_types({RELEASE})
def helm_pinned(type_: str, props: Props, config: Config) -> Iterator[str]:
    version = str(props.get("version", ""))
    if not EXACT_VERSION.match(version):
        yield f"chart {props.get('chart')} is not pinned to an exact version (got {version or 'none'})"
    repo = get(props, "repositoryOpts", "repo") or str(props.get("chart", "")).rsplit("/", 1)[0]
    allowed = config.get("allowedRepositories", [])
    if allowed and repo not in allowed:
        yield f"chart repository {repo} is not allow-listed"


def _images(value: Any) -> Iterator[str]:
    # The analyzer hands rules read-only Mapping/Sequence proxies, not dicts and lists.
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k in ("image", "devicePluginImage", "nodeLabellerImage") and isinstance(v, str):
                yield v
            else:
                yield from _images(v)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for v in value:
            yield from _images(v)


def images_pinned_and_own(type_: str, props: Props, config: Config) -> Iterator[str]:
    """Every image a Kubernetes object names is pinned (a digest, or an immutable tag in the
    stack's own registry, whose repositories refuse tag moves) and comes from that registry."""
    if not type_.startswith("kubernetes:") or type_ == RELEASE:
        return
    for ref in sorted(set(_images(props.get("spec")))):
        own = bool(OWN_REGISTRY.match(ref))
        if not own:
            yield f"image {ref} is pulled from outside the stack's own registries"
        elif not DIGEST.search(ref) and ":" not in ref.rsplit("/", 1)[-1]:
            yield f"image {ref} has no tag or digest"


@of_types({"pulumi:providers:aws", "pulumi:providers:gcp", "pulumi:providers:azure-native"})
def providers_pinned(type_: str, props: Props, config: Config) -> Iterator[str]:
    if type_ == "pulumi:providers:aws" and not props.get("allowedAccountIds"):
        yield "the AWS provider is not pinned to an account (allowedAccountIds)"
    if type_ == "pulumi:providers:gcp" and not props.get("project"):
        yield "the GCP provider is not pinned to a project"
    if type_ == "pulumi:providers:azure-native" and not props.get("subscriptionId"):
        yield "the Azure provider is not pinned to a subscription (subscriptionId)"


__all__ = ["helm_pinned", "images_pinned_and_own", "providers_pinned"]
