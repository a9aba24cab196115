"""The stack spec: one validated, frozen description of an environment.

All of a stack's configuration lives under the one config key `rtip:platform` (see `CONFIG_KEY`),
so `pulumi config` and the offline engine read the same document. This module checks shape and
types; `stacks.checks` then checks everything that spans fields or needs the catalogs. Every field
carries a `description`: `rtip schema` prints them as the stack file's JSON Schema, which editors
use for completion and validation.

Numbers are strict: a whole number where one is expected (not `"4"`, `4.0` or `true`), and no
`.nan` or `.inf`. Text fields are never empty and have no leading or trailing spaces. Every regex
here has its plain-words reading in `PATTERN_WORDS`, which error messages show instead.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from serving.images import MIRRORED_BY_DEFAULT
from serving.models import Quantization
from stacks.schema_base import (
    CONFIG_KEY,
    CONFIG_NAMESPACE,
    GCP_PROJECT_NUMBER_PATTERN,
    GCP_PROJECT_PATTERN,
    KUBERNETES_VERSION_PATTERN,
    NAME_PATTERN,
    NAME_PREFIX_PATTERN,
    TEXT_PATTERN,
    UNIQUE,
    Count,
    Name,
    Network,
    Rate,
    Text,
    _Spec,
)
from stacks.schema_deployer import (
    DEPLOYER_PATTERN_WORDS,
    AwsDeployer,
    AzureDeployer,
    DeployerSpec,
    GcpDeployer,
)

# What each pattern means, in the words an error message uses (never the regex itself).
PATTERN_WORDS: dict[str, str] = {
    NAME_PATTERN: "2 to 40 characters: lowercase letters, digits and '-', starting with a letter "
                  "and ending with a letter or digit",
    TEXT_PATTERN: "must not be empty or start or end with a space",
    KUBERNETES_VERSION_PATTERN: "a Kubernetes minor version from 1.28 to 1.39, written as text "
                                "in quotes, e.g. \"1.33\"",
    GCP_PROJECT_PATTERN: "a GCP project ID: 6 to 30 characters: lowercase letters, digits and "
                         "'-', starting with a letter and ending with a letter or digit",
    GCP_PROJECT_NUMBER_PATTERN: "the project's number: 6 to 20 digits, in quotes",
    NAME_PREFIX_PATTERN: "3 to 12 characters: lowercase letters and digits, starting with a letter",
    **DEPLOYER_PATTERN_WORDS,
}

class WholeGpu(_Spec):
    """Each replica gets whole GPUs (tensor parallelism spans several)."""

    mode: Literal["whole"] = Field(default="whole", description="Whole GPUs per replica.")


class MigSharing(_Spec):
    """NVIDIA MIG: a named mig-parted layout (`all-balanced`, `all-3g.40gb` ...) or explicit
    profile counts per GPU (`{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}`). Exactly one of the two."""

    mode: Literal["mig"] = Field(description="NVIDIA Multi-Instance GPU partitions.")
    layout: Text | None = Field(default=None, description=(
        "A named mig-parted layout applied to every GPU of the pool (all-balanced, all-1g.10gb, "
        "all-3g.40gb ...; the names depend on the GPU's memory). Give this or `profiles`."))
    profiles: dict[Text, Annotated[Count, Field(ge=1)]] | None = Field(
        default=None, min_length=1, description=(
            "MIG instances per GPU: profile name -> count (e.g. {3g.40gb: 2}); they must fit one "
            "GPU's 7 compute and 8 memory slices. Give this or `layout`."))


class TimeSlicing(_Spec):
    """NVIDIA device-plugin time-slicing: each GPU is advertised `replicas` times."""

    mode: Literal["time_slice"] = Field(description=(
        "NVIDIA device-plugin time-slicing (no isolation between the sharers)."))
    replicas: Count = Field(ge=2, le=16, description=(
        "How many pods share each GPU (2 to 16); each gets 1/replicas of its time and memory."))


class AmdPartitioning(_Spec):
    """AMD MI300X compute/memory partitioning through the Device Config Manager."""

    mode: Literal["partition"] = Field(description="AMD Instinct compute/memory partitions.")
    profile: Literal["SPX-NPS1", "CPX-NPS1", "CPX-NPS4"] = Field(description=(
        "Partition profile: SPX-NPS1 one GPU per device, CPX-NPS1 and CPX-NPS4 eight partitions "
        "per GPU (NPS4 splits memory too)."))


class PlannedSharing(_Spec):
    """The planner chooses: whole GPUs or TP groups, one MIG layout for every GPU of the pool (one
    profile on GKE and AKS), a time-slice width (non-MIG NVIDIA GPUs), or AMD CPX partitions; the
    cheapest that serves the models at peak within their tiers. `allow` narrows the choice."""

    mode: Literal["auto"] = Field(default="auto", description=(
        "The planner chooses the sharing (the default)."))
    allow: list[Literal["whole", "mig", "time_slice", "partition"]] | None = Field(
        default=None, min_length=1, json_schema_extra=UNIQUE, description=(
            "The sharing modes the planner may choose from, each once (default: every mode the "
            "GPU supports)."))


Sharing = Annotated[
    PlannedSharing | WholeGpu | MigSharing | TimeSlicing | AmdPartitioning, Field(discriminator="mode")
]


class GpuPoolSpec(_Spec):
    """A GPU node pool. Nodes are spread over the region's zones (or `zones`, a subset).

    A pool may state only its machine type and `max_nodes`: the planner then chooses the sharing
    and raises `min_nodes` to what the models' minimum replicas need. A stated sharing is kept and
    the planner fits the models into it."""

    name: Name = Field(description=(
        "The pool's name, unique in its region; an identity (renaming replaces the pool). Not `system`."))
    machine_type: Text = Field(description=(
        "A GPU machine type of the region's cloud (serving/hardware.py MACHINES), e.g. "
        "g6.2xlarge, a3-highgpu-8g, Standard_NC40ads_H100_v5."))
    gpu: Text | None = Field(default=None, description=(
        "The GPU the machine type must carry (L4, L40S, A100-80GB, H100-80GB, H100-NVL-94GB, "
        "MI300X); a guard against a mistyped machine type. Default: not checked."))
    min_nodes: Count = Field(default=0, ge=0, description=(
        "Nodes the pool keeps at least, over all its zones (default 0); the plan raises it to what "
        "the models' minimum replicas need."))
    max_nodes: Count = Field(ge=1, description=(
        "The most nodes the pool may grow to, over all its zones: the autoscaler's ceiling, which "
        "the planner stays within."))
    capacity_type: Literal["on_demand", "spot"] = Field(default="on_demand", description=(
        "on_demand (the default) or spot (cheaper, may be reclaimed)."))
    sharing: Sharing = Field(default=PlannedSharing(), description=(
        "How GPUs are shared between replicas; default {mode: auto}: the planner chooses."))
    zones: list[Text] | None = Field(default=None, min_length=1, json_schema_extra=UNIQUE, description=(
        "A subset of the region's zones, each once. Default: every zone of the region."))


class SystemPoolSpec(_Spec):
    """CPU nodes for the platform services; the default machine type is per cloud."""

    machine_type: Text | None = Field(default=None, description=(
        "A CPU machine type of the region's cloud (serving/hardware.py SYSTEM_MACHINES). Default "
        "per cloud: m7i.xlarge (AWS), n2-standard-4 (GCP), Standard_D4ds_v5 (Azure)."))
    min_nodes: Count = Field(default=2, ge=1, description="Nodes at least, over all zones (default 2).")
    max_nodes: Count = Field(default=6, ge=1, description="Nodes at most, over all zones (default 6).")


class NetworkSpec(_Spec):
    """The region's address space; subnets per zone are carved out of it."""

    cidr: Network = Field(description=(
        "The region's network, a /16 to /20 in private address space (10.0.0.0/8, 172.16.0.0/12 "
        "or 192.168.0.0/16), not overlapping another region's; split into subnets per zone."))


