"""The stack spec's building blocks: its config key, field patterns, strict number types and the
frozen, closed base model every block of it derives from (stacks/schema.py reads them all)."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict
from pydantic_core import PydanticCustomError

CONFIG_NAMESPACE = "rtip"
CONFIG_KEY = f"{CONFIG_NAMESPACE}:platform"

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$"
TEXT_PATTERN = r"^\S(.*\S)?$"
KUBERNETES_VERSION_PATTERN = r"^1\.(2[89]|3[0-9])$"
GCP_PROJECT_PATTERN = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
GCP_PROJECT_NUMBER_PATTERN = r"^[0-9]{6,20}$"
NAME_PREFIX_PATTERN = r"^[a-z][a-z0-9]{2,11}$"

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Text = Annotated[str, Field(pattern=TEXT_PATTERN)]
Count = Annotated[int, Strict()]  # a whole number as YAML writes one: not "4", 4.0 or true
Rate = Annotated[float, Strict(), Field(allow_inf_nan=False)]  # a finite number; 2 and 2.5 both


def _network_text(value: Any) -> Any:
    """An IPv4 network written as text (`10.10.0.0/16`), with its host bits clear."""
    if not isinstance(value, str):
        raise PydanticCustomError("network_type", "expected an IPv4 network written as text, "
                                  "e.g. 10.10.0.0/16")
    try:
        return IPv4Network(value)
    except ValueError as err:
        if "host bits set" in str(err):
            fixed = IPv4Network(value, strict=False)
            raise PydanticCustomError("network_host_bits", "{value} has host bits set; the network "
                                      "it lies in is {fixed}", {"value": value, "fixed": str(fixed)}
                                      ) from None
        raise PydanticCustomError("network_parsing", "expected an IPv4 network: four numbers 0-255 "
                                  "and a prefix length 0-32, e.g. 10.10.0.0/16") from None


Network = Annotated[IPv4Network, BeforeValidator(_network_text)]
# Lists whose items must differ: stacks.checks reports a repeat with its path; the JSON Schema
# says so too, so editors flag it.
UNIQUE: dict[str, Any] = {"uniqueItems": True}


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


__all__ = ["CONFIG_KEY", "CONFIG_NAMESPACE", "GCP_PROJECT_NUMBER_PATTERN", "GCP_PROJECT_PATTERN",
           "KUBERNETES_VERSION_PATTERN", "NAME_PATTERN", "NAME_PREFIX_PATTERN", "TEXT_PATTERN", "UNIQUE",
           "Count", "Name", "Network", "Rate", "Text"]
