"""Images through the region's registry: the path function against the clouds' documented
formats, digests pinned in the stack, and every model server pulling from its own region."""

from __future__ import annotations

import copy

import pytest

from rtip import offline
from rtip.cli import main
from rtip.stackfile import load
from serving.charts import UnpinnedError
from serving.hardware import Cloud
from serving.images import RegionalRegistry, parse, regional_ref
from tests.conftest import record_of, stack_doc, write_stack

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_paths_follow_each_clouds_documented_format() -> None:
    # ECR user guide, "Pulling an image with a pull through cache rule":
    # <acct>.dkr.ecr.<region>.amazonaws.com/<prefix>/<repository>:<tag>
    assert regional_ref("docker.io/vllm/vllm-openai:v0.11.0",
                        "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip", Cloud.AWS) == \
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip/docker-hub/vllm/vllm-openai:v0.11.0"
    # Artifact Registry: <loc>-docker.pkg.dev/<project>/<repository>/<image>:<tag>
    assert regional_ref("docker.io/rocm/vllm:rocm7", "us-central1-docker.pkg.dev/p-1/rtip", Cloud.GCP) == \
        "us-central1-docker.pkg.dev/p-1/rtip-docker-hub/rocm/vllm:rocm7"
    # ACR: <registry>.azurecr.io/<target repository>:<tag>
    assert regional_ref("quay.io/jetstack/cert-manager-controller:v1.21.1", "r.azurecr.io", Cloud.AZURE) == \
        "r.azurecr.io/quay/jetstack/cert-manager-controller:v1.21.1"


def test_docker_hub_names_are_read_the_way_docker_reads_them() -> None:
    # Docker: no registry host means Docker Hub; official images live under library/ (which the
    # ECR guide says a pull-through path must include).
    assert regional_ref("nginx:1.27", "h/rtip", Cloud.AWS) == "h/rtip/docker-hub/library/nginx:1.27"
    assert regional_ref("vllm/vllm-openai:v1", "h/rtip", Cloud.AWS) == "h/rtip/docker-hub/vllm/vllm-openai:v1"
    assert parse("registry.k8s.io/pause:3.10").path == "pause"
    with pytest.raises(UnpinnedError, match=r"registry example\.com:5000 has no regional cache"):
        regional_ref("example.com:5000/app:v1", "h", Cloud.AWS)
    with pytest.raises(UnpinnedError, match="no tag or digest"):
        regional_ref("docker.io/vllm/vllm-openai", "h", Cloud.AWS)


def test_a_digest_replaces_the_tag() -> None:
    assert regional_ref("docker.io/vllm/vllm-openai:v0.11.0", "r.azurecr.io", Cloud.AZURE, DIGEST) == \
        f"r.azurecr.io/docker-hub/vllm/vllm-openai@{DIGEST}"
    with pytest.raises(ValueError, match="not sha256"):
        regional_ref("docker.io/vllm/vllm-openai:v0.11.0", "h", Cloud.AWS, "sha256:abc")
    registry = RegionalRegistry("h/rtip", Cloud.AWS, {"vllm-openai": DIGEST})
    assert registry.ref("vllm-openai", "x") == f"h/rtip/docker-hub/vllm/vllm-openai@{DIGEST}"
    assert registry.repository_and_tag("vllm-rocm", "x")[0] == "h/rtip/docker-hub/rocm/vllm"
    with pytest.raises(UnpinnedError, match="repository and a tag only"):
        registry.repository_and_tag("vllm-openai", "x")


def _runtime_images(record) -> dict[str, str]:
    return {r.inputs["model"] + "@" + r.inputs["cluster"]: r.inputs["runtimeImage"]
            for r in record.by_type("rtip:k8s:ModelDeployment")}


def test_every_model_server_pulls_from_its_own_regions_registry() -> None:
    record = record_of("prod")
    runtimes = record.by_type("kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime")
    assert runtimes
    expected_root = {
        "us-east-1": "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip/docker-hub/",
        "us-west-2": "123456789012.dkr.ecr.us-west-2.amazonaws.com/rtip/docker-hub/",
        "us-central1": "us-central1-docker.pkg.dev/rtip-prod-serving/rtip-docker-hub/",
        "eastus": "rtipprodimages.azurecr.io/docker-hub/",
    }
    for deployment in record.by_type("rtip:k8s:ModelDeployment"):
        cluster = next(a for a in record.ancestors(deployment) if a.type.endswith(":Cluster"))
        region = cluster.inputs["region"]
        image = deployment.inputs["runtimeImage"]
        assert image.startswith(expected_root[region]), (region, image)
        assert "docker.io" not in image
        (runtime,) = [r for r in runtimes if r.parent == deployment.urn]
        assert runtime.inputs["spec"]["containers"][0]["image"] == image


def test_a_digest_pinned_in_the_stack_is_what_the_cluster_pulls(tmp_path) -> None:
    doc = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    doc.setdefault("registries", {})["digests"] = {"vllm-openai": DIGEST}
    record = offline.run(load(str(write_stack(tmp_path, doc))))
    images = set(_runtime_images(record).values())
    root = "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip"
    assert images == {f"{root}/docker-hub/vllm/vllm-openai@{DIGEST}"}


def _bad(tmp_path, capsys, registries: dict) -> str:
    doc = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    doc["registries"] = {**doc.get("registries", {}), **registries}
    assert main(["plan", str(write_stack(tmp_path, doc))]) == 2
    return capsys.readouterr().err


def test_bad_image_settings_exit_2_with_the_key_path(tmp_path, capsys) -> None:
    err = _bad(tmp_path, capsys, {"digests": {"vllm-openai": "sha256:abc"}})
    assert "rtip:platform.registries.digests.vllm-openai: 'sha256:abc' is not a content digest" in err
    err = _bad(tmp_path, capsys, {"digests": {"vllm": DIGEST}})
    assert "rtip:platform.registries.digests.vllm: unknown image 'vllm'" in err
    err = _bad(tmp_path, capsys, {"upstream_credentials": {"nvcr.io": {"username": "u", "token": "t"}}})
    assert "rtip:platform.registries.upstream_credentials.nvcr.io: no regional cache for registry" in err


def test_an_aws_image_no_cache_can_fetch_and_nobody_mirrors_is_named(tmp_path, capsys) -> None:
    err = _bad(tmp_path, capsys, {"images": ["vllm-rocm"]})
    assert ("rtip:platform.registries.images: image vllm-openai (docker.io/vllm/vllm-openai) runs in "
            "regions[0] (us-east-1), and ECR pull-through caches fetch docker.io only with a login") in err