class _RegionSpec(_Spec):
    region: Text = Field(description="The cloud's region name, e.g. us-east-1, us-central1, eastus.")
    zones: list[Text] = Field(min_length=1, json_schema_extra=UNIQUE, description=(
        "Zones of the region the cluster spans, each once (prod: at least 2). Azure zones are "
        "\"1\", \"2\", \"3\"."))
    network: NetworkSpec = Field(description="The region's address space.")
    system_pool: SystemPoolSpec = Field(default=SystemPoolSpec(), description=(
        "CPU nodes for the platform services (default: the cloud's default machine type, 2 to 6 nodes)."))
    gpu_pools: list[GpuPoolSpec] = Field(default_factory=list, description=(
        "GPU node pools, names unique in the region. Default: none."))
    api_access_cidrs: list[Network] = Field(default_factory=list, json_schema_extra=UNIQUE, description=(
        "Public networks allowed to reach the Kubernetes API from outside the VPC, each once; not "
        "0.0.0.0/0 nor any range wider than a /8, not private ranges. Not allowed in prod, whose "
        "API endpoint is private. Default: none (the API is reached from inside the network)."))


class AwsRegion(_RegionSpec):
    """A region on AWS: an EKS cluster in its own VPC."""

    cloud: Literal["aws"] = Field(description="aws: the region's cluster is EKS.")
    zones_down: list[Text] = Field(default_factory=list, json_schema_extra=UNIQUE, description=(
        "Zones of `zones` lost to an outage, each once, never all of them. Karpenter keeps "
        "every zone its NodePools allow as a place the models' replicas must spread over, and "
        "pins every new node to the lost one, where none launches; a zone listed here is taken "
        "out of the NodePools, whose drift disruption is held meanwhile (the zone's nodes would "
        "count as drifted and be replaced); the plan keeps its replicas and zones. Remove it once "
        "the zone is back. AWS regions only. Default: none."))


