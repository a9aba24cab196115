"""ClusterAddons: pinned releases, their order, and the GPU wiring from pool label to operator config."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.addons_gpu import (
    AMD_NAMESPACE,
    DCM_CONFIGMAP,
    DEVICE_PLUGIN_CONFIGMAP,
    MIG_CONFIG_FILE,
    MIG_CONFIGMAP,
    NVIDIA_ON,
    model_cache,
)
from rtip.offline import Record, Resource
from rtip.render import HELM_RELEASE, cluster_of, manifest
from serving import gpu_config as gc
from serving import manifests, mig
from serving.charts import CHARTS, IMAGES, ChartKey, UnpinnedError, chart, image, pinned_ref
from serving.hardware import GPUS, Cloud, GpuModel, Vendor, machine
from serving.sharing import Partition, Whole, mig_sharing
from tests.conftest import SHARED, STACKS, plan_of, record_of, spec_of

FACTS = SHARED / "FACTS.md"
PLATFORM_CHARTS = {ChartKey.CERT_MANAGER, ChartKey.KSERVE_CRD, ChartKey.KSERVE, ChartKey.KEDA,
                   ChartKey.KUBE_PROMETHEUS_STACK}


# --- reading the record -----------------------------------------------------------------------

def clusters(record: Record) -> dict[str, Resource]:
    return {r.name: r for r in record.resources
            if r.type.startswith("rtip:") and r.type.endswith(":Cluster")}


def cloud_of(record: Record, cluster: str) -> Cloud:
    return Cloud(clusters(record)[cluster].type.split(":")[1])


def k8s_on(record: Record, cluster: str, type_: str) -> list[Resource]:
    return [r for r in record.by_type(type_) if cluster_of(record, r) == cluster]


def releases(record: Record, cluster: str) -> dict[str, Resource]:
    return {r.inputs["name"]: r for r in k8s_on(record, cluster, HELM_RELEASE)}


def configmap(record: Record, cluster: str, name: str) -> Resource | None:
    return next((r for r in k8s_on(record, cluster, "kubernetes:core/v1:ConfigMap")
                 if r.inputs["metadata"]["name"] == name), None)


def pools(record: Record, cluster: str) -> list[dict[str, Any]]:
    owner = clusters(record)[cluster].urn
    return [r.inputs for r in record.by_type("rtip:k8s:GpuPool")
            if owner in {a.urn for a in record.ancestors(r)}]


def pool_view(stack: str, cluster: str, p: dict[str, Any]) -> SimpleNamespace:
    """The recorded pool's labels with the plan's typed sharing of the same pool."""
    region = next(r for r in plan_of(stack).regions if r.cluster == cluster)
    planned = region.pool(p["pool"])
    return SimpleNamespace(name=p["pool"], gpu=planned.gpu, vendor=planned.vendor, sharing=planned.sharing,
                           labels=p["labels"], gpus_per_node=int(p["gpusPerNode"]))


def every_cluster() -> list[tuple[str, str]]:
    return [(s, c) for s in STACKS for c in clusters(record_of(s))]


# --- pinned tables ----------------------------------------------------------------------------

def facts_versions() -> dict[str, str]:
    """Chart -> version from FACTS.md section 6's table."""
    section = FACTS.read_text().split("## 6.")[1].split("\n## ")[0]
    out: dict[str, str] = {}
    for row in re.findall(r"^\|(.+)\|(.+)\|(.+)\|$", section, re.M):
        names, _source, version = (c.strip() for c in row)
        for name in names.split(","):
            out[name.split("(")[0].strip()] = version
    return out


def test_chart_versions_are_exactly_the_upstream_facts() -> None:
    # FACTS.md section 6 where it lists the chart; else the pinned release's folder of chart facts
    # in ../shared/charts (SOURCES.md: the folder name is the release tag).
    facts = facts_versions()
    for key, pinned in CHARTS.items():
        if pinned.name in facts:
            assert facts[pinned.name] == pinned.version, key
        else:
            assert (SHARED / "charts" / pinned.name / pinned.version / "Chart.yaml").is_file(), key


