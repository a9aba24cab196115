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


# Image fields in `spec` whose tag the consumer writes itself, by resource type. The AMD GPU
# operator appends `:<os>-${KERNEL_FULL_VERSION}-<driver version>` to DeviceConfig
# spec.driver.image, where its in-cluster build pushes the driver and the nodes pull it
# (ROCm/gpu-operator v1.5.1, internal/kmmmodule/kmmmodule.go addNodeInfoSuffixToImageTag; the
# CRD: "don't include tag since it will be fully managed by operator"). Such a field must be a
# bare repository in the stack's own registry: a tag or digest there makes an invalid reference.
OPERATOR_TAGGED: dict[str, tuple[str, ...]] = {
    "kubernetes:amd.com/v1alpha1:DeviceConfig": ("driver", "image"),
}


def _images(value: Any, skip: tuple[str, ...] | None = None, at: tuple[str, ...] = ()) -> Iterator[str]:
    # The analyzer hands rules read-only Mapping/Sequence proxies, not dicts and lists.
    if isinstance(value, Mapping):
        for k, v in value.items():
            if (*at, k) == skip:
                continue
            if k in ("image", "devicePluginImage", "nodeLabellerImage") and isinstance(v, str):
                yield v
            else:
                yield from _images(v, skip, (*at, str(k)))
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for v in value:
            yield from _images(v, skip, (*at, "[]"))


def images_pinned_and_own(type_: str, props: Props, config: Config) -> Iterator[str]:
    """Every image a Kubernetes object names is pinned (a digest, or an immutable tag in the
    stack's own registry, whose repositories refuse tag moves) and comes from that registry; a
    repository the operator tags itself (OPERATOR_TAGGED) is in that registry and names no tag."""
    if not type_.startswith("kubernetes:") or type_ == RELEASE:
        return
    tagged = OPERATOR_TAGGED.get(type_)
    repo = get(props, "spec", *tagged) if tagged else None
    if isinstance(repo, str):
        if not OWN_REGISTRY.match(repo):
            yield f"image repository {repo} is outside the stack's own registries"
        elif "@" in repo or ":" in repo.rsplit("/", 1)[-1]:
            yield (f"image repository {repo} names a tag or digest, but the operator appends its "
                   f"own tag to spec.{'.'.join(tagged or ())}")
    for ref in sorted(set(_images(props.get("spec"), tagged))):
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


__all__ = ["OPERATOR_TAGGED", "helm_pinned", "images_pinned_and_own", "providers_pinned"]