class GcpRegion(_RegionSpec):
    """A region on GCP: a regional GKE cluster in the given project."""

    cloud: Literal["gcp"] = Field(description="gcp: the region's cluster is GKE (needs project).")
    project: Annotated[str, Field(pattern=GCP_PROJECT_PATTERN)] = Field(description=(
        "The GCP project ID the cluster lives in."))
    # The project's number names its Google service agents, which customer keys must trust;
    # required in prod (customer-managed encryption). Not a secret: `gcloud projects describe`.
    project_number: Annotated[str, Field(pattern=GCP_PROJECT_NUMBER_PATTERN)] | None = Field(
        default=None, description=(
            "The project's number (gcloud projects describe PROJECT "
            "--format='value(projectNumber)'), in quotes; required in prod, whose customer-managed "
            "keys must trust the project's service agents."))


class AzureRegion(_RegionSpec):
    """A region on Azure: an AKS cluster in its own resource group and VNet."""

    cloud: Literal["azure"] = Field(description="azure: the region's cluster is AKS.")


RegionSpec = Annotated[AwsRegion | GcpRegion | AzureRegion, Field(discriminator="cloud")]


class ReplicaBounds(_Spec):
    """Replica bounds that override the planner's sizing (the replicas are still packed onto pools)."""

    min: Count = Field(ge=1, description="Replicas at least, over all zones of a region; at least 1 "
                       "(a fleet at zero answers only after a cold start, which no tier allows).")
    max: Count = Field(ge=1, description=(
        "Replicas at most, over all zones of a region; not below min. With several zones, keep at "
        "least min + ceil(min / zones): the autoscaler replaces a lost zone's pods early only "
        "within max (`rtip plan` notes a max without that room)."))


class TokenMix(_Spec):
    """Mean tokens per request, for sizing; defaults are the means of the Azure 2023 conversation
    trace in `../shared/traces` (1,155 context, 211 generated tokens)."""

    input_tokens: Count = Field(default=1155, ge=1, description=(
        "Mean prompt tokens per request (default 1155); with output_tokens within the model's "
        "context (or max_model_len)."))
    output_tokens: Count = Field(default=211, ge=1, description=(
        "Mean generated tokens per request (default 211)."))


