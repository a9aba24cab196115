"""The offline engine: run the real Pulumi program in-process under the SDK's mocks and record it.

What it records per resource: type, name, URN, parent, provider, dependencies and inputs (secret
values replaced by a marker), and the outputs the mocks synthesize. The program runs exactly as
`pulumi preview` would run it: config from Pulumi.yaml and the stack file, `__main__.py` of the
project, no default providers allowed.
"""

from __future__ import annotations

import asyncio
import gc
import runpy
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as pulumi_config
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from rtip import synth
from rtip.stackfile import PROJECT_DIR, StackConfig

SECRET_MARK = "[secret]"
STACK_TYPE = "pulumi:pulumi:Stack"
# Packages whose resources must name an explicit provider (the stack disables default ones).
PROVIDER_PACKAGES = ("aws", "gcp", "azure-native", "kubernetes")


class EngineError(Exception):
    """The program did something a real engine would reject (duplicate URN, default provider)."""


class ProgramRejected(Exception):
    """The program stopped with a `pulumi.RunError`: its stack is not valid (the message lists
    every problem with its key path), exactly as `pulumi preview` would print it."""


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    urn: str
    parent: str | None
    provider: str | None  # provider URN
    dependencies: tuple[str, ...]
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    custom: bool
    secret_paths: tuple[str, ...] = ()
    # Resource options that change what an update does: protect, ignoreChanges,
    # replaceOnChanges (a change to these fields replaces the resource), deleteBeforeReplace.
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type, "name": self.name, "urn": self.urn, "parent": self.parent,
            "provider": self.provider, "dependencies": list(self.dependencies),
            "inputs": self.inputs, "options": self.options,
        }


@dataclass
class Record:
    stack: str
    resources: list[Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The program's own plan (`plan` in __main__.py): the value the resources were built from.
    plan: Any = None

    def by_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def get(self, urn: str) -> Resource:
        return self._index[urn]

    @cached_property
    def _index(self) -> dict[str, Resource]:
        # A record is complete when `run` returns it; lookups by URN and parent are then O(1).
        return {r.urn: r for r in self.resources}

    @cached_property
    def _children(self) -> dict[str, list[Resource]]:
        by_parent: dict[str, list[Resource]] = {}
        for r in self.resources:
            if r.parent:
                by_parent.setdefault(r.parent, []).append(r)
        return by_parent

    def children(self, urn: str) -> list[Resource]:
        return list(self._children.get(urn, []))

    def ancestors(self, resource: Resource) -> list[Resource]:
        index, chain, parent = self._index, [], resource.parent
        while parent and parent in index:
            chain.append(index[parent])
            parent = index[parent].parent
        return chain


def _redact(value: Any, path: str, secrets: list[str]) -> Any:
    """Replace secret values with a marker, remembering where they were."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            secrets.append(path)
            return SECRET_MARK
        return {k: _redact(v, f"{path}.{k}" if path else k, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire carries every number as a float
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return _unwrap(value["value"])
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


class _NoCalls(pulumi_mocks.Mocks):
    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict]:
        raise AssertionError("RecordingMonitor registers resources itself")

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, list | None]:
        # The program plans from its spec, not from lookups against live clouds; the few invokes
        # that only read back what the program itself created are answered from `synth.INVOKES`.
        answer = synth.INVOKES.get(args.token)
        if answer is None:
            raise EngineError(f"the program called {args.token}: offline plans make no provider "
                              f"calls except {', '.join(sorted(synth.INVOKES)) or 'none'}")
        return answer(dict(args.args)), []


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A resource monitor that records every registration with its full request."""

    def __init__(self) -> None:
        super().__init__(_NoCalls())
        self.records: dict[str, Resource] = {}
        self.duplicates: list[str] = []
        # The SDK calls RegisterResource from executor threads; the duplicate check and the
        # insert must be one step or two registrations of one URN can both pass.
        self._lock = threading.Lock()
        self.default_providers: list[str] = []

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._lock:
            if urn in self.resources:
                self.duplicates.append(urn)
            self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, "", {})
        pulumi_mocks._ensure_event_loop()
        raw = rpc.deserialize_properties(request.object)
        secrets: list[str] = []
        inputs = _redact(raw, "", secrets)
        # The SDK sends a provider reference as `<provider URN>::<provider ID>`.
        provider = request.provider.rsplit("::", 1)[0] if request.provider else None
        custom = bool(request.custom)
        region = self._region(raw, provider)
        if request.type == STACK_TYPE or not custom:
            rid, state = "", {}
        else:
            rid, state = synth.outputs(request.type, request.name, urn, _unwrap(raw), region)
        package = request.type.split(":")[0]
        if custom and package in PROVIDER_PACKAGES and provider is None:
            self.default_providers.append(urn)
        self.records[urn] = Resource(
            type=request.type, name=request.name, urn=urn, parent=request.parent or None,
            provider=provider, dependencies=tuple(sorted(set(request.dependencies))),
            inputs=inputs, outputs=_redact(state, "", []), custom=custom,
            secret_paths=tuple(secrets), options=_options(request),
        )
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, rid, state)
        if request.type == STACK_TYPE:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        obj = _sync_await(rpc.serialize_properties(state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=rid, object=obj)

    def _region(self, inputs: dict[str, Any], provider: str | None) -> str | None:
        if isinstance(inputs.get("region"), str):
            return inputs["region"]
        if provider and provider in self.records:
            region = self.records[provider].inputs.get("region")
            return region if isinstance(region, str) else None
        return None


def _options(request: Any) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if request.protect:
        options["protect"] = True
    for key in ("ignoreChanges", "replaceOnChanges"):
        values = sorted(getattr(request, key))
        if values:
            options[key] = values
    if request.deleteBeforeReplace:
        options["deleteBeforeReplace"] = True
    return options


class _WarningLog:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def debug(self, msg: str) -> None: ...
    def info(self, msg: str) -> None: ...

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)

    def error(self, msg: str) -> None:
        self.warnings.append(f"error: {msg}")


