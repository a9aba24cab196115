"""Deploy-time checks over the offline record: kinds served on each cluster, Helm values keys."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from rtip.deploycheck import Finding, Severity, check_kinds, check_values, run_checks
from rtip.deploycheck.graph import HELM_RELEASE
from rtip.offline import Record, Resource
from tests.conftest import SHARED, STACKS, record_of

CHARTS = SHARED / "charts"
LOCAL_MODEL_KINDS = ("LocalModelCache", "LocalModelNodeGroup")


def _errors(findings: list[Finding], check: str) -> list[Finding]:
    return [f for f in findings if f.check == check and f.severity is Severity.ERROR]


def _kind(resource: Resource) -> str:
    return resource.type.rsplit(":", 1)[-1]


# --- the shipped stacks -----------------------------------------------------------------------

def without_localmodel_crds(record: Record) -> Record:
    """A copy of `record` as it was before the local model cache's CRD chart was installed: the
    `kserve-localmodel-crd` release gone, and nothing waiting for it."""
    gone = {r.urn for r in record.resources if r.type == HELM_RELEASE
            and r.inputs.get("name") == "kserve-localmodel-crd"}
    assert gone, "the stack installs the local model cache's CRDs"
    kept = [dataclasses.replace(r, dependencies=tuple(d for d in r.dependencies if d not in gone))
            for r in record.resources if r.urn not in gone]
    return Record(stack=record.stack, resources=kept, outputs=record.outputs, plan=record.plan)


def test_prod_kinds_are_all_served_and_the_cache_defect_would_be_named() -> None:
    record = record_of("prod")
    local = {r.urn for r in record.resources if _kind(r) in LOCAL_MODEL_KINDS}
    assert {_kind(record.get(u)) for u in local} == set(LOCAL_MODEL_KINDS)  # both kinds present
    assert not _errors(check_kinds(record), "kinds")
    # The defect the audit found, put back: every cache object is named, nothing else.
    reported = {f.urn for f in _errors(check_kinds(without_localmodel_crds(record)), "kinds")}
    assert reported == local
    fine = {"Namespace", "InferenceService", "ScaledObject", "PodMonitor", "ClusterServingRuntime",
            "PodDisruptionBudget", "DeviceConfig", "StorageClass", "ConfigMap", "ServiceAccount"}
    present = {_kind(r) for r in record.resources if r.type.startswith("kubernetes:")}
    assert fine <= present  # the objects the assertion above clears are really there


def test_local_model_cache_message_names_cluster_and_the_chart_that_has_the_crd() -> None:
    record = without_localmodel_crds(record_of("prod"))
    cache = next(r for r in record.resources if _kind(r) == "LocalModelCache")
    [finding] = [f for f in check_kinds(record) if f.urn == cache.urn]
    name = cache.inputs["metadata"]["name"]
    assert finding.message.startswith(f"LocalModelCache {name} on cluster rtip-prod-")
    assert "serving.kserve.io/v1alpha1 LocalModelCache" in finding.message
    # The chart that does install it (KINDS.txt of kserve-localmodel-crd lists the CRD).
    kinds_txt = (CHARTS / "kserve-localmodel-crd/v0.20.0/KINDS.txt").read_text()
    assert "crd serving.kserve.io/LocalModelCache" in kinds_txt
    assert "kserve-localmodel-crd v0.20.0" in finding.message


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_have_no_kinds_errors(stack: str) -> None:
    assert not _errors(run_checks(record_of(stack)), "kinds")


def test_unvendored_subcharts_are_listed_as_not_checked() -> None:
    record = record_of("prod")
    infos = [f for f in check_values(record) if f.severity is Severity.INFO]
    said = {(record.get(f.urn).name.rsplit("-addons-", 1)[-1], f.message.split("values under ")[1].split()[0])
            for f in infos}
    # kube-prometheus-stack's Chart.yaml names these dependencies; none is vendored (SOURCES.md).
    deps = {d["name"] for d in yaml.safe_load(
        (CHARTS / "kube-prometheus-stack/88.5.3/Chart.yaml").read_text())["dependencies"]}
    assert {"grafana", "kube-state-metrics", "prometheus-node-exporter"} <= deps
    assert {("kube-prometheus-stack", "grafana"), ("kube-prometheus-stack", "kube-state-metrics"),
            ("kube-prometheus-stack", "prometheus-node-exporter"),
            ("gpu-nvidia-gpu-operator", "node-feature-discovery")} <= said


def test_custom_resource_that_does_not_wait_for_its_crd_release_is_reported() -> None:
    record = record_of("prod")
    isvc = next(r for r in record.resources if _kind(r) == "InferenceService")
    assert not [f for f in check_kinds(record) if f.urn == isvc.urn]
    cut = Record(record.stack, [dataclasses.replace(r, dependencies=()) if r.urn == isvc.urn else r
                                for r in record.resources])
    [finding] = [f for f in check_kinds(cut) if f.urn == isvc.urn]
    assert finding.severity is Severity.ERROR
    assert "kserve-crd v0.20.0" in finding.message and "does not depend on it" in finding.message


# --- hand-made records ------------------------------------------------------------------------

STACK = "urn:pulumi:t::rtip::"
CLUSTER = f"{STACK}rtip:test:Cluster::c1"
PROVIDER = f"{STACK}rtip:test:Cluster$pulumi:providers:kubernetes::c1-k8s"


def _res(type_: str, name: str, inputs: dict[str, Any], deps: tuple[str, ...] = (),
         custom: bool = True) -> Resource:
    return Resource(type=type_, name=name, urn=f"{STACK}{type_}::{name}", parent=CLUSTER,
                    provider=PROVIDER, dependencies=deps, inputs=inputs, outputs={}, custom=custom)


def _record(*resources: Resource, version: str = "1.33") -> Record:
    cluster = Resource(type="rtip:test:Cluster", name="c1", urn=CLUSTER, parent=None, provider=None,
                       dependencies=(), inputs={"kubernetesVersion": version}, outputs={}, custom=False)
    provider = Resource(type="pulumi:providers:kubernetes", name="c1-k8s", urn=PROVIDER, parent=CLUSTER,
                        provider=None, dependencies=(), inputs={}, outputs={}, custom=True)
    return Record("t", [cluster, provider, *resources])


def _release(name: str, chart: str, version: str, values: dict[str, Any]) -> Resource:
    return _res(HELM_RELEASE, name, {"chart": chart, "version": version, "values": values})


def _object(api_version: str, kind: str, name: str, deps: tuple[str, ...] = ()) -> Resource:
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return _res(f"kubernetes:{group_version}:{kind}", name,
                {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}, deps)


def _pdb(api_version: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}}}


def test_removed_core_api_is_reported_as_kubernetes_validate_says() -> None:
    with pytest.raises(SchemaNotFoundError):
        kubernetes_validate.validate(_pdb("policy/v1beta1"), "1.33")
    kubernetes_validate.validate(_pdb("policy/v1"), "1.33")  # served: no exception
    old = _object("policy/v1beta1", "PodDisruptionBudget", "old")
    new = _object("policy/v1", "PodDisruptionBudget", "new")
    findings = check_kinds(_record(old, new))
    assert [f.urn for f in findings] == [old.urn]
    assert "Kubernetes 1.33 does not serve policy/v1beta1 PodDisruptionBudget" in findings[0].message
    assert "policy/v1" in findings[0].message.split("serves")[-1]


def test_cluster_version_outside_the_table_is_not_checked_but_said() -> None:
    [finding] = check_kinds(_record(_object("v1", "Namespace", "n"), version="1.99"))
    assert finding.severity is Severity.INFO and "1.99" in finding.message


def test_crd_switched_off_by_values_is_reported_with_its_condition() -> None:
    off = _release("cm", "oci://quay.io/jetstack/charts/cert-manager", "v1.21.1", {})
    cert = _object("cert-manager.io/v1", "Certificate", "tls", deps=(off.urn,))
    [finding] = check_kinds(_record(off, cert))
    assert "only when crds.enabled or installCRDs, which its values turn off" in finding.message
    on = dataclasses.replace(off, inputs={**off.inputs, "values": {"crds": {"enabled": True}}})
    assert check_kinds(_record(on, cert)) == []


def test_crd_version_not_served_is_reported() -> None:
    keda = _release("keda", "keda", "2.20.2", {})
    scaler = _object("keda.sh/v1beta1", "ScaledObject", "s", deps=(keda.urn,))
    [finding] = check_kinds(_record(keda, scaler))
    assert "serves keda.sh ScaledObject as v1alpha1, not v1beta1" in finding.message


def test_dependency_through_a_parent_component_counts() -> None:
    keda = _release("keda", "keda", "2.20.2", {})
    component = _res("rtip:test:Model", "m", {}, deps=(keda.urn,), custom=False)
    scaler = dataclasses.replace(_object("keda.sh/v1alpha1", "ScaledObject", "s"), parent=component.urn)
    assert check_kinds(_record(keda, component, scaler)) == []
    # Waiting for a component means waiting for its children: the release inside it counts.
    group = _res("rtip:test:Addons", "addons", {}, custom=False)
    inner = dataclasses.replace(keda, parent=group.urn)
    waits = _object("keda.sh/v1alpha1", "ScaledObject", "s2", deps=(group.urn,))
    assert check_kinds(_record(group, inner, waits)) == []


def test_release_of_an_unvendored_chart_makes_the_object_undecided() -> None:
    other = _release("x", "oci://example/charts/mystery", "1.0.0", {})
    thing = _object("example.com/v1", "Widget", "w", deps=(other.urn,))
    [kinds] = check_kinds(_record(other, thing))
    assert kinds.severity is Severity.WARNING and "mystery" in kinds.message
    [values] = check_values(_record(other))
    assert values.severity is Severity.WARNING and "not checked" in values.message


def test_misspelled_values_key_fails_with_a_suggestion() -> None:
    keda = yaml.safe_load((CHARTS / "keda/2.20.2/values.yaml").read_text())
    assert "replicaCount" in keda["operator"] and "replicaCont" not in keda["operator"]
    release = _release("keda", "keda", "2.20.2", {"operator": {"replicaCont": 2}})
    [finding] = check_values(_record(release))
    assert finding.severity is Severity.ERROR
    assert "operator.replicaCont is not in the chart's values.yaml" in finding.message
    assert "did you mean operator.replicaCount?" in finding.message


def test_free_form_maps_lists_and_pass_through_types_accept_their_own_keys() -> None:
    text = (CHARTS / "cert-manager/v1.21.1/values.yaml").read_text()
    cert = yaml.safe_load(text)
    assert cert["podLabels"] == {} and cert["nodeSelector"] == {"kubernetes.io/os": "linux"}
    # webhook.podAnnotations is documented only as a comment under `webhook:`.
    assert "podAnnotations" not in cert["webhook"] and "\n  # podAnnotations: {}\n" in text
    values = {"podLabels": {"team": "ml"}, "nodeSelector": {"rtip.dev/pool": "system"},
              "extraArgs": ["--v=2"], "resources": {"requests": {"cpu": "1"}},
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
              "webhook": {"podAnnotations": {"a/b": "c"}}}
    release = _release("cm", "cert-manager", "v1.21.1", values)
    assert check_values(_record(release)) == []
    typo = _release("cm", "cert-manager", "v1.21.1", {"resources": {"requets": {"cpu": "1"}}})
    messages = [f.message for f in check_values(_record(typo))]
    assert any("resources.requets is not a field of Kubernetes ResourceRequirements" in m for m in messages)


def test_schema_rejects_a_value_of_the_wrong_type() -> None:
    schema = (CHARTS / "cert-manager/v1.21.1/values.schema.json").read_text()
    assert '"helm-values.replicaCount"' in schema
    release = _release("cm", "cert-manager", "v1.21.1", {"replicaCount": "two"})
    findings = check_values(_record(release))
    assert [f.severity for f in findings] == [Severity.ERROR]
    assert "values at replicaCount fail the schema" in findings[0].message
    assert "'two' is not of type 'number'" in findings[0].message


def test_scalar_default_takes_no_keys() -> None:
    release = _release("keda", "keda", "2.20.2", {"operator": {"replicaCount": {"min": 1}}})
    [finding] = check_values(_record(release))
    assert "operator.replicaCount, where values.yaml has a number" in finding.message


def test_vendored_subchart_values_are_checked_against_the_subchart() -> None:
    # inferencepool's Chart.yaml: inference-extension from file://../epplib, alias inferenceExtension.
    chart = yaml.safe_load((CHARTS / "inferencepool/v1.5.0/Chart.yaml").read_text())
    assert chart["dependencies"][0]["alias"] == "inferenceExtension"
    epplib = yaml.safe_load((CHARTS / "epplib/v1.5.0/values.yaml").read_text())
    assert "enabled" in epplib["latencyPredictor"]
    good = {"inferenceExtension": {"latencyPredictor": {"enabled": True}}}
    assert check_values(_record(_release("ip", "inferencepool", "v1.5.0", good))) == []
    bad = {"inferenceExtension": {"latencyPredictor": {"enabeld": True}}}
    [finding] = check_values(_record(_release("ip", "inferencepool", "v1.5.0", bad)))
    assert "inferenceExtension.latencyPredictor.enabeld" in finding.message
    assert "subchart inference-extension v1.5.0" in finding.message


def test_a_crd_object_in_the_record_serves_its_kind_to_what_waits_for_it() -> None:
    crd = _res("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "widgets", {
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Widget"}, "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": True}, {"name": "v0", "served": False}]}})
    waits = _object("example.com/v1", "Widget", "w", deps=(crd.urn,))
    assert check_kinds(_record(crd, waits)) == []
    old = _object("example.com/v0", "Widget", "old", deps=(crd.urn,))
    eager = _object("example.com/v1", "Widget", "eager")
    findings = {f.urn: f.message for f in run_checks(_record(crd, old, eager))}
    assert set(findings) == {old.urn, eager.urn}
    assert "as v1, not v0" in findings[old.urn]
    assert "does not depend on it" in findings[eager.urn]
