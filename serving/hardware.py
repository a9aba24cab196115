"""GPU and machine-shape catalog for the three clouds.

Every figure carries its source in the comment above its table. Sizes are in decimal GB as the
vendors publish them (an "80GB" H100 is 80 GB); prices are list on-demand USD per hour for Linux
in the reference region named per cloud, used only to rank plans by cost, never billed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Cloud(StrEnum):
    AWS = "aws"
    GCP = "gcp"
    AZURE = "azure"


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"


class GpuModel(StrEnum):
    L4 = "L4"
    L40S = "L40S"
    A100_80GB = "A100-80GB"
    H100_80GB = "H100-80GB"
    H100_NVL = "H100-NVL-94GB"
    MI300X = "MI300X"


@dataclass(frozen=True)
class MigProfile:
    """One MIG instance profile: its share of the GPU's 7 compute and 8 memory slices."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: float
    # Memory-slice indices where an instance of this profile may start (NVIDIA placement rules).
    starts: tuple[int, ...]
    # What an instance reports (`nvidia-smi mig -lgip`, GiB), where a published listing has it;
    # the name's figure is nominal and the instance can hold less (H100 NVL 2g.24gb: 21.62 GiB).
    reported_gib: float | None = None

    @property
    def usable_gb(self) -> float:
        """The memory vLLM sees on the instance, in GB: the reported figure where known, else
        the nominal one."""
        return round(self.reported_gib * GIB_GB, 3) if self.reported_gib is not None else self.memory_gb


@dataclass(frozen=True)
class AmdPartition:
    """An AMD Device Config Manager partition profile (compute mode + memory mode)."""

    name: str
    compute_mode: str
    memory_mode: str
    partitions_per_gpu: int


@dataclass(frozen=True)
class GpuSpec:
    model: GpuModel
    vendor: Vendor
    memory_gb: float
    bandwidth_gb_s: float
    fp16_dense_tflops: float
    fp8_dense_tflops: float | None
    int8: bool
    mig_profiles: tuple[MigProfile, ...] = ()
    # Named MIG layouts as NVIDIA mig-parted's default config spells them: name -> profile counts.
    mig_layouts: dict[str, dict[str, int]] = field(default_factory=dict)
    amd_partitions: tuple[AmdPartition, ...] = ()

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def fp8(self) -> bool:
        return self.fp8_dense_tflops is not None

    def mig_profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.mig_profiles if p.name == name), None)

    def amd_partition(self, name: str) -> AmdPartition | None:
        return next((p for p in self.amd_partitions if p.name == name), None)


def _mig_family(unit_gb: float, names: tuple[str, str, str, str, str, str],
                reported: tuple[float | None, ...] = (None,) * 6) -> tuple[MigProfile, ...]:
    """The six MIG profiles shared by A100-80GB, H100-80GB and H100-NVL, scaled by memory slice size.

    Geometry and start positions: NVIDIA MIG user guide, "Supported MIG profiles" and
    "A100/H100 MIG profile placement" (1g.Ngb 0-6, 1g.2Ngb 0/2/4/6, 2g 0/2/4, 3g 0/4, 4g 0, 7g 0).
    `reported`: each profile's `nvidia-smi mig -lgip` memory in GiB, None where unpublished.
    """
    one, one_double, two, three, four, seven = names
    r = reported
    return (
        MigProfile(one, 1, 1, unit_gb, (0, 1, 2, 3, 4, 5, 6), r[0]),
        MigProfile(one_double, 1, 2, 2 * unit_gb, (0, 2, 4, 6), r[1]),
        MigProfile(two, 2, 2, 2 * unit_gb, (0, 2, 4), r[2]),
        MigProfile(three, 3, 4, 4 * unit_gb, (0, 4), r[3]),
        MigProfile(four, 4, 4, 4 * unit_gb, (0,), r[4]),
        MigProfile(seven, 7, 8, 8 * unit_gb, (0,), r[5]),
    )


def _named_layouts(profiles: tuple[MigProfile, ...], maxima: tuple[int, ...]) -> dict[str, dict[str, int]]:
    """mig-parted's `all-<profile>` layouts plus `all-balanced` (2x smallest, 1x 2g, 1x 3g)."""
    layouts = {f"all-{p.name}": {p.name: n} for p, n in zip(profiles, maxima, strict=True)}
    layouts["all-balanced"] = {profiles[0].name: 2, profiles[2].name: 1, profiles[3].name: 1}
    return layouts


