"""What a cloud's log store gives the cloud-neutral collector (components/logs.py): one seam.

Each cloud (components/<cloud>/logs.py) creates its store for one cluster (with the posture's
retention), the collector's identity on it, and returns what the collector's Helm values need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import pulumi

from serving.posture import Posture


@dataclass(frozen=True)
class LogSink:
    location: str  # the exporter's `location`: the AWS region or the GCP project ("" on Azure)
    # On the collector's Kubernetes service account: what binds it to the cloud identity.
    annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # A connection string the exporter authenticates with (Azure), carried as a secret Output.
    connection_string: pulumi.Output[str] | None = None
    # Cloud resources the collector must not start before (its store, grants, identity binding).
    after: tuple[pulumi.Resource, ...] = ()


class SinkFactory(Protocol):
    def __call__(self, name: str, cluster: object, env: Posture, parent: pulumi.Resource) -> LogSink: ...


__all__ = ["LogSink", "SinkFactory"]
