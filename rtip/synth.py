"""Realistic outputs for resources the offline engine pretends to create.

Every value derives from the resource's URN, so two runs of the same stack give the same record.
Outputs are the inputs plus what the cloud would add (IDs, ARNs, endpoints, certificates).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ACCOUNT_ID = "123456789012"
GCP_PROJECT_NUMBER = "123456789012"
AZURE_SUBSCRIPTION = "00000000-0000-4000-8000-000000000000"


def digest(urn: str, n: int = 17) -> str:
    return hashlib.sha256(urn.encode()).hexdigest()[:n]


def _uuid(urn: str) -> str:
    h = hashlib.sha256(urn.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


# Resources whose cloud-side name is not the `name` input.
NAME_KEYS = {"aws:s3/bucket:Bucket": "bucket"}


def _physical_name(type_: str, name: str, inputs: dict[str, Any], urn: str) -> str:
    """Pulumi auto-names resources `<logical name>-<7 random hex>` unless a name is given."""
    given = inputs.get(NAME_KEYS.get(type_, "name"))
    return given if isinstance(given, str) else f"{name}-{digest(urn, 7)}"


def _aws_arn(service: str, region: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{resource}"


@dataclass(frozen=True)
class SynthArgs:
    type: str
    name: str  # the logical (Pulumi) name
    physical: str  # the cloud-side name: the `name` input, or Pulumi's auto-name
    urn: str
    inputs: dict[str, Any]
    region: str


# A synthesizer returns the resource's ID and the outputs the cloud adds to its inputs.
Synthesizer = Callable[[SynthArgs], tuple[str, dict[str, Any]]]


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


def fake_ca(urn: str) -> str:
    """A base64 PEM-shaped certificate authority, unique per resource."""
    body = digest(urn, 32).upper()
    return base64.b64encode(f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
                            .encode()).decode()


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
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _aws("a-", lambda a: {
        "associationArn": _aws_arn("eks", a.region, f"podidentityassociation/{_uuid(a.urn)}")}),
    "aws:eks/addon:Addon": _aws("", lambda a: {
        "arn": _aws_arn("eks", a.region, f"addon/{a.inputs.get('addonName')}/{_uuid(a.urn)}")}),
}


# An invoke answer takes the call's arguments and returns its result.
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def _tables() -> tuple[dict[str, Synthesizer], dict[str, Invoke]]:
    from rtip.synth_azure import AZURE, AZURE_INVOKES
    from rtip.synth_gcp import GCP
    return {**AWS, **GCP, **AZURE}, {**AZURE_INVOKES}


def outputs(type_: str, name: str, urn: str, inputs: dict[str, Any],
            region: str | None) -> tuple[str, dict[str, Any]]:
    """(id, state) for a resource as a real engine would report them after creation."""
    physical = _physical_name(type_, name, inputs, urn)
    state = dict(inputs)
    if type_.startswith("pulumi:providers:"):
        return _uuid(urn), state
    if type_.startswith("kubernetes:"):
        meta = dict(inputs.get("metadata") or {})
        meta.setdefault("name", physical)
        meta.setdefault("uid", _uuid(urn))
        ns = meta.get("namespace")
        state["metadata"] = meta
        return (f"{ns}/{meta['name']}" if ns else meta["name"]), state
    state.setdefault("name", physical)
    synth = _TABLES.get(type_)
    if synth is not None:
        rid, extra = synth(SynthArgs(type_, name, physical, urn, inputs, region or ""))
        state.update(extra)
        return rid, {"id": rid, **state}
    if type_.startswith("aws:"):
        state.setdefault("arn", _aws_arn(type_.split(":")[1].split("/")[0], region or "us-east-1",
                                         physical))
    return physical, {"id": physical, **state}


_TABLES, INVOKES = _tables()

__all__ = [
    "ACCOUNT_ID",
    "AWS",
    "AZURE_SUBSCRIPTION",
    "GCP_PROJECT_NUMBER",
    "INVOKES",
    "Invoke",
    "SynthArgs",
    "Synthesizer",
    "digest",
    "fake_ca",
    "outputs",
]