# Single-profile maxima per GPU (FACTS.md section 5, from mig-parted config-default.yaml).
_MIG_MAXIMA = (7, 4, 3, 2, 1, 1)
GIB_GB = 1.073741824  # GB in a GiB
_NAMES_80 = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
_MIG_80 = _mig_family(10, _NAMES_80)  # A100-80GB: no published listing at hand, nominal sizes
# Reported memory (GiB) per profile, from `nvidia-smi mig -lgip` listings. H100 80GB: 9.75,
# 19.62, 19.62, 39.50 (jbarrow.ai/field_notes/nvidia-mig); H100 NVL: 10.75, 21.62, 21.62, 46.38
# (NVIDIA/gpu-operator PR #900 and NVIDIA/mig-parted PR #101, by NVIDIA's maintainers). 4g has
# the same 4/8 memory fraction as 3g in NVIDIA's profile table, so the same memory (H200's listing
# shows both at 69.50 GiB). 7g: no listing found, nominal.
_MIG_H100_80 = _mig_family(10, _NAMES_80, (9.75, 19.62, 19.62, 39.50, 39.50, None))
_MIG_94 = _mig_family(12, ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
                      (10.75, 21.62, 21.62, 46.38, 46.38, None))

# MI300X partition modes (AMD Instinct MI300X partitioning guide; FACTS.md section 5):
# SPX exposes one GPU per device, CPX eight; NPS4 memory mode only together with CPX.
_MI300X_PARTITIONS = (
    AmdPartition("SPX-NPS1", "SPX", "NPS1", 1),
    AmdPartition("CPX-NPS1", "CPX", "NPS1", 8),
    AmdPartition("CPX-NPS4", "CPX", "NPS4", 8),
)

# Memory bandwidth and dense tensor throughput: NVIDIA L4, L40S, A100, H100 datasheets and AMD
# MI300X datasheet (dense = the datasheet's sparse figure halved). A100 has no FP8 tensor cores.
GPUS: dict[GpuModel, GpuSpec] = {
    GpuModel.L4: GpuSpec(GpuModel.L4, Vendor.NVIDIA, 24, 300, 121, 242, True),
    GpuModel.L40S: GpuSpec(GpuModel.L40S, Vendor.NVIDIA, 48, 864, 362, 733, True),
    GpuModel.A100_80GB: GpuSpec(
        GpuModel.A100_80GB, Vendor.NVIDIA, 80, 2039, 312, None, True,
        _MIG_80, _named_layouts(_MIG_80, _MIG_MAXIMA),
    ),
    GpuModel.H100_80GB: GpuSpec(
        GpuModel.H100_80GB, Vendor.NVIDIA, 80, 3350, 989, 1979, True,
        _MIG_H100_80, _named_layouts(_MIG_H100_80, _MIG_MAXIMA),
    ),
    GpuModel.H100_NVL: GpuSpec(
        GpuModel.H100_NVL, Vendor.NVIDIA, 94, 3900, 835, 1671, True,
        _MIG_94, _named_layouts(_MIG_94, _MIG_MAXIMA),
    ),
    GpuModel.MI300X: GpuSpec(
        GpuModel.MI300X, Vendor.AMD, 192, 5300, 1307, 2615, True,
        amd_partitions=_MI300X_PARTITIONS,
    ),
}


@dataclass(frozen=True)
class MachineShape:
    cloud: Cloud
    name: str
    gpu: GpuModel
    gpu_count: int
    vcpus: int
    memory_gib: int
    local_nvme_gb: int
    price_per_hour: float
    # Cloud-specific accelerator identifier (GKE accelerator type); empty where the cloud needs none.
    accelerator: str = ""

    @property
    def gpu_spec(self) -> GpuSpec:
        return GPUS[self.gpu]


_Row = tuple[str, GpuModel, int, int, int, int, float, str]


def _shapes(cloud: Cloud, rows: list[_Row]) -> dict[str, MachineShape]:
    return {r[0]: MachineShape(cloud, *r) for r in rows}


