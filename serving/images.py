"""Every image the toolkit names, as its cluster pulls it: from the region's own registry.

Pure functions. An upstream reference (`docker.io/vllm/vllm-openai:v0.11.0`) becomes the path the
region's pull-through cache, remote repository or cache rule serves it under:

    <registry root><join><namespace>/<upstream path>(:<tag> | @sha256:<digest>)

`registry root` is the region's RegionStore.image_registry; `namespace` is the upstream's segment
(serving.charts.UPSTREAMS, e.g. `docker-hub`); `join` is `/` where one registry holds every
upstream under a path (ECR: `<acct>.dkr.ecr.<region>.amazonaws.com/<prefix>/docker-hub/...`; ACR:
`<registry>.azurecr.io/docker-hub/...`) and `-` on Artifact Registry, where each upstream is a
remote repository of its own named `<prefix>-<namespace>`
(`<loc>-docker.pkg.dev/<project>/<prefix>-docker-hub/...`). A digest pinned in the stack
(`registries.digests`) replaces the tag: the kubelet then pulls exactly that manifest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from serving.charts import IMAGES, UPSTREAMS, Image, UnpinnedError, Upstream, pinned_ref
from serving.hardware import Cloud, Vendor

# How a cloud's registry root and an upstream's namespace join (see the module docstring).
NAMESPACE_JOIN: dict[Cloud, str] = {Cloud.AWS: "/", Cloud.AZURE: "/", Cloud.GCP: "-"}
# The OCI content digest form a stack may pin: sha256 and 64 lowercase hex digits.
DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
DOCKER_HUB = "docker.io"
# The toolkit images a GPU pool of each vendor brings onto its cluster: the vLLM runtime, and for
# AMD the ROCm GPU operator (its controller in the chart values, the rest in its DeviceConfig).
VENDOR_IMAGES: dict[Vendor, tuple[str, ...]] = {
    Vendor.NVIDIA: ("vllm-openai",),
    Vendor.AMD: ("vllm-rocm", "amd-gpu-operator", "amd-device-plugin", "amd-node-labeller",
                 "amd-metrics-exporter", "amd-config-manager", "amd-utils"),
}
# The toolkit images a cluster with NVMe GPU pools runs for its local model cache: the node
# preparation DaemonSet (serving/nodeprep.py).
CACHE_IMAGES: tuple[str, ...] = ("node-prep",)
# The front door every cluster runs (serving/gateway.py): Envoy Gateway, its proxy and rate-limit
# service, the AI Gateway controller and ext_proc, the endpoint picker and the counters' store.
GATEWAY_IMAGES: tuple[str, ...] = ("envoy-gateway", "envoy-proxy", "envoy-ratelimit", "ai-gateway-controller",
                                   "ai-gateway-extproc", "epp", "ratelimit-redis")
# The redacting request-log collector every cluster runs (components/logs.py).
LOG_IMAGES: tuple[str, ...] = ("otel-collector",)
# Images whose consumer takes a repository and a tag apart and joins them with `:`, so no digest
# can be pulled: the AMD operator's controller (gpu-operator-charts v1.5.1,
# templates/deployment.yaml: `image: {{ ...manager.image.repository }}:{{ ...manager.image.tag
# | default .Chart.AppVersion }}`).
# Images a stack mirrors into repositories of its own unless it says otherwise
# (`registries.images`): the Docker Hub ones every region may run, because an ECR pull-through
# cache reaches Docker Hub only with a login (the endpoint picker, on registry.k8s.io, needs none).
MIRRORED_BY_DEFAULT: tuple[str, ...] = (
    "vllm-openai", "vllm-rocm", "node-prep", "envoy-gateway", "envoy-proxy", "envoy-ratelimit",
    "ai-gateway-controller", "ai-gateway-extproc", "ratelimit-redis", "otel-collector")
TAG_ONLY: dict[str, str] = {
    # The front door's charts take an image as repository and tag too (ai-gateway-helm v1.1.0
    # `controller.image` and `extProc.image`, inferencepool v1.5.0 `inferenceExtension.image`:
    # {registry,} repository, tag in their values.yaml), so a digest is refused in the stack.
    "ai-gateway-controller": "ai-gateway-helm v1.1.0 takes controller.image as repository and tag",
    "ai-gateway-extproc": "ai-gateway-helm v1.1.0 takes extProc.image as repository and tag",
    "epp": "inferencepool v1.5.0 takes inferenceExtension.image as registry, repository and tag",
    "amd-gpu-operator": "the gpu-operator-charts v1.5.1 Deployment joins "
                        "controllerManager.manager.image.repository and .tag with ':'",
}


def region_image_keys(vendors: Iterable[Vendor], nvme: bool) -> tuple[str, ...]:
    """The toolkit images a region runs: the front door's and the log collector's, per GPU vendor
    of its pools, and the cache's when any pool has local NVMe."""
    keys = ({k for v in vendors for k in VENDOR_IMAGES[v]} | set(GATEWAY_IMAGES) | set(LOG_IMAGES)
            | (set(CACHE_IMAGES) if nvme else set()))
    return tuple(sorted(keys))


