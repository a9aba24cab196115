"""Realistic outputs for resources the offline engine pretends to create.

Every value derives from the resource's URN, so two runs of the same stack give the same record.
Outputs are the inputs plus what the cloud would add (IDs, ARNs, endpoints, certificates).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any

ACCOUNT_ID = "123456789012"
GCP_PROJECT_NUMBER = "123456789012"
AZURE_SUBSCRIPTION = "00000000-0000-4000-8000-000000000000"


def digest(urn: str, n: int = 17) -> str:
    return hashlib.sha256(urn.encode()).hexdigest()[:n]


def _uuid(urn: str) -> str:
    h = hashlib.sha256(urn.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def _physical_name(name: str, inputs: dict[str, Any], urn: str) -> str:
    """Pulumi auto-names resources `<logical name>-<7 random hex>` unless a name is given."""
    given = inputs.get("name")
    return given if isinstance(given, str) else f"{name}-{digest(urn, 7)}"


def _aws_arn(service: str, region: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{resource}"


def _eks_cluster(name: str, region: str, urn: str, inputs: dict[str, Any]) -> dict[str, Any]:
    h = digest(urn, 32).upper()
    fake_ca = base64.b64encode(f"-----BEGIN CERTIFICATE-----\n{h}\n-----END CERTIFICATE-----\n"
                               .encode()).decode()
    return {
        "arn": _aws_arn("eks", region, f"cluster/{name}"),
        "endpoint": f"https://{h}.gr7.{region}.eks.amazonaws.com",
        "certificateAuthority": {"data": fake_ca},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{h}"}]}],
        "vpcConfig": {**inputs.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{digest(urn)}",
                      "vpcId": f"vpc-{digest(urn + 'vpc')}"},
        "status": "ACTIVE",
        "platformVersion": "eks.1",
    }


# type token -> (id prefix, extra outputs(name, region, urn, inputs))
_AWS: dict[str, tuple[str, Callable[[str, str, str, dict[str, Any]], dict[str, Any]]]] = {
    "aws:ec2/vpc:Vpc": ("vpc-", lambda n, r, u, i: {"arn": _aws_arn("ec2", r, f"vpc/vpc-{digest(u)}")}),
    "aws:ec2/subnet:Subnet": ("subnet-", lambda n, r, u, i: {
        "arn": _aws_arn("ec2", r, f"subnet/subnet-{digest(u)}")}),
    "aws:ec2/internetGateway:InternetGateway": ("igw-", lambda n, r, u, i: {}),
    "aws:ec2/natGateway:NatGateway": ("nat-", lambda n, r, u, i: {"publicIp": "203.0.113.10"}),
    "aws:ec2/eip:Eip": ("eipalloc-", lambda n, r, u, i: {"publicIp": "203.0.113.10"}),
    "aws:ec2/routeTable:RouteTable": ("rtb-", lambda n, r, u, i: {}),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("rtbassoc-", lambda n, r, u, i: {}),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpce-", lambda n, r, u, i: {}),
    "aws:ec2/launchTemplate:LaunchTemplate": ("lt-", lambda n, r, u, i: {
        "latestVersion": 1, "defaultVersion": 1}),
    "aws:kms/key:Key": ("", lambda n, r, u, i: {
        "keyId": _uuid(u), "arn": _aws_arn("kms", r, f"key/{_uuid(u)}")}),
    "aws:kms/alias:Alias": ("", lambda n, r, u, i: {"arn": _aws_arn("kms", r, str(i.get("name")))}),
    "aws:iam/role:Role": ("", lambda n, r, u, i: {
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{n}", "uniqueId": "AROA" + digest(u).upper()}),
    "aws:eks/cluster:Cluster": ("", _eks_cluster),
    "aws:eks/nodeGroup:NodeGroup": ("", lambda n, r, u, i: {
        "arn": _aws_arn("eks", r, f"nodegroup/{n}/{_uuid(u)}"), "status": "ACTIVE"}),
    "aws:eks/addon:Addon": ("", lambda n, r, u, i: {
        "arn": _aws_arn("eks", r, f"addon/{i.get('addonName')}/{_uuid(u)}")}),
}


def outputs(type_: str, name: str, urn: str, inputs: dict[str, Any],
            region: str | None) -> tuple[str, dict[str, Any]]:
    """(id, state) for a resource as a real engine would report them after creation."""
    physical = _physical_name(name, inputs, urn)
    state = dict(inputs)
    if type_.startswith("pulumi:providers:"):
        return _uuid(urn), state
    if type_ in _AWS:
        prefix, extra = _AWS[type_]
        state.setdefault("name", physical)
        state.update(extra(physical, region or "us-east-1", urn, inputs))
        rid = f"{prefix}{digest(urn)}" if prefix else physical
        return rid, {"id": rid, **state}
    if type_.startswith("kubernetes:"):
        meta = dict(inputs.get("metadata") or {})
        meta.setdefault("name", physical)
        meta.setdefault("uid", _uuid(urn))
        ns = meta.get("namespace")
        state["metadata"] = meta
        return (f"{ns}/{meta['name']}" if ns else meta["name"]), state
    state.setdefault("name", physical)
    if type_.startswith("aws:"):
        state.setdefault("arn", _aws_arn(type_.split(":")[1].split("/")[0], region or "us-east-1",
                                         physical))
    return physical, {"id": physical, **state}


__all__ = ["ACCOUNT_ID", "AZURE_SUBSCRIPTION", "GCP_PROJECT_NUMBER", "digest", "outputs"]