def test_recorded_releases_use_the_pinned_table(stack: str) -> None:
    record = record_of(stack)
    found = record.by_type(HELM_RELEASE)
    assert found
    # A release is named after its chart, except the inferencepool chart, installed once per model
    # under the model's name (components/gateway.py): those are found by their chart reference.
    by_name = {c.name: c for c in CHARTS.values()}
    by_reference = {c.reference: c for c in CHARTS.values()}
    for release in found:
        pinned = by_name.get(release.inputs["name"]) or by_reference[release.inputs["chart"]]
        assert release.inputs["version"] == pinned.version
        assert release.inputs["chart"] == pinned.reference
        repo = (release.inputs.get("repositoryOpts") or {}).get("repo")
        assert (repo is None) == pinned.is_oci and repo in (None, pinned.repo)


def test_unpinned_chart_and_image_are_clear_errors() -> None:
    with pytest.raises(UnpinnedError, match="chart 'ingress-nginx' has no pinned version"):
        chart("ingress-nginx")
    with pytest.raises(UnpinnedError, match="vllm-cuda"):
        image("vllm-cuda")
    for ref in ("vllm/vllm-openai", "vllm/vllm-openai:latest", "registry:5000/vllm",
                "rocm/k8s-device-plugin:labeller-latest"):
        with pytest.raises(UnpinnedError, match="no pinned tag"):
            pinned_ref(ref, "model llama-8b")
    assert pinned_ref("registry:5000/vllm:v0.11.0", "x") == "registry:5000/vllm:v0.11.0"
    assert pinned_ref("vllm/vllm-openai@sha256:" + "0" * 64, "x").endswith("0" * 64)
    for key in IMAGES:
        assert image(key) == IMAGES[key].ref


# --- platform services ------------------------------------------------------------------------