@dataclass(frozen=True)
class ImageRef:
    upstream: Upstream
    path: str  # the repository path on the upstream, `library/` included for official images
    tag: str | None
    digest: str | None


def parse(ref: str) -> ImageRef:
    """Split a reference the way Docker reads one: a first component with a `.` or `:` (or
    `localhost`) is a registry host, else the image is on Docker Hub, whose single-name official
    images live under `library/`. A registry the toolkit has no cache for is an error."""
    name, _, pinned = ref.partition("@")
    digest = pinned or None
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, name
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    upstream = UPSTREAMS.get(host)
    if upstream is None:
        raise UnpinnedError(f"image {ref!r}: registry {host} has no regional cache; known upstreams "
                            f"are {', '.join(sorted(UPSTREAMS))} (serving/charts.py UPSTREAMS)")
    return ImageRef(upstream, path, tag, digest)


def regional_ref(image: str, registry_root: str, cloud: Cloud, digest: str | None = None) -> str:
    """`image` as the region's registry serves it; `digest` (sha256:...) replaces its tag."""
    if digest is not None and not DIGEST_PATTERN.match(digest):
        raise ValueError(f"image {image!r}: digest {digest!r} is not sha256: and 64 hex digits")
    ref = parse(image)
    where = f"{registry_root.rstrip('/')}{NAMESPACE_JOIN[cloud]}{ref.upstream.namespace}/{ref.path}"
    pin = digest or ref.digest
    if pin:
        return f"{where}@{pin}"
    if not ref.tag:
        raise UnpinnedError(f"image {image!r} has no tag or digest")
    return f"{where}:{ref.tag}"


@dataclass(frozen=True)
class RegionalRegistry:
    """One region's registry as the images' users need it: its root, its cloud's layout, and
    the digests the stack pins (image key -> sha256:...)."""

    root: str
    cloud: Cloud
    digests: Mapping[str, str] = field(default_factory=dict)

    def ref(self, key: str, what: str, images: Mapping[str, Image] = IMAGES) -> str:
        """The pinned toolkit image `key`, from this region's registry."""
        pinned = images.get(key)
        if pinned is None:
            raise UnpinnedError(f"{what}: no image {key!r} in the pinned table (serving/charts.py)")
        return regional_ref(pinned_ref(pinned.ref, what), self.root, self.cloud, self.digests.get(key))

    def repository_and_tag(self, key: str, what: str) -> tuple[str, str]:
        """For chart values that take an image as `repository` and `tag`: a digest goes into
        the tag as `@sha256:...`, which charts that join them with `:` cannot express, so a
        pinned digest is an error here rather than silently dropped."""
        ref = self.ref(key, what)
        if "@" in ref:
            why = TAG_ONLY.get(key, "its chart takes a repository and a tag only")
            raise UnpinnedError(f"{what}: image {key} has a pinned digest, but {why}")
        repository, _, tag = ref.rpartition(":")
        return repository, tag


def upstreams_of(keys: list[str] | tuple[str, ...]) -> dict[str, Upstream]:
    """The upstream registries the toolkit images `keys` come from, by host."""
    found = {parse(IMAGES[k].ref).upstream for k in keys}
    return {u.host: u for u in sorted(found, key=lambda u: u.host)}


def cache_path(key: str) -> tuple[Upstream, str]:
    """The upstream of toolkit image `key` and its repository path there."""
    ref = parse(IMAGES[key].ref)
    return ref.upstream, ref.path


__all__ = ["CACHE_IMAGES", "DIGEST_PATTERN", "GATEWAY_IMAGES", "LOG_IMAGES", "MIRRORED_BY_DEFAULT",
           "NAMESPACE_JOIN", "TAG_ONLY", "VENDOR_IMAGES", "ImageRef", "RegionalRegistry", "cache_path",
           "parse", "region_image_keys", "regional_ref", "upstreams_of"]
