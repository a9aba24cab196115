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
    # The registry's login server, whatever name components/azure/registries.py gives it.
    acr = next(r for r in record.resources if r.type.startswith("azure-native:containerregistry")
               and r.type.endswith(":Registry")).outputs["loginServer"]
    expected_root = {
        "us-east-1": "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip/docker-hub/",
        "us-west-2": "123456789012.dkr.ecr.us-west-2.amazonaws.com/rtip/docker-hub/",
        "us-central1": "us-central1-docker.pkg.dev/rtip-prod-serving/rtip-docker-hub/",
        "eastus": f"{acr}/docker-hub/",
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


# --- every Kubernetes object's images, not only the model servers' -------------------------------

def _image_fields(doc, path=""):
    """Every image a document names, read independently of rtip/deploycheck: `image` strings,
    operator CRD fields named `<x>Image`, and Helm `{repository, tag}` maps, with the registry
    in front where the map names one apart (inferencepool v1.5.0: `{registry, repository, tag}`)."""
    if isinstance(doc, dict):
        if isinstance(doc.get("repository"), str) and "tag" in doc:
            head = f"{doc['registry']}/" if isinstance(doc.get("registry"), str) else ""
            yield path, f"{head}{doc['repository']}:{doc['tag']}"
        for k, v in doc.items():
            if (k == "image" or k.endswith("Image")) and isinstance(v, str):
                yield f"{path}.{k}", v
            else:
                yield from _image_fields(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for n, v in enumerate(doc):
            yield from _image_fields(v, f"{path}[{n}]")


def test_no_kubernetes_object_names_an_image_outside_its_regions_registry() -> None:
    record = record_of("prod")
    acr = next(r for r in record.resources if r.type.startswith("azure-native:containerregistry")
               and r.type.endswith(":Registry")).outputs["loginServer"]
    # The clouds' documented registry paths (see test_paths_follow_each_clouds_documented_format).
    roots = {"us-east-1": "123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip/",
             "us-west-2": "123456789012.dkr.ecr.us-west-2.amazonaws.com/rtip/",
             "us-central1": "us-central1-docker.pkg.dev/rtip-prod-serving/rtip-",
             "eastus": f"{acr}/"}
    seen = 0
    for r in record.resources:
        if not r.type.startswith("kubernetes:") or r.provider is None:
            continue
        provider = record.get(r.provider)
        cluster = next((a for a in record.ancestors(provider) if a.type.endswith(":Cluster")), None)
        if cluster is None:
            continue
        doc = r.inputs.get("values") if r.type.endswith("helm.sh/v3:Release") else r.inputs.get("spec")
        for path, image in _image_fields(doc or {}):
            seen += 1
            assert image.startswith(roots[cluster.inputs["region"]]), (r.name, path, image)
    assert seen > 20  # node prep on every NVMe cluster, the AMD operator, every model server


@pytest.fixture(scope="module")
def pinned_amd(tmp_path_factory):
    doc = copy.deepcopy(stack_doc("prod")["config"]["rtip:platform"])
    doc.setdefault("registries", {})["digests"] = {"amd-device-plugin": DIGEST, "node-prep": DIGEST}
    return offline.run(load(str(write_stack(tmp_path_factory.mktemp("pins"), doc))))


def test_digest_pins_reach_the_amd_operator_and_node_prep(pinned_amd) -> None:
    [dc] = pinned_amd.by_type("kubernetes:amd.com/v1alpha1:DeviceConfig")
    plugin = dc.inputs["spec"]["devicePlugin"]
    assert plugin["devicePluginImage"].endswith(f"/docker-hub/rocm/k8s-device-plugin@{DIGEST}")
    # The labeller is the same repository under another tag: the pin is per image key.
    assert plugin["nodeLabellerImage"].endswith("/docker-hub/rocm/k8s-device-plugin:labeller-1.31.0.10")
    preps = [r for r in pinned_amd.by_type("kubernetes:apps/v1:DaemonSet")
             if r.inputs["metadata"]["name"] == "rtip-nvme-cache"]
    assert len(preps) == 4  # every prod cluster has NVMe pools
    for ds in preps:
        pod = ds.inputs["spec"]["template"]["spec"]
        for c in pod["initContainers"] + pod["containers"]:
            assert c["image"].endswith(f"docker-hub/library/ubuntu@{DIGEST}")  # `-` joins on GCP


def test_a_digest_for_the_amd_controller_is_refused_with_its_reason(tmp_path, capsys) -> None:
    # The v1.5.1 chart writes `image: <repository>:<tag>` (ROCm/gpu-operator
    # helm-charts-k8s/templates/deployment.yaml): a digest has nowhere to go.
    err = _bad(tmp_path, capsys, {"digests": {"amd-gpu-operator": DIGEST}})
    assert "rtip:platform.registries.digests.amd-gpu-operator: image amd-gpu-operator cannot be pulled " \
           "by digest" in err


def test_node_prep_on_aws_nvme_needs_a_login_or_a_mirror(tmp_path, capsys) -> None:
    # dev's g6.2xlarge has local NVMe, so its cluster runs node preparation from docker.io.
    err = _bad(tmp_path, capsys, {"images": ["vllm-openai"]})
    assert ("rtip:platform.registries.images: image node-prep (docker.io/library/ubuntu) runs in "
            "regions[0] (us-east-1), and ECR pull-through caches fetch docker.io only with a login") in err
    doc = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    doc["registries"] = {"images": ["vllm-openai"],
                         "upstream_credentials": {"docker.io": {"username": "u", "token": "t"}}}
    assert main(["plan", str(write_stack(tmp_path, doc, extra={
        "rtip:u": {"secure": "v1:u"}, "rtip:t": {"secure": "v1:t"}}))]) == 0


# --- the AMD driver repository: the operator tags it ----------------------------------------------

DEVICE_CONFIG = "kubernetes:amd.com/v1alpha1:DeviceConfig"


def _device_config(driver: str) -> dict:
    plugin = "r.azurecr.io/docker-hub/rocm/k8s-device-plugin:1"
    return {"spec": {"driver": {"enable": True, "image": driver},
                     "devicePlugin": {"devicePluginImage": plugin}}}


def test_policy_wants_the_driver_repository_in_the_own_registry_and_untagged() -> None:
    from tests.test_policies import flags, res

    # ROCm/gpu-operator v1.5.1 internal/kmmmodule/kmmmodule.go addNodeInfoSuffixToImageTag appends
    # `:<os>-${KERNEL_FULL_VERSION}-<version>` to spec.driver.image: a bare repository is right.
    bare = res(DEVICE_CONFIG, "bare", _device_config("r.azurecr.io/amdgpu-driver"))
    tagged = res(DEVICE_CONFIG, "tagged", _device_config("r.azurecr.io/amdgpu-driver:v1"))
    outside = res(DEVICE_CONFIG, "outside", _device_config("docker.io/rocm/amdgpu-driver"))
    assert flags("images-pinned-own-registry", bare, tagged, outside) == {"tagged", "outside"}


def test_deploy_check_rejects_a_tagged_driver_repository() -> None:
    from rtip.deploycheck.images import check_images
    from rtip.offline import Record, Resource

    def config(name: str, driver: str) -> Resource:
        return Resource(type=DEVICE_CONFIG, name=name, urn=f"urn:{name}", parent=None, provider=None,
                        dependencies=(), inputs=_device_config(driver), outputs={}, custom=True)

    findings = check_images(Record(stack="t", resources=[
        config("bare", "r.azurecr.io/amdgpu-driver"), config("tagged", "r.azurecr.io/amdgpu-driver:v1")]))
    assert [(f.urn, "appends its own tag" in f.message) for f in findings] == [("urn:tagged", True)]


def test_a_digest_for_the_front_doors_chart_images_is_refused(tmp_path, capsys) -> None:
    # ai-gateway-helm and inferencepool take an image as repository and tag (their values.yaml):
    # a digest is a stack error, not a failure inside `pulumi up`.
    for key in ("ai-gateway-controller", "epp"):
        err = _bad(tmp_path, capsys, {"digests": {key: DIGEST}})
        assert f"rtip:platform.registries.digests.{key}: image {key} cannot be pulled by digest" in err