# AWS: EC2 accelerated-computing instance pages (G6, G6e, P4de, P5) for GPUs, vCPU, memory and
# instance-store NVMe (FACTS.md section 4); prices: EC2 on-demand, us-east-1, after the June 2025
# P4/P5 price reduction.
_AWS = _shapes(Cloud.AWS, [
    ("g6.xlarge", GpuModel.L4, 1, 4, 16, 250, 0.8048, ""),
    ("g6.2xlarge", GpuModel.L4, 1, 8, 32, 450, 0.9776, ""),
    ("g6.4xlarge", GpuModel.L4, 1, 16, 64, 600, 1.3232, ""),
    ("g6.8xlarge", GpuModel.L4, 1, 32, 128, 900, 2.0144, ""),
    ("g6.12xlarge", GpuModel.L4, 4, 48, 192, 3760, 4.6016, ""),
    ("g6.24xlarge", GpuModel.L4, 4, 96, 384, 3760, 6.6752, ""),
    ("g6.48xlarge", GpuModel.L4, 8, 192, 768, 7520, 13.3504, ""),
    ("g6e.xlarge", GpuModel.L40S, 1, 4, 32, 250, 1.861, ""),
    ("g6e.2xlarge", GpuModel.L40S, 1, 8, 64, 450, 2.24208, ""),
    ("g6e.4xlarge", GpuModel.L40S, 1, 16, 128, 600, 3.00424, ""),
    ("g6e.12xlarge", GpuModel.L40S, 4, 48, 384, 3800, 10.49264, ""),
    ("g6e.24xlarge", GpuModel.L40S, 4, 96, 768, 3800, 15.06559, ""),
    ("g6e.48xlarge", GpuModel.L40S, 8, 192, 1536, 7600, 30.13118, ""),
    ("p4de.24xlarge", GpuModel.A100_80GB, 8, 96, 1152, 8000, 27.45, ""),
    ("p5.48xlarge", GpuModel.H100_80GB, 8, 192, 2048, 30400, 55.04, ""),
])

# GCP: Compute Engine GPU machine types (G2, A2 Ultra, A3 High); local SSD is 375 GB a disk
# (FACTS.md section 4). G2 local SSD is optional and billed apart: the figure is what the pool
# attaches (one disk per GPU); A2 Ultra and A3 bundle theirs. Prices: on-demand, us-central1,
# GPUs included (G2: VM part plus the L4 price).
_GCP = _shapes(Cloud.GCP, [
    ("g2-standard-4", GpuModel.L4, 1, 4, 16, 375, 0.7068, "nvidia-l4"),
    ("g2-standard-8", GpuModel.L4, 1, 8, 32, 375, 0.8536, "nvidia-l4"),
    ("g2-standard-24", GpuModel.L4, 2, 24, 96, 750, 2.0004, "nvidia-l4"),
    ("g2-standard-48", GpuModel.L4, 4, 48, 192, 1500, 4.0008, "nvidia-l4"),
    ("g2-standard-96", GpuModel.L4, 8, 96, 384, 3000, 8.0016, "nvidia-l4"),
    ("a2-ultragpu-1g", GpuModel.A100_80GB, 1, 12, 170, 375, 5.0688, "nvidia-a100-80gb"),
    ("a2-ultragpu-8g", GpuModel.A100_80GB, 8, 96, 1360, 3000, 40.5504, "nvidia-a100-80gb"),
    ("a3-highgpu-1g", GpuModel.H100_80GB, 1, 26, 234, 750, 11.0613, "nvidia-h100-80gb"),
    ("a3-highgpu-8g", GpuModel.H100_80GB, 8, 208, 1872, 6000, 88.4904, "nvidia-h100-80gb"),
])

# Azure: NC A100 v4, NC H100 v5, ND H100 v5 and ND MI300X v5 size pages (FACTS.md section 4:
# NC A100 v4 960 GiB NVMe a GPU, ND H100 v5 28 TiB). Unverified here, to recheck before relying on
# them for cost: the NC H100 v5 and ND MI300X v5 NVMe sizes and every Azure price (pay-as-you-go
# Linux, East US, as remembered from the pricing page).
_AZURE = _shapes(Cloud.AZURE, [
    ("Standard_NC24ads_A100_v4", GpuModel.A100_80GB, 1, 24, 220, 960, 3.673, ""),
    ("Standard_NC48ads_A100_v4", GpuModel.A100_80GB, 2, 48, 440, 1920, 7.346, ""),
    ("Standard_NC96ads_A100_v4", GpuModel.A100_80GB, 4, 96, 880, 3840, 14.692, ""),
    ("Standard_NC40ads_H100_v5", GpuModel.H100_NVL, 1, 40, 320, 3576, 6.98, ""),
    ("Standard_NC80adis_H100_v5", GpuModel.H100_NVL, 2, 80, 640, 7152, 13.96, ""),
    ("Standard_ND96isr_H100_v5", GpuModel.H100_80GB, 8, 96, 1900, 28000, 98.32, ""),
    ("Standard_ND96isr_MI300X_v5", GpuModel.MI300X, 8, 96, 1850, 28000, 48.0, ""),
])

