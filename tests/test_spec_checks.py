"""Every class of bad input of the structure issue, through the CLI: exit 2, the exact key path,
the message in plain words (no regex, no pydantic wording), no traceback, nothing planned."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

import stacks.plan
from rtip.cli import main
from rtip.stackfile import PROJECT_DIR
from stacks.checks_limits import check_limits
from stacks.loader import load_spec
from tests.conftest import stack_doc, write_stack
from tests.test_bad_input import dev_platform, plan_fails, prod_platform, set_key

# Pydantic's own wording and regex syntax never reach the user.
NOT_PLAIN = ("Input should", "String should", "pattern", "^[", "]$", "{0,", "pydantic", "type=",
             "Spec", "value_error", "Traceback")


def problem_line(err: str, where: str) -> str:
    """The one line of `err` about `where` (the whole key path), checked for plain words."""
    lines = [ln for ln in err.splitlines() if f"{where}: " in ln]
    assert lines, err
    message = lines[0].split(f"{where}: ", 1)[1]
    for word in NOT_PLAIN:
        assert word not in message, lines[0]
    return lines[0]


def rejects(capsys: pytest.CaptureFixture[str], tmp_path, doc: dict, where: str, *words: str) -> str:
    err = plan_fails(capsys, write_stack(tmp_path, doc))
    line = problem_line(err, f"rtip:platform.{where}")
    for w in words:
        assert w in line, line
    return line


def raw_fails(capsys: pytest.CaptureFixture[str], tmp_path, text: str) -> str:
    path = tmp_path / "Pulumi.raw.yaml"
    path.write_text(text)
    return plan_fails(capsys, path)


# --- duplicate YAML keys -------------------------------------------------------------------------

DEV_HEAD = """config:
  rtip:platform:
    environment: dev
    regions:
      - cloud: aws
        region: us-east-1
        zones: [us-east-1a, us-east-1b]
        network: {cidr: 10.10.0.0/16}
