"""Every custom resource the toolkit emits validates against its upstream CRD (../shared/crds/).

The API server prunes fields a structural schema does not declare, silently, so besides the
jsonschema check every field must be one the schema names: a misspelling fails here, not in prod.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rtip.offline import Record, Resource
from serving import gpu_config as gc
from serving import manifests
from serving.hardware import GPUS, GpuModel, Vendor
from serving.sharing import Partition, Sharing
from tests.conftest import SHARED, record_of

CRDS = SHARED / "crds"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _crd_files() -> dict[str, Path]:
    """`<group>_<plural>.yaml` by file stem (the upstream naming every file here follows); the
    CRDs of ../shared/crds and, for charts it has none of (Karpenter, cert-manager, Envoy AI
    Gateway, Envoy Gateway's HTTPRouteFilter), the pinned chart's own."""
    charts = SHARED / "charts"
    extra = [*charts.glob("karpenter-crd/1.14.1/crds/*.yaml"),
             *charts.glob("cert-manager/v1.21.1/crds/*.yaml"),
             *charts.glob("ai-gateway-crds-helm/v1.1.0/crds/*.yaml"),
             *charts.glob("gateway-crds-helm/v1.9.0/crds/gateway.envoyproxy.io_httproutefilters.yaml")]
    return {p.stem: p for p in [*extra, *CRDS.glob("*/*.yaml")]}


@cache
def schema_of(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    candidates = [_crd_files().get(f"{group}_{kind.lower()}s")] + [
        p for stem, p in sorted(_crd_files().items()) if stem.startswith(f"{group}_")]
    for path in filter(None, candidates):
        crd = yaml.load(path.read_text(), Loader=_Loader)
        if crd["spec"]["names"]["kind"] != kind or crd["spec"]["group"] != group:
            continue
        for v in crd["spec"]["versions"]:
            if v["name"] == version and v.get("served", True):
                return v["schema"]["openAPIV3Schema"]
        raise AssertionError(f"{path.name} serves no version {version} of {kind}")
    raise AssertionError(f"no CRD for {api_version} {kind} under {CRDS}")


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths in `value` that `schema` does not declare (fields the API server would prune)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        found: list[str] = []
        for key, sub in value.items():
            if props is not None and key in props:
                found += unknown_fields(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += unknown_fields(sub, extra, f"{path}.{key}")
            elif props is not None and path != ".metadata" and extra is not True:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [f for i, item in enumerate(value)
                for f in unknown_fields(item, schema["items"], f"{path}[{i}]")]
    return []


def check(body: dict[str, Any]) -> None:
    schema = schema_of(body["apiVersion"], body["kind"])
    jsonschema.Draft7Validator(schema).validate(body)
    assert unknown_fields(body, schema) == [], f"{body['kind']} fields its CRD does not declare"


def is_custom(resource: Resource) -> bool:
    if not resource.type.startswith("kubernetes:") or resource.type.startswith("kubernetes:helm"):
        return False
    group = resource.type.split(":")[1].rpartition("/")[0]
    return "." in group and not group.endswith(".k8s.io")


def custom_resources(record: Record) -> list[Resource]:
    return [r for r in record.resources if r.custom and is_custom(r)]


def body(resource: Resource) -> dict[str, Any]:
    return {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")
            if k in resource.inputs}


def test_every_emitted_custom_resource_validates_against_its_crd(stack: str) -> None:
    found = custom_resources(record_of(stack))
    assert found, f"{stack} emits no custom resources"
    for resource in found:
        check(body(resource))


def test_prod_emits_each_add_on_kind() -> None:
    kinds = {r.inputs["kind"] for r in custom_resources(record_of("prod"))}
    assert {"LocalModelNodeGroup", "DeviceConfig"} <= kinds


class _Pool:
    """A pool as serving/gpu_config reads it, for shapes no stack file uses yet."""

    def __init__(self, name: str, gpu: GpuModel, sharing: Sharing, labels: dict[str, str],
                 gpus_per_node: int = 8) -> None:
        self.name, self.gpu, self.sharing, self.labels = name, gpu, sharing, labels
        self.vendor = Vendor.AMD if gpu is GpuModel.MI300X else Vendor.NVIDIA
        self.gpus_per_node = gpus_per_node


@pytest.mark.parametrize("profile", ["CPX-NPS1", "CPX-NPS4"])
def test_partitioned_mi300x_device_config_validates(profile: str) -> None:
    partition = GPUS[GpuModel.MI300X].amd_partition(profile)
    assert partition is not None
    pool = _Pool("mi300x", GpuModel.MI300X, Partition(partition),
                 {gc.AMD_PROFILE_LABEL: profile.lower(), "rtip.dev/gpu": "mi300x"})
    profiles = gc.amd_partitions([pool])
    assert set(profiles) == {profile.lower()}
    doc = manifests.amd_device_config(manifests.AmdDeviceConfigInput(
        name="rtip-mi300x", namespace="kube-amd-gpu", selector={"rtip.dev/gpu": "mi300x"},
        taint_keys=("amd.com/gpu",), driver_image="rtip.azurecr.io/rtip/amdgpu-driver",
        dcm_configmap="rtip-dcm-config"))
    check(doc)
    assert doc["spec"]["configManager"] == {**doc["spec"]["configManager"], "enable": True,
                                            "config": {"name": "rtip-dcm-config"}}
    assert doc["spec"]["devicePlugin"]["devicePluginArguments"]["resource_naming_strategy"] == "mixed"


def test_local_model_node_group_without_stack_validates() -> None:
    check(manifests.local_model_node_group("l4", 450))


def test_unknown_field_is_caught() -> None:
    doc = manifests.local_model_node_group("l4", 450)
    doc["spec"]["storageLimt"] = "1G"
    schema = schema_of(doc["apiVersion"], doc["kind"])
    assert unknown_fields(doc, schema) == [".spec.storageLimt"]