MACHINES: dict[Cloud, dict[str, MachineShape]] = {Cloud.AWS: _AWS, Cloud.GCP: _GCP, Cloud.AZURE: _AZURE}


def machine(cloud: Cloud, name: str) -> MachineShape | None:
    return MACHINES[cloud].get(name)


@dataclass(frozen=True)
class CpuShape:
    """A CPU machine type for a cluster's system pool (platform services, no GPUs)."""

    cloud: Cloud
    name: str
    vcpus: int
    memory_gib: int
    price_per_hour: float


def _cpu_shapes(cloud: Cloud, rows: list[tuple[str, int, int, float]]) -> dict[str, CpuShape]:
    return {r[0]: CpuShape(cloud, *r) for r in rows}


# System pools hold the platform services (CoreDNS, the GPU operator's controllers, KServe, KEDA,
# Prometheus ...): general-purpose shapes with 4 GiB a vCPU, 2 to 16 vCPUs. AKS requires at least
# 2 vCPUs and 4 GiB for a system pool (learn.microsoft.com/azure/aks/use-system-pools). vCPUs and
# memory: the EC2 M7i/M7a/M6i/C7i/R7i, Compute Engine N2/N2D/E2/C3 and Azure Dv5/Ddv5/Dasv5 size
# pages. Prices: list on-demand Linux (us-east-1, us-central1, East US) as remembered from the
# pricing pages, unverified here; used only to rank, recheck before relying on them for cost.
_AWS_CPU = _cpu_shapes(Cloud.AWS, [
    ("m7i.large", 2, 8, 0.1008),
    ("m7i.xlarge", 4, 16, 0.2016),
    ("m7i.2xlarge", 8, 32, 0.4032),
    ("m7i.4xlarge", 16, 64, 0.8064),
    ("m7a.xlarge", 4, 16, 0.23184),
    ("m6i.xlarge", 4, 16, 0.192),
    ("m6i.2xlarge", 8, 32, 0.384),
    ("c7i.2xlarge", 8, 16, 0.357),
    ("r7i.xlarge", 4, 32, 0.2646),
])
_GCP_CPU = _cpu_shapes(Cloud.GCP, [
    ("n2-standard-2", 2, 8, 0.0971),
    ("n2-standard-4", 4, 16, 0.1942),
    ("n2-standard-8", 8, 32, 0.3885),
    ("n2-standard-16", 16, 64, 0.7769),
    ("n2d-standard-4", 4, 16, 0.169),
    ("e2-standard-4", 4, 16, 0.134),
    ("c3-standard-4", 4, 16, 0.2014),
])
_AZURE_CPU = _cpu_shapes(Cloud.AZURE, [
    ("Standard_D2ds_v5", 2, 8, 0.113),
    ("Standard_D4ds_v5", 4, 16, 0.226),
    ("Standard_D8ds_v5", 8, 32, 0.452),
    ("Standard_D16ds_v5", 16, 64, 0.904),
    ("Standard_D4s_v5", 4, 16, 0.192),
    ("Standard_D8s_v5", 8, 32, 0.384),
    ("Standard_D4as_v5", 4, 16, 0.172),
])

SYSTEM_MACHINES: dict[Cloud, dict[str, CpuShape]] = {
    Cloud.AWS: _AWS_CPU, Cloud.GCP: _GCP_CPU, Cloud.AZURE: _AZURE_CPU,
}
# The system pool's machine type when the stack names none: 4 vCPUs, 16 GiB on every cloud.
DEFAULT_SYSTEM_MACHINE: dict[Cloud, str] = {
    Cloud.AWS: "m7i.xlarge", Cloud.GCP: "n2-standard-4", Cloud.AZURE: "Standard_D4ds_v5",
}


def system_machine(cloud: Cloud, name: str | None = None) -> CpuShape | None:
    """A system-pool machine type of `cloud` (its default when `name` is None), or None if unknown."""
    return SYSTEM_MACHINES[cloud].get(DEFAULT_SYSTEM_MACHINE[cloud] if name is None else name)


__all__ = [
    "DEFAULT_SYSTEM_MACHINE",
    "GPUS",
    "MACHINES",
    "SYSTEM_MACHINES",
    "AmdPartition",
    "Cloud",
    "CpuShape",
    "GpuModel",
    "GpuSpec",
    "MachineShape",
    "MigProfile",
    "Vendor",
    "machine",
    "system_machine",
]
