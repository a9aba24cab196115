"""The offline engine: a complete, deterministic record, and the rejections a real engine makes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rtip import offline, synth
from rtip.offline import SECRET_MARK, EngineError
from rtip.stackfile import load
from tests.conftest import record_of

PROVIDERLESS = ("pulumi:pulumi:Stack", "pulumi:providers:")


def test_every_stack_records_unique_urns(stack) -> None:
    urns = [r.urn for r in record_of(stack).resources]
    assert len(urns) == len(set(urns))
    assert urns == sorted(urns)


def test_record_is_deterministic(stack) -> None:
    first = [r.to_json() for r in record_of(stack).resources]
    again = [r.to_json() for r in offline.run(load(stack)).resources]
    assert first == again


def test_every_cloud_resource_has_an_explicit_provider(stack) -> None:
    record = record_of(stack)
    for res in record.resources:
        if res.custom and not res.type.startswith(PROVIDERLESS):
            assert res.provider is not None, res.urn
            assert record.get(res.provider).type.startswith("pulumi:providers:")


def test_parents_form_a_tree_rooted_at_the_stack(stack) -> None:
    record = record_of(stack)
    roots = [r for r in record.resources if r.parent is None]
    assert [r.type for r in roots] == ["pulumi:pulumi:Stack"]
    for res in record.resources:
        if res.parent:
            record.get(res.parent)  # every parent is itself recorded


def test_outputs_are_synthesized_per_type() -> None:
    record = record_of("dev")
    (eks,) = record.by_type("aws:eks/cluster:Cluster")
    assert eks.outputs["endpoint"].startswith("https://") and ".us-east-1.eks.amazonaws.com" in \
        eks.outputs["endpoint"]
    assert eks.outputs["arn"] == f"arn:aws:eks:us-east-1:{synth.ACCOUNT_ID}:cluster/rtip-dev-us-east-1"
    for role in record.by_type("aws:iam/role:Role"):
        assert role.outputs["arn"].startswith(f"arn:aws:iam::{synth.ACCOUNT_ID}:role/")
    vpc = record.by_type("aws:ec2/vpc:Vpc")[0]
    assert vpc.outputs["id"].startswith("vpc-")
    assert record.outputs["clusters"]["rtip-dev-us-east-1"]["endpoint"] == eks.outputs["endpoint"]


def test_dependencies_are_recorded() -> None:
    record = record_of("staging")  # staging's posture encrypts secrets with a customer key
    (eks,) = record.by_type("aws:eks/cluster:Cluster")
    deps = {record.get(d).type for d in eks.dependencies}
    assert "aws:iam/role:Role" in deps and "aws:kms/key:Key" in deps
    assert "aws:ec2/subnet:Subnet" in deps


def test_secrets_are_redacted_in_the_record() -> None:
    record = record_of("dev")
    (provider,) = record.by_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == SECRET_MARK
    assert "kubeconfig" in provider.secret_paths


def _project(tmp_path: Path, program: str) -> Path:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: rtip\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(textwrap.dedent(program))
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text(
        "config:\n  rtip:platform: {}\n  rtip:token:\n    secure: AAABAGVuY3J5cHRlZA==\n")
    return tmp_path


def test_secure_config_reaches_the_program_as_a_secret(tmp_path) -> None:
    project = _project(tmp_path, """
        import pulumi, pulumi_aws as aws
        p = aws.Provider("p", region="us-east-1")
        token = pulumi.Config("rtip").require_secret("token")
        aws.ssm.Parameter("t", type="SecureString", value=token, opts=pulumi.ResourceOptions(provider=p))
    """)
    config = load("t", project)
    assert config.secret_keys == {"rtip:token"}
    record = offline.run(config, project)
    (param,) = record.by_type("aws:ssm/parameter:Parameter")
    assert param.inputs["value"] == SECRET_MARK
    assert "AAAB" not in str(record.resources)


def test_duplicate_urns_are_rejected(tmp_path) -> None:
    project = _project(tmp_path, """
        import pulumi_aws as aws, pulumi
        p = aws.Provider("p", region="us-east-1")
        for _ in range(2):
            aws.s3.Bucket("same", opts=pulumi.ResourceOptions(provider=p))
    """)
    with pytest.raises(EngineError, match="duplicate resource URNs"):
        offline.run(load("t", project), project)


def test_default_providers_are_rejected(tmp_path) -> None:
    project = _project(tmp_path, """
        import pulumi_aws as aws
        aws.s3.Bucket("implicit")
    """)
    with pytest.raises(EngineError, match="without an explicit provider"):
        offline.run(load("t", project), project)


def test_provider_lookups_are_rejected(tmp_path) -> None:
    project = _project(tmp_path, """
        import pulumi, pulumi_aws as aws
        p = aws.Provider("p", region="us-east-1")
        aws.get_caller_identity(opts=pulumi.InvokeOptions(provider=p))
    """)
    with pytest.raises(EngineError, match="make no provider calls"):
        offline.run(load("t", project), project)
