"""Deploy reality of the local model cache, AMD on AKS, the AKS NVMe and Prometheus' volume.

Each assertion reads an upstream source the code does not: the pinned charts' KINDS.txt and
values.yaml, the CRD schemas, SOURCES.md / FACTS.md notes on KServe's agent, Prometheus' sizing rule.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.gpu_pools import pool_facts
from rtip.deploycheck import Severity, run_checks
from rtip.offline import Record, Resource
from serving import nodeprep
from serving.hardware import Cloud
from tests.conftest import SHARED, STACKS, plan_of, record_of
from tests.test_addons import cloud_of, every_cluster, k8s_on, pools, releases
from tests.test_crds import check, schema_of

CHARTS = SHARED / "charts"
LOCALMODEL_CRDS = CHARTS / "kserve-localmodel-crd/v0.20.0/crds"


def _values(chart: str, version: str) -> dict[str, Any]:
    return yaml.safe_load((CHARTS / chart / version / "values.yaml").read_text())


def _kinds_txt(chart: str, version: str) -> str:
    return (CHARTS / chart / version / "KINDS.txt").read_text()


def _dig(doc: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        doc = doc[part]
    return doc


def _crd_schema(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    """Kubernetes' matching rule for one NoSchedule taint."""
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]) or t.get("key") not in (None, taint["key"]):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint["value"]:
            return True
    return False


