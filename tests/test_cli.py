"""`rtip plan`: tables, the JSON document, rendered manifests, stack paths anywhere."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from rtip.cli import main
from rtip.stackfile import PROJECT_DIR
from serving.tiers import TIERS, Tier
from tests.conftest import record_of, spec_of, stack_doc, write_stack


def plan_json(capsys, *args: str) -> dict:
    """The JSON document; `rtip plan` exits 1 exactly when a deploy check found an error."""
    code = main(["plan", *args, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == (1 if any(f["severity"] == "error" for f in doc["deploy_checks"]) else 0)
    return doc


def test_tables_name_clusters_pools_models_and_counts(capsys) -> None:
    assert main(["plan", "dev"]) in (0, 1)  # 1: a deploy check failed (tests/test_deploycheck_deploy.py)
    out = capsys.readouterr().out
    for words in ("Clusters", "rtip-dev-us-east-1", "GPU pools", "g6.2xlarge", "time_slice:2",
                  "Models", "llama-3b", "Resources by type", "aws:eks/nodeGroup:NodeGroup"):
        assert words in out


def test_json_document_shape(capsys, stack) -> None:
    doc = plan_json(capsys, stack)
    assert doc["stack"] == stack
    for key in ("clusters", "models", "resources"):
        assert doc[key], key
    for cluster in doc["clusters"]:
        assert {"name", "cloud", "region", "zones", "pools"} <= set(cluster)
        for pool in cluster["pools"]:
            assert {"name", "machine_type", "gpu", "gpus_per_node", "min_nodes", "max_nodes",
                    "sharing"} <= set(pool)
    for res in doc["resources"]:
        assert {"type", "name", "urn", "parent", "provider", "dependencies", "inputs"} <= set(res)
    spec = spec_of(stack)
    assert {(c["cloud"], c["region"]) for c in doc["clusters"]} == \
        {(r.cloud, r.region) for r in spec.regions}
    planned = {(m["name"], m["region"]) for m in doc["models"]}
    assert planned == {(m.name, r.region) for m in spec.models for r in spec.regions
                       if m.regions is None or r.region in m.regions}


def test_json_lists_a_registry_copy_in_every_region(capsys) -> None:
    doc = plan_json(capsys, "prod")
    spec = spec_of("prod")
    by_cloud = {r["cloud"]: r for r in doc["registries"]}
    for cloud in {r.cloud for r in spec.regions}:
        assert by_cloud[cloud]["regions"] == [r.region for r in spec.regions if r.cloud == cloud]
        assert by_cloud[cloud]["source"] == by_cloud[cloud]["regions"][0]


def test_plan_flags_immutable_pool_fields(capsys) -> None:
    doc = plan_json(capsys, "prod")
    pools = {(c["cloud"], p["name"]): p for c in doc["clusters"] for p in c["pools"]}
    assert pools[("azure", "h100-mig")]["replace_on_change"] == ["gpuInstanceProfile"]
    assert pools[("aws", "h100-mig")]["replace_on_change"] == []


def test_json_shows_tiers_posture_and_what_was_stated(capsys) -> None:
    doc = plan_json(capsys, "prod")
    tiers = {t["name"]: t for t in doc["tiers"]}
    # MLPerf Llama-3.1-8B interactive p99 limits (FACTS.md section 7).
    assert (tiers["interactive"]["ttft_ms"], tiers["interactive"]["tpot_ms"]) == (500, 30)
    assert all(t["used"] == (t["name"] in {"standard", "interactive", "batch"}) for t in tiers.values())
    assert doc["posture"]["private_api"] is True and doc["posture"]["environment"] == "prod"
    pools = {(c["region"], p["name"]): p for c in doc["clusters"] for p in c["pools"]}
    # us-west-2's h100-mig states no sharing and no floor; us-east-1's states both.
    west, east = pools[("us-west-2", "h100-mig")], pools[("us-east-1", "h100-mig")]
    assert west["planned"] is True and west["stated_min_nodes"] == 0 and west["min_nodes"] >= 3
    assert east["planned"] is False and east["stated_min_nodes"] == 1
    assert east["sharing"] == "mig:all-balanced"


def test_json_models_carry_their_placement(capsys) -> None:
    doc = plan_json(capsys, "prod")
    by = {(m["name"], m["region"]): m for m in doc["models"]}
    big = by[("llama-70b", "us-east-1")]
    assert big["pool"] == "h100" and big["tensor_parallel"] >= 2 and big["slice"] == "nvidia.com/gpu"
    assert by[("llama-70b", "eastus")]["slice"] == "amd.com/gpu"
    assert by[("qwen-vl", "us-east-1")]["slice"].startswith("nvidia.com/mig-")
    # GKE advertises its own MIG partitions as whole GPUs of the partitioned node.
    gke = by[("qwen-vl", "us-central1")]
    assert (gke["slice"], gke["slice_mode"]) == ("nvidia.com/gpu", "mig")
    # An H100-80GB profile (FACTS.md section 5), whichever one the sizing chose.
    assert gke["mig_profile"] in {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
    assert by[("llama-8b", "us-east-1")]["quantization"] == "fp8"  # allowed, and what meets the tier
    for m in doc["models"]:
        assert m["memory_needed_gb"] <= m["slice_memory_gb"] * m["tensor_parallel"]
        assert m["replicas"]["min"] >= 3  # at least one per zone, three zones
        t = m["throughput"]
        assert t["ttft_ms"] <= TIERS[Tier(m["tier"])].ttft_ms
        assert t["tpot_ms"] <= TIERS[Tier(m["tier"])].tpot_ms
        # Losing any one of the three zones still serves peak: the fullest holds ceil(max / 3)
        # under the zone spread's maxSkew 1.
        assert (m["replicas"]["max"] - -(-m["replicas"]["max"] // 3)) * t["qps"] >= m["peak_qps"]
    assert doc["cost_per_hour"] == pytest.approx(
        sum(m["replicas"]["max"] * m["cost_per_replica_hour"] for m in doc["models"]), abs=0.01)


def test_stack_file_anywhere(tmp_path, capsys) -> None:
    copy = tmp_path / "Pulumi.mine.yaml"
    shutil.copy(PROJECT_DIR / "stacks" / "Pulumi.dev.yaml", copy)
    doc = plan_json(capsys, str(copy))
    assert doc["stack"] == "mine"
    assert doc["resources"][0]["urn"].startswith("urn:pulumi:mine::rtip::")


def test_out_writes_plan_and_manifests_per_cluster(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["plan", "staging", "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    doc = json.loads((out / "plan.json").read_text())
    assert doc["stack"] == "staging"
    folder = out / "rtip-staging-us-east-2"
    names = sorted(p.name for p in folder.iterdir())
    assert {"namespace-rtip-models.yaml", "namespace-rtip-system.yaml",
            "serviceaccount-rtip-models-model-server.yaml", "helmrelease-kserve-resources.yaml"} <= set(names)
    ns = yaml.safe_load((folder / "namespace-rtip-models.yaml").read_text())
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "rtip-models"


@pytest.mark.parametrize("stack_name", ["dev", "staging", "prod"])
def test_rendered_core_objects_validate_strictly(tmp_path, capsys, stack_name) -> None:
    out = tmp_path / stack_name
    assert main(["plan", stack_name, "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    version = spec_of(stack_name).kubernetes_version
    files = list(out.glob("*/*.yaml"))
    assert files
    for path in files:
        doc = yaml.safe_load(path.read_text())
        # Helm releases and custom resources are checked in tests/test_addons.py and test_crds.py.
        # Gateway API and its inference extension are CRDs too, though their groups end in k8s.io.
        group = doc.get("apiVersion", "").rpartition("/")[0]
        crd_group = group in ("gateway.networking.k8s.io", "inference.networking.k8s.io") \
            or group.endswith(".x-k8s.io")
        if doc["kind"] == "HelmRelease" or crd_group or ("." in group and not group.endswith(".k8s.io")):
            continue
        # A secret value is only a marker offline: the rest of the object is validated.
        doc = {k: v for k, v in doc.items() if v != "[secret]"}
        kubernetes_validate.validate(doc, version, strict=True)


def test_json_models_show_what_their_deployment_runs(capsys) -> None:
    doc = plan_json(capsys, "prod")
    record = record_of("prod")
    deployed = {(r.inputs["cluster"], r.inputs["model"]): r.inputs for r in record.resources
                if r.type == "rtip:k8s:ModelDeployment"}
    for m in doc["models"]:
        cluster = f"rtip-prod-{m['region']}"
        got = deployed[(cluster, m["name"])]
        # The plan's slice is the resource the deployment requests: one rule for both.
        assert (got["resource"], got["resourceCount"]) == (m["slice"], m["tensor_parallel"])
        assert m["deployment"]["runtime_image"] == got["runtimeImage"]
        if m["cloud"] == "azure" and m["slice_mode"] == "mig":
            # AKS partitions its one NVIDIA pool with one profile: the operator's single strategy
            # advertises the instances as whole GPUs.
            assert m["slice"] == "nvidia.com/gpu"
    # Whole nodes at peak cost at least the models' GPU shares at peak.
    assert doc["node_cost_per_hour"] >= doc["cost_per_hour"] > 0
    pools = [p for c in doc["clusters"] for p in c["pools"]]
    node_cost = sum(p["cost_per_hour_at_peak"] for p in pools)
    assert doc["node_cost_per_hour"] == pytest.approx(node_cost, abs=0.01)
    assert all(p["nodes_at_floor"] <= p["nodes_at_peak"] <= p["max_nodes"] for p in pools)
    assert {p["planned"] for p in pools} == {True, False}  # prod has both kinds


def test_plan_prints_the_note_of_an_alert_a_wide_tail_drops(tmp_path: Path, capsys) -> None:
    """dev's models with their tier held at p92: 8 % of requests may miss, and the 14.4x page
    would need 14.4 x 8 % = 115 % of them to miss (by hand), so the rule drops it and the plan
    says so under the models table; the 6x ticket (48 %) stays."""
    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    tiers = {m.get("tier", platform.get("default_tier", "standard")) for m in platform["models"]}
    platform["tiers"] = {t: {"percentile": 92} for t in tiers}
    path = write_stack(tmp_path, platform)
    assert main(["plan", str(path)]) in (0, 1)
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    for m in platform["models"]:
        for region in [r["region"] for r in platform["regions"]]:
            assert (f"note: {m['name']} in {region}: model {m['name']}: no 14.4x page alert over 1h: "
                    f"14.4 x its 8.0% tail is 100 % or more") in out
    assert "no 6x" not in out
