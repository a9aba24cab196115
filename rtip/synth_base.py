"""What every cloud's synthesizers share: the arguments they get, deterministic IDs and names.

Every value derives from the resource's URN, so two runs of the same stack give the same record.
The per-cloud tables (synth_aws, synth_gcp, synth_azure) import only this module; rtip.synth
assembles them.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stacks.naming import AZURE_AUTONAME_HEX

ACCOUNT_ID = "123456789012"
GCP_PROJECT_NUMBER = "123456789012"
AZURE_SUBSCRIPTION = "00000000-0000-4000-8000-000000000000"


def digest(urn: str, n: int = 17) -> str:
    return hashlib.sha256(urn.encode()).hexdigest()[:n]


def uuid_of(urn: str) -> str:
    h = hashlib.sha256(urn.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


# Resources whose cloud-side name is not the `name` input.
NAME_KEYS = {"aws:s3/bucket:Bucket": "bucket", "azure-native:keyvault:Vault": "vaultName"}
# Bridged providers (aws, gcp) auto-name `<logical name>-<7 random hex>` (pulumi-terraform-bridge
# AutoName); azure-native `<logical name><8 random hex>` with no separator for its random strategy
# (pulumi-azure-native provider/pkg/provider/autonaming_test.go).
BRIDGED_AUTONAME_HEX = 7


def physical_name(type_: str, name: str, inputs: dict[str, Any], urn: str) -> str:
    """The cloud-side name: the name input when given, else the provider's auto-name."""
    given = inputs.get(NAME_KEYS.get(type_, "name"))
    if isinstance(given, str):
        return given
    if type_.startswith("azure-native:"):
        return f"{name}{digest(urn, AZURE_AUTONAME_HEX)}"
    return f"{name}-{digest(urn, BRIDGED_AUTONAME_HEX)}"


def aws_arn(service: str, region: str, resource: str) -> str:
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


# An invoke answer takes the call's arguments and returns its result.
Invoke = Callable[[dict[str, Any]], dict[str, Any]]




def fake_ca(urn: str) -> str:
    """A base64 PEM-shaped certificate authority, unique per resource."""
    body = digest(urn, 32).upper()
    return base64.b64encode(f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
                            .encode()).decode()


__all__ = ["ACCOUNT_ID", "AZURE_SUBSCRIPTION", "BRIDGED_AUTONAME_HEX", "GCP_PROJECT_NUMBER", "NAME_KEYS",
           "Invoke", "SynthArgs", "Synthesizer", "aws_arn", "digest", "fake_ca", "physical_name", "uuid_of"]