"""


@pytest.mark.parametrize(("text", "where", "words"), [
    (DEV_HEAD + "        zones: [us-east-1c]\n", "config.rtip:platform.regions[0].zones",
     "line 9, column 9: key 'zones' is written twice in this mapping (first on line 7)"),
    (DEV_HEAD + "    environment: prod\n", "config.rtip:platform.environment",
     "line 9, column 5: key 'environment' is written twice in this mapping (first on line 3)"),
    (DEV_HEAD + "  rtip:platform: {}\n", "config.rtip:platform",
     "line 9, column 3: key 'rtip:platform' is written twice"),
    (DEV_HEAD + "        gpu_pools:\n          - {name: a, machine_type: g6.xlarge, max_nodes: 2,"
     " max_nodes: 3}\n", "config.rtip:platform.regions[0].gpu_pools[0].max_nodes",
     "line 10, column 62: key 'max_nodes' is written twice"),
])
def test_duplicate_yaml_keys_are_rejected_at_any_depth(tmp_path, capsys, text, where, words) -> None:
    err = raw_fails(capsys, tmp_path, text)
    line = problem_line(err, where)
    assert words in line and "write it once" in line


def test_a_merge_key_may_be_overridden(tmp_path, capsys) -> None:
    text = DEV_HEAD.replace("network: {cidr: 10.10.0.0/16}", "network: &net {cidr: 10.10.0.0/16}")
    text += "        system_pool: {<<: {machine_type: m7i.large, min_nodes: 2}, min_nodes: 3}\n"
    # The API is private (no api_access_cidrs): the deployer runs inside the network.
    text += '    deployer: {network: inside, aws: {role_arn: "arn:aws:iam::123456789012:role/d"}}\n'
    path = tmp_path / "Pulumi.merge.yaml"
    path.write_text(text)
    assert main(["plan", str(path), "--json"]) == 0
    capsys.readouterr()


# --- duplicates in lists, at every level --------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["regions", 0, "zones"], ["us-east-1a", "us-east-1a"], "regions[0].zones",
     "zone 'us-east-1a' is listed 2 times"),
    (["regions", 0, "gpu_pools", 1], {"name": "l4", "machine_type": "g6.xlarge", "max_nodes": 2},
     "regions[0].gpu_pools[1].name", "pool name 'l4' is used twice"),
    (["regions", 0, "gpu_pools", 0, "zones"], ["us-east-1b", "us-east-1b"],
     "regions[0].gpu_pools[0].zones[1]", "'us-east-1b' is listed twice (also at [0])"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "auto", "allow": ["whole", "whole"]},
     "regions[0].gpu_pools[0].sharing.allow[1]", "'whole' is listed twice"),
    (["regions", 0, "api_access_cidrs"], ["203.0.113.0/24", "203.0.113.0/24"],
     "regions[0].api_access_cidrs[1]", "203.0.113.0/24 is listed twice (also at [0])"),
    (["regions", 0, "api_access_cidrs"], ["203.0.113.0/24", "203.0.113.128/25"],
     "regions[0].api_access_cidrs[1]", "203.0.113.128/25 lies inside 203.0.113.0/24"),
    (["models", 1, "name"], "llama-3b", "models[1].name", "model name 'llama-3b' is used twice"),
    (["models", 0, "regions"], ["us-east-1", "us-east-1"], "models[0].regions[1]",
     "'us-east-1' is listed twice"),
    (["models", 0, "allowed_quantization"], ["fp8", "fp8"], "models[0].allowed_quantization[1]",
     "'fp8' is listed twice"),
    (["tenants", 1], {"name": "ml-team", "requests_per_minute": 1, "models": ["*"],
                      "api_key_secret": "k"}, "tenants[1].name", "tenant name 'ml-team' is used twice"),
    (["tenants", 0, "models"], ["llama-3b", "llama-1b", "llama-3b"], "tenants[0].models[2]",
     "'llama-3b' is listed twice (also at [0])"),
    (["registries"], {"images": ["vllm-openai", "vllm-openai"]}, "registries.images[1]",
     "'vllm-openai' is listed twice"),
])
def test_repeated_items_are_rejected(tmp_path, capsys, path, value, where, words) -> None:
    doc = dev_platform()
    if path[-1] == 1 and isinstance(value, dict):  # append a second pool or tenant
        doc_list = doc
        for key in path[:-1]:
            doc_list = doc_list[key]
        doc_list.append(value)
    else:
        set_key(doc, path, value)
    rejects(capsys, tmp_path, doc, where, words)


def test_a_region_listed_twice(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][1]["region"] = "us-east-1"
    rejects(capsys, tmp_path, doc, "regions[1].region", "aws region 'us-east-1' appears more than once")


# --- empty text and empty lists where they mean nothing -----------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["regions", 0, "gpu_pools", 0, "machine_type"], "", "regions[0].gpu_pools[0].machine_type",
     "must not be empty or start or end with a space (got '')"),
    (["regions", 0, "system_pool", "machine_type"], " m7i.large", "regions[0].system_pool.machine_type",
     "must not be empty or start or end with a space"),
    (["regions", 0, "zones", 0], "", "regions[0].zones[0]", "must not be empty"),
    (["models", 0, "catalog"], "", "models[0].catalog", "must not be empty"),
    (["models", 0, "pool"], "", "models[0].pool", "must not be empty"),
    (["tenants", 0, "api_key_secret"], "  ", "tenants[0].api_key_secret", "must not be empty"),
    (["tenants", 0, "models", 0], "", "tenants[0].models[0]", "must not be empty"),
    (["models", 0, "name"], "", "models[0].name", "2 to 40 characters"),
    (["tenants", 0, "models"], [], "tenants[0].models", "must not be empty"),
    (["regions", 0, "gpu_pools", 0, "zones"], [], "regions[0].gpu_pools[0].zones",
     "must not be empty; leave the key out for the default"),
    (["models", 0, "regions"], [], "models[0].regions", "must not be empty; leave the key out"),
    (["registries"], {"images": []}, "registries.images", "must not be empty"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "mig", "profiles": {}},
     "regions[0].gpu_pools[0].sharing.profiles", "must not be empty"),
])
def test_empty_values_that_mean_nothing(tmp_path, capsys, path, value, where, words) -> None:
    rejects(capsys, tmp_path, set_key(dev_platform(), path, value), where, words)


@pytest.mark.parametrize(("path", "value"), [
    (["models", 1, "allowed_quantization"], []),  # native weights only: the default
    (["regions", 0, "api_access_cidrs"], []),  # no public API access: the default
])
def test_empty_lists_that_mean_the_default_are_accepted(tmp_path, capsys, path, value) -> None:
    doc = set_key(dev_platform(), path, value)
    if path[-1] == "api_access_cidrs":  # a private API: the deployer must run inside the network
        doc["deployer"] = {"network": "inside", "aws": {"role_arn": "arn:aws:iam::123456789012:role/d"}}
    assert main(["plan", str(write_stack(tmp_path, doc)), "--json"]) == 0
    capsys.readouterr()


# --- numbers: non-finite, strict, limits --------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["models", 0, "peak_qps"], float("nan"), "models[0].peak_qps", "expected a finite number, got .nan"),
    (["models", 0, "peak_qps"], float("inf"), "models[0].peak_qps", "expected a finite number, got .inf"),
    (["tiers"], {"gold": {"ttft_ms": float("nan"), "tpot_ms": 10}}, "tiers.gold.ttft_ms",
     "expected a finite number, got .nan"),
    (["regions", 0, "gpu_pools", 0, "max_nodes"], float("inf"), "regions[0].gpu_pools[0].max_nodes",
     "expected a whole number, got the number .inf"),
    (["regions", 0, "gpu_pools", 0, "max_nodes"], "4", "regions[0].gpu_pools[0].max_nodes",
     "expected a whole number, got the text '4'; remove the quotes"),
    (["regions", 0, "gpu_pools", 0, "max_nodes"], 2.5, "regions[0].gpu_pools[0].max_nodes",
     "expected a whole number, got the number 2.5"),
    (["regions", 0, "gpu_pools", 0, "max_nodes"], True, "regions[0].gpu_pools[0].max_nodes",
     "expected a whole number, got the boolean true"),
    (["models", 0, "peak_qps"], "2", "models[0].peak_qps", "expected a number, got the text '2'; "
     "remove the quotes"),
    (["models", 0, "peak_qps"], 0, "models[0].peak_qps", "must be more than 0 (got 0)"),
    (["regions", 0, "gpu_pools", 0, "sharing", "replicas"], 32, "regions[0].gpu_pools[0].sharing.replicas",
     "must be at most 16 (got 32)"),
    (["models", 0, "tensor_parallel"], 16, "models[0].tensor_parallel", "must be at most 8 (got 16)"),
])
def test_numbers(tmp_path, capsys, path, value, where, words) -> None:
    rejects(capsys, tmp_path, set_key(dev_platform(), path, value), where, words)


# --- a number or boolean where text is expected: a hint to quote it -----------------------------

@pytest.mark.parametrize(("text_from", "text_to", "where", "words"), [
    ('kubernetes_version: "1.33"', "kubernetes_version: 1.30", "kubernetes_version",
     "expected text, got the number 1.3; put the value in quotes"),
    ("api_key_secret: mlTeamApiKey", "api_key_secret: 12345", "tenants[0].api_key_secret",
     'expected text, got the number 12345; put the value in quotes: "12345"'),
    ("gpu: L4", "gpu: yes", "regions[0].gpu_pools[0].gpu",
     "expected text, got the boolean true; YAML reads unquoted true/false/yes/no/on/off as booleans"),
])
def test_a_number_where_text_is_expected_gets_a_hint_to_quote_it(tmp_path, capsys, text_from, text_to,
                                                                  where, words) -> None:
    text = (PROJECT_DIR / "stacks" / "Pulumi.dev.yaml").read_text()
    assert text_from in text
    err = raw_fails(capsys, tmp_path, text.replace(text_from, text_to))
    assert words in problem_line(err, f"rtip:platform.{where}")


def test_azure_zones_as_numbers_get_the_quote_hint(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][3]["zones"] = [1, 2, 3]
    rejects(capsys, tmp_path, doc, "regions[3].zones[0]", 'got the number 1; put the value in quotes: "1"')


# --- patterns in words ---------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["models", 0, "name"], "Llama_3", "models[0].name",
     "2 to 40 characters: lowercase letters, digits and '-', starting with a letter and ending with a "
     "letter or digit (got 'Llama_3')"),
    (["regions", 0, "gpu_pools", 0, "name"], "l" * 41, "regions[0].gpu_pools[0].name",
     "2 to 40 characters"),
    (["tenants", 0, "name"], "ml-team-", "tenants[0].name", "ending with a letter or digit"),
    (["kubernetes_version"], "1.27", "kubernetes_version",
     "a Kubernetes minor version from 1.28 to 1.39, written as text in quotes"),
    (["registries"], {"name_prefix": "RTIP"}, "registries.name_prefix",
     "3 to 12 characters: lowercase letters and digits, starting with a letter"),
    (["tiers"], {"Gold": {"ttft_ms": 100, "tpot_ms": 10}}, "tiers.Gold",
     "as a key: 2 to 40 characters: lowercase letters, digits and '-'"),
])
def test_patterns_are_explained_in_words(tmp_path, capsys, path, value, where, words) -> None:
    rejects(capsys, tmp_path, set_key(dev_platform(), path, value), where, words)


def test_gcp_project_number_unquoted_gets_the_quote_hint(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][2]["project_number"] = 123456789012
    rejects(capsys, tmp_path, doc, "regions[2].project_number", "got the number 123456789012; put "
            'the value in quotes: "123456789012"')


# --- shapes: unknown keys, tags, containers, null -----------------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["regions", 0, "gpu_pools", 0, "max_node"], 4, "regions[0].gpu_pools[0].max_node",
     "unknown key (did you mean max_nodes?); expected one of: name, machine_type"),
    (["regions", 0, "gpu_pools", 0, "sharing"], {"mode": "bogus"}, "regions[0].gpu_pools[0].sharing.mode",
     "unknown mode 'bogus'; expected one of: auto, whole, mig, time_slice, partition"),
    (["regions", 0, "gpu_pools", 0, "sharing"], "whole", "regions[0].gpu_pools[0].sharing",
     "expected a mapping (key: value), got the text 'whole'"),
    (["regions", 0, "zones"], "us-east-1a", "regions[0].zones", "expected a list"),
    (["regions"], None, "regions", "expected a list ([a, b] or one '- item' line each), got nothing"),
    (["environment"], "qa", "environment", "expected 'dev', 'staging' or 'prod' (got 'qa')"),
    (["models", 0, "allowed_quantization"], ["fp9"], "models[0].allowed_quantization[0]",
     "expected 'none', 'fp8', 'int8' or 'int4' (got 'fp9')"),
])
def test_shapes(tmp_path, capsys, path, value, where, words) -> None:
    rejects(capsys, tmp_path, set_key(dev_platform(), path, value), where, words)


def test_a_region_without_its_cloud(tmp_path, capsys) -> None:
    doc = dev_platform()
    del doc["regions"][0]["cloud"]
    rejects(capsys, tmp_path, doc, "regions[0].cloud", "required key is missing; expected one of: aws, "
            "gcp, azure")


def test_a_mig_profile_count_of_zero(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["regions"][0]["gpu_pools"][0]["sharing"] = {"mode": "mig", "profiles": {"3g.40gb": 0}}
    rejects(capsys, tmp_path, doc, 'regions[0].gpu_pools[0].sharing.profiles["3g.40gb"]',
            "must be at least 1 (got 0)")


# --- machine types against the catalog of their cloud -------------------------------------------

@pytest.mark.parametrize(("region", "machine", "words"), [
    (0, "m5.large", "'m5.large' is not a system-pool machine type of aws; expected one of: c7i.2xlarge"),
    (0, "p5.48xlarge", "'p5.48xlarge' is a GPU machine type; the system pool runs on CPU machines of aws"),
    (2, "m7i.xlarge", "'m7i.xlarge' is not a system-pool machine type of gcp; expected one of: "
     "c3-standard-4"),
    (3, "Standard_D4_v2", "not a system-pool machine type of azure; expected one of: Standard_D16ds_v5"),
])
def test_system_pool_machine_type_is_in_its_clouds_catalog(tmp_path, capsys, region, machine, words) -> None:
    doc = prod_platform()
    doc["regions"][region]["system_pool"] = {"machine_type": machine}
    rejects(capsys, tmp_path, doc, f"regions[{region}].system_pool.machine_type", words)


# --- network ranges ------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "where", "words"), [
    (["regions", 0, "network", "cidr"], "8.8.0.0/16", "regions[0].network.cidr",
     "8.8.0.0/16 is not in private address space; use a range inside 10.0.0.0/8, 172.16.0.0/12 or "
     "192.168.0.0/16"),
    (["regions", 0, "network", "cidr"], "172.32.0.0/16", "regions[0].network.cidr",
     "not in private address space"),
    (["regions", 0, "network", "cidr"], "100.64.0.0/16", "regions[0].network.cidr",
     "carrier-grade NAT space (RFC 6598)"),
    (["regions", 0, "network", "cidr"], "10.10.0.1/16", "regions[0].network.cidr",
     "10.10.0.1/16 has host bits set; the network it lies in is 10.10.0.0/16"),
    (["regions", 0, "network", "cidr"], 167772160, "regions[0].network.cidr",
     "expected an IPv4 network written as text, e.g. 10.10.0.0/16 (got the number 167772160)"),
    (["regions", 0, "api_access_cidrs"], ["0.0.0.0/0"], "regions[0].api_access_cidrs[0]",
     "0.0.0.0/0 opens the Kubernetes API to the whole internet"),
    (["regions", 0, "api_access_cidrs"], ["0.0.0.0/1"], "regions[0].api_access_cidrs[0]",
     "too wide for API access (at most a /8)"),
    (["regions", 0, "api_access_cidrs"], ["10.1.0.0/24"], "regions[0].api_access_cidrs[0]",
     "10.1.0.0/24 is not a public network"),
])
def test_network_ranges(tmp_path, capsys, path, value, where, words) -> None:
    rejects(capsys, tmp_path, set_key(dev_platform(), path, value), where, words)


def test_the_whole_internet_is_rejected_in_every_environment(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["environment"] = "staging"
    doc["regions"][0]["api_access_cidrs"] = ["0.0.0.0/0"]
    rejects(capsys, tmp_path, doc, "regions[0].api_access_cidrs[0]", "whole internet")


# --- limits before the planner ------------------------------------------------------------------

@pytest.fixture
def planner_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> None:
        raise AssertionError("the planner ran on a stack with a value over its limit")
    monkeypatch.setattr(stacks.plan, "plan_stack", boom)


@pytest.mark.usefixtures("planner_must_not_run")
@pytest.mark.parametrize(("change", "where", "words"), [
    ({"tensor_parallel": 2}, "models[0].tensor_parallel",
     "2 GPUs per replica must sit on one node, but no node of its pool 'l4' in us-east-1 has 2 GPUs: "
     "l4 has 1 (g6.2xlarge)"),
    ({"tokens": {"input_tokens": 130000, "output_tokens": 2000}}, "models[0].tokens",
     "130000 prompt + 2000 output = 132000 tokens per request is more than llama-3.2-3b-instruct's "
     "context of 131072 tokens"),
    ({"max_model_len": 1024}, "models[0].max_model_len",
     "1024 tokens is less than the token mix (1155 prompt + 211 output = 1366 tokens per request)"),
    ({"max_model_len": 4096, "tokens": {"input_tokens": 4000, "output_tokens": 500}},
     "models[0].max_model_len", "4096 tokens is less than the token mix"),
    ({"max_output_tokens": 200}, "models[0].max_output_tokens",
     "200 tokens is below the token mix's mean output of 211"),
])
def test_limits_are_checked_before_the_planner(tmp_path, capsys, change, where, words) -> None:
    doc = dev_platform()
    doc["models"][0].update(change)
    rejects(capsys, tmp_path, doc, where, words)


@pytest.mark.usefixtures("planner_must_not_run")
def test_a_stated_cap_is_held_to_the_drain_limit_on_every_cloud(tmp_path, capsys) -> None:
    """prod's llama-3b (batch: MLPerf 405B server, 6 s TTFT, 175 ms TPOT): 5 s settle + 6 s +
    5,000 x 0.175 s + 8 s hook margin = 894 s, past the cluster autoscaler's 600 s on GKE and
    AKS; the most within it is (600 - 19) / 0.175 = 3,320. dev runs on EKS only, where Karpenter
    waits for the pod's own grace period, and is held to the same 600 s: the same cap fails there,
    and 3,320 passes."""
    doc = prod_platform()
    (i,) = [i for i, m in enumerate(doc["models"]) if m["name"] == "llama-3b"]
    doc["models"][i]["max_output_tokens"] = 5000
    rejects(capsys, tmp_path, doc, f"models[{i}].max_output_tokens",
            "a response of 5000 tokens at the batch tier's 175 ms per token needs a 894 s drain when its "
            "replica is scaled in, past the 600 s a drain may take")
    doc = dev_platform()
    (j,) = [j for j, m in enumerate(doc["models"]) if m["name"] == "llama-3b"]  # batch, on EKS only
    doc["models"][j]["max_output_tokens"] = 5000
    rejects(capsys, tmp_path, doc, f"models[{j}].max_output_tokens", "needs a 894 s drain",
            "past the 600 s a drain may take", "at most 3320 tokens")
    doc["models"][j]["max_output_tokens"] = 3320
    assert list(check_limits(load_spec(doc, "dev"))) == []


@pytest.mark.usefixtures("planner_must_not_run")
def test_a_tier_too_slow_for_the_drain_is_checked_before_the_planner(tmp_path, capsys) -> None:
    """No stated cap: the tier's default must hold the mix's mean output. The batch tier at 3 s a
    token: (600 - 5 settle - 8 margin - 6 TTFT) / 3 = 193 tokens, below the default mix's 211."""
    doc = dev_platform()
    doc["tiers"] = {"batch": {"tpot_ms": 3000}}
    rejects(capsys, tmp_path, doc, "models[0].tier", "lets a response of at most 193 tokens drain "
            "within 600 s", "below the token mix's mean output of 211")


