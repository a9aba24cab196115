"""The stack spec: one validated, frozen description of an environment.

All of a stack's configuration lives under the one config key `rtip:platform` (see `CONFIG_KEY`),
so `pulumi config` and the offline engine read the same document. This module checks shape and
types; `stacks.checks` then checks everything that spans fields or needs the catalogs.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.models import Quantization

CONFIG_NAMESPACE = "rtip"
CONFIG_KEY = f"{CONFIG_NAMESPACE}:platform"

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")]


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WholeGpu(_Spec):
    """Each replica gets whole GPUs (tensor parallelism spans several)."""

    mode: Literal["whole"] = "whole"


class MigSharing(_Spec):
    """NVIDIA MIG: a named mig-parted layout (`all-balanced`, `all-3g.40gb` ...) or explicit
    profile counts per GPU (`{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}`). Exactly one of the two."""

    mode: Literal["mig"]
    layout: str | None = None
    profiles: dict[str, int] | None = None


class TimeSlicing(_Spec):
    """NVIDIA device-plugin time-slicing: each GPU is advertised `replicas` times."""

    mode: Literal["time_slice"]
    replicas: int = Field(ge=2, le=16)


class AmdPartitioning(_Spec):
    """AMD MI300X compute/memory partitioning through the Device Config Manager."""

    mode: Literal["partition"]
    profile: Literal["SPX-NPS1", "CPX-NPS1", "CPX-NPS4"]


class PlannedSharing(_Spec):
    """The planner chooses: whole GPUs or TP groups, one MIG layout for every GPU of the pool (one
    profile on GKE and AKS), a time-slice width (non-MIG NVIDIA GPUs), or AMD CPX partitions; the
    cheapest that serves the models at peak within their tiers. `allow` narrows the choice."""

    mode: Literal["auto"] = "auto"
    allow: list[Literal["whole", "mig", "time_slice", "partition"]] | None = Field(
        default=None, min_length=1)


Sharing = Annotated[
    PlannedSharing | WholeGpu | MigSharing | TimeSlicing | AmdPartitioning, Field(discriminator="mode")
]


class GpuPoolSpec(_Spec):
    """A GPU node pool. Nodes are spread over the region's zones (or `zones`, a subset).

    A pool may state only its machine type and `max_nodes`: the planner then chooses the sharing
    and raises `min_nodes` to what the models' minimum replicas need. A stated sharing is kept and
    the planner fits the models into it."""

    name: Name
    machine_type: str
    gpu: str | None = None  # checked against the machine type's GPU when given
    min_nodes: int = Field(default=0, ge=0)  # a floor; the plan may hold more nodes
    max_nodes: int = Field(ge=1)  # the ceiling the autoscaler and the planner stay within
    capacity_type: Literal["on_demand", "spot"] = "on_demand"
    sharing: Sharing = PlannedSharing()
    zones: list[str] | None = None


class SystemPoolSpec(_Spec):
    """CPU nodes for the platform services; the default machine type is per cloud."""

    machine_type: str | None = None
    min_nodes: int = Field(default=2, ge=1)
    max_nodes: int = Field(default=6, ge=1)


class NetworkSpec(_Spec):
    """The region's address space; subnets per zone are carved out of it."""

    cidr: IPv4Network


class _RegionSpec(_Spec):
    region: str
    zones: list[str] = Field(min_length=1)
    network: NetworkSpec
    system_pool: SystemPoolSpec = SystemPoolSpec()
    gpu_pools: list[GpuPoolSpec] = Field(default_factory=list)
    # Networks allowed to reach the Kubernetes API from outside the VPC; never used in prod,
    # whose API endpoint is private.
    api_access_cidrs: list[IPv4Network] = Field(default_factory=list)


class AwsRegion(_RegionSpec):
    cloud: Literal["aws"]


class GcpRegion(_RegionSpec):
    cloud: Literal["gcp"]
    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")]
    # The project's number names its Google service agents, which customer keys must trust;
    # required in prod (customer-managed encryption). Not a secret: `gcloud projects describe`.
    project_number: Annotated[str, Field(pattern=r"^[0-9]{6,20}$")] | None = None


class AzureRegion(_RegionSpec):
    cloud: Literal["azure"]


