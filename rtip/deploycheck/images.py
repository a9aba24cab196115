"""Images: every container image the toolkit writes is pinned and pullable by its cluster.

Pinned: a digest (`@sha256:`), or a tag other than `latest`; an image with neither can change
under a running deployment. Pullable: a private registry of a cloud (ECR, Artifact Registry or
GCR, ACR) serves only its own cloud's nodes, with that cloud's credentials, so a cluster on
another cloud cannot pull from it (error); a public registry is pulled over the region's NAT and
is reported as not mirrored in the region (warning). Images are read where the record writes them:
pod templates, InferenceService predictors, ClusterServingRuntimes, and `image`/`repository`+`tag`
pairs in Helm values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import cluster_of, object_name
from rtip.offline import SECRET_MARK, Record, Resource

CHECK = "images"
# Private registries by host pattern, and the cloud whose nodes they serve.
PRIVATE_REGISTRIES = (
    (re.compile(r"^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com$"), "aws"),
    (re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev$|^([a-z]+\.)?gcr\.io$"), "gcp"),
    (re.compile(r"^[a-z0-9]+\.azurecr\.io$"), "azure"),
)
DEFAULT_REGISTRY = "docker.io"


def split(image: str) -> tuple[str, str, str | None, str | None]:
    """(registry host, repository, tag, digest) of an image reference."""
    rest, _, digest = image.partition("@")
    first, slash, remainder = rest.partition("/")
    explicit = bool(slash) and ("." in first or ":" in first or first == "localhost")
    host, path = (first, remainder) if explicit else (DEFAULT_REGISTRY, rest)
    last = path.rsplit("/", 1)[-1]
    repo, tag = (path.rsplit(":", 1) if ":" in last else (path, ""))
    return host, repo, tag or None, digest or None


def _walk(doc: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, image) for every image a document names: `image: x` strings and
    `{repository, tag}` / `{registry, repository, tag}` maps (the Helm charts' convention)."""
    if isinstance(doc, dict):
        repo = doc.get("repository")
        if isinstance(repo, str) and ("tag" in doc or "digest" in doc):
            registry = doc.get("registry")
            ref = f"{registry}/{repo}" if isinstance(registry, str) and registry else repo
            tag, digest = doc.get("tag"), doc.get("digest")
            yield path, f"{ref}{f':{tag}' if tag else ''}{f'@{digest}' if digest else ''}"
        for k, v in doc.items():
            # `image`, and the `<x>Image` fields of operator CRDs (the AMD DeviceConfig's
            # devicePluginImage, nodeLabellerImage).
            if (k == "image" or str(k).endswith("Image")) and isinstance(v, str):
                yield f"{path}.{k}".lstrip("."), v
            else:
                yield from _walk(v, f"{path}.{k}".lstrip("."))
    elif isinstance(doc, list):
        for n, v in enumerate(doc):
            yield from _walk(v, f"{path}[{n}]")


def image_fields(r: Resource) -> Iterator[tuple[str, str]]:
    """(path, image) for every image the resource's inputs name (Helm values or `spec`)."""
    if r.type == "kubernetes:helm.sh/v3:Release":
        yield from _walk(r.inputs.get("values") or {}, "values")
    elif r.type.startswith("kubernetes:") and isinstance(r.inputs.get("spec"), dict):
        yield from _walk(r.inputs["spec"], "spec")


# Image fields whose tag the operator writes itself, so the manifest must name only the repository:
# the AMD DeviceConfig's driver image, to which the operator appends
# `:<os>-${KERNEL_FULL_VERSION}-<driver version>` (ROCm/gpu-operator v1.5.1,
# internal/kmmmodule/kmmmodule.go addNodeInfoSuffixToImageTag; the CRD's spec.driver.image:
# "don't include tag since it will be fully managed by operator"). A tag or digest there yields
# `repo:tag:suffix`, which no registry serves.
OPERATOR_TAGGED: frozenset[tuple[str, str]] = frozenset({("DeviceConfig", "spec.driver.image")})


def check_images(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for r in record.resources:
        if not r.type.startswith("kubernetes:"):
            continue
        cluster = cluster_of(record, r)
        cloud = str(cluster.inputs.get("cloud")) if cluster else None
        for path, image in image_fields(r):
            if image == SECRET_MARK or "{{" in image:
                continue
            host, _repo, tag, digest = split(image)
            what = f"{object_name(r)} {path}: {image}"
            operator_tagged = (r.type.rsplit(":", 1)[-1], path) in OPERATOR_TAGGED
            if operator_tagged and (tag or digest):
                findings.append(Finding(CHECK, r.urn, f"{what} names a tag or digest, but the "
                                        "operator appends its own tag to this repository"))
            elif not digest and (tag is None or tag == "latest") and not operator_tagged:
                findings.append(Finding(CHECK, r.urn, f"{what} is not pinned (no digest, tag "
                                        f"{tag or 'missing'})"))
            owner = next((c for pattern, c in PRIVATE_REGISTRIES if pattern.match(host)), None)
            if owner is not None and cloud is not None and owner != cloud:
                name = cluster.name if cluster else ""
                findings.append(Finding(CHECK, r.urn, f"{what} is in a {owner} registry, which nodes of "
                                        f"the {cloud} cluster {name} cannot pull from"))
            elif owner is None and cluster is not None:
                findings.append(Finding(CHECK, r.urn, f"{what} is pulled from {host} over the internet, "
                                        "not from the region's registry", Severity.WARNING))
    return findings


__all__ = ["CHECK", "OPERATOR_TAGGED", "PRIVATE_REGISTRIES", "check_images", "image_fields", "split"]
