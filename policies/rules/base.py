"""How a rule becomes a pulumi_policy policy: rules are plain functions that yield messages.

A resource rule takes (type, props, config) and yields one message per violation; a stack rule
takes the stack's resources and config and yields (urn, message). `resource_policy` and
`stack_policy` wrap them so the pack, the CLI's analyzer and the tests run the same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

Props = Mapping[str, Any]
Config = Mapping[str, Any]
ResourceCheck = Callable[[str, Props, Config], Iterable[str]]


@dataclass(frozen=True)
class StackResource:
    """What a stack rule sees of one resource."""

    type: str
    urn: str
    name: str
    props: Props
    parent: str | None
    dependencies: tuple[str, ...]
    provider: str | None = None  # the provider's URN: Kubernetes objects of one cluster share one


StackCheck = Callable[[list[StackResource], Config], Iterable[tuple[str, str]]]


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """A nested value, or `default` where any step is missing."""
    value = props
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return default
    return default if value is None else value


def resource_policy(name: str, description: str, check: ResourceCheck, remediation: str,
                    schema: dict[str, Any] | None = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for message in check(args.resource_type, args.props, args.get_config() or {}):
            report(f"{message}. Fix: {remediation}", args.urn)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, remediation_steps=remediation,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None)


def stack_policy(name: str, description: str, check: StackCheck, remediation: str,
                 schema: dict[str, Any] | None = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [StackResource(r.resource_type, r.urn, r.name, r.props,
                                   r.parent.urn if r.parent is not None else None,
                                   tuple(d.urn for d in r.dependencies),
                                   r.provider.urn if r.provider is not None else None)
                     for r in args.resources]
        for urn, message in check(resources, args.get_config() or {}):
            report(f"{message}. Fix: {remediation}", urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, remediation_steps=remediation,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None)


def of_types(types: set[str]) -> Callable[[ResourceCheck], ResourceCheck]:
    """Run a resource check only on `types`."""
    def wrap(check: ResourceCheck) -> ResourceCheck:
        def run(type_: str, props: Props, config: Config) -> Iterator[str]:
            if type_ in types:
                yield from check(type_, props, config)
        return run
    return wrap


__all__ = ["Config", "Props", "StackResource", "get", "of_types", "resource_policy", "stack_policy"]
