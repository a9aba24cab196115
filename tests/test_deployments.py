"""ModelDeployment: every planned model on its cluster, wired from pool label to pod resource.

Reads the offline record of every stack (tests/conftest.py) and the plan the program built it
from (the program's stacks.plan.Plan), and checks the objects against each other, the CRDs and checkov.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from components.addons_gpu import MIG_CONFIG_FILE, MIG_CONFIGMAP, NVIDIA_ON
from components.azure.identity import USE_LABEL
from components.contract import ClusterFacts, PoolFacts, Taint
from components.gpu_pools import pool_facts
from components.models import NEEDS, ModelDeployment, prometheus_address, targets
from rtip import offline
from rtip.offline import Record, Resource
from rtip.render import cluster_of, manifest
from rtip.stackfile import load
from serving import _model_pod as pod
from serving import deployments as dep
from serving import gpu_config as gc
from serving.autoscaling import POLLING_INTERVAL_S
from serving.charts import IMAGES, ChartKey, Image, UnpinnedError, chart
from serving.hardware import MACHINES, Cloud, Vendor
from serving.sharing import Whole
from serving.slices import GPU_MEMORY_UTILIZATION, SharingMode
from stacks.model_plan import ModelRegionPlan
from tests.conftest import STACKS, record_of, spec_of
from tests.conftest import plan_of as stack_plan
from tests.test_addons import cloud_of, clusters, configmap, k8s_on, pool_view, pools, releases
from tests.test_checkov import checkov, failed
from tests.test_crds import body, check

MODEL_DEPLOYMENT = "rtip:k8s:ModelDeployment"
KINDS = {"ClusterServingRuntime", "InferenceService", "ScaledObject", "PodMonitor", "LocalModelCache",
         "PodDisruptionBudget", "PrometheusRule"}
# Failed checkov checks on the predictor Deployment KServe makes from an InferenceService, and why
# the platform keeps each.
ACCEPTED_ON_PREDICTOR: dict[str, str] = {
    "CKV_K8S_43": "images are pinned by release tag in serving/charts.py; digests need a registry "
                  "lookup the offline plan cannot make",
    "CKV_K8S_15": "IfNotPresent with pinned tags: a scale-up must not depend on the registry "
                  "answering, and a cached 12 GB image is the cold start's largest saving",
    "CKV2_K8S_6": "the predictor pod is scanned alone here; the rtip-models namespace's default "
                  "deny and its allow rules are separate objects (serving/netpol.py, tests/test_netpol.py)",
    "CKV_K8S_23": "ROCm model servers only (RUNS_AS_ROOT): /dev/kfd and /dev/dri belong to host "
                  "groups whose GIDs differ between node images",
    "CKV_K8S_40": "ROCm model servers only, as CKV_K8S_23",
}


# --- reading the record -----------------------------------------------------------------------

def deployments(record: Record) -> dict[tuple[str, str], Resource]:
    """ModelDeployment components by (cluster, model)."""
    owner = {c.urn: name for name, c in clusters(record).items()}
    found: dict[tuple[str, str], Resource] = {}
    for r in record.by_type(MODEL_DEPLOYMENT):
        cluster = next(owner[a.urn] for a in record.ancestors(r) if a.urn in owner)
        found[(cluster, r.inputs["model"])] = r
    return found


def parts(record: Record, component: Resource) -> dict[str, dict[str, Any]]:
    """The component's Kubernetes objects by kind, as `kubectl apply` takes them."""
    out: dict[str, dict[str, Any]] = {}
    for child in record.children(component.urn):
        doc = manifest(child)
        assert doc["kind"] not in out, child.urn
        out[doc["kind"]] = doc
    return out


def planned(stack: str) -> list[tuple[str, ModelRegionPlan]]:
    """(cluster, plan) of every model in every built region of the stack."""
    record = record_of(stack)
    by_region = {c.inputs["region"]: name for name, c in clusters(record).items()}
    return [(by_region[p.region], p) for p in stack_plan(stack).models if p.region in by_region]


