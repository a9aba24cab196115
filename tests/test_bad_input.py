"""Bad stacks: exit status 2, one line per problem naming the file and key path, no traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from rtip.cli import main
from rtip.stackfile import PROJECT_DIR
from tests.conftest import stack_doc, write_stack


def dev_platform() -> dict:
    return copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])


def prod_platform() -> dict:
    return copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])


def plan_fails(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    code = main(["plan", str(path)])
    out = capsys.readouterr()
    assert code == 2, out
    assert "Traceback" not in out.err
    assert out.out == ""  # no half-built plan
    return out.err


def set_key(doc: dict, path: list, value: object) -> dict:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


CASES = [
    # (what changes, key path expected in the message, words expected in the message)
    (["regions", 0, "gpu_pools", 0, "colour"], "blue",
     "rtip:platform.regions[0].gpu_pools[0].colour", "unknown key; expected one of: name, machine_type"),
    (["regions", 0, "gpu_pools", 0, "max_nodes"], "four",
     "rtip:platform.regions[0].gpu_pools[0].max_nodes", "expected a whole number, got the text 'four'"),
    (["models", 0, "tier"], "gold", "rtip:platform.models[0].tier", "unknown tier 'gold'"),
    (["regions", 0, "gpu_pools", 0, "gpu"], "A10G", "rtip:platform.regions[0].gpu_pools[0].gpu",
     "unknown GPU 'A10G'"),
    (["regions", 0, "gpu_pools", 0, "gpu"], "L40S", "rtip:platform.regions[0].gpu_pools[0].gpu",
     "g6.2xlarge carries L4, not L40S"),
    (["regions", 0, "gpu_pools", 0, "machine_type"], "g6.3xlarge",
     "rtip:platform.regions[0].gpu_pools[0].machine_type", "not a GPU machine type of aws"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "mig", "layout": "all-balanced"},
     "rtip:platform.regions[0].gpu_pools[0].sharing.mode", "L4 (g6.2xlarge) has no MIG"),
    (["regions", 0, "zones", 1], "us-west-2a", "rtip:platform.regions[0].zones[1]",
     "zone 'us-west-2a' is not in aws region us-east-1"),
    (["regions", 0, "region"], "us-east-9", "rtip:platform.regions[0].region",
     "unknown aws region 'us-east-9'"),
    (["regions", 0, "zones_down"], ["us-east-1z"], "rtip:platform.regions[0].zones_down[0]",
     "zone 'us-east-1z' is not one of this region's zones (us-east-1a, us-east-1b)"),
    (["regions", 0, "zones_down"], ["us-east-1a", "us-east-1b"], "rtip:platform.regions[0].zones_down",
     "every zone of the region is listed as down"),
    (["regions", 0, "zones_down"], ["us-east-1a", "us-east-1a"], "rtip:platform.regions[0].zones_down",
     "zone 'us-east-1a' is listed 2 times"),
    (["regions", 0, "cloud"], "oracle", "rtip:platform.regions[0].cloud",
     "unknown cloud 'oracle'; expected one of: aws, gcp, azure"),
    (["regions", 0, "network", "cidr"], "10.10.0.0/24", "rtip:platform.regions[0].network.cidr",
     "expected a /16 to /20"),
    (["regions", 0, "network", "cidr"], "10.10.0.0/33", "rtip:platform.regions[0].network.cidr",
     "expected an IPv4 network: four numbers 0-255 and a prefix length 0-32"),
    (["models", 1, "name"], "llama-3b", "rtip:platform.models[1].name", "used twice"),
    (["models", 0, "catalog"], "gpt-5", "rtip:platform.models[0].catalog", "unknown model 'gpt-5'"),
    (["models", 0, "pool"], "h100", "rtip:platform.models[0].pool", "pool 'h100' does not exist"),
    (["models", 0, "catalog"], "llama-3.3-70b-instruct", "rtip:platform.models[0]",
     "fits no slice of pools ['l4']"),
    (["models", 0, "tier"], "interactive", "rtip:platform.models[0].pool",
     "does not allow time-sliced GPUs"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "auto", "allow": ["whole", "mig"]},
     "rtip:platform.regions[0].gpu_pools[0].sharing.allow[1]", "L4 cannot run mig"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "auto", "allow": []},
     "rtip:platform.regions[0].gpu_pools[0].sharing.allow", "must not be empty; leave the key out"),
    (["models", 0, "regions"], ["eu-west-1"], "rtip:platform.models[0].regions[0]",
     "region 'eu-west-1' is not in this stack"),
    (["tenants", 0, "models"], ["nope"], "rtip:platform.tenants[0].models[0]", "model 'nope' is not in"),
    (["environment"], "qa", "rtip:platform.environment", "'dev', 'staging' or 'prod'"),
    (["regions", 0, "gpu_pools", 0, "min_nodes"], 9, "rtip:platform.regions[0].gpu_pools[0].min_nodes",
     "above max_nodes"),
    (["models", 0, "replicas"], {"min": 0, "max": 4}, "rtip:platform.models[0].replicas.min", "at least 1"),
]


@pytest.mark.parametrize(("path", "value", "where", "words"), CASES,
                         ids=[".".join(map(str, c[0])) + "=" + str(c[1]) for c in CASES])
def test_bad_spec_is_rejected_with_its_key_path(tmp_path, capsys, path, value, where, words) -> None:
    stack = write_stack(tmp_path, set_key(dev_platform(), path, value))
    err = plan_fails(capsys, stack)
    line = next((ln for ln in err.splitlines() if where + ":" in ln), None)
    assert line is not None, err
    assert str(stack) in line
    assert words in line, err


def test_a_pool_left_with_no_zone_up_is_refused(tmp_path, capsys) -> None:
    doc = set_key(dev_platform(), ["regions", 0, "gpu_pools", 0, "zones"], ["us-east-1b"])
    doc = set_key(doc, ["regions", 0, "zones_down"], ["us-east-1b"])
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[0].gpu_pools[0].zones: pool 'l4' runs only in us-east-1b, all listed in " \
        "zones_down" in err, err


def test_an_aws_only_key_on_another_cloud_says_so(tmp_path, capsys) -> None:
    doc = copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])
    (gcp_at,) = [i for i, r in enumerate(doc["regions"]) if r["cloud"] == "gcp"]
    doc["regions"][gcp_at]["zones_down"] = [doc["regions"][gcp_at]["zones"][0]]
    err = plan_fails(capsys, write_stack(tmp_path, doc, "prod"))
    assert (f"rtip:platform.regions[{gcp_at}].zones_down: unknown key here: it is a key of aws regions "
            f"only; expected one of:") in err, err


def test_every_problem_is_reported_at_once(tmp_path, capsys) -> None:
    doc = set_key(dev_platform(), ["models", 0, "tier"], "gold")
    doc = set_key(doc, ["regions", 0, "zones", 1], "us-east-1q")
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "2 problem(s)" in err
    assert "models[0].tier" in err and "zones[1]" in err


@pytest.mark.parametrize(("profiles", "ok"), [
    ({"3g.40gb": 2}, True),
    ({"4g.40gb": 1, "3g.40gb": 1}, True),
    ({"3g.40gb": 2, "1g.10gb": 1}, False),  # 7 compute slices but 9 memory slices
    ({"1g.20gb": 4, "1g.10gb": 1}, False),
    ({"7g.80gb": 1, "1g.10gb": 1}, False),
    ({"5g.50gb": 1}, False),
])
def test_mig_profiles_must_fit_the_gpu(tmp_path, capsys, profiles, ok) -> None:
    doc = prod_platform()
    doc["regions"][0]["gpu_pools"][0]["sharing"] = {"mode": "mig", "profiles": profiles}
    doc["models"] = [m for m in doc["models"] if m["name"] == "llama-70b"]
    doc["tenants"] = []
    path = write_stack(tmp_path, doc)
    if ok:
        assert main(["plan", str(path), "--json"]) == 0
        capsys.readouterr()
    else:
        err = plan_fails(capsys, path)
        assert "rtip:platform.regions[0].gpu_pools[0].sharing.profiles" in err


def test_unknown_named_mig_layout(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][0]["gpu_pools"][0]["sharing"] = {"mode": "mig", "layout": "all-2g.40gb"}
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[0].gpu_pools[0].sharing.layout: unknown MIG layout 'all-2g.40gb'" in err


def test_prod_needs_two_zones_per_region(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][1]["zones"] = ["us-west-2a"]
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[1].zones: prod needs at least 2 zones" in err


def test_a_cluster_routes_at_most_fifteen_models(tmp_path, capsys) -> None:
    # The AIGatewayRoute CRD (ai-gateway-crds-helm v1.1.0) caps spec.rules at 15, one per model.
    doc = prod_platform()
    extra = copy.deepcopy(doc["models"][-1])
    doc["models"] += [{**copy.deepcopy(extra), "name": f"extra-{k}"} for k in range(16 - len(doc["models"]))]
    assert len(doc["models"]) == 16
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[0]: us-east-1 serves 16 models" in err and "at most 15" in err


def test_prod_api_is_private(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][0]["api_access_cidrs"] = ["0.0.0.0/0"]
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[0].api_access_cidrs" in err


def test_overlapping_networks(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][1]["network"]["cidr"] = "10.20.0.0/16"
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[1].network.cidr: 10.20.0.0/16 overlaps regions[0]" in err


def test_time_slicing_is_nvidia_only(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][3]["gpu_pools"][1]["sharing"] = {"mode": "time_slice", "replicas": 2}
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[3].gpu_pools[1].sharing.mode: time-slicing is an NVIDIA" in err


def test_unparseable_yaml(tmp_path, capsys) -> None:
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config:\n  rtip:platform:\n    environment: dev\n   regions: [\n")
    err = plan_fails(capsys, path)
    assert str(path) in err and "line 4" in err and "not valid YAML" in err


def test_missing_platform_key(tmp_path, capsys) -> None:
    path = tmp_path / "Pulumi.empty.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n")
    err = plan_fails(capsys, path)
    assert "rtip:platform: missing" in err


def test_misspelt_config_key(tmp_path, capsys) -> None:
    path = write_stack(tmp_path, dev_platform(), extra={"rtip:platfrom": {}})
    err = plan_fails(capsys, path)
    assert "config.rtip:platfrom: unknown key" in err


def test_unknown_stack_name(capsys) -> None:
    assert main(["plan", "nosuchstack"]) == 2
    assert "no such stack file" in capsys.readouterr().err


def test_console_script_prints_no_traceback(tmp_path) -> None:
    stack = write_stack(tmp_path, set_key(dev_platform(), ["models", 0, "tier"], "gold"))
    done = subprocess.run([sys.executable, "-m", "rtip.cli", "plan", str(stack)], cwd=PROJECT_DIR,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "rtip:platform.models[0].tier: unknown tier 'gold'" in done.stderr


@pytest.mark.parametrize("region", [2, 3])
def test_gke_and_aks_pools_take_one_mig_profile(tmp_path, capsys, region) -> None:
    doc = prod_platform()
    doc["regions"][region]["gpu_pools"][0]["sharing"] = {"mode": "mig", "layout": "all-balanced"}
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert f"rtip:platform.regions[{region}].gpu_pools[0].sharing: " in err
    assert "one MIG profile" in err


@pytest.mark.parametrize(("region", "pool", "change", "where", "words"), [
    (2, 0, {"machine_type": "p5.48xlarge"}, "regions[2].gpu_pools[0].machine_type",
     "'p5.48xlarge' is not a GPU machine type of gcp"),
    (3, 1, {"sharing": {"mode": "mig", "layout": "all-1g.10gb"}}, "regions[3].gpu_pools[1].sharing.mode",
     "MI300X (Standard_ND96isr_MI300X_v5) has no MIG"),
    (0, 0, {"machine_type": "g6e.12xlarge", "sharing": {"mode": "mig", "layout": "all-balanced"}},
     "regions[0].gpu_pools[0].sharing.mode", "L40S (g6e.12xlarge) has no MIG"),
])
def test_cloud_specific_pool_errors(tmp_path, capsys, region, pool, change, where, words) -> None:
    doc = prod_platform()
    doc["regions"][region]["gpu_pools"][pool].update(change)
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert f"rtip:platform.{where}: {words}" in err


def test_a_region_needs_zones(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][2]["zones"] = []
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[2].zones: must not be empty" in err


def test_prod_gcp_needs_the_project_number(tmp_path, capsys) -> None:
    doc = prod_platform()
    del doc["regions"][2]["project_number"]
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    assert "rtip:platform.regions[2].project_number: prod encrypts with customer keys" in err


def test_peak_the_pools_cannot_serve_within_the_tier(tmp_path, capsys) -> None:
    err = plan_fails(capsys, write_stack(tmp_path, set_key(dev_platform(), ["models", 0, "peak_qps"], 50)))
    line = next(ln for ln in err.splitlines() if "rtip:platform.models[0]:" in ln)
    assert "in us-east-1: model llama-3b: pools ['l4'] cannot serve its peak within tier batch" in line
    assert "peak 50 req/s needs" in line and "raise max_nodes" in line


def test_tier_the_slice_cannot_meet_at_batch_one(tmp_path, capsys) -> None:
    doc = set_key(dev_platform(), ["models", 1, "tier"], "standard")
    doc = set_key(doc, ["models", 1, "catalog"], "qwen2.5-7b-instruct")
    doc = set_key(doc, ["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "whole"})
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    line = next(ln for ln in err.splitlines() if "rtip:platform.models[1]:" in ln)
    assert "misses tier standard at batch 1" in line and "looser tier" in line