@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_platform_releases_and_their_order(stack: str, cluster: str) -> None:
    record = record_of(stack)
    rel = releases(record, cluster)
    assert {chart(k).name for k in PLATFORM_CHARTS} <= set(rel)
    urn = {name: r.urn for name, r in rel.items()}
    assert rel["cert-manager"].inputs["values"]["crds"]["enabled"] is True
    kserve = rel["kserve-resources"]
    assert kserve.inputs["values"]["kserve"]["controller"]["deploymentMode"] == "Standard"
    # The cache flag only where the cache's charts are installed (tests/test_localmodel.py).
    has_nvme = any(p["nvmePath"] for p in pools(record, cluster))
    assert kserve.inputs["values"]["kserve"]["localmodel"]["enabled"] is has_nvme
    assert ("kserve-localmodel-crd" in rel) is has_nvme
    assert {urn["kserve-crd"], urn["cert-manager"]} <= set(kserve.dependencies)
    spec = rel["kube-prometheus-stack"].inputs["values"]["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
    # Releases that create ServiceMonitors wait for the chart that brings the CRD.
    for name in ("keda", "gpu-operator", "gpu-operator-charts"):
        if name in rel:
            assert urn["kube-prometheus-stack"] in rel[name].dependencies, name
    # Custom resources wait for the release that installs their CRD.
    crd_release = {"LocalModelNodeGroup": "kserve-localmodel-crd", "DeviceConfig": "gpu-operator-charts"}
    for r in record.resources:
        if r.custom and r.type.startswith("kubernetes:") and cluster_of(record, r) == cluster:
            needs = crd_release.get(str(r.inputs.get("kind")))
            if needs:
                assert urn[needs] in r.dependencies, r.name


def test_nothing_lands_in_the_default_namespace(stack: str) -> None:
    record = record_of(stack)
    for r in record.resources:
        if r.custom and r.type.startswith("kubernetes:") and not r.type.startswith("pulumi:"):
            ns = r.inputs.get("namespace") or (r.inputs.get("metadata") or {}).get("namespace")
            assert ns != "default", r.urn
            if r.type == HELM_RELEASE:
                assert ns, f"{r.urn} installs into the provider's default namespace"


# --- NVIDIA: pool label -> operator config -> resource name ------------------------------------

@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_nvidia_wiring_end_to_end(stack: str, cluster: str) -> None:
    record = record_of(stack)
    cloud = cloud_of(record, cluster)
    on = NVIDIA_ON[cloud]
    nvidia = [pool_view(stack, cluster, p) for p in pools(record, cluster)
              if GPUS[GpuModel(p["gpu"])].vendor is Vendor.NVIDIA]
    rel = releases(record, cluster)
    if not (nvidia and on.operator):
        assert "gpu-operator" not in rel
        assert configmap(record, cluster, MIG_CONFIGMAP) is None
        assert configmap(record, cluster, DEVICE_PLUGIN_CONFIGMAP) is None
        return
    values = rel["gpu-operator"].inputs["values"]
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    strategy = gc.nvidia_config(nvidia).mig_strategy
    mig_pools = [p for p in nvidia if gc.MIG_CONFIG_LABEL in p.labels]
    assert values["mig"]["strategy"] == str(strategy or "single")
    mig_cm = configmap(record, cluster, MIG_CONFIGMAP)
    if on.mig_manager and mig_pools:
        assert values["migManager"]["config"]["name"] == MIG_CONFIGMAP
        assert mig_cm is not None and mig_cm.urn in rel["gpu-operator"].dependencies
        layouts = yaml.safe_load(mig_cm.inputs["data"][MIG_CONFIG_FILE])
        assert layouts["version"] == "v1"
        for pool in mig_pools:
            entry = layouts["mig-configs"][pool.labels[gc.MIG_CONFIG_LABEL]]
            assert entry[0]["devices"] == "all" and entry[0]["mig-enabled"] is True
            counts = entry[0]["mig-devices"]
            assert mig.is_valid(GPUS[pool.gpu], counts), pool.name
            assert counts == pool.sharing.profiles
            # What a pod on this pool asks for (the ModelDeployment uses the same function).
            names = {gc.resource_name(False, nvidia, pool, p) for p in counts}
            assert names == ({"nvidia.com/gpu"} if strategy is gc.MigStrategy.SINGLE
                             else {f"nvidia.com/mig-{p}" for p in counts})
    else:
        # AKS cuts MIG itself: the operator must not repartition what the agent pool owns.
        assert values["migManager"]["enabled"] is False and mig_cm is None
    plugin = configmap(record, cluster, DEVICE_PLUGIN_CONFIGMAP)
    assert plugin is not None and plugin.urn in rel["gpu-operator"].dependencies
    assert values["devicePlugin"]["config"]["name"] == DEVICE_PLUGIN_CONFIGMAP
    assert values["devicePlugin"]["config"]["default"] in plugin.inputs["data"]
    for pool in nvidia:
        key = pool.labels.get(gc.DEVICE_PLUGIN_CONFIG_LABEL)
        if key is None:
            continue
        doc = yaml.safe_load(plugin.inputs["data"][key])
        assert doc["sharing"]["timeSlicing"]["resources"] == [
            {"name": "nvidia.com/gpu", "replicas": pool.sharing.replicas}]


def test_stacks_exercise_mig_and_time_slicing_wiring() -> None:
    keys = {(s, c): (configmap(record_of(s), c, MIG_CONFIGMAP), configmap(record_of(s), c,
                     DEVICE_PLUGIN_CONFIGMAP)) for s, c in every_cluster()}
    assert any(m is not None for m, _ in keys.values())
    assert any(p is not None and len(p.inputs["data"]) > 1 for _, p in keys.values())


def test_gke_gets_no_nvidia_operator() -> None:
    gke = [(s, c) for s, c in every_cluster() if cloud_of(record_of(s), c) is Cloud.GCP]
    assert gke
    for s, c in gke:
        assert "gpu-operator" not in releases(record_of(s), c)


# --- AMD and the model cache ------------------------------------------------------------------

def test_amd_device_config_selects_the_mi300x_nodes() -> None:
    record = record_of("prod")
    found = 0
    for cluster in clusters(record):
        amd = [p for p in pools(record, cluster) if p["gpu"] == GpuModel.MI300X]
        configs = [r for r in k8s_on(record, cluster, "kubernetes:amd.com/v1alpha1:DeviceConfig")]
        if not amd:
            assert not configs
            continue
        (config,) = configs
        found += 1
        selector = config.inputs["spec"]["selector"]
        for p in pools(record, cluster):
            matches = selector.items() <= p["labels"].items()
            assert matches == (p["gpu"] == GpuModel.MI300X), p["pool"]
        assert config.inputs["metadata"]["namespace"] == AMD_NAMESPACE
        spec = config.inputs["spec"]
        assert spec["driver"]["enable"] and spec["devicePlugin"]["enableNodeLabeller"]
        assert spec["metricsExporter"]["enable"]
        assert set(spec["metricsExporter"]["resource"]) == {"requests", "limits"}
        # prod's MI300X pool runs whole GPUs: no partition profile, no config manager.
        assert "configManager" not in spec and configmap(record, cluster, DCM_CONFIGMAP) is None
    assert found == 1


def test_cpx_nps4_pool_gets_a_dcm_profile_its_label_selects() -> None:
    mi300x = GPUS[GpuModel.MI300X]
    pool = SimpleNamespace(name="mi300x", gpu=GpuModel.MI300X, vendor=Vendor.AMD,
                           sharing=Partition(mi300x.amd_partition("CPX-NPS4")), gpus_per_node=8,
                           labels={gc.AMD_PROFILE_LABEL: "cpx-nps4"})
    config = json.loads(gc.dcm_config_json(gc.amd_partitions([pool])))["gpu-config-profiles"]
    assert config["cpx-nps4"]["profiles"] == [
        {"computePartition": "CPX", "memoryPartition": "NPS4", "numGPUsAssigned": 8}]
    whole = SimpleNamespace(**{**vars(pool), "sharing": Partition(mi300x.amd_partition("SPX-NPS1"))})
    assert gc.amd_partitions([whole]) == {}


@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_model_cache_on_every_nvme_pool(stack: str, cluster: str) -> None:
    record = record_of(stack)
    cloud = cloud_of(record, cluster)
    groups = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in
              k8s_on(record, cluster, "kubernetes:serving.kserve.io/v1alpha1:LocalModelNodeGroup")}
    for p in pools(record, cluster):
        if p["nvmePath"] is None:
            assert p["pool"] not in groups
            continue
        spec = groups[p["pool"]]
        pv = spec["persistentVolumeSpec"]
        # The node agent's host path, which node prep binds onto `<nvmePath>/models`.
        assert pv["hostPath"] == {"path": "/models", "type": "DirectoryOrCreate"}
        term = pv["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
        assert term == {"key": "rtip.dev/pool", "operator": "In", "values": [p["pool"]]}
        shape = machine(cloud, p["machineType"])
        assert shape is not None
        assert spec["storageLimit"] == f"{int(shape.local_nvme_gb * manifests.CACHE_SHARE)}G"


def test_pool_without_nvme_gets_a_note_and_no_cache() -> None:
    pool = SimpleNamespace(name="t4", nvme_path=None)
    cache, notes = model_cache(SimpleNamespace(pools=(pool,), cloud=Cloud.AWS))  # type: ignore[arg-type]
    assert cache == {"t4": None}
    assert any("t4" in n and "runai_streamer" in n for n in notes)


# --- MIG config from pools (pure) -------------------------------------------------------------

def _mig_pool(name: str, layout: str | dict[str, int], gpu: GpuModel = GpuModel.H100_80GB) -> SimpleNamespace:
    spec = GPUS[gpu]
    sharing = (mig_sharing(spec, spec.mig_layouts[layout], layout) if isinstance(layout, str)
               else mig_sharing(spec, layout))
    # As components/gpu_pools.config_key names them: a named layout by its name, counts by pool.
    key = sharing.layout or f"rtip-{name}"
    return SimpleNamespace(name=name, gpu=gpu, vendor=Vendor.NVIDIA, sharing=sharing,
                           gpus_per_node=8, labels={gc.MIG_CONFIG_LABEL: key})


def test_custom_layout_gets_its_own_key_and_mixed_strategy() -> None:
    custom = _mig_pool("mixed", {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1})
    cfg = gc.nvidia_config([custom])
    assert cfg.mig_layouts == {"rtip-mixed": {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}}
    assert cfg.mig_strategy is gc.MigStrategy.MIXED
    parted = gc.mig_parted_config(cfg.mig_layouts)
    assert parted["mig-configs"]["rtip-mixed"][0]["mig-devices"] == {
        "1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}
    assert parted["mig-configs"][gc.MIG_DISABLED] == [{"devices": "all", "mig-enabled": False}]


def test_single_strategy_only_for_one_profile_everywhere() -> None:
    one = _mig_pool("a", "all-3g.40gb")
    assert gc.nvidia_config([one]).mig_strategy is gc.MigStrategy.SINGLE
    whole = SimpleNamespace(name="w", gpu=GpuModel.H100_80GB, vendor=Vendor.NVIDIA,
                            sharing=Whole(), gpus_per_node=8, labels={})
    assert gc.nvidia_config([one, whole]).mig_strategy is gc.MigStrategy.MIXED
    assert gc.nvidia_config([whole]).mig_strategy is None


def test_resource_names_per_cloud_and_sharing() -> None:
    mixed = _mig_pool("m", "all-balanced")
    whole = SimpleNamespace(name="w", gpu=GpuModel.H100_80GB, vendor=Vendor.NVIDIA,
                            sharing=Whole(), gpus_per_node=8, labels={})
    assert gc.resource_name(False, [mixed, whole], mixed, "3g.40gb") == "nvidia.com/mig-3g.40gb"
    assert gc.resource_name(True, [mixed, whole], mixed, "3g.40gb") == "nvidia.com/gpu"
    assert gc.resource_name(False, [mixed, whole], whole) == "nvidia.com/gpu"
    with pytest.raises(ValueError, match=r"pool m: MIG profile '7g\.80gb'"):
        gc.resource_name(False, [mixed], mixed, "7g.80gb")
    cpx = SimpleNamespace(name="a", gpu=GpuModel.MI300X, vendor=Vendor.AMD, gpus_per_node=8,
                          sharing=Partition(GPUS[GpuModel.MI300X].amd_partition("CPX-NPS4")), labels={})
    assert gc.resource_name(False, [cpx], cpx) == "amd.com/cpx_nps4"
    assert gc.resource_name(False, [cpx], SimpleNamespace(**{**vars(cpx), "sharing": Whole()})) \
        == "amd.com/gpu"


def test_rendered_helm_releases_carry_chart_repo_version_values() -> None:
    record = record_of("prod")
    for r in record.by_type(HELM_RELEASE):
        doc = manifest(r)
        assert doc["kind"] == "HelmRelease"
        assert {"chart", "version", "values", "namespace", "name"} <= set(doc)
        assert doc["chart"].startswith("oci://") or doc["repositoryOpts"]["repo"].startswith("https://")


def test_addon_core_objects_validate_strictly(stack: str) -> None:
    record = record_of(stack)
    version = spec_of(stack).kubernetes_version
    core = [r for r in record.resources if r.custom and r.type.split(":")[1].split("/")[0] in
            ("core", "storage.k8s.io") and r.type.startswith("kubernetes:")]
    assert any(r.inputs["kind"] == "ConfigMap" for r in core)
    for r in core:
        body = manifest(r)
        # A secret value (a tenant's key) is only a marker offline: its content is not ours to
        # validate, the rest of the object is.
        for path in r.secret_paths:
            if "." not in path and "[" not in path:
                body.pop(path, None)
        kubernetes_validate.validate(body, version, strict=True)


def test_impossible_layout_is_refused() -> None:
    # FACTS.md section 5: a public A100-80 layout needed 9 memory slices (4 + 2 x 2 + 1).
    with pytest.raises(ValueError, match="does not fit one"):
        _mig_pool("bad", {"3g.40gb": 1, "2g.20gb": 2, "1g.10gb": 1})


_H100 = [p.name for p in GPUS[GpuModel.H100_80GB].mig_profiles]


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(_H100), st.integers(1, 7), min_size=1, max_size=4))
def test_any_custom_layout_is_written_iff_its_geometry_fits(counts: dict[str, int]) -> None:
    if not mig.is_valid(GPUS[GpuModel.H100_80GB], counts):
        with pytest.raises(ValueError, match="does not fit one"):
            _mig_pool("p", counts)
        return
    pool = _mig_pool("p", counts)
    parted = gc.mig_parted_config(gc.nvidia_config([pool]).mig_layouts)
    assert parted["mig-configs"][pool.labels[gc.MIG_CONFIG_LABEL]][0]["mig-devices"] == counts


