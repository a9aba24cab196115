"""The request-log stores and identities per cloud: least privilege on the one store, and the names
the collector's config, its service account and the cloud bindings share."""

from __future__ import annotations

import json
from functools import cache

import pytest

from components.aws.logs import logs_key_policy, write_logs_policy
from components.azure.logs import workspace_retention_days
from components.gcp.logs import log_filter
from rtip import offline
from rtip.offline import Record
from rtip.stackfile import load
from serving.logpipeline import EXPORTERS, SERVICE_ACCOUNT, collector_values, log_group_name, log_name
from serving.netpol import LOGS
from serving.posture import POSTURES

GROUP = "/rtip/rtip-staging-us-east-1/inference"
# By hand from the Service Authorization Reference's ARN format for CloudWatch Logs log groups.
GROUP_ARN = "arn:aws:logs:us-east-1:123456789012:log-group:/rtip/rtip-staging-us-east-1/inference"


def test_the_aws_role_may_only_write_into_its_one_group() -> None:
    [statement] = write_logs_policy("aws", "us-east-1", "123456789012", GROUP)["Statement"]
    assert statement["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert statement["Resource"] == [GROUP_ARN, f"{GROUP_ARN}:log-stream:*"]


def test_the_logs_key_serves_cloudwatch_for_that_group_only() -> None:
    account, logs = logs_key_policy("aws", "us-east-1", "123456789012", GROUP)["Statement"]
    assert account["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert logs["Condition"] == {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": GROUP_ARN}}
    assert not any(a.startswith("kms:Create") or a == "kms:*" for a in logs["Action"])


def test_the_exporters_write_where_the_stores_are() -> None:
    aws = EXPORTERS["aws"].config("rtip-staging-us-east-1", "us-east-1")
    assert (aws["log_group_name"], aws["region"]) == (GROUP, "us-east-1") == (
        log_group_name("rtip-staging-us-east-1"), "us-east-1")
    gcp = EXPORTERS["gcp"].config("c", "proj")
    assert gcp["project"] == "proj"
    assert log_filter("proj", "c") == f'logName="projects/proj/logs/{gcp["log"]["default_log_name"]}"'
    assert gcp["log"]["default_log_name"] == log_name("c") == "rtip-c-inference"


@pytest.mark.parametrize("days, kept", [(3, 30), (7, 30), (30, 30), (90, 90)])
def test_azure_keeps_at_least_the_workspace_minimum(days: int, kept: int) -> None:
    from dataclasses import replace
    row = replace(POSTURES[next(iter(POSTURES))], log_retention_days=days)
    assert workspace_retention_days(row) == kept


@cache
def staging() -> Record:
    return offline.run(load("staging"))


def test_the_pod_identity_binds_the_service_account_the_chart_creates() -> None:
    rec = staging()
    account = collector_values("aws", models_namespace="m", cluster="c", location="r")["serviceAccount"]
    assert account["name"] == SERVICE_ACCOUNT and account["create"] is True
    associations = [a for a in rec.by_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                    if a.inputs["namespace"] == LOGS]
    assert associations and all(a.inputs["serviceAccount"] == SERVICE_ACCOUNT for a in associations)
    roles = {r.outputs["arn"]: r for r in rec.by_type("aws:iam/role:Role")}
    for association in associations:
        trust = json.loads(roles[association.inputs["roleArn"]].inputs["assumeRolePolicy"])
        subjects = {(s["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"],
                     s["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"])
                    for s in trust["Statement"]}
        assert subjects == {(LOGS, SERVICE_ACCOUNT)}
    # Each cluster's collector writes into the group of its own cluster, in its own region.
    for release in rec.by_type("kubernetes:helm.sh/v3:Release"):
        if release.inputs["chart"] != "opentelemetry-collector":
            continue
        exporter = release.inputs["values"]["alternateConfig"]["exporters"]["awscloudwatchlogs"]
        groups = [g.inputs["name"] for g in rec.by_type("aws:cloudwatch/logGroup:LogGroup")]
        assert exporter["log_group_name"] in groups