RegionSpec = Annotated[AwsRegion | GcpRegion | AzureRegion, Field(discriminator="cloud")]


class ReplicaBounds(_Spec):
    min: int = Field(ge=0)
    max: int = Field(ge=1)


class TokenMix(_Spec):
    """Mean tokens per request, for sizing; defaults are the means of the Azure 2023 conversation
    trace in `../shared/traces` (1,155 context, 211 generated tokens)."""

    input_tokens: int = Field(default=1155, ge=1)
    output_tokens: int = Field(default=211, ge=1)


class ModelSpec(_Spec):
    name: Name
    catalog: str  # a key of serving.models.CATALOG
    source_uri: str | None = None  # default: the model's folder in the regional weights store
    tier: str | None = None  # default: the stack's default_tier
    peak_qps: float = Field(gt=0)
    regions: list[str] | None = None  # default: every region of the stack
    pool: str | None = None  # default: the cheapest pool of the region it fits
    tensor_parallel: int | None = Field(default=None, ge=1, le=8)
    allowed_quantization: list[Quantization] = Field(default_factory=list)
    max_model_len: int | None = Field(default=None, ge=256)
    replicas: ReplicaBounds | None = None
    tokens: TokenMix = TokenMix()


class TenantSpec(_Spec):
    """A gateway tenant: its key is a Pulumi secret config value named `api_key_secret`."""

    name: Name
    requests_per_minute: int = Field(ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    models: list[str] = Field(min_length=1)
    api_key_secret: str


class RegistriesSpec(_Spec):
    """Container images mirrored into every region and the weights store's retention.

    `name_prefix` starts every bucket and registry name; bucket names are global on every cloud,
    so give each organisation its own."""

    name_prefix: Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{2,11}$")] = "rtip"
    images: list[Name] = Field(default_factory=lambda: ["vllm-openai", "vllm-rocm"])
    weights_versions_kept: int = Field(default=3, ge=1)


class TierDefinition(_Spec):
    """An SLO tier of this stack: a new tier (give at least `ttft_ms` and `tpot_ms`) or an override
    of a built-in one (interactive, standard, batch), whose unstated fields keep their values."""

    ttft_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False, description=(
        "Time to first token the tier promises at `percentile`, in milliseconds."))
    tpot_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False, description=(
        "Time per output token the tier promises at `percentile`, in milliseconds."))
    percentile: float | None = Field(default=None, ge=50, le=99.9, allow_inf_nan=False, description=(
        "The percentile both latency targets hold at (default 99)."))
    availability: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False, description=(
        "Share of requests that must succeed within the targets over 30 days (default 0.995); "
        "one minus it is the error budget."))
    burst_headroom: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False, description=(
        "Capacity held above peak for bursts the autoscaler has not caught up with, as a share of "
        "peak (default 0.2)."))
    allows_time_slicing: bool | None = Field(default=None, description=(
        "Whether models of this tier may run on time-sliced GPUs, which share SMs with no isolation "
        "(default false for new tiers)."))


class StackSpec(_Spec):
    environment: Literal["dev", "staging", "prod"]
    default_tier: str = "standard"
    tiers: dict[Name, TierDefinition] = Field(default_factory=dict, description=(
        "SLO tiers this stack adds or overrides, by name; the built-in tiers are interactive, "
        "standard and batch."))
    kubernetes_version: Annotated[str, Field(pattern=r"^1\.(2[89]|3[0-9])$")] = "1.33"
    regions: list[RegionSpec] = Field(min_length=1)
    registries: RegistriesSpec = RegistriesSpec()
    models: list[ModelSpec] = Field(default_factory=list)
    tenants: list[TenantSpec] = Field(default_factory=list)

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"


__all__ = [
    "CONFIG_KEY",
    "CONFIG_NAMESPACE",
    "AmdPartitioning",
    "AwsRegion",
    "AzureRegion",
    "GcpRegion",
    "GpuPoolSpec",
    "MigSharing",
    "ModelSpec",
    "NetworkSpec",
    "PlannedSharing",
    "RegionSpec",
    "RegistriesSpec",
    "ReplicaBounds",
    "StackSpec",
    "SystemPoolSpec",
    "TenantSpec",
    "TierDefinition",
    "TimeSlicing",
    "TokenMix",
    "WholeGpu",
]
