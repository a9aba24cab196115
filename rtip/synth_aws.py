"""Synthesized outputs of AWS resources for the offline engine (see rtip/synth.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rtip.synth_base import ACCOUNT_ID, SynthArgs, Synthesizer, digest, fake_ca
from rtip.synth_base import aws_arn as _aws_arn
from rtip.synth_base import uuid_of as _uuid


def _aws(prefix: str, extra: Callable[[SynthArgs], dict[str, Any]] | None = None) -> Synthesizer:
    def synth(a: SynthArgs) -> tuple[str, dict[str, Any]]:
        rid = f"{prefix}{digest(a.urn)}" if prefix else a.physical
        return rid, (extra(a) if extra else {})
    return synth


def _eks_cluster(a: SynthArgs) -> dict[str, Any]:
    h = digest(a.urn, 32).upper()
    return {
        "arn": _aws_arn("eks", a.region, f"cluster/{a.physical}"),
        "endpoint": f"https://{h}.gr7.{a.region}.eks.amazonaws.com",
        "certificateAuthority": {"data": fake_ca(a.urn)},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{a.region}.amazonaws.com/id/{h}"}]}],
        "vpcConfig": {**a.inputs.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{digest(a.urn)}",
                      "vpcId": f"vpc-{digest(a.urn + 'vpc')}"},
        "status": "ACTIVE",
        "platformVersion": "eks.1",
    }


AWS: dict[str, Synthesizer] = {
    "aws:ec2/vpc:Vpc": _aws("vpc-", lambda a: {"arn": _aws_arn("ec2", a.region, f"vpc/vpc-{digest(a.urn)}")}),
    "aws:ec2/subnet:Subnet": _aws("subnet-", lambda a: {
        "arn": _aws_arn("ec2", a.region, f"subnet/subnet-{digest(a.urn)}")}),
    "aws:ec2/internetGateway:InternetGateway": _aws("igw-"),
    "aws:ec2/natGateway:NatGateway": _aws("nat-", lambda a: {"publicIp": "203.0.113.10"}),
    "aws:ec2/eip:Eip": _aws("eipalloc-", lambda a: {"publicIp": "203.0.113.10"}),
    "aws:ec2/routeTable:RouteTable": _aws("rtb-"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": _aws("rtbassoc-"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": _aws("vpce-"),
    "aws:ec2/launchTemplate:LaunchTemplate": _aws("lt-", lambda a: {"latestVersion": 1, "defaultVersion": 1}),
    "aws:kms/key:Key": _aws("", lambda a: {
        "keyId": _uuid(a.urn), "arn": _aws_arn("kms", a.region, f"key/{_uuid(a.urn)}")}),
    "aws:kms/alias:Alias": _aws("", lambda a: {"arn": _aws_arn("kms", a.region, str(a.inputs.get("name")))}),
    "aws:iam/role:Role": _aws("", lambda a: {
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{a.physical}", "uniqueId": "AROA" + digest(a.urn).upper()}),
    "aws:eks/cluster:Cluster": _aws("", _eks_cluster),
    "aws:eks/nodeGroup:NodeGroup": _aws("", lambda a: {
        "arn": _aws_arn("eks", a.region, f"nodegroup/{a.physical}/{_uuid(a.urn)}"), "status": "ACTIVE"}),
    "aws:s3/bucket:Bucket": _aws("", lambda a: {
        "arn": f"arn:aws:s3:::{a.physical}", "bucket": a.physical,
        "bucketRegionalDomainName": f"{a.physical}.s3.{a.region}.amazonaws.com"}),
    "aws:ecr/repository:Repository": _aws("", lambda a: {
        "arn": _aws_arn("ecr", a.region, f"repository/{a.physical}"), "registryId": ACCOUNT_ID,
        "repositoryUrl": f"{ACCOUNT_ID}.dkr.ecr.{a.region}.amazonaws.com/{a.physical}"}),
    # ECR keeps one pull-through rule per prefix in the registry (the account) of its region.
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": _aws("", lambda a: {"registryId": ACCOUNT_ID}),
    "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": _aws("", lambda a: {
        "registryId": ACCOUNT_ID}),
    # Secrets Manager appends six random characters to a secret's name in its ARN.
    "aws:secretsmanager/secret:Secret": _aws("", lambda a: {
        "arn": _aws_arn("secretsmanager", a.region, f"secret:{a.physical}-{digest(a.urn, 6)}")}),
    "aws:secretsmanager/secretVersion:SecretVersion": _aws("", lambda a: {
        "versionId": _uuid(a.urn), "arn": a.inputs.get("secretId", "")}),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _aws("a-", lambda a: {
        "associationArn": _aws_arn("eks", a.region, f"podidentityassociation/{_uuid(a.urn)}")}),
    # Karpenter (components/aws/karpenter.py): an SQS queue's ID is its URL.
    "aws:sqs/queue:Queue": lambda a: (
        f"https://sqs.{a.region}.amazonaws.com/{ACCOUNT_ID}/{a.physical}",
        {"arn": _aws_arn("sqs", a.region, a.physical),
         "url": f"https://sqs.{a.region}.amazonaws.com/{ACCOUNT_ID}/{a.physical}"}),
    "aws:cloudwatch/eventRule:EventRule": _aws("", lambda a: {
        "arn": _aws_arn("events", a.region, f"rule/{a.physical}")}),
    "aws:cloudwatch/eventTarget:EventTarget": lambda a: (
        f"{a.inputs.get('rule')}-{a.inputs.get('targetId')}", {}),
    "aws:eks/accessEntry:AccessEntry": lambda a: (
        f"{a.inputs.get('clusterName')}:{a.inputs.get('principalArn')}", {
            "accessEntryArn": _aws_arn("eks", a.region, f"access-entry/{a.inputs.get('clusterName')}/"
                                                        f"role/{ACCOUNT_ID}/{_uuid(a.urn)}"),
            # EKS names an EC2_LINUX entry's user after the node; other types keep their input.
            **({"userName": "system:node:{{EC2PrivateDNSName}}"}
               if a.inputs.get("type") == "EC2_LINUX" else {})}),
    "aws:ec2/tag:Tag": lambda a: (f"{a.inputs.get('resourceId')},{a.inputs.get('key')}", {}),
    "aws:eks/addon:Addon": _aws("", lambda a: {
        "arn": _aws_arn("eks", a.region, f"addon/{a.inputs.get('addonName')}/{_uuid(a.urn)}")}),
}


__all__ = ["AWS"]