class ModelSpec(_Spec):
    """A model the stack serves, in every region it names, sized for its peak within its tier."""

    name: Name = Field(description="The model's name, unique in the stack; names its deployments.")
    catalog: Text = Field(description="A key of the model catalog (serving/models.py), e.g. "
                                      "llama-3.1-8b-instruct.")
    source_uri: Text | None = Field(default=None, description=(
        "Where the weights come from. Default: the model's folder in the region's weights store."))
    tier: Text | None = Field(default=None, description=(
        "The SLO tier the model must meet (interactive, standard, batch). Default: the stack's "
        "default_tier."))
    peak_qps: Rate = Field(gt=0, description="Peak requests per second, per region it runs in.")
    regions: list[Text] | None = Field(default=None, min_length=1, json_schema_extra=UNIQUE, description=(
        "Regions of this stack the model runs in, each once. Default: every region."))
    pool: Text | None = Field(default=None, description=(
        "The GPU pool to run on, by name, in every region of the model. Default: the planner "
        "chooses the cheapest pool it fits."))
    tensor_parallel: Count | None = Field(default=None, ge=1, le=8, description=(
        "GPUs per replica (1, 2, 4 or 8), all on one node; at most the GPUs of a node of its "
        "pools. Default: the planner chooses."))
    allowed_quantization: list[Quantization] = Field(default_factory=list, json_schema_extra=UNIQUE,
                                                      description=(
        "Weight variants the planner may choose besides the native BF16 ones (fp8, int8, int4), "
        "each once. Default (or empty): native weights only."))
    max_model_len: Count | None = Field(default=None, ge=256, description=(
        "The context each replica serves, in tokens (prompt plus output); at most the model's "
        "context and at least the token mix. Default: the model's full context."))
    max_output_tokens: Count | None = Field(default=None, ge=1, description=(
        "The most tokens one response may generate: vLLM caps every chat and completion request "
        "at it, and a replica being scaled in waits for a response this long at the tier's TPOT "
        "before it stops. At least tokens.output_tokens; on GKE and AKS its wait at most 600 s, "
        "where the cluster autoscaler stops waiting (Karpenter waits longer). Default: the most "
        "600 s allows, within the served context (19,550 at the built-in interactive tier, 5,850 "
        "at standard, 3,320 at batch)."))
    replicas: ReplicaBounds | None = Field(default=None, description=(
        "Replica bounds that override the sizing. Default: sized from peak_qps and the tier."))
    tokens: TokenMix = Field(default=TokenMix(), description=(
        "Mean tokens per request, for sizing (default: 1155 in, 211 out)."))
    traffic: Literal["conversation", "code"] = Field(default="conversation", description=(
        "How fast the model's traffic can grow, as one of the Azure LLM inference traces 2023: "
        "conversation (chat: up to 40 % of peak within a 12-minute cold start) or code (on/off "
        "bursts: from nothing to peak within a minute, so the replica floor holds the peak). "
        "Sets the burst headroom the replicas hold for autoscale lag (default: conversation)."))
    growth_per_minute: Rate | None = Field(default=None, gt=0, le=1, description=(
        "How fast the model's traffic can grow, stated instead of `traffic` for traffic shaped "
        "like neither trace: the largest rise within a minute, as a share of peak (0.05: 5 % of "
        "peak a minute). The replicas hold that growth over one cold start (at most the whole "
        "peak), or the tier's burst_headroom if larger. Default: none, `traffic` decides."))


class TenantSpec(_Spec):
    """A gateway tenant: its key is a Pulumi secret config value named `api_key_secret`."""

    name: Name = Field(description="The tenant's name, unique in the stack.")
    requests_per_minute: Count = Field(ge=1, description="The tenant's request rate limit, per minute.")
    tokens_per_minute: Count | None = Field(default=None, ge=1, description=(
        "The tenant's token rate limit, per minute (prompt plus output). Default: no token limit."))
    models: list[Text] = Field(min_length=1, json_schema_extra=UNIQUE, description=(
        "Model names of this stack the tenant may call, each once; \"*\" for every model."))
    api_key_secret: Text = Field(description=(
        "The name of the secret config value (pulumi config set --secret NAME) holding the "
        "tenant's API key."))


class UpstreamCredential(_Spec):
    """A registry login as two secret config keys of this project (`pulumi config set --secret`)."""
    username: Text = Field(description="Config key holding the user name, e.g. dockerHubUser.")
    token: Text = Field(description="Config key holding its access token, e.g. dockerHubToken.")


class RegistriesSpec(_Spec):
    """Container images mirrored into every region and the weights store's retention.

    `name_prefix` starts every bucket and registry name; bucket names are global on every cloud,
    so give each organisation its own."""

    name_prefix: Annotated[str, Field(pattern=NAME_PREFIX_PATTERN)] = Field(
        default="rtip", description=(
            "Starts every bucket and registry name (default rtip); bucket names are global, so "
            "give each organisation its own."))
    images: list[Name] = Field(default_factory=lambda: list(MIRRORED_BY_DEFAULT),
                               min_length=1,
                               json_schema_extra=UNIQUE,
                               description=(
        "Toolkit images (keys of serving/charts.py IMAGES) the stack keeps in repositories of its own "
        "where no cache can pull them without a credential (ECR: docker.io and ghcr.io without "
        "`upstream_credentials`), replicated into every region and filled by a mirror step "
        "(default: the Docker Hub images a region may run: both vLLM builds, node-prep for NVMe "
        "pools, the front door's Envoy, AI Gateway and Valkey images, and the log collector's)."))
    weights_versions_kept: Count = Field(default=3, ge=1, description=(
        "Published weights versions kept per model, the current one included (default 3)."))
    digests: dict[str, str] = Field(default_factory=dict, description=(
        "Digests pinning toolkit images by key (serving/charts.py IMAGES), e.g. {vllm-openai: "
        "'sha256:<64 hex digits>'}: pulled by digest when pinned, else by release tag."))
    upstream_credentials: dict[str, UpstreamCredential] = Field(default_factory=dict, description=(
        "Logins of public registries by host (e.g. docker.io) for the regional caches. ECR needs "
        "one for docker.io and ghcr.io; without it AWS mirrors those images (see `images`)."))


