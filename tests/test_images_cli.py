"""`rtip images STACK`: per region, every toolkit image, the reference its cluster pulls, how it
gets there, and the copy commands of mirrored ones; run through the CLI."""

from __future__ import annotations

import copy
import json

import pytest

from rtip.cli import main
from tests.conftest import stack_doc, write_stack

DIGEST = "sha256:" + "89abcdef01234567" * 4
ECR = "123456789012.dkr.ecr.{}.amazonaws.com"


@pytest.fixture(scope="module")
def prod() -> dict:
    # One CLI run for the module: the offline engine takes seconds per stack.
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["images", "prod", "--json"]) == 0
    return {r["region"]: r for r in json.loads(out.getvalue())["regions"]}


def _keys(region: dict) -> set[str | None]:
    return {i["key"] for i in region["images"]}


def test_each_region_lists_the_images_its_pools_run(prod) -> None:
    # From stacks/Pulumi.prod.yaml by hand: H100 pools with local NVMe (p5.48xlarge, a3-highgpu-8g,
    # NC40ads_H100_v5) run vLLM's CUDA image and node preparation; eastus's MI300X pool adds
    # the ROCm vLLM image, the AMD operator's images and the driver image the operator builds.
    assert list(prod) == ["us-east-1", "us-west-2", "us-central1", "eastus"]
    # Every cluster runs the front door: Envoy Gateway, its proxy and rate-limit service, the AI
    # Gateway controller and ext_proc, the endpoint picker and Valkey (components/gateway.py).
    gateway = {"envoy-gateway", "envoy-proxy", "envoy-ratelimit", "ai-gateway-controller",
               "ai-gateway-extproc", "epp", "ratelimit-redis"}
    # ... and the redacting log collector's contrib image (components/logs.py).
    gateway |= {"otel-collector"}
    for region in ("us-east-1", "us-west-2", "us-central1"):
        assert _keys(prod[region]) == {"vllm-openai", "node-prep"} | gateway, region
    amd = {"amd-gpu-operator", "amd-device-plugin", "amd-node-labeller", "amd-metrics-exporter", "amd-utils"}
    # The config manager runs only where a pool is partitioned (serving/manifests.py).
    expected = {"vllm-openai", "vllm-rocm", "node-prep", None} | amd | gateway
    assert _keys(prod["eastus"]) - {"amd-config-manager"} == expected
    [driver] = [i for i in prod["eastus"]["images"] if i["key"] is None]
    assert driver["via"] == "built in the cluster" and driver["pulled"].endswith(".azurecr.io/amdgpu-driver")


def test_every_image_is_pulled_from_its_own_regions_registry(prod) -> None:
    for name, region in prod.items():
        for image in region["images"]:
            pulled = image["pulled"]
            # Two upstreams: Docker Hub and registry.k8s.io (the endpoint picker), filed under
            # their namespaces `docker-hub` and `k8s`.
            if region["cloud"] == "aws":
                assert pulled.startswith(tuple(f"{ECR.format(name)}/rtip/{ns}/"
                                               for ns in ("docker-hub", "k8s"))), pulled
            elif region["cloud"] == "gcp":
                assert pulled.startswith(tuple(f"{name}-docker.pkg.dev/rtip-prod-serving/rtip-{ns}/"
                                               for ns in ("docker-hub", "k8s"))), pulled
            else:
                assert pulled.split("/")[0].endswith(".azurecr.io"), pulled
            assert "docker.io" not in pulled


def test_how_each_cloud_gets_them(prod) -> None:
    # prod names no Docker Hub login: ECR mirrors (components/aws/registries.py), filled in the
    # first AWS region and replicated; GKE's remote repository and AKS's cache rules pull
    # anonymously.
    east = {i["key"]: i for i in prod["us-east-1"]["images"]}
    assert east["vllm-openai"]["via"] == "mirrored repository"
    host = ECR.format("us-east-1")
    assert east["vllm-openai"]["copy"] == [
        f"aws ecr get-login-password --region us-east-1 | crane auth login {host} -u AWS --password-stdin",
        f"crane copy docker.io/vllm/vllm-openai:v0.11.0 {host}/rtip/docker-hub/vllm/vllm-openai:v0.11.0"]
    # prod pins node-prep by digest (registries.digests): the copy takes exactly that image.
    digest = stack_doc("prod")["config"]["rtip:platform"]["registries"]["digests"]["node-prep"]
    assert east["node-prep"]["copy"][-1] == \
        f"crane copy docker.io/library/ubuntu@{digest} {host}/rtip/docker-hub/library/ubuntu:24.04"
    west = {i["key"]: i for i in prod["us-west-2"]["images"]}
    assert west["vllm-openai"]["copy"] == []
    assert "replicated by ECR from us-east-1" in west["vllm-openai"]["source"]
    assert {i["via"] for i in prod["us-central1"]["images"]} == {"remote repository"}
    assert {i["via"] for i in prod["eastus"]["images"] if i["key"]} == {"cache rule"}


def test_a_pinned_digest_is_pulled_and_copied_by_digest(tmp_path, capsys) -> None:
    doc = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    doc.setdefault("registries", {})["digests"] = {"node-prep": DIGEST}
    assert main(["images", str(write_stack(tmp_path, doc)), "--json"]) == 0
    [region] = json.loads(capsys.readouterr().out)["regions"]
    prep = next(i for i in region["images"] if i["key"] == "node-prep")
    host = ECR.format(region["region"])
    assert prep["pulled"] == f"{host}/rtip/docker-hub/library/ubuntu@{DIGEST}"
    # crane copy keeps the digest, so the tag the immutable repository gets holds that manifest.
    assert prep["copy"][-1] == \
        f"crane copy docker.io/library/ubuntu@{DIGEST} {host}/rtip/docker-hub/library/ubuntu:24.04"


def test_text_output_prints_the_copy_commands(capsys) -> None:
    assert main(["images", "dev"]) == 0
    out = capsys.readouterr().out
    assert "crane copy docker.io/vllm/vllm-openai:v0.11.0" in out


def test_bad_stack_input_exits_2(tmp_path, capsys) -> None:
    assert main(["images", "nope"]) == 2
    doc = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    doc.setdefault("registries", {})["images"] = ["vllm-openai"]
    assert main(["images", str(write_stack(tmp_path, doc))]) == 2
    assert "image node-prep (docker.io/library/ubuntu) runs in regions[0]" in capsys.readouterr().err
