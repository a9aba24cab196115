"""Where an EKS cluster's redacting collector ships its logs: one CloudWatch Logs group per cluster.

The awscloudwatchlogs exporter (opentelemetry-collector-contrib, internal/aws/cwlogs
cwlog_client.go) calls `PutLogEvents`; when the stream does not exist yet it calls
`CreateLogStream`, and only when the group is missing `CreateLogGroup` (then, in newer releases,
`PutRetentionPolicy` and `TagResource` for the group it made). The stack creates the group itself,
with the posture's retention and, where the posture keeps customer keys, a KMS key of its own, so
the collector needs exactly `logs:CreateLogStream` and `logs:PutLogEvents` on that one group: a
group it cannot create is a group it cannot create unencrypted or without retention.

The role is assumed through EKS Pod Identity by the collector's service account only (the same
trust as the model servers', components/aws/roles.py); EKS Pod Identity needs no annotation.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from components.aws.cluster import AwsCluster
from components.aws.keys import DELETION_WINDOW_DAYS
from components.aws.roles import arn_parts, pod_role
from components.logsink import LogSink
from serving.logpipeline import SERVICE_ACCOUNT, log_group_name
from serving.netpol import LOGS
from serving.posture import Posture


def log_group_arn(partition: str, region: str, account: str, group: str) -> str:
    """A log group's ARN as IAM names it (Service Authorization Reference, Amazon CloudWatch Logs:
    `arn:${Partition}:logs:${Region}:${Account}:log-group:${LogGroupName}`)."""
    return f"arn:{partition}:logs:{region}:{account}:log-group:{group}"


def write_logs_policy(partition: str, region: str, account: str, group: str) -> dict[str, Any]:
    """Create streams in, and put events into, the one group (streams are
    `<group ARN>:log-stream:<name>`, the resource `PutLogEvents` names)."""
    arn = log_group_arn(partition, region, account, group)
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "WriteRequestLogs", "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": [arn, f"{arn}:log-stream:*"]}]}


def logs_key_policy(partition: str, region: str, account: str, group: str) -> dict[str, Any]:
    """The key's policy: the account administers it (what KMS gives a key created without a
    policy), and CloudWatch Logs in this region may use it for this one group only (CloudWatch Logs
    user guide, "Encrypt log data in CloudWatch Logs using AWS Key Management Service": the
    `logs.<region>.amazonaws.com` principal with the `kms:EncryptionContext:aws:logs:arn` condition)."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "AccountAdministersTheKey", "Effect": "Allow",
         "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"}, "Action": "kms:*", "Resource": "*"},
        {"Sid": "CloudWatchLogsEncryptsTheGroup", "Effect": "Allow",
         "Principal": {"Service": f"logs.{region}.amazonaws.com"},
         "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*",
                    "kms:Describe*"],
         "Resource": "*",
         "Condition": {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn":
                                     log_group_arn(partition, region, account, group)}}},
    ]}


def aws_log_sink(name: str, cluster: AwsCluster, env: Posture, parent: pulumi.Resource) -> LogSink:
    child = pulumi.ResourceOptions(parent=parent, provider=cluster.cloud_provider)
    group = log_group_name(cluster.cluster_name)
    parts = cluster.eks.arn.apply(arn_parts)
    key = None
    if env.stores_customer_key:
        key = aws.kms.Key(f"{name}-key", aws.kms.KeyArgs(
            description=f"request logs of {cluster.cluster_name}", enable_key_rotation=True,
            deletion_window_in_days=DELETION_WINDOW_DAYS,
            policy=parts.apply(lambda p: json.dumps(logs_key_policy(*p, group)))), opts=child)
    log_group = aws.cloudwatch.LogGroup(f"{name}-group", aws.cloudwatch.LogGroupArgs(
        name=group, retention_in_days=env.log_retention_days,
        kms_key_id=key.arn if key is not None else None), opts=child)
    role = pod_role(f"{name}-role", cluster.eks, [(LOGS, SERVICE_ACCOUNT)], child)
    policy = aws.iam.RolePolicy(f"{name}-write", aws.iam.RolePolicyArgs(
        role=role.id, policy=parts.apply(lambda p: json.dumps(write_logs_policy(*p, group)))), opts=child)
    association = aws.eks.PodIdentityAssociation(f"{name}-assoc", aws.eks.PodIdentityAssociationArgs(
        cluster_name=cluster.facts.native_id, namespace=LOGS, service_account=SERVICE_ACCOUNT,
        role_arn=role.arn), opts=child)
    return LogSink(location=cluster.facts.region, after=(log_group, policy, association))


__all__ = ["aws_log_sink", "log_group_arn", "logs_key_policy", "write_logs_policy"]