def _grafana_block(values_yaml: str) -> list[str]:
    """The lines of the top-level `grafana:` block of a values.yaml (comments included)."""
    lines = values_yaml.splitlines()
    start = lines.index("grafana:") + 1
    end = next((n for n in range(start, len(lines)) if lines[n] and lines[n][0] not in " #"), len(lines))
    return lines[start:end]


def test_grafana_has_no_default_admin_password(stack: str) -> None:
    """kube-prometheus-stack 88.5.3 no longer sets `grafana.adminPassword` (its values.yaml keeps
    the line commented out), and the Grafana chart then generates a random one into its Secret
    (grafana chart `_config.tpl`, `grafana.secretsData`: `admin-password: {{ include
    "grafana.password" . }}` when adminPassword is empty). The toolkit must not set one either."""
    values = (SHARED / "charts" / "kube-prometheus-stack" / "88.5.3" / "values.yaml").read_text()
    block = _grafana_block(values)
    assert any("# adminPassword:" in line for line in block)  # the chart's commented example
    assert not [line for line in block if line.strip().startswith("adminPassword:")]
    # The reader finds an active setting where there is one.
    sample = "grafana:\n  adminPassword: prom-operator\nother: 1\n"
    assert _grafana_block(sample) == ["  adminPassword: prom-operator"]
    releases = [r for r in record_of(stack).by_type(HELM_RELEASE)
                if r.inputs["chart"].endswith("kube-prometheus-stack")]
    assert releases
    for release in releases:
        assert "adminPassword" not in (release.inputs.get("values") or {}).get("grafana", {})


