"""`rtip check STACK`: the policy pack over the offline record, through the analyzer the Pulumi CLI
talks to.

`pulumi preview --policy-pack policies` starts the pack's gRPC analyzer and calls `Configure`
with the pack config, then `Analyze` once per resource (its inputs) and `AnalyzeStack` once with
every resource (their outputs). This drives the same servicer class (pulumi_policy 1.21.0,
`_PolicyAnalyzerServicer`: private API, pinned in the lock) with the same requests built from the
record, so a violation here is the one preview would report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policies.pack import PACK_NAME, policies
from rtip.offline import Record, Resource
from rtip.stackfile import PROJECT_DIR

CONFIG_DIR = PROJECT_DIR / "policies" / "config"
PACK_VERSION = str(yaml.safe_load((PROJECT_DIR / "policies" / "PulumiPolicy.yaml").read_text())["version"])
_LEVELS = {analyzer_pb2.EnforcementLevel.ADVISORY: "advisory",
           analyzer_pb2.EnforcementLevel.MANDATORY: "mandatory"}


@dataclass(frozen=True)
class Violation:
    policy: str
    urn: str
    message: str
    enforcement: str  # advisory | mandatory

    def to_json(self) -> dict[str, str]:
        return {"policy": self.policy, "urn": self.urn, "message": self.message,
                "enforcement": self.enforcement}


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(json.loads(json.dumps(value, default=str)))
    return out


def _level(name: str) -> int:
    return {"advisory": analyzer_pb2.EnforcementLevel.ADVISORY,
            "mandatory": analyzer_pb2.EnforcementLevel.MANDATORY,
            "disabled": analyzer_pb2.EnforcementLevel.DISABLED}[name]


def configure_request(config: dict[str, Any]) -> analyzer_pb2.ConfigureAnalyzerRequest:
    """The pack config file as the CLI sends it: `all` sets every policy's level."""
    default = config.get("all")
    names = [p.name for p in policies()]
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    for name in names:
        entry = config.get(name, {})
        entry = {"enforcementLevel": entry} if isinstance(entry, str) else dict(entry)
        level = entry.pop("enforcementLevel", default)
        if level is None:
            continue
        request.policyConfig[name].CopyFrom(analyzer_pb2.PolicyConfig(
            enforcementLevel=_level(level), properties=_struct(entry)))
    return request


def _request(resource: Resource, record: Record, stack: bool) -> Any:
    props = resource.outputs if stack and resource.custom else resource.inputs
    options = analyzer_pb2.AnalyzerResourceOptions(protect=bool(resource.options.get("protect")),
                                                   parent=resource.parent or "")
    if not stack:
        req = analyzer_pb2.AnalyzeRequest(type=resource.type, properties=_struct(props), urn=resource.urn,
                                          name=resource.name, options=options)
    else:
        req = analyzer_pb2.AnalyzerResource(type=resource.type, properties=_struct(props), urn=resource.urn,
                                            name=resource.name, options=options, parent=resource.parent or "",
                                            dependencies=list(resource.dependencies))
    if resource.provider:
        provider = record.get(resource.provider)
        req.provider.CopyFrom(analyzer_pb2.AnalyzerProviderResource(
            type=provider.type, properties=_struct(provider.inputs), urn=provider.urn, name=provider.name))
    return req


def _collect(response: Any, out: list[Violation]) -> None:
    for d in response.diagnostics:
        # The analyzer prefixes the policy's description on its own line; the policy name says it.
        message = d.message.split("\n", 1)[-1]
        out.append(Violation(d.policyName, d.urn, message, _LEVELS.get(d.enforcementLevel, "advisory")))


def analyze(record: Record, config: dict[str, Any]) -> list[Violation]:
    """Every violation the pack reports for the record under `config`."""
    servicer = _PolicyAnalyzerServicer(PACK_NAME, PACK_VERSION, policies(), EnforcementLevel.ADVISORY)
    servicer.Configure(configure_request(config), None)
    found: list[Violation] = []
    for resource in record.resources:
        if resource.type == "pulumi:pulumi:Stack":
            continue
        _collect(servicer.Analyze(_request(resource, record, stack=False), None), found)
    stack = analyzer_pb2.AnalyzeStackRequest(resources=[
        _request(r, record, stack=True) for r in record.resources if r.type != "pulumi:pulumi:Stack"])
    _collect(servicer.AnalyzeStack(stack, None), found)
    return sorted(found, key=lambda v: (v.enforcement != "mandatory", v.policy, v.urn))


def environment_config(environment: str, directory: Path = CONFIG_DIR) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((directory / f"{environment}.json").read_text())
    return loaded


__all__ = ["CONFIG_DIR", "Violation", "analyze", "configure_request", "environment_config"]


def run_command(stack: str, as_json: bool) -> int:
    """`rtip check`: 0 clean or advisory only, 1 a mandatory violation, 2 bad input."""
    import sys

    from rich.console import Console
    from rich.table import Table

    from rtip import offline
    from rtip.stackfile import StackFileError, load

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        config = load(stack)
        record = offline.run(config)
    except (StackFileError, offline.ProgramRejected) as problem:
        err.print(str(problem), markup=False)
        return 2
    environment = record.plan.spec.environment
    found = analyze(record, environment_config(environment))
    remediation = {p.name: p.remediation_steps for p in policies()}
    if as_json:
        doc = {"stack": record.stack, "environment": environment,
               "violations": [{**v.to_json(), "remediation": remediation.get(v.policy, "")} for v in found]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        table = Table(title=f"Policy pack {PACK_NAME} on {record.stack} ({environment})",
                      title_justify="left")
        for col in ("enforcement", "policy", "resource", "message"):
            table.add_column(col)
        for v in found:
            table.add_row(v.enforcement, v.policy, v.urn.rsplit("::", 1)[-1], v.message)
        Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)
        print(f"{sum(v.enforcement == 'mandatory' for v in found)} mandatory, "
              f"{sum(v.enforcement == 'advisory' for v in found)} advisory violation(s)")
    return 1 if any(v.enforcement == "mandatory" for v in found) else 0
