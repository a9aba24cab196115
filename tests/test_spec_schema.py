"""The spec documents itself: every field described, `rtip schema` prints the stack file's JSON
Schema, the checked-in copy is current, every shipped stack validates against it and bad ones do
not; the system pools' CPU catalog holds the defaults the clusters use."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from rtip.cli import main
from rtip.stackfile import PROJECT_DIR, SCHEMA_COMMENT, SCHEMA_PATH, json_schema
from serving.hardware import DEFAULT_SYSTEM_MACHINE, MACHINES, SYSTEM_MACHINES, Cloud, system_machine
from stacks.schema import PATTERN_WORDS, StackSpec
from tests.conftest import record_of, stack_doc
from tests.test_bad_input import dev_platform

VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def models_of(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """Every model reachable from `model` through its fields' annotations."""
    seen: set[type[BaseModel]] = set()
    todo = [model]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        yield m
        for field in m.model_fields.values():
            todo += list(_models_in(field.annotation))


def _models_in(tp: Any) -> Iterator[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield tp
    for arg in typing.get_args(tp):
        yield from _models_in(arg)


def test_every_field_of_every_model_has_a_description() -> None:
    found = list(models_of(StackSpec))
    assert len(found) >= 15
    for model in found:
        assert (model.__doc__ or "").strip(), model.__name__
        for name, field in model.model_fields.items():
            assert field.description and len(field.description) > 10, f"{model.__name__}.{name}"


def test_every_pattern_has_its_plain_words() -> None:
    patterns = {m.group(1) for m in __import__("re").finditer(r'"pattern": "((?:[^"\\]|\\.)*)"',
                                                                 json.dumps(json_schema()))}
    decoded = {json.loads(f'"{p}"') for p in patterns}
    assert decoded and decoded <= set(PATTERN_WORDS), decoded - set(PATTERN_WORDS)


def test_rtip_schema_prints_the_schema(capsys) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json_schema()
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed["properties"]["config"]["properties"]["rtip:platform"] == {"$ref": "#/$defs/StackSpec"}
    pool = printed["$defs"]["GpuPoolSpec"]["properties"]
    assert "autoscaler's ceiling" in pool["max_nodes"]["description"]


def test_rtip_schema_out_writes_the_file(tmp_path, capsys) -> None:
    out = tmp_path / "stack.schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == json_schema()
    assert main(["schema", "--out", str(tmp_path / "no" / "such" / "dir.json")]) == 2
    assert "rtip schema" in capsys.readouterr().err


def test_the_checked_in_schema_is_current() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == json_schema(), (
        "stacks/stack.schema.json is stale: run `.venv/bin/rtip schema --out stacks/stack.schema.json`")


def test_every_shipped_stack_names_the_schema_and_validates(stack: str) -> None:
    path = PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml"
    assert path.read_text().splitlines()[0] == SCHEMA_COMMENT
    assert (path.parent / SCHEMA_COMMENT.split("$schema=")[1]).resolve() == SCHEMA_PATH
    errors = [e.message for e in VALIDATOR.iter_errors(stack_doc(stack))]
    assert errors == []


def test_the_readme_shows_the_schema_line() -> None:
    readme = (PROJECT_DIR / "README.md").read_text()
    assert SCHEMA_COMMENT in readme and "rtip schema" in readme


def doc_with(change: dict, platform: dict | None = None) -> dict:
    return {"config": {"rtip:platform": platform if platform is not None else dev_platform(), **change}}


@pytest.mark.parametrize("config", [
    {"rtip:apiKey": {"secure": "v1:abc"}},  # a secret of this project
    {"aws:region": "us-east-1"},  # another namespace: any value
    {"aws:tags": {"team": "ml"}},
])
def test_the_schema_accepts_other_config_keys(config) -> None:
    assert [e.message for e in VALIDATOR.iter_errors(doc_with(config))] == []


def set_in(doc: dict, path: list, value: object) -> dict:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value"), [
    (["regions", 0, "gpu_pools", 0, "max_nodes"], "four"),
    (["regions", 0, "gpu_pools", 0, "colour"], "blue"),
    (["regions", 0, "zones"], []),
    (["regions", 0, "zones"], ["us-east-1a", "us-east-1a"]),
    (["models", 0, "name"], "Llama_3"),
    (["models", 0, "peak_qps"], 0),
    (["environment"], "qa"),
    (["kubernetes_version"], 1.33),
    (["regions", 0, "cloud"], "oracle"),
    (["tenants", 0, "models"], ["llama-3b", "llama-3b"]),
])
def test_the_schema_rejects_bad_stacks(path, value) -> None:
    doc = doc_with({}, set_in(dev_platform(), path, value))
    assert list(VALIDATOR.iter_errors(doc))