def run(config: StackConfig, project_dir: Path = PROJECT_DIR) -> Record:
    """Run `__main__.py` for one stack and return everything it registered."""
    settings.ROOT.set(None)
    pulumi_config.set_all_config(config.for_engine(), sorted(config.secret_keys))
    asyncio.set_event_loop(asyncio.new_event_loop())
    monitor = RecordingMonitor()
    log = _WarningLog()
    pulumi.runtime.set_mocks(
        _NoCalls(), project=config.project, stack=config.stack,
        preview=True, monitor=monitor, logger=log,  # type: ignore[arg-type]
    )
    main = str(project_dir / "__main__.py")
    # The SDK allocates tens of thousands of futures and tasks per thousand resources, all alive
    # until the run ends; the cyclic collector rescanning them made plan time grow faster than
    # linearly with stack size. Collect once at the end instead.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    namespace: dict[str, Any] = {}
    try:
        _sync_await(run_pulumi_func(lambda: namespace.update(runpy.run_path(main, run_name="__main__"))))
        stack = settings.get_root_resource()
        exported = _sync_await(pulumi.Output.from_input(stack.outputs).future())  # type: ignore[union-attr]
    except pulumi.RunError as err:
        raise ProgramRejected(str(err)) from None
    finally:
        settings.ROOT.set(None)
        if gc_was_enabled:
            gc.enable()
    if monitor.duplicates:
        raise EngineError("duplicate resource URNs: " + ", ".join(sorted(set(monitor.duplicates))))
    if monitor.default_providers:
        raise EngineError("resources without an explicit provider (default providers are "
                          "disabled): " + ", ".join(sorted(monitor.default_providers)))
    resources = sorted(monitor.records.values(), key=lambda r: r.urn)
    return Record(stack=config.stack, resources=resources,
                  outputs=_redact(exported or {}, "", []), warnings=log.warnings,
                  plan=namespace.get("plan"))


__all__ = ["SECRET_MARK", "EngineError", "ProgramRejected", "Record", "RecordingMonitor", "Resource", "run"]