@pytest.mark.usefixtures("planner_must_not_run")
def test_tensor_parallel_against_every_pool_of_the_region(tmp_path, capsys) -> None:
    doc = prod_platform()
    doc["models"][2]["tensor_parallel"] = 4  # qwen-vl on h100-mig: one NC40ads H100 per node in eastus
    line = rejects(capsys, tmp_path, doc, "models[2].tensor_parallel", "no node of its pool 'h100-mig' in "
                   "eastus has 4 GPUs: h100-mig has 1 (Standard_NC40ads_H100_v5)")
    assert "us-east-1" not in line  # p5.48xlarge has 8
    doc = prod_platform()
    doc["regions"] = [doc["regions"][3]]
    doc["regions"][0]["gpu_pools"] = [doc["regions"][0]["gpu_pools"][0]]
    doc["models"] = [{"name": "big", "catalog": "llama-3.1-8b-instruct", "peak_qps": 1,
                      "tensor_parallel": 8}]
    doc["tenants"] = []
    rejects(capsys, tmp_path, doc, "models[0].tensor_parallel", "no node of any pool in eastus has 8 GPUs")


def staging_platform() -> dict:
    return copy.deepcopy(stack_doc("staging")["config"]["rtip:platform"])


@pytest.mark.parametrize(("tp", "ok"), [(4, True), (8, False)])
def test_tensor_parallel_at_and_over_the_gpus_of_a_node(tmp_path, capsys, tp, ok) -> None:
    doc = staging_platform()
    assert doc["models"][0]["pool"] == "l40s"  # g6e.12xlarge: 4 L40S a node
    doc["models"][0]["tensor_parallel"] = tp
    if ok:
        assert main(["plan", str(write_stack(tmp_path, doc)), "--json"]) == 0
        capsys.readouterr()
    else:
        rejects(capsys, tmp_path, doc, "models[0].tensor_parallel",
                "no node of its pool 'l40s' in us-east-2 has 8 GPUs: l40s has 4 (g6e.12xlarge)")


# --- through a real process ---------------------------------------------------------------------

def test_the_console_script_prints_plain_lines_and_no_traceback(tmp_path) -> None:
    text = (PROJECT_DIR / "stacks" / "Pulumi.dev.yaml").read_text()
    path = tmp_path / "Pulumi.proc.yaml"
    path.write_text(text.replace("peak_qps: 0.5", "peak_qps: .nan").replace("gpu: L4", "gpu: L4\n"
                                                                             "            gpu: L40S"))
    done = subprocess.run([sys.executable, "-m", "rtip.cli", "plan", str(path)], cwd=PROJECT_DIR,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "config.rtip:platform.regions[0].gpu_pools[0].gpu: line" in done.stderr
    path.write_text(text.replace("peak_qps: 0.5", "peak_qps: .nan"))
    done = subprocess.run([sys.executable, "-m", "rtip.cli", "plan", str(path)], cwd=PROJECT_DIR,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "rtip:platform.models[0].peak_qps: expected a finite number, got .nan" in done.stderr
