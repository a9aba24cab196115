"""The vendored chart facts and core kinds table: regenerated from their sources, and read right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from rtip import chartfacts
from rtip.chartfacts import FACTS_DIR, corekinds, generate
from rtip.chartfacts.conditions import describe, evaluate, parse
from serving.charts import CHARTS
from tests.conftest import SHARED

CHARTS_DIR = SHARED / "charts"


def test_vendored_facts_are_what_the_generator_writes_from_shared(tmp_path: Path) -> None:
    written = generate.generate(CHARTS_DIR, tmp_path)
    vendored = generate.data_files(FACTS_DIR)
    assert sorted(p.name for p in written) == [p.name for p in vendored]
    stale = [p.name for p in vendored if p.read_bytes() != (tmp_path / p.name).read_bytes()]
    assert not stale, f"run: python -m rtip.chartfacts.generate {CHARTS_DIR}  (stale: {stale})"


def test_every_chart_folder_has_facts_and_they_stay_small() -> None:
    folders = {f"{p.parent.name}@{p.name}" for p in CHARTS_DIR.glob("*/*") if p.is_dir()}
    assert folders == set(chartfacts.all_facts())
    total = sum(p.stat().st_size for p in FACTS_DIR.glob("*.json"))
    assert total < 2_000_000


def test_crd_count_matches_sources_md() -> None:
    # SOURCES.md: "The 114 files hold 154 documents", all of them CRDs.
    said = re.search(r"The (\d+) files hold (\d+) documents", (CHARTS_DIR / "SOURCES.md").read_text())
    assert said is not None
    assert sum(len(f.crds) for f in chartfacts.all_facts().values()) == int(said.group(2))


@pytest.mark.parametrize("rel", [
    "kube-prometheus-stack/88.5.3/crds/crd-alertmanagerconfigs.yaml",  # the `- =` enum items
    "gateway-crds-helm/v1.9.0/crds/experimental-gatewayapi-crds.yaml",  # many documents
    "ai-gateway-crds-helm/v1.1.0/crds/aigateway.envoyproxy.io_aigatewayroutes.yaml",  # indentless lists
    "amd-gpu-operator/v1.5.1/crds/kmm.sigs.x-k8s.io_preflightvalidations.yaml",  # HELM[] placeholders
])
def test_pruned_parse_reads_what_a_full_parse_reads(rel: str) -> None:
    def summary(docs: list[dict]) -> list[tuple]:
        return [(d["spec"]["group"], d["spec"]["names"]["kind"], d["spec"].get("scope"),
                 [(v["name"], v.get("served")) for v in d["spec"]["versions"]]) for d in docs]
    path = CHARTS_DIR / rel
    assert summary(generate.crd_documents(path, pruned=True)) == summary(
        generate.crd_documents(path, pruned=False))


def test_kinds_txt_crd_lines_all_have_facts() -> None:
    for kinds in CHARTS_DIR.glob("*/*/KINDS.txt"):
        facts = chartfacts.all_facts()[f"{kinds.parent.parent.name}@{kinds.parent.name}"]
        have = {(c.group, c.kind) for c in facts.crds}
        listed = {tuple(line.split()[1].rsplit("/", 1)) for line in kinds.read_text().splitlines()
                  if line.startswith("crd ")}
        assert listed == have, kinds


def test_every_pinned_chart_has_facts() -> None:
    for pinned in CHARTS.values():
        facts = chartfacts.for_release(pinned.reference, pinned.version)
        assert facts is not None, pinned
        assert (CHARTS_DIR / facts.folder / facts.version).is_dir()


def test_release_maps_to_folder_by_chart_name_and_version_not_chart_yaml_version() -> None:
    # SOURCES.md: the NVIDIA Chart.yaml says v1.0.0-devel and is named gpu-operator; AMD's is
    # gpu-operator-charts; cert-manager's says v0.0.0.
    nvidia = chartfacts.for_release("gpu-operator", "v26.7.0")
    amd = chartfacts.for_release("gpu-operator-charts", "v1.5.1")
    cert = chartfacts.for_release("oci://quay.io/jetstack/charts/cert-manager", "v1.21.1")
    assert (nvidia and nvidia.folder, amd and amd.folder, cert and cert.folder) == (
        "nvidia-gpu-operator", "amd-gpu-operator", "cert-manager")
    assert chartfacts.for_release("cert-manager", "v0.0.0") is None


def _installed(folder: str, values: dict, kind: str) -> set[bool | None]:
    facts = next(f for f in chartfacts.all_facts().values() if f.folder == folder)
    return {on for crd, on in facts.installs(values) if crd.kind == kind}


def test_cert_manager_installs_crds_only_when_asked() -> None:
    upstream = yaml.safe_load((CHARTS_DIR / "cert-manager/v1.21.1/values.yaml").read_text())
    assert upstream["crds"]["enabled"] is False and upstream["installCRDs"] is False
    assert _installed("cert-manager", {}, "Certificate") == {False}
    assert _installed("cert-manager", {"crds": {"enabled": True}}, "Certificate") == {True}
    assert _installed("cert-manager", {"installCRDs": True}, "Issuer") == {True}


def test_keda_and_subchart_conditions() -> None:
    assert _installed("keda", {}, "ScaledObject") == {True}
    assert _installed("keda", {"crds": {"install": False}}, "ScaledObject") == {False}
    # kube-prometheus-stack's CRDs come from its `crds` subchart (condition crds.enabled).
    assert _installed("kube-prometheus-stack", {}, "PodMonitor") == {True}
    assert _installed("kube-prometheus-stack", {"crds": {"enabled": False}}, "PodMonitor") == {False}
    # NVIDIA: NFD's CRDs with nfd.enabled; NodeResourceTopology also needs the topology updater.
    assert _installed("nvidia-gpu-operator", {"nfd": {"enabled": False}}, "NodeFeature") == {False}
    assert _installed("nvidia-gpu-operator", {}, "NodeResourceTopology") == {False}
    topo = {"node-feature-discovery": {"topologyUpdater": {"enable": True, "createCRDs": True}}}
    assert _installed("nvidia-gpu-operator", topo, "NodeResourceTopology") == {True}
    assert _installed("amd-gpu-operator", {"kmm": {"enabled": False}}, "Module") == {False}
    assert _installed("amd-gpu-operator", {}, "DeviceConfig") == {True}


def test_gateway_api_channel_picks_the_file() -> None:
    on = {"crds": {"gatewayAPI": {"enabled": True, "channel": "standard"}}}
    facts = chartfacts.all_facts()["gateway-crds-helm@v1.9.0"]
    chosen = {(c.kind, c.file) for c, installed in facts.installs(on) if installed}
    assert ("Gateway", "crds/standard-gatewayapi-crds.yaml") in chosen
    assert ("Gateway", "crds/experimental-gatewayapi-crds.yaml") not in chosen
    assert not any(kind == "XMesh" for kind, _ in chosen)  # experimental channel only
    assert not any(installed for _, installed in facts.installs({}))  # everything off by default


def test_condition_parse_evaluate_describe() -> None:
    text = ('if and .Values.crds.gatewayAPI.enabled (or (eq .Values.crds.gatewayAPI.channel '
            '"experimental") (eq .Values.crds.gatewayAPI.channel ""))')
    cond = parse(text)
    assert evaluate(cond, {"crds": {"gatewayAPI": {"enabled": True, "channel": ""}}}) is True
    assert evaluate(cond, {"crds": {"gatewayAPI": {"enabled": True, "channel": "standard"}}}) is False
    assert describe(parse("if or .Values.crds.enabled .Values.installCRDs")) == "crds.enabled or installCRDs"
    unknown = parse("if include \"x\" .")
    assert unknown[0] == "unknown" and evaluate(unknown, {}) is None
    # `X | default false` is X's truth (Go: a falsy default changes none); a truthy default is not
    # modelled. Go template truth: a non-empty string or map is true, an empty one false.
    off = parse("if not (.Values.disabled.W | default false)")
    assert off == ["not", ["value", ["disabled", "W"]]]
    assert [evaluate(off, {"disabled": {"W": v}}) for v in (True, "true", 1, {"a": 1}, {}, "", None)] == [
        False, False, False, False, True, True, True]
    assert parse("if .Values.a | default true")[0] == "unknown"


def test_default_values_pass_their_own_schema() -> None:
    # Helm validates defaults plus overrides; the defaults alone must pass or the check is wrong.
    from rtip.deploycheck.values import schema_errors
    with_schema = [f for f in chartfacts.all_facts().values() if f.has_schema]
    assert {f.folder for f in with_schema} >= {"cert-manager", "opentelemetry-collector"}
    for facts in with_schema:
        assert list(schema_errors(facts.schema or {}, facts.values({}), [])) == [], facts.name


def test_core_kinds_table_is_what_kubernetes_validate_gives() -> None:
    assert corekinds.TABLE.read_text() == corekinds.render(corekinds.derive()), \
        "run: python -m rtip.chartfacts.corekinds"


@pytest.mark.parametrize(("api_version", "kind", "version"), [
    ("policy/v1beta1", "PodDisruptionBudget", "1.33"),
    ("policy/v1", "PodDisruptionBudget", "1.33"),
    ("batch/v1beta1", "CronJob", "1.25"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler", "1.25"),
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler", "1.26"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "1.28"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "1.32"),
    ("v1", "Namespace", "1.37"),
    ("storage.k8s.io/v1", "StorageClass", "1.33"),
])
def test_table_agrees_with_kubernetes_validate(api_version: str, kind: str, version: str) -> None:
    try:
        kubernetes_validate.validate({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}},
                                     version)
        upstream = True
    except SchemaNotFoundError:
        upstream = False
    except kubernetes_validate.ValidationError:
        upstream = True  # the schema exists; the stub object just lacks required fields
    served = corekinds.served(version) or {}
    assert (kind in served.get(api_version, [])) is upstream


def test_table_lists_json_not_python_values() -> None:
    doc = json.loads(corekinds.TABLE.read_text())
    assert "PodDisruptionBudget" in doc["versions"]["1.33"]["policy/v1"]
    assert corekinds.served("v1.33.4") == corekinds.served("1.33")
    assert corekinds.served("1.99") is None


def test_commented_keys_are_keys_at_their_place_not_prose_or_examples() -> None:
    text = """\
top:
  # documented: {}
  # Note: this sentence is prose
  script: |
    # notakey: 1
  set: 1
  items:
    - name: a
      # inlist: true
  # example:
  #   nested: 1
# toplevel: x
"""
    found = generate.commented_keys(text, yaml.safe_load(text))
    assert found == [["top", "documented"], ["top", "example"], ["toplevel"]]