class TierDefinition(_Spec):
    """An SLO tier of this stack: a new tier (give at least `ttft_ms` and `tpot_ms`) or an override
    of a built-in one (interactive, standard, batch), whose unstated fields keep their values."""

    ttft_ms: Rate | None = Field(default=None, ge=1, allow_inf_nan=False, description=(
        "Time to first token the tier promises at `percentile`, in ms; at least 1 (vLLM's TTFT buckets)."))
    tpot_ms: Rate | None = Field(default=None, ge=10, allow_inf_nan=False, description=(
        "Time per output token the tier promises at `percentile`, in ms; at least 10 (vLLM's TPOT buckets)."))
    percentile: Rate | None = Field(default=None, ge=50, le=99.9, allow_inf_nan=False, description=(
        "The percentile both latency targets hold at (default 99)."))
    availability: Rate | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False, description=(
        "Share of requests that must succeed within the targets over 30 days (default 0.995); "
        "one minus it is the error budget."))
    burst_headroom: Rate | None = Field(default=None, ge=0, le=2, allow_inf_nan=False, description=(
        "Capacity held above peak for bursts the autoscaler has not caught up with, as a share of "
        "peak (default 0.2)."))
    allows_time_slicing: bool | None = Field(default=None, description=(
        "Whether models of this tier may run on time-sliced GPUs, which share SMs with no isolation "
        "(default false for new tiers)."))


class StackSpec(_Spec):
    """One environment: its regions, their GPU pools, the models it serves and its tenants."""

    environment: Literal["dev", "staging", "prod"] = Field(description=(
        "dev, staging or prod; prod needs 2 zones per region and keeps the API private."))
    default_tier: Text = Field(default="standard", description=(
        "The SLO tier of models that name none (default standard)."))
    tiers: dict[Name, TierDefinition] = Field(default_factory=dict, description=(
        "SLO tiers this stack adds or overrides, by name; the built-in tiers are interactive, "
        "standard and batch."))
    kubernetes_version: Annotated[str, Field(pattern=KUBERNETES_VERSION_PATTERN)] = Field(
        default="1.33", description="The clusters' Kubernetes minor version, in quotes (default \"1.33\").")
    regions: list[RegionSpec] = Field(min_length=1, description=(
        "The regions of the stack, each once; each gets a cluster."))
    registries: RegistriesSpec = Field(default=RegistriesSpec(), description=(
        "Image registries and weights stores (default: prefix rtip, the vLLM images)."))
    models: list[ModelSpec] = Field(default_factory=list, description=(
        "The models served, names unique. Default: none."))
    tenants: list[TenantSpec] = Field(default_factory=list, description=(
        "Gateway tenants, names unique. Default: none."))
    alert_webhooks: dict[Literal["page", "ticket"], Text] = Field(default_factory=dict, description=(
        "Where the models' SLO burn-rate alerts go, by severity (page, ticket): the name of a secret "
        "config value holding an HTTPS webhook URL. Default: none, so they notify no one."))
    heartbeat_webhooks: dict[Text, Text] = Field(default_factory=dict, description=(
        "Where each region's Watchdog heartbeat goes, by region: the name of a secret config value "
        "holding the HTTPS URL of that cluster's own dead man's switch, which pages when the pings "
        "(about one every two minutes) stop. One switch a cluster: a shared one keeps hearing "
        "the others. Every region, or none. Default: none."))
    deployer: DeployerSpec | None = Field(default=None, description=(
        "Where `pulumi up` runs and as whom; required where the posture's API is private (prod). "
        "Default: none declared (a public runner, clusters granting only their creator)."))

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"


__all__ = ["CONFIG_KEY", "CONFIG_NAMESPACE", "PATTERN_WORDS", "AmdPartitioning", "AwsDeployer",
           "AwsRegion", "AzureDeployer", "AzureRegion", "DeployerSpec", "GcpDeployer", "GcpRegion",
           "GpuPoolSpec", "MigSharing", "ModelSpec", "NetworkSpec", "PlannedSharing", "RegionSpec",
           "RegistriesSpec", "ReplicaBounds", "StackSpec", "SystemPoolSpec", "TenantSpec",
           "TierDefinition", "TimeSlicing", "TokenMix", "UpstreamCredential", "WholeGpu"]