def every_model() -> list[tuple[str, str, str]]:
    return [(s, c, p.model) for s in STACKS for c, p in planned(s)]


def plan_of(stack: str, cluster: str, model: str) -> ModelRegionPlan:
    return next(p for c, p in planned(stack) if (c, p.model) == (cluster, model))


def objects(stack: str, cluster: str, model: str) -> dict[str, dict[str, Any]]:
    record = record_of(stack)
    return parts(record, deployments(record)[(cluster, model)])


def predictor(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objs["InferenceService"]["spec"]["predictor"]


def pool_of(stack: str, cluster: str, name: str) -> dict[str, Any]:
    return next(p for p in pools(record_of(stack), cluster) if p["pool"] == name)


def predictor_deployment(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The Deployment KServe's Standard mode makes: the runtime's container merged with the
    model's (KServe appends the model's args to the runtime's), the predictor's pod fields."""
    isvc = objs["InferenceService"]
    spec = dict(predictor(objs))
    model = dict(spec.pop("model"))
    for kserve_only in ("modelFormat", "runtime", "storageUri", "minReplicas", "maxReplicas"):
        model.pop(kserve_only, None)
        spec.pop(kserve_only, None)
    labels = spec.pop("labels")
    annotations = spec.pop("annotations")
    runtime = objs["ClusterServingRuntime"]["spec"]["containers"][0]
    container = {**runtime, **model, "args": runtime["args"] + model["args"]}
    meta = isvc["metadata"]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{meta['name']}-predictor", "namespace": meta["namespace"],
                         "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {**spec, "containers": [container]}}}}


def flag(args: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return value


# --- one ModelDeployment per planned model ----------------------------------------------------

def test_every_planned_model_is_deployed_on_its_cluster(stack: str) -> None:
    record = record_of(stack)
    found = deployments(record)
    expected = {(c, p.model) for c, p in planned(stack)}
    assert expected and set(found) == expected
    for (cluster, _), component in found.items():
        objs = parts(record, component)
        assert KINDS - {"LocalModelCache"} <= set(objs) <= KINDS
        for child in record.children(component.urn):
            assert cluster_of(record, child) == cluster
            assert child.name.startswith(component.name + "-")


def test_model_objects_validate_against_their_crds(stack: str) -> None:
    record = record_of(stack)
    kinds: set[str] = set()
    for component in deployments(record).values():
        for child in record.children(component.urn):
            if child.type.startswith("kubernetes:policy/"):
                continue
            check(body(child))
            kinds.add(child.inputs["kind"])
    assert kinds >= {"ClusterServingRuntime", "InferenceService", "ScaledObject", "PodMonitor"}


def test_core_objects_and_the_predictor_pod_validate_strictly(stack: str) -> None:
    record = record_of(stack)
    version = spec_of(stack).kubernetes_version
    for component in deployments(record).values():
        objs = parts(record, component)
        kubernetes_validate.validate(objs["PodDisruptionBudget"], version, strict=True)
        kubernetes_validate.validate(predictor_deployment(objs), version, strict=True)


def test_objects_wait_for_the_release_that_brings_their_crd(stack: str) -> None:
    record = record_of(stack)
    for (cluster, _), component in deployments(record).items():
        rel = {r.inputs["name"]: r.urn for r in releases(record, cluster).values()}
        for child in record.children(component.urn):
            for key in NEEDS.get(child.inputs["kind"], ()):
                assert rel[chart(key).name] in child.dependencies, (child.name, key)


@pytest.mark.parametrize(("stack", "cluster", "model"), every_model())
def test_inference_service_carries_the_plan(stack: str, cluster: str, model: str) -> None:
    plan = plan_of(stack, cluster, model)
    objs = objects(stack, cluster, model)
    isvc = objs["InferenceService"]
    annotations = isvc["metadata"]["annotations"]
    assert annotations["serving.kserve.io/deploymentMode"] == "Standard"
    assert annotations["serving.kserve.io/autoscalerClass"] == "external"
    spec = predictor(objs)
    assert (spec["minReplicas"], spec["maxReplicas"]) == (plan.min_replicas, plan.max_replicas)
    assert spec["serviceAccountName"] == "model-server"
    assert spec["nodeSelector"]["rtip.dev/pool"] == plan.pool
    pool = pool_of(stack, cluster, plan.pool)
    # Tolerates the pool's own taints, exactly, and an unreachable node for 30 s (serving/failover.py).
    own = [t for t in spec["tolerations"] if t["operator"] == "Equal"]
    assert {f"{t['key']}={t['value']}:{t['effect']}" for t in own} == set(pool["taints"])
    assert [t for t in spec["tolerations"] if t["operator"] != "Equal"] == [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 30}]
    zone = [c for c in spec["topologySpreadConstraints"] if c["topologyKey"] == "topology.kubernetes.io/zone"]
    assert zone and zone[0]["whenUnsatisfiable"] == "DoNotSchedule" and zone[0]["maxSkew"] == 1
    assert zone[0]["labelSelector"]["matchLabels"].items() <= spec["labels"].items()
    azure = cloud_of(record_of(stack), cluster) is Cloud.AZURE
    assert (spec["labels"].get(USE_LABEL) == "true") == azure
    container = spec["model"]
    args = container["args"]
    assert flag(args, "served-model-name") == plan.model
    assert int(flag(args, "tensor-parallel-size")) == plan.resource_count
    assert int(flag(args, "max-model-len")) == plan.max_model_len
    assert 0 < float(flag(args, "gpu-memory-utilization")) <= GPU_MEMORY_UTILIZATION
    for side in ("requests", "limits"):
        amounts = container["resources"][side]
        assert {"cpu", "memory"} <= set(amounts)
        gpu = [k for k in amounts if k not in ("cpu", "memory")]
        assert len(gpu) == 1 and amounts[gpu[0]] == str(plan.resource_count)
    # Every container KServe runs has both requests and limits: only the model container here.
    assert len(predictor_deployment(objs)["spec"]["template"]["spec"]["containers"]) == 1


@pytest.mark.parametrize(("stack", "cluster", "model"), every_model())
def test_startup_probe_covers_the_cold_start_tail(stack: str, cluster: str, model: str) -> None:
    cold = plan_of(stack, cluster, model).cold_start
    tail = cold.image_pull_s + cold.weights_load_s + cold.engine_start_s
    probe = predictor(objects(stack, cluster, model))["model"]["startupProbe"]
    allowed = probe["periodSeconds"] * probe["failureThreshold"]
    assert allowed >= tail * pod.STARTUP_MARGIN >= tail
    assert probe["httpGet"]["port"] == pod.VLLM_PORT


@pytest.mark.parametrize(("stack", "cluster", "model"), every_model())
def test_scaled_object_targets_the_predictor_with_the_plans_bounds(stack: str, cluster: str,
                                                                    model: str) -> None:
    plan = plan_of(stack, cluster, model)
    objs = objects(stack, cluster, model)
    so = objs["ScaledObject"]["spec"]
    assert so["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": f"{objs['InferenceService']['metadata']['name']}-predictor"}
    assert (so["minReplicaCount"], so["maxReplicaCount"]) == (plan.min_replicas, plan.max_replicas)
    (trigger,) = so["triggers"]
    assert trigger["metadata"]["query"] == plan.autoscaling.query
    # The Prometheus of this cluster's kube-prometheus-stack release.
    release = releases(record_of(stack), cluster)["kube-prometheus-stack"].inputs
    assert trigger["metadata"]["serverAddress"] == (
        f"http://{release['name']}-prometheus.{release['namespace']}.svc.cluster.local:9090")
    # The PodMonitor feeds the query: it scrapes the model's pods as often as KEDA polls.
    monitor = objs["PodMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= predictor(objs)["labels"].items()
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert endpoint["interval"] == f"{POLLING_INTERVAL_S}s" == f"{so['pollingInterval']}s"
    ports = objs["ClusterServingRuntime"]["spec"]["containers"][0]["ports"]
    assert endpoint["portNumber"] in {p["containerPort"] for p in ports}
    pdb = objs["PodDisruptionBudget"]["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"].items() <= predictor(objs)["labels"].items()


# --- GPU wiring: pool label -> operator config -> the predictor's resource ------------------

@pytest.mark.parametrize(("stack", "cluster", "model"), every_model())
def test_slice_wiring_end_to_end(stack: str, cluster: str, model: str) -> None:
    plan = plan_of(stack, cluster, model)
    record = record_of(stack)
    cloud = cloud_of(record, cluster)
    spec = predictor(objects(stack, cluster, model))
    requests = spec["model"]["resources"]["requests"]
    pool = pool_of(stack, cluster, plan.pool)
    views = [pool_view(stack, cluster, p) for p in pools(record, cluster)]
    view = next(v for v in views if v.name == plan.pool)
    runtime = objects(stack, cluster, model)["ClusterServingRuntime"]["spec"]["containers"][0]
    if view.vendor is Vendor.AMD:
        assert requests.get("amd.com/gpu") == str(plan.resource_count)
        # From the region's registry (serving/images.py), under Docker Hub's namespace.
        assert runtime["image"].endswith("docker-hub/rocm/vllm:" + IMAGES["vllm-rocm"].tag)
        return
    assert runtime["image"].endswith("docker-hub/vllm/vllm-openai:" + IMAGES["vllm-openai"].tag)
    if plan.slice.mode is SharingMode.MIG:
        profile = plan.slice.mig_profile
        key = pool["labels"][gc.MIG_CONFIG_LABEL]
        nvidia = [v for v in views if v.vendor is Vendor.NVIDIA]
        if NVIDIA_ON[cloud].mig_manager:
            parted = yaml.safe_load(configmap(record, cluster, MIG_CONFIGMAP).inputs["data"][MIG_CONFIG_FILE])
            assert profile in parted["mig-configs"][key][0]["mig-devices"]
        strategy = gc.nvidia_config(nvidia).mig_strategy
        if cloud is Cloud.GCP:
            assert set(requests) - {"cpu", "memory"} == {"nvidia.com/gpu"}
            assert spec["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == profile
        elif strategy is gc.MigStrategy.MIXED:
            assert requests[f"nvidia.com/mig-{profile}"] == "1"
        else:
            assert requests["nvidia.com/gpu"] == "1"
        return
    assert requests["nvidia.com/gpu"] == str(plan.resource_count)
    if plan.slice.mode is SharingMode.TIME_SLICE:
        key = pool["labels"][gc.DEVICE_PLUGIN_CONFIG_LABEL]
        cm = configmap(record, cluster, "rtip-device-plugin-config")
        shared = yaml.safe_load(cm.inputs["data"][key])["sharing"]["timeSlicing"]["resources"]
        assert shared == [{"name": "nvidia.com/gpu", "replicas": plan.slice.shares}]
        # Each share sees the whole GPU's memory: vLLM may take only its share of it.
        util = float(flag(spec["model"]["args"], "gpu-memory-utilization"))
        assert util == pytest.approx(GPU_MEMORY_UTILIZATION / plan.slice.shares, abs=1e-3)


def test_stacks_exercise_every_slice_kind() -> None:
    seen: set[str] = set()
    for stack, cluster, model in every_model():
        requests = predictor(objects(stack, cluster, model))["model"]["resources"]["requests"]
        seen.add(str(plan_of(stack, cluster, model).slice.mode))
        if any(k.startswith("nvidia.com/mig-") for k in requests):
            seen.add("mig-mixed")
        if "amd.com/gpu" in requests:
            seen.add("amd")
    assert {"mig-mixed", "amd", "mig", "time_slice", "whole"} <= seen


def test_cached_models_read_the_pools_node_group(stack: str) -> None:
    record = record_of(stack)
    for cluster, plan in planned(stack):
        objs = parts(record, deployments(record)[(cluster, plan.model)])
        groups = {r.inputs["metadata"]["name"] for r in
                  k8s_on(record, cluster, "kubernetes:serving.kserve.io/v1alpha1:LocalModelNodeGroup")}
        cache = objs.get("LocalModelCache")
        container = predictor(objs)["model"]
        if pool_of(stack, cluster, plan.pool)["nvmePath"] is None:
            assert cache is None
            continue
        assert cache is not None and cache["spec"]["nodeGroups"] == [plan.pool] and plan.pool in groups
        assert cache["spec"]["sourceModelUri"] == plan.source_uri == container["storageUri"]
        assert flag(container["args"], "model") == pod.MODEL_DIR
        assert not any("runai_streamer" in a for a in container["args"])


# --- no local NVMe: stream from the bucket, no cache, and the plan says so --------------------

def test_pool_without_nvme_streams_weights_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    shape = MACHINES[Cloud.AWS]["g6.2xlarge"]
    monkeypatch.setitem(MACHINES[Cloud.AWS], "g6.2xlarge", replace(shape, local_nvme_gb=0))
    record = offline.run(load("dev"))
    assert not [r for r in record.resources if r.type.endswith(":LocalModelCache")]
    found = deployments(record)
    assert found
    for (_, model), component in found.items():
        args = predictor(parts(record, component))["model"]["args"]
        assert "--load-format=runai_streamer" in args
        assert flag(args, "model").startswith("s3://") and flag(args, "model").endswith(f"/{model}")
        assert "storageUri" not in predictor(parts(record, component))["model"]
        assert component.inputs["modelCache"] is False
        assert any("runai_streamer" in n and "no local NVMe" in n for n in component.inputs["notes"])


# --- bad input --------------------------------------------------------------------------------

def _cluster_without(plan: ModelRegionPlan) -> ClusterFacts:
    other = PoolFacts(name="other", shape=MACHINES[Cloud.AWS]["g6.2xlarge"], sharing=Whole(),
                      planned=False, capacity_type="on_demand", min_nodes=1, max_nodes=2, zones=("a",),
                      labels={"rtip.dev/pool": "other"}, taints=(Taint("nvidia.com/gpu", "true"),),
                      nvme_path=None)
    return ClusterFacts(name="rtip-t", cloud=Cloud.AWS, region=plan.region, zones=("a",),
                        kubernetes_version="1.33", provider=None, pools=(other,),  # type: ignore[arg-type]
                        endpoint=None, native_id=None)  # type: ignore[arg-type]


def test_planned_pool_missing_on_the_cluster_names_model_and_pool() -> None:
    _, plan = planned("dev")[0]
    cluster = _cluster_without(plan)
    with pytest.raises(ValueError, match=rf"model {plan.model}: planned pool '{plan.pool}' is not on "
                                         r"cluster rtip-t \(its pools: other\)"):
        targets(plan, cluster)
    # The component refuses before it registers anything.
    releases_ = {key: None for keys in NEEDS.values() for key in keys}
    with pytest.raises(ValueError, match=f"planned pool '{plan.pool}'"):
        ModelDeployment("x", plan, cluster, releases_)  # type: ignore[arg-type]


def test_runtime_image_without_pinned_tag_names_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, plan = planned("dev")[0]
    pool, where = targets(plan, _real_cluster_facts("dev", cluster))
    for bad in (Image("docker.io/vllm/vllm-openai", "latest"), Image("docker.io/vllm/vllm-openai", "")):
        with pytest.raises(UnpinnedError, match=rf"model {plan.model} .*no pinned tag"):
            dep.model_manifests(plan, pool, where, images={**IMAGES, "vllm-openai": bad})
    with pytest.raises(UnpinnedError, match=rf"model {plan.model} .*vllm-openai: no image"):
        dep.model_manifests(plan, pool, where, images={k: v for k, v in IMAGES.items() if k != "vllm-openai"})
    # Through the whole program: the stack fails, the message names the model.
    monkeypatch.setitem(IMAGES, "vllm-openai", Image("docker.io/vllm/vllm-openai", "latest"))
    with pytest.raises(UnpinnedError, match=f"model {plan.model}"):
        offline.run(load("dev"))


def _real_cluster_facts(stack: str, cluster: str) -> ClusterFacts:
    """The cluster's pools as the program builds them from the plan (no provider needed)."""
    region = next(r for r in stack_plan(stack).regions if r.cluster == cluster)
    return ClusterFacts(name=cluster, cloud=region.cloud, region=region.name,
                        zones=tuple(region.region.zones),
                        kubernetes_version=spec_of(stack).kubernetes_version,
                        provider=None, pools=tuple(pool_facts(region.cloud, p) for p in region.pools),  # type: ignore[arg-type]
                        endpoint=None, native_id=None)  # type: ignore[arg-type]


def test_prometheus_address_is_the_monitoring_releases_service() -> None:
    record = record_of("prod")
    for cluster in clusters(record):
        rel = releases(record, cluster)[chart(ChartKey.KUBE_PROMETHEUS_STACK).name].inputs
        assert prometheus_address().startswith(f"http://{rel['name']}-prometheus.{rel['namespace']}.")


# --- checkov on what KServe will run ----------------------------------------------------------

def test_predictor_pods_pass_checkov(tmp_path: Path) -> None:
    record = record_of("prod")
    amd: set[str] = set()
    for (cluster, model), component in deployments(record).items():
        objs = parts(record, component)
        doc = predictor_deployment(objs)
        name = f"{cluster}-{model}"
        doc["metadata"]["name"] = name
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
        if "amd.com/gpu" in predictor(objs)["model"]["resources"]["requests"]:
            amd.add(name)
    reports = checkov(tmp_path)
    assert sum(r.get("summary", {}).get("resource_count", 0) for r in reports) > 0
    root_checks = {"CKV_K8S_23", "CKV_K8S_40"}
    unexpected = [(c, res) for c, res in failed(reports) if c not in ACCEPTED_ON_PREDICTOR
                  or (c in root_checks and not any(n in res for n in amd))]
    assert not unexpected, unexpected


def test_resources_fit_the_node_share() -> None:
    for stack, cluster, model in every_model():
        plan = plan_of(stack, cluster, model)
        requests = predictor(objects(stack, cluster, model))["model"]["resources"]["requests"]
        pool = pool_of(stack, cluster, plan.pool)
        shape = MACHINES[cloud_of(record_of(stack), cluster)][pool["machineType"]]
        share = pod.node_share(plan.slice, shape)
        assert int(requests["cpu"]) <= math.floor(shape.vcpus * share) or requests["cpu"] == "1"
        assert int(requests["memory"].removesuffix("Gi")) <= shape.memory_gib * share


def test_autoscaling_notes_reach_the_models_notes() -> None:
    """What the autoscaling says about its bounds (serving/autoscaling.py `notes`) is among the
    notes the model's component hands the plan."""
    cluster, plan = planned("dev")[0]
    pool, where = targets(plan, _real_cluster_facts("dev", cluster))
    said = "model x: max 3 leaves less than a zone's share of its floor"
    noted = replace(plan, autoscaling=replace(plan.autoscaling, notes=(said,)))
    assert said in dep.model_manifests(noted, pool, where).notes
    assert said not in dep.model_manifests(plan, pool, where).notes