@pytest.mark.parametrize("config", [
    {"rtip:other": "plain"},  # this project's other keys are secrets only
    {"aws-region": "x"},  # keys are namespace:name
])
def test_the_schema_rejects_bad_config_keys(config) -> None:
    assert [e.message for e in VALIDATOR.iter_errors(doc_with(config))]


@pytest.mark.parametrize("doc", [{"config": {}}, {"config": {"rtip:platform": {}}}, {"configs": {}}])
def test_the_schema_rejects_bad_stack_files(doc) -> None:
    assert list(VALIDATOR.iter_errors(doc))


# --- the system pools' CPU catalog ---------------------------------------------------------------

def test_the_default_system_machine_of_every_cloud_is_in_its_catalog() -> None:
    for cloud in Cloud:
        shape = system_machine(cloud)
        assert shape is not None and shape.name == DEFAULT_SYSTEM_MACHINE[cloud]
        assert (shape.vcpus, shape.memory_gib) == (4, 16)


def system_machines_built(stack: str) -> list[tuple[Cloud, str]]:
    """(cloud, machine type) of every system pool the program builds for the stack."""
    record = record_of(stack)
    built = [(Cloud.AWS, g.inputs["instanceTypes"][0]) for g in record.by_type("aws:eks/nodeGroup:NodeGroup")
             if g.inputs["labels"].get("rtip.dev/pool") == "system"]
    built += [(Cloud.GCP, p.inputs["nodeConfig"]["machineType"])
              for p in record.by_type("gcp:container/nodePool:NodePool")
              if p.inputs["nodeConfig"].get("labels", {}).get("rtip.dev/pool") == "system"]
    built += [(Cloud.AZURE, a["vmSize"])
              for c in record.by_type("azure-native:containerservice:ManagedCluster")
              for a in c.inputs["agentPoolProfiles"] if a["mode"] == "System"]
    return built


def test_every_system_pool_built_is_in_the_catalog(stack: str) -> None:
    regions = stack_doc(stack)["config"]["rtip:platform"]["regions"]
    built = system_machines_built(stack)
    assert len(built) == len(regions)
    stated = {(Cloud(r["cloud"]), (r.get("system_pool") or {}).get("machine_type")) for r in regions}
    for cloud, name in built:
        assert system_machine(cloud, name) is not None, (cloud, name)
        # A region that names no machine type gets its cloud's default from the catalog.
        assert (cloud, name) in stated or ((cloud, None) in stated and name == DEFAULT_SYSTEM_MACHINE[cloud])


def test_system_machines_are_cpu_shapes_that_fit_a_system_pool() -> None:
    for cloud, shapes in SYSTEM_MACHINES.items():
        assert len(shapes) >= 5
        for name, shape in shapes.items():
            assert shape.cloud is cloud and shape.name == name
            assert name not in MACHINES[cloud]  # no GPU shape
            # AKS requires 2 vCPUs and 4 GiB for a system pool; every cloud gets the same floor.
            assert shape.vcpus >= 2 and shape.memory_gib >= 4 and shape.price_per_hour > 0