def _taints(pool: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for spelled in pool["taints"]:
        key, rest = spelled.split("=", 1)
        value, effect = rest.rsplit(":", 1)
        out.append({"key": key, "value": value, "effect": effect})
    return out


def _nvme_clusters() -> list[tuple[str, str]]:
    return [(s, c) for s, c in every_cluster() if any(p["nvmePath"] for p in pools(record_of(s), c))]


# --- 1. KServe local model cache ------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_no_deploy_time_kind_or_values_errors(stack: str) -> None:
    """Before: every LocalModelCache/NodeGroup waited only for kserve-crd, which lacks their CRDs."""
    findings = [f for f in run_checks(record_of(stack))
                if f.check in ("kinds", "values") and f.severity is Severity.ERROR]
    assert findings == []


@pytest.mark.parametrize(("stack", "cluster"), _nvme_clusters())
def test_cache_charts_installed_crds_first(stack: str, cluster: str) -> None:
    record = record_of(stack)
    rel = releases(record, cluster)
    # The chart whose KINDS.txt installs the cache's CRDs, and the one that runs agent and controller.
    assert "crd serving.kserve.io/LocalModelCache" in _kinds_txt("kserve-localmodel-crd", "v0.20.0")
    assert "apps/v1 DaemonSet" in _kinds_txt("kserve-localmodel-resources", "v0.20.0")
    crd, res = rel["kserve-localmodel-crd"], rel["kserve-localmodel-resources"]
    kserve = rel["kserve-resources"]
    assert crd.urn in kserve.dependencies  # the flag's defaulting lists LocalModelCaches
    assert {crd.urn, kserve.urn, rel["cert-manager"].urn} <= set(res.dependencies)
    for r in record.resources:
        if r.inputs.get("kind") in ("LocalModelCache", "LocalModelNodeGroup") and \
                r.type.startswith("kubernetes:") and _cluster(record, r) == cluster:
            assert {crd.urn, res.urn} <= set(r.dependencies), r.name


def _cluster(record: Record, r: Resource) -> str | None:
    from rtip.render import cluster_of
    return cluster_of(record, r)


@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_agent_runs_on_exactly_the_nvme_nodes(stack: str, cluster: str) -> None:
    record = record_of(stack)
    rel = releases(record, cluster)
    if "kserve-localmodel-resources" not in rel:
        assert not any(p["nvmePath"] for p in pools(record, cluster))
        return
    values = rel["kserve-localmodel-resources"].inputs["values"]
    chart = _values("kserve-localmodel-resources", "v0.20.0")
    # The keys the DaemonSet template reads (SOURCES.md: kserve.localmodelnode.controller.*).
    notes = (CHARTS / "SOURCES.md").read_text()
    assert "nodeSelector/tolerations/affinity come from kserve.localmodelnode.controller.*" in notes
    ours = _dig(values, "kserve.localmodelnode.controller")
    assert set(ours) <= set(_dig(chart, "kserve.localmodelnode.controller"))
    # The deep merge keeps the chart's own selector, so the node label must be exactly it.
    selector = {**_dig(chart, "kserve.localmodelnode.controller.nodeSelector"), **ours["nodeSelector"]}
    for p in pools(record, cluster):
        on = all(p["labels"].get(k) == v for k, v in selector.items())
        assert on is bool(p["nvmePath"]), p["pool"]
        if on:
            assert all(_tolerated(t, ours["tolerations"]) for t in _taints(p)), p["pool"]


def _agent_host_path() -> str:
    """The agent DaemonSet's hostPath, as FACTS.md section 9 records it from upstream."""
    facts = (SHARED / "FACTS.md").read_text()
    found = re.search(r"host path `(/[^`]+)`,\s+mounted at `/mnt/models`", facts)
    assert found, "FACTS.md no longer states the agent's host path"
    return found.group(1)


@pytest.mark.parametrize(("stack", "cluster"), _nvme_clusters())
def test_pv_is_created_on_the_node_at_the_agents_path(stack: str, cluster: str) -> None:
    record = record_of(stack)
    schema = _crd_schema(LOCALMODEL_CRDS / "serving.kserve.io_localmodelnodegroups.yaml")
    pv_schema = schema["properties"]["spec"]["properties"]["persistentVolumeSpec"]["properties"]
    assert "hostPath" in pv_schema and "type" in pv_schema["hostPath"]["properties"]
    for r in k8s_on(record, cluster, "kubernetes:serving.kserve.io/v1alpha1:LocalModelNodeGroup"):
        body = {k: r.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        check(body)
        pv = body["spec"]["persistentVolumeSpec"]
        assert "local" not in pv  # a local PV needs the path to exist already
        assert pv["hostPath"] == {"path": _agent_host_path(), "type": "DirectoryOrCreate"}
    # And node prep binds that path onto the NVMe on every NVMe node.
    [ds] = [r for r in k8s_on(record, cluster, "kubernetes:apps/v1:DaemonSet")
            if r.inputs["metadata"]["name"] == nodeprep.NODE_PREP_NAME]
    script = ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
    [nvme] = {p["nvmePath"] for p in pools(record, cluster) if p["nvmePath"]}
    assert f'CACHE="{nvme}"' in script and f'HOSTPATH="{_agent_host_path()}"' in script
    assert 'mount --bind "$CACHE/models" "$HOSTPATH"' in script


@pytest.mark.parametrize(("stack", "cluster"), _nvme_clusters())
def test_caches_name_a_download_account_the_cloud_identity_trusts(stack: str, cluster: str) -> None:
    record = record_of(stack)
    job_ns = _dig(_values("kserve-resources", "v0.20.0"), "kserve.localmodel.jobNamespace")
    cache_schema = _crd_schema(LOCALMODEL_CRDS / "serving.kserve.io_localmodelcaches.yaml")
    assert "serviceAccountName" in cache_schema["properties"]["spec"]["properties"]
    caches = k8s_on(record, cluster, "kubernetes:serving.kserve.io/v1alpha1:LocalModelCache")
    assert caches
    names = {c.inputs["spec"].get("serviceAccountName") for c in caches}
    assert len(names) == 1 and None not in names
    [sa_name] = names
    accounts = [r for r in k8s_on(record, cluster, "kubernetes:core/v1:ServiceAccount")
                if r.inputs["metadata"]["name"] == sa_name and r.inputs["metadata"]["namespace"] == job_ns]
    assert len(accounts) == 1
    assert any(r.inputs["metadata"]["name"] == job_ns
               for r in k8s_on(record, cluster, "kubernetes:core/v1:Namespace"))
    cloud = cloud_of(record, cluster)
    model_sa = next(r for r in k8s_on(record, cluster, "kubernetes:core/v1:ServiceAccount")
                    if r.inputs["metadata"]["name"] == "model-server")
    # The same cloud identity: the same annotations as the model servers' account.
    assert accounts[0].inputs["metadata"].get("annotations") == model_sa.inputs["metadata"].get("annotations")
    trust = _trust(record, cloud)
    assert (job_ns, sa_name) in trust and ("rtip-models", "model-server") in trust


def _trust(record: Record, cloud: Cloud) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for r in record.resources:
        if cloud is Cloud.AWS and r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation":
            out.add((r.inputs["namespace"], r.inputs["serviceAccount"]))
        elif cloud is Cloud.GCP and r.type == "gcp:serviceaccount/iAMMember:IAMMember" and \
                r.inputs.get("role") == "roles/iam.workloadIdentityUser":
            ns, sa = re.search(r"\[([^/]+)/([^\]]+)\]", r.inputs["member"]).groups()  # type: ignore[union-attr]
            out.add((ns, sa))
        elif cloud is Cloud.AZURE and r.type.endswith(":FederatedIdentityCredential"):
            _, _, ns, sa = r.inputs["subject"].split(":")
            out.add((ns, sa))
    return out


# --- 5. AMD on AKS --------------------------------------------------------------------------------

def _amd_cluster() -> tuple[Record, str]:
    record = record_of("prod")
    for _, cluster in every_cluster():
        if "gpu-operator-charts" in releases(record, cluster):
            return record, cluster
    raise AssertionError("prod has no AMD cluster")


def test_amd_driver_image_in_the_regions_registry() -> None:
    record, cluster = _amd_cluster()
    [dc] = k8s_on(record, cluster, "kubernetes:amd.com/v1alpha1:DeviceConfig")
    driver = dc.inputs["spec"]["driver"]
    assert driver["enable"] is True
    schema = schema_of("amd.com/v1alpha1", "DeviceConfig")
    pattern = schema["properties"]["spec"]["properties"]["driver"]["properties"]["image"]["pattern"]
    assert re.fullmatch(pattern, driver["image"])
    store = next(r for r in record.resources if r.type.startswith("azure-native:containerregistry")
                 and r.type.endswith(":Registry"))
    assert driver["image"].split("/")[0] == store.outputs["loginServer"]
    assert ":" not in driver["image"].split("/")[-1]  # the operator tags it (CRD description)


def test_amd_images_follow_the_v151_chart() -> None:
    record, cluster = _amd_cluster()
    chart = _values("amd-gpu-operator", "v1.5.1")
    values = releases(record, cluster)["gpu-operator-charts"].inputs["values"]
    login = next(r for r in record.resources if r.type.startswith("azure-native:containerregistry")
                 and r.type.endswith(":Registry")).outputs["loginServer"]
    # The chart's own images, as the region's ACR cache rules serve them: `<login server>/
    # docker-hub/<Docker Hub path>` (Azure docs, "Artifact cache in Azure Container Registry").
    upstream = _dig(chart, "controllerManager.manager.image.repository")
    assert upstream.startswith("docker.io/")
    assert _dig(values, "controllerManager.manager.image.repository") == \
        f"{login}/docker-hub/{upstream.removeprefix('docker.io/')}"
    tag = "controllerManager.manager.image.tag"
    assert _dig(values, tag) == _dig(chart, tag)
    [dc] = k8s_on(record, cluster, "kubernetes:amd.com/v1alpha1:DeviceConfig")
    utils = dc.inputs["spec"]["commonConfig"]["utilsContainer"]["image"]
    upstream = _dig(chart, "deviceConfig.spec.commonConfig.utilsContainer.image").rsplit(":", 1)[0]
    release = yaml.safe_load((CHARTS / "amd-gpu-operator/v1.5.1/Chart.yaml").read_text())["appVersion"]
    assert utils == f"{login}/docker-hub/{upstream.removeprefix('docker.io/')}:{release}"


def test_one_node_feature_discovery_per_cluster() -> None:
    record, cluster = _amd_cluster()
    rel = releases(record, cluster)
    amd_chart = yaml.safe_load((CHARTS / "amd-gpu-operator/v1.5.1/Chart.yaml").read_text())
    [dep] = [d for d in amd_chart["dependencies"] if d["name"] == "node-feature-discovery"]
    amd_on = _dig(rel["gpu-operator-charts"].inputs["values"], dep["condition"])
    nvidia_on = "gpu-operator" in rel and rel["gpu-operator"].inputs["values"].get(
        "nfd", {}).get("enabled", _dig(_values("nvidia-gpu-operator", "v26.7.0"), "nfd.enabled"))
    assert [amd_on, bool(nvidia_on)].count(True) == 1
    if nvidia_on:
        # AMD's NodeFeatureRule needs NFD's CRD, which NVIDIA's release installs; its NFD worker
        # must label the AMD nodes too.
        assert rel["gpu-operator"].urn in rel["gpu-operator-charts"].dependencies
        tol = rel["gpu-operator"].inputs["values"]["node-feature-discovery"]["worker"]["tolerations"]
        for p in pools(record, cluster):
            assert all(_tolerated(t, tol) for t in _taints(p)), p["pool"]


# --- 6. AKS NVMe ----------------------------------------------------------------------------------

def test_aks_cache_is_on_the_assembled_nvme_not_the_temp_disk() -> None:
    record = record_of("prod")
    for stack, cluster in _nvme_clusters():
        if stack != "prod" or cloud_of(record, cluster) is not Cloud.AZURE:
            continue
        for p in pools(record, cluster):
            assert p["nvmePath"] not in ("/mnt", "/mnt/")  # AKS mounts the temp disk at /mnt
        [ds] = [r for r in k8s_on(record, cluster, "kubernetes:apps/v1:DaemonSet")
                if r.inputs["metadata"]["name"] == nodeprep.NODE_PREP_NAME]
        script = ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
        assert "mdadm --create" in script and "--level=0" in script and "/sys/block/nvme*n1" in script
        assert 'mount -o noatime "$MD" "$CACHE"' in script
        return
    raise AssertionError("prod has no AKS NVMe cluster")


# --- 9. Prometheus volume and AKS spot ------------------------------------------------------------

STORAGE_CLASS = {Cloud.AWS: "gp3", Cloud.GCP: "standard-rwo", Cloud.AZURE: "managed-csi"}


@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_prometheus_on_a_claim_sized_for_retention(stack: str, cluster: str) -> None:
    record = record_of(stack)
    spec = releases(record, cluster)["kube-prometheus-stack"].inputs["values"]["prometheus"]["prometheusSpec"]
    storage = spec["storageSpec"]
    crd = yaml.load((CHARTS / "kube-prometheus-stack/88.5.3/crds/crd-prometheuses.yaml").read_text(),
                    Loader=yaml.SafeLoader)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema = spec_schema["properties"]["storage"]
    jsonschema.Draft7Validator(schema).validate(storage)
    claim = storage["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == STORAGE_CLASS[cloud_of(record, cluster)]
    days = int(spec["retention"].rstrip("d"))
    gib = int(claim["resources"]["requests"]["storage"].removesuffix("Gi"))
    # prometheus.io storage docs: retention_s * samples/s * (1-2) bytes/sample.
    assert gib * 2**30 >= days * 86_400 * 10_000 * 2


def test_aks_spot_pool_taint_is_tolerated_by_its_models() -> None:
    plan = plan_of("prod")
    azure = [p for r in plan.regions if r.cloud == "azure" for p in r.pools]
    pool = dataclasses.replace(azure[0], capacity_type="spot")
    facts = pool_facts(Cloud.AZURE, pool)
    assert ("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule") in {
        (t.key, t.value, t.effect) for t in facts.taints}
    on_demand = pool_facts(Cloud.AZURE, dataclasses.replace(azure[0], capacity_type="on_demand"))
    assert all(t.key != "kubernetes.azure.com/scalesetpriority" for t in on_demand.taints)
