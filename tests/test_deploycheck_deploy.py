"""Deploy checks for scheduling, reach and images: each defect re-introduced into a copy of a
stack's record is found and named; allocatable figures are hand calculations."""

from __future__ import annotations

import copy
import dataclasses

from rtip.deploycheck import Severity, run_checks
from rtip.deploycheck.images import check_images, split
from rtip.deploycheck.nodes import reserved_cpu_m, reserved_memory_mi
from rtip.deploycheck.reach import check_reach
from rtip.deploycheck.scheduling import check_scheduling, quantity
from rtip.offline import Record, Resource
from tests.conftest import record_of

ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"


def _edit(record: Record, pick, change) -> tuple[Record, Resource]:
    """A copy of `record` with the first resource `pick` accepts changed by `change(inputs)`."""
    target = next(r for r in record.resources if pick(r))
    inputs = copy.deepcopy(target.inputs)
    change(inputs)
    edited = dataclasses.replace(target, inputs=inputs)
    resources = [edited if r.urn == target.urn else r for r in record.resources]
    return Record(record.stack, resources, record.outputs, record.warnings, record.plan), edited


def _errors(findings, check: str, urn: str) -> list[str]:
    return [f.message for f in findings if f.check == check and f.urn == urn and f.severity is Severity.ERROR]


def test_kubelet_reservation_by_hand() -> None:
    # 8 cores: 60 + 10 + 2 x 5 + 4 x 2.5 = 90 m; 32 GiB: 1 + 0.8 + 0.8 + 16 x 0.06 = 3.56 GiB.
    assert reserved_cpu_m(8) == 90
    assert reserved_memory_mi(32) == int(3.56 * 1024) + 100


def test_quantities() -> None:
    assert quantity("cpu", "500m") == 500 and quantity("cpu", "8") == 8000
    assert quantity("memory", "22Gi") == 22 * 1024 and quantity("memory", "1G") == 954
    assert quantity("nvidia.com/gpu", "2") == 2


def test_stacks_schedule_today() -> None:
    for stack in ("dev", "staging", "prod"):
        assert check_scheduling(record_of(stack)) == [], stack


def test_wrong_node_selector_is_found() -> None:
    record, isvc = _edit(record_of("dev"), lambda r: r.type == ISVC,
                         lambda i: i["spec"]["predictor"]["nodeSelector"].update({"rtip.dev/pool": "nope"}))
    (message,) = _errors(check_scheduling(record), "scheduling", isvc.urn)
    assert "fits no pool" in message and "rtip.dev/pool=nope" in message


def test_missing_toleration_is_found() -> None:
    record, isvc = _edit(record_of("dev"), lambda r: r.type == ISVC,
                         lambda i: i["spec"]["predictor"].update({"tolerations": []}))
    (message,) = _errors(check_scheduling(record), "scheduling", isvc.urn)
    assert "taint nvidia.com/gpu=true:NoSchedule not tolerated" in message


def test_more_gpu_slices_than_a_node_has_are_found() -> None:
    # dev's l4 pool: g6.2xlarge, one L4 time-sliced two ways -> 2 nvidia.com/gpu per node.
    def ask(inputs: dict) -> None:
        res = inputs["spec"]["predictor"]["model"]["resources"]
        res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = "3"
    record, isvc = _edit(record_of("dev"), lambda r: r.type == ISVC, ask)
    (message,) = _errors(check_scheduling(record), "scheduling", isvc.urn)
    assert "requests 3 nvidia.com/gpu, a node has 2" in message


def test_prod_reaches_and_authorizes_every_cluster() -> None:
    assert [f for f in check_reach(record_of("prod")) if f.severity is Severity.ERROR] == []


def test_aks_without_the_role_assignment_is_a_403() -> None:
    record = record_of("prod")
    kept = [r for r in record.resources if not (r.type == "azure-native:authorization:RoleAssignment"
                                                and r.name.endswith("-deployer"))]
    broken = Record(record.stack, kept, record.outputs, record.warnings, record.plan)
    (provider,) = [p for p in broken.by_type("pulumi:providers:kubernetes") if "eastus" in p.name]
    (message,) = _errors(check_reach(broken), "reach", provider.urn)
    assert "403" in message and provider.name in message


def test_provider_that_does_not_wait_for_its_grant_is_found() -> None:
    record = record_of("prod")
    (provider,) = [p for p in record.by_type("pulumi:providers:kubernetes") if "us-central1" in p.name]
    grant = next(r for r in record.by_type("gcp:projects/iAMMember:IAMMember")
                 if r.name.endswith("-deployer"))
    edited = dataclasses.replace(
        provider, dependencies=tuple(d for d in provider.dependencies if d != grant.urn))
    broken = Record(record.stack, [edited if r.urn == provider.urn else r for r in record.resources],
                    record.outputs, record.warnings, record.plan)
    messages = _errors(check_reach(broken), "reach", provider.urn)
    assert any(f"does not wait for IAMMember {grant.name}" in m for m in messages)


def test_private_endpoint_with_a_public_runner_is_found() -> None:
    record = record_of("prod")
    spec = record.plan.spec
    public = spec.model_copy(update={"deployer": spec.deployer.model_copy(update={"network": "public"})})
    plan = dataclasses.replace(record.plan, spec=public)
    findings = check_reach(Record(record.stack, record.resources, record.outputs, record.warnings, plan))
    errors = [f for f in findings if f.severity is Severity.ERROR and "private" in f.message]
    assert len(errors) == 4  # every prod cluster


def test_image_references() -> None:
    assert split("vllm/vllm-openai:v0.11.0") == ("docker.io", "vllm/vllm-openai", "v0.11.0", None)
    assert split("nginx") == ("docker.io", "nginx", None, None)
    assert split("ghcr.io/a/b@sha256:ab") == ("ghcr.io", "a/b", None, "sha256:ab")
    assert split("localhost:5000/x:1") == ("localhost:5000", "x", "1", None)


def test_unpinned_and_foreign_registry_images_are_found() -> None:
    runtime = "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime"
    record, rt = _edit(record_of("prod"), lambda r: r.type == runtime and "us-central1" in r.name,
                       lambda i: i["spec"]["containers"][0].update(
                           image="123456789012.dkr.ecr.us-east-1.amazonaws.com/rtip/vllm-openai:latest"))
    messages = _errors(check_images(record), "images", rt.urn)
    assert any("is not pinned" in m for m in messages)
    assert any("aws registry" in m and "gcp cluster" in m for m in messages)


def test_run_checks_includes_every_check() -> None:
    from tests.test_deploycheck import without_localmodel_crds
    # prod's images are all pinned in their regions' registries: give the images check a finding.
    runtime = "kubernetes:serving.kserve.io/v1alpha1:ClusterServingRuntime"
    record, _ = _edit(without_localmodel_crds(record_of("prod")), lambda r: r.type == runtime,
                      lambda i: i["spec"]["containers"][0].update(image="docker.io/vllm/vllm-openai:latest"))
    checks = {f.check for f in run_checks(record)}
    assert {"kinds", "images", "values"} <= checks


def test_plan_prints_each_error_and_exits_1(capsys) -> None:
    import json

    from rtip.cli import main
    code = main(["plan", "prod", "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    errors = [f for f in doc["deploy_checks"] if f["severity"] == "error"]
    assert code == (1 if errors else 0)
    for f in errors:
        assert f"error [{f['check']}] {f['resource']}: {f['message']}" in captured.err.replace("\n", "")