# The pods each spread rule must select, as upstream writes their labels: KEDA chart v2.20.2
# templates/manager/deployment.yaml (`app: {{ .Values.operator.name }}`) and
# metrics-server/deployment.yaml (`app: {{ .Values.operator.name }}-metrics-apiserver`), with
# values.yaml's operator.name keda-operator; prometheus-operator v0.93.0 podMetadata's reserved
# labels (prometheus_types.go, alertmanager_types.go: app.kubernetes.io/name).
SPREAD_PODS = {
    ("keda", "operator"): {"app": "keda-operator"},
    ("keda", "metricsServer"): {"app": "keda-operator-metrics-apiserver"},
    ("kube-prometheus-stack", "prometheus"): {"app.kubernetes.io/name": "prometheus"},
    ("kube-prometheus-stack", "alertmanager"): {"app.kubernetes.io/name": "alertmanager"},
}


@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_the_autoscaling_and_alerting_path_spreads_over_zones(stack: str, cluster: str) -> None:
    """KEDA's operator and metrics API server, Prometheus and Alertmanager run as many replicas
    each (two in prod) and at most one more in any zone than another, on nodes they tolerate: a
    zone lost with the only metrics server would blind every model's HPA until it came back."""
    rel = releases(record_of(stack), cluster)
    keda = rel["keda"].inputs["values"]
    stack_values = rel["kube-prometheus-stack"].inputs["values"]
    prometheus = stack_values["prometheus"]["prometheusSpec"]
    alertmanager = stack_values["alertmanager"]["alertmanagerSpec"]
    replicas = {keda["operator"]["replicaCount"], keda["metricsServer"]["replicaCount"],
                prometheus["replicas"], alertmanager["replicas"]}
    assert replicas == ({2} if stack in ("prod", "staging") else {1})
    rules = {("keda", "operator"): keda["topologySpreadConstraints"]["operator"],
             ("keda", "metricsServer"): keda["topologySpreadConstraints"]["metricsServer"],
             ("kube-prometheus-stack", "prometheus"): prometheus["topologySpreadConstraints"],
             ("kube-prometheus-stack", "alertmanager"): alertmanager["topologySpreadConstraints"]}
    for key, (rule,) in rules.items():
        assert rule == {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
                        "labelSelector": {"matchLabels": SPREAD_PODS[key]}}, key
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": SPREAD_PODS[key]},
               "spec": {"containers": [{"name": "c", "image": "i"}], "topologySpreadConstraints": [rule]}}
        kubernetes_validate.validate(pod, "1.33", strict=True)


@pytest.mark.parametrize(("stack", "cluster"), every_cluster())
def test_kube_state_metrics_is_replaced_90_s_into_a_zone_loss(stack: str, cluster: str) -> None:
    """kube-state-metrics runs one replica, the only source of the HPA conditions the blind-HPA
    page reads; lost with its zone it comes back only through its eviction. Its tolerations, read
    as Kubernetes matches them (serving/failover.py), end its binding to an unreachable node 30 s
    into the taint, which comes 60 s after the node went silent: 50 s grace, a 5 s monitor
    period, another for the taint. The other taints keep the admission plugin's default."""
    from serving.failover import failover, unreachable_toleration_s

    values = releases(record_of(stack), cluster)["kube-prometheus-stack"].inputs["values"]
    ksm = values["kube-state-metrics"]
    assert unreachable_toleration_s(ksm["tolerations"]) == 30
    assert failover({}, ksm["tolerations"]).evict_s == 50 + 5 + 5 + 30
    assert all(t["key"] == "node.kubernetes.io/unreachable" for t in ksm["tolerations"])
    assert ksm.get("replicas", 1) == 1
