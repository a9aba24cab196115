"""Checks of the stack's image settings: pinned digests, upstream credentials, mirrored images.

Every image the toolkit deploys is pulled from its region's registry (serving/images.py). Where a
region's cache cannot reach an image's upstream without a login (ECR pull-through for Docker Hub
and GHCR) and the stack names none, the image must be one the stack mirrors itself
(`registries.images`); otherwise the stack is wrong before anything is registered.
"""

from __future__ import annotations

from collections.abc import Iterator

from serving.charts import IMAGES, UPSTREAMS
from serving.hardware import Cloud, machine
from serving.images import DIGEST_PATTERN, TAG_ONLY, cache_path, region_image_keys
from stacks.checks_base import Problem
from stacks.schema import StackSpec


def _choices(values: object) -> str:
    return ", ".join(sorted(str(v) for v in values))  # type: ignore[attr-defined]


def check_images(spec: StackSpec) -> Iterator[Problem]:
    registries = spec.registries
    for key, digest in registries.digests.items():
        at = f"registries.digests.{key}"
        if key not in IMAGES:
            yield Problem(at, f"unknown image {key!r}; expected one of: {_choices(IMAGES)}")
        if not isinstance(digest, str) or not DIGEST_PATTERN.match(digest):
            yield Problem(at, f"{digest!r} is not a content digest: expected 'sha256:' and 64 "
                              "lowercase hexadecimal digits, as `docker buildx imagetools inspect` "
                              "prints it")
        elif key in TAG_ONLY:
            yield Problem(at, f"image {key} cannot be pulled by digest: {TAG_ONLY[key]}; pin its "
                              "tag instead (serving/charts.py IMAGES)")
    for host in registries.upstream_credentials:
        if host not in UPSTREAMS:
            yield Problem(f"registries.upstream_credentials.{host}",
                          f"no regional cache for registry {host!r}; expected one of: "
                          f"{_choices(UPSTREAMS)}")
    for j, key in enumerate(registries.images):
        if key not in IMAGES:
            yield Problem(f"registries.images[{j}]", f"unknown image {key!r}; expected one of: "
                                                     f"{_choices(IMAGES)}")
    yield from _uncached_on_aws(spec)


def _uncached_on_aws(spec: StackSpec) -> Iterator[Problem]:
    """Images an AWS region runs that no ECR pull-through cache can fetch and nobody mirrors."""
    reported: set[str] = set()
    for i, region in enumerate(spec.regions):
        if region.cloud != Cloud.AWS:
            continue
        shapes = [m for p in region.gpu_pools if (m := machine(Cloud.AWS, p.machine_type)) is not None]
        # The runtimes and operators by GPU vendor, and node preparation on NVMe pools.
        keys = region_image_keys({m.gpu_spec.vendor for m in shapes},
                                 any(m.local_nvme_gb for m in shapes))
        for key in keys:
            upstream, path = cache_path(key)
            if (not upstream.ecr_needs_credential or upstream.host in spec.registries.upstream_credentials
                    or key in spec.registries.images or key in reported):
                continue
            reported.add(key)
            yield Problem("registries.images", (
                f"image {key} ({upstream.host}/{path}) runs in regions[{i}] ({region.region}), and "
                f"ECR pull-through caches fetch {upstream.host} only with a login: name one under "
                f"registries.upstream_credentials.{upstream.host}, or add {key} to "
                "registries.images and mirror it into the stack's own repository"))


__all__ = ["check_images"]
