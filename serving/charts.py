"""The pinned Helm charts and container images every cluster's serving stack is built from.

One table each, so promoting a stack means changing a version here and nowhere else. Chart
versions are FACTS.md section 6 (newest stable seen upstream); a release asks for its chart by key
and gets a clear error for anything not pinned, never a floating `latest`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class UnpinnedError(ValueError):
    """A chart or image the toolkit would deploy has no pinned version."""


class ChartKey(StrEnum):
    CERT_MANAGER = "cert-manager"
    KSERVE_CRD = "kserve-crd"
    KSERVE = "kserve-resources"
    KEDA = "keda"
    NVIDIA_GPU_OPERATOR = "gpu-operator"
    AMD_GPU_OPERATOR = "gpu-operator-charts"
    KUBE_PROMETHEUS_STACK = "kube-prometheus-stack"
    KSERVE_LOCALMODEL_CRD = "kserve-localmodel-crd"
    KSERVE_LOCALMODEL = "kserve-localmodel-resources"
    KARPENTER_CRD = "karpenter-crd"
    KARPENTER = "karpenter"
    GATEWAY_CRDS = "gateway-crds-helm"
    GATEWAY = "gateway-helm"
    AI_GATEWAY_CRDS = "ai-gateway-crds-helm"
    AI_GATEWAY = "ai-gateway-helm"
    INFERENCE_POOL = "inferencepool"
    OTEL_COLLECTOR = "opentelemetry-collector"


@dataclass(frozen=True)
class Chart:
    name: str
    repo: str  # an `oci://` registry path or an HTTP chart repository
    version: str

    @property
    def is_oci(self) -> bool:
        return self.repo.startswith("oci://")

    @property
    def reference(self) -> str:
        """What `helm install` takes as the chart: OCI charts by full path, others by name."""
        return f"{self.repo}/{self.name}" if self.is_oci else self.name


# FACTS.md section 6; the KServe, KEDA, NVIDIA and AMD versions match the CRD snapshots in
# ../shared/crds/SOURCES.md, so the schemas the tests validate against are the ones installed.
CHARTS: dict[ChartKey, Chart] = {
    ChartKey.CERT_MANAGER: Chart("cert-manager", "oci://quay.io/jetstack/charts", "v1.21.1"),
    ChartKey.KSERVE_CRD: Chart("kserve-crd", "oci://ghcr.io/kserve/charts", "v0.20.0"),
    ChartKey.KSERVE: Chart("kserve-resources", "oci://ghcr.io/kserve/charts", "v0.20.0"),
    ChartKey.KEDA: Chart("keda", "https://kedacore.github.io/charts", "2.20.2"),
    ChartKey.NVIDIA_GPU_OPERATOR: Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.7.0"),
    ChartKey.AMD_GPU_OPERATOR: Chart("gpu-operator-charts", "https://rocm.github.io/gpu-operator", "v1.5.1"),
    ChartKey.KUBE_PROMETHEUS_STACK: Chart(
        "kube-prometheus-stack", "oci://ghcr.io/prometheus-community/charts", "88.5.3"),
    # The local model cache's CRDs, controller and node agent ship apart from kserve-resources
    # (FACTS.md section 9; ../shared/charts/kserve-localmodel-*/v0.20.0).
    ChartKey.KSERVE_LOCALMODEL_CRD: Chart("kserve-localmodel-crd", "oci://ghcr.io/kserve/charts", "v0.20.0"),
    ChartKey.KSERVE_LOCALMODEL: Chart("kserve-localmodel-resources", "oci://ghcr.io/kserve/charts",
                                      "v0.20.0"),
    # EKS node autoscaling (FACTS.md section 9; ../shared/charts/karpenter*/1.14.1).
    ChartKey.KARPENTER_CRD: Chart("karpenter-crd", "oci://public.ecr.aws/karpenter", "1.14.1"),
    ChartKey.KARPENTER: Chart("karpenter", "oci://public.ecr.aws/karpenter", "1.14.1"),
    # The front door (serving/gateway.py): Envoy Gateway, its CRDs (Gateway API standard channel
    # and Envoy Gateway's own) in their own chart as its docs advise, the Envoy AI Gateway
    # controller as its InferencePool extension server, and the Inference Extension's pool chart
    # with the endpoint picker (../shared/charts/SOURCES.md: gateway-helm v1.9.0, ai-gateway-helm
    # v1.1.0, inferencepool v1.5.0; FACTS.md section 6).
    ChartKey.GATEWAY_CRDS: Chart("gateway-crds-helm", "oci://docker.io/envoyproxy", "v1.9.0"),
    ChartKey.GATEWAY: Chart("gateway-helm", "oci://docker.io/envoyproxy", "v1.9.0"),
    ChartKey.AI_GATEWAY_CRDS: Chart("ai-gateway-crds-helm", "oci://docker.io/envoyproxy", "v1.1.0"),
    ChartKey.AI_GATEWAY: Chart("ai-gateway-helm", "oci://docker.io/envoyproxy", "v1.1.0"),
    ChartKey.INFERENCE_POOL: Chart("inferencepool", "oci://registry.k8s.io/gateway-api-inference-extension/charts",
                                   "v1.5.0"),
    # The redacting request-log collector (serving/logpipeline.py): the newest chart tag in
    # ../shared/charts/SOURCES.md (opentelemetry-collector-0.170.0, appVersion 0.158.0).
    ChartKey.OTEL_COLLECTOR: Chart("opentelemetry-collector",
                                   "https://open-telemetry.github.io/opentelemetry-helm-charts", "0.170.0"),
}


def chart(key: str) -> Chart:
    """The pinned chart for `key`; an unknown chart is an error, not a floating install."""
    try:
        return CHARTS[ChartKey(key)]
    except ValueError:
        raise UnpinnedError(
            f"chart {key!r} has no pinned version: pinned charts are "
            f"{', '.join(sorted(CHARTS))} (serving/charts.py)") from None


@dataclass(frozen=True)
class Image:
    repository: str
    tag: str

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


# Images the toolkit names itself (charts pin their own through the chart version). The AMD
# operator's DeviceConfig defaults its device plugin and node labeller to `:latest`, so they are
# pinned here. Tags: the metrics exporter and config manager as ROCm/gpu-operator's chart values
# name them; the device plugin and labeller as ROCm's public DeviceConfig examples pin them.
# Not rechecked against the v1.5.1 release notes: recheck before promoting.
IMAGES: dict[str, Image] = {
    "amd-device-plugin": Image("docker.io/rocm/k8s-device-plugin", "1.31.0.10"),
    "amd-node-labeller": Image("docker.io/rocm/k8s-device-plugin", "labeller-1.31.0.10"),
    "amd-metrics-exporter": Image("docker.io/rocm/device-metrics-exporter", "v1.4.0"),
    "amd-config-manager": Image("docker.io/rocm/device-config-manager", "v1.4.0"),
    # The DeviceConfig utils container: the v1.5.1 chart names the repository
    # `docker.io/rocm/amd-gpu-operator-utils` (values.yaml deviceConfig.spec.commonConfig), pinned
    # at the operator's release.
    "amd-utils": Image("docker.io/rocm/amd-gpu-operator-utils", "v1.5.1"),
    # The controller as the v1.5.1 chart's values name it (controllerManager.manager.image).
    "amd-gpu-operator": Image("docker.io/rocm/amd-gpu-operator", "v1.5.1"),
    # The model cache's node preparation (serving/nodeprep.py): only `nsenter` and `sleep` from
    # it; mdadm, mkfs and mount run from the host. Ubuntu's LTS base image, pinned by release.
    "node-prep": Image("docker.io/library/ubuntu", "24.04"),
    # vLLM per GPU vendor (serving/deployments.py RUNTIME_IMAGE). CUDA: the project's release
    # image, the tag its Docker docs build on. ROCm: AMD's build (vLLM ships no ROCm release
    # image); the tag is one the rocm/vllm repository lists, vLLM 0.11.2 on ROCm 7.0.0.
    "vllm-openai": Image("docker.io/vllm/vllm-openai", "v0.11.0"),
    "vllm-rocm": Image("docker.io/rocm/vllm", "rocm7.0.0_vllm_0.11.2_20251210"),
    # The front door (serving/gateway.py). Envoy Gateway and its rate-limit service as gateway-helm
    # v1.9.0's values name them (global.images); the proxy as Envoy Gateway v1.9.0's built-in
    # default (api/v1alpha1 shared_types.go DefaultEnvoyProxyImage, beside DefaultRateLimitImage
    # 17b1956c): named here so it is pulled from the region's registry too.
    "envoy-gateway": Image("docker.io/envoyproxy/gateway", "v1.9.0"),
    "envoy-ratelimit": Image("docker.io/envoyproxy/ratelimit", "17b1956c"),
    "envoy-proxy": Image("docker.io/envoyproxy/envoy", "distroless-v1.39.0"),
    # The Envoy AI Gateway controller and its ext_proc, at the chart's release (its values leave
    # the tag to the appVersion, a placeholder at the tag: SOURCES.md).
    "ai-gateway-controller": Image("docker.io/envoyproxy/ai-gateway-controller", "v1.1.0"),
    "ai-gateway-extproc": Image("docker.io/envoyproxy/ai-gateway-extproc", "v1.1.0"),
    # The endpoint picker as inferencepool v1.5.0's values name it (inferenceExtension.image).
    "epp": Image("registry.k8s.io/gateway-api-inference-extension/epp", "v1.5.0"),
    # The rate-limit counters' store: Valkey (BSD-licensed Redis fork, Redis protocol), pinned
    # by release. Not rechecked against the newest patch: recheck before promoting.
    "ratelimit-redis": Image("docker.io/valkey/valkey", "8.0.2"),
    # The log collector's contrib distribution (filelog, transform and the three clouds' log
    # exporters) at opentelemetry-collector 0.170.0's appVersion; the chart has no default image.
    "otel-collector": Image("docker.io/otel/opentelemetry-collector-contrib", "0.158.0"),
}

# The public registries the toolkit's images come from, and how each cloud's cache reaches them.
# `namespace` is the path segment a region's registry files an upstream under (ECR's console
# defaults, e.g. `docker-hub`). ECR pull-through cache upstream URLs and which need a Secrets
# Manager credential: ECR API CreatePullThroughCacheRule (`upstreamRegistryUrl`: Docker Hub is
# `registry-1.docker.io`) and the ECR user guide, "Creating a pull through cache rule" (Docker Hub
# and GitHub Container Registry authenticate with a secret named `ecr-pullthroughcache/...`;
# ECR Public, Quay and registry.k8s.io need none). Artifact Registry remote repositories name
# Docker Hub as the preset `DOCKER_HUB`, others by URI (`commonRepository.uri`), and pull
# anonymously without credentials. ACR cache rules take `<host>/<path>` as the source and
# pull Docker Hub, GHCR, Quay, registry.k8s.io (authenticated or not) and ECR Public
# (unauthenticated only) (Azure docs, "Artifact cache in Azure Container Registry").
@dataclass(frozen=True)
class Upstream:
    host: str  # as an image reference names it
    namespace: str  # the path segment the regional caches file it under
    ecr_url: str  # ECR pull-through `upstreamRegistryUrl`
    gcp_uri: str | None  # Artifact Registry remote URI; None: its `DOCKER_HUB` preset
    ecr_needs_credential: bool


UPSTREAMS: dict[str, Upstream] = {u.host: u for u in (
    Upstream("docker.io", "docker-hub", "registry-1.docker.io", None, True),
    Upstream("ghcr.io", "ghcr", "ghcr.io", "https://ghcr.io", True),
    Upstream("quay.io", "quay", "quay.io", "https://quay.io", False),
    Upstream("public.ecr.aws", "ecr-public", "public.ecr.aws", "https://public.ecr.aws", False),
    Upstream("registry.k8s.io", "k8s", "registry.k8s.io", "https://registry.k8s.io", False),
)}

# Tags that name no fixed content: an image deployed with one can change under a running stack.
_FLOATING_TAGS = frozenset({"", "latest", "stable", "main", "master", "dev", "nightly"})


def pinned_ref(ref: str, what: str) -> str:
    """`ref` itself when it carries a fixed tag or digest; `what` names the user of the image."""
    if "@sha256:" in ref:
        return ref
    name, _, tag = ref.rpartition(":")
    # A colon inside the registry host (`host:5000/img`) is a port, not a tag.
    if not name or "/" in tag:
        tag = ""
    if tag.lower() in _FLOATING_TAGS or tag.lower().endswith("-latest"):
        raise UnpinnedError(f"{what}: image {ref!r} has no pinned tag (pin a version or a digest)")
    return ref


def image(key: str) -> str:
    """The pinned reference of a toolkit image by key."""
    pinned = IMAGES.get(key)
    if pinned is None:
        raise UnpinnedError(f"image {key!r} is not in the pinned image table (serving/charts.py): "
                            f"pinned images are {', '.join(sorted(IMAGES))}")
    return pinned_ref(pinned.ref, key)


__all__ = ["CHARTS", "IMAGES", "UPSTREAMS", "Chart", "ChartKey", "Image", "UnpinnedError", "Upstream",
           "chart", "image", "pinned_ref"]
