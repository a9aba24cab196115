"""Realistic outputs for resources the offline engine pretends to create.

Outputs are the inputs plus what the cloud would add (IDs, ARNs, endpoints, certificates), from
the per-cloud tables; every value derives from the resource's URN, so runs are deterministic.
"""

from __future__ import annotations

from typing import Any

from rtip.synth_aws import AWS
from rtip.synth_azure import AZURE, AZURE_INVOKES
from rtip.synth_base import (
    ACCOUNT_ID,
    AZURE_SUBSCRIPTION,
    GCP_PROJECT_NUMBER,
    Invoke,
    SynthArgs,
    Synthesizer,
    aws_arn,
    digest,
    fake_ca,
    physical_name,
    uuid_of,
)
from rtip.synth_gcp import GCP

TABLES: dict[str, Synthesizer] = {**AWS, **GCP, **AZURE}
INVOKES: dict[str, Invoke] = dict(AZURE_INVOKES)


def outputs(type_: str, name: str, urn: str, inputs: dict[str, Any],
            region: str | None) -> tuple[str, dict[str, Any]]:
    """(id, state) for a resource as a real engine would report them after creation."""
    physical = physical_name(type_, name, inputs, urn)
    state = dict(inputs)
    if type_.startswith("pulumi:providers:"):
        return uuid_of(urn), state
    if type_.startswith("kubernetes:"):
        meta = dict(inputs.get("metadata") or {})
        meta.setdefault("name", physical)
        meta.setdefault("uid", uuid_of(urn))
        ns = meta.get("namespace")
        state["metadata"] = meta
        return (f"{ns}/{meta['name']}" if ns else meta["name"]), state
    state.setdefault("name", physical)
    synth = TABLES.get(type_)
    if synth is not None:
        rid, extra = synth(SynthArgs(type_, name, physical, urn, inputs, region or ""))
        state.update(extra)
        return rid, {"id": rid, **state}
    if type_.startswith("aws:"):
        state.setdefault("arn", aws_arn(type_.split(":")[1].split("/")[0], region or "us-east-1", physical))
    return physical, {"id": physical, **state}


__all__ = ["ACCOUNT_ID", "AWS", "AZURE_SUBSCRIPTION", "GCP_PROJECT_NUMBER", "INVOKES", "TABLES", "Invoke",
           "SynthArgs", "Synthesizer", "digest", "fake_ca", "outputs"]
