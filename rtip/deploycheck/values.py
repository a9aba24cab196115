"""Values keys: every Helm release's values must be values its pinned chart has.

A key path is known when the chart's values.yaml has it, or when it lies under a value that
values.yaml leaves free-form: an empty map (`nodeSelector: {}`), a null, a list (a list is
replaced whole, whatever its items), or a map of labels, annotations or node selectors. Values
the chart passes through as a Kubernetes type (`resources`, `affinity`, `securityContext`) take
that type's fields. A key values.yaml documents only as a comment at its place
(`  # podAnnotations: {}`) is known too. A value the chart gives as a scalar takes no keys.
Keys under a subchart (a Chart.yaml dependency, by name or alias) are checked against the
subchart's own facts when its folder is vendored, else reported as not checked. Where the chart
has a values.schema.json, the values coalesced over the defaults (what Helm validates) must pass it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from rtip import chartfacts
from rtip.chartfacts import ChartFacts, corekinds
from rtip.chartfacts.conditions import coalesce
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import HELM_RELEASE, cluster_of
from rtip.offline import SECRET_MARK, Record, Resource

CHECK = "values"
# Helm hands `global` to every chart and subchart whether or not values.yaml names it.
GLOBAL = "global"


def check_values(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    for release in record.by_type(HELM_RELEASE):
        findings.extend(check_release(record, release))
    return findings


def _who(record: Record, release: Resource, facts: ChartFacts | None) -> str:
    cluster = cluster_of(record, release)
    chart = facts.label if facts else (f"{chartfacts.chart_name(str(release.inputs.get('chart', '')))} "
                                       f"{release.inputs.get('version', '')}")
    return f"release {release.name} ({chart}){f' on cluster {cluster.name}' if cluster else ''}"


def check_release(record: Record, release: Resource) -> list[Finding]:
    chart, version = str(release.inputs.get("chart", "")), str(release.inputs.get("version", ""))
    values = release.inputs.get("values") or {}
    facts = chartfacts.for_release(chart, version)
    who = _who(record, release, facts)
    if facts is None:
        have = chartfacts.versions_of(chart)
        return [Finding(CHECK, release.urn, f"{who}: no vendored facts for this chart version "
                        f"({'vendored: ' + ', '.join(have) if have else 'chart not vendored'}); "
                        f"its values are not checked", Severity.WARNING)]
    if not isinstance(values, Mapping):
        return [Finding(CHECK, release.urn, f"{who}: values are a {_type(values)}, not a map")]
    findings: list[Finding] = []
    plain = {}
    for key, value in values.items():
        dep = facts.dependency(key)
        if dep is None:
            plain[key] = value
            continue
        sub = chartfacts.all_facts().get(dep.facts) if dep.facts else None
        if sub is None:
            findings.append(Finding(CHECK, release.urn, f"{who}: values under {key} go to subchart "
                                    f"{dep.name} {dep.version}, which has no vendored facts: not checked",
                                    Severity.INFO))
            continue
        # The subchart reads its own defaults, overridden by the parent's values.yaml section.
        sub_defaults = coalesce(dict(sub.defaults), facts.defaults.get(key) or {})
        commented = sub.commented | {k[1:] for k in facts.commented if k[:1] == (key,)}
        for message in unknown_keys(value, sub_defaults, [key], commented, 1):
            findings.append(Finding(CHECK, release.urn, f"{who}: {message} (subchart {sub.label})"))
        if sub.schema is not None:
            for message in schema_errors(sub.schema, coalesce(sub_defaults, value), [key]):
                findings.append(Finding(CHECK, release.urn,
                                        f"{who}: {message} (subchart {sub.label} values.schema.json)"))
    for message in unknown_keys(plain, facts.defaults, [], facts.commented):
        findings.append(Finding(CHECK, release.urn, f"{who}: {message}"))
    if facts.schema is not None:
        for message in schema_errors(facts.schema, facts.values(values), []):
            findings.append(Finding(CHECK, release.urn, f"{who}: {message} (chart values.schema.json)"))
    return findings


def _type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else "null"


def _path(path: list[str]) -> str:
    return ".".join(path) or "(top level)"


def unknown_keys(values: Any, defaults: Any, path: list[str],
                 commented: frozenset[tuple[str, ...]] = frozenset(), skip: int = 0) -> Iterator[str]:
    """Plain-words problems with `values` against the chart defaults `defaults` at `path`.
    `commented` are key paths values.yaml documents only in comments (chart-relative: the first
    `skip` elements of `path` are the subchart's key); a value under one is not checked further."""
    if not isinstance(values, Mapping):
        return
    name = path[-1] if path else ""
    kube = kube_type(name, defaults)
    if kube is not None:
        type_name, fields = kube
        for key in values:
            if key not in fields:
                yield (f"values key {_path([*path, str(key)])} is not a field of Kubernetes {type_name}, "
                       f"which the chart passes {name} through as ({', '.join(fields)})")
        return
    if free_form(defaults, name):
        return
    if not isinstance(defaults, Mapping):
        yield (f"values give a map at {_path(path)}, where values.yaml has a {_type(defaults)} "
               f"({defaults!r}): the chart reads no keys under it")
        return
    for key, value in values.items():
        here = [*path, str(key)]
        if key not in defaults:
            if (not path and key == GLOBAL) or tuple(here[skip:]) in commented:
                continue
            yield (f"values key {_path(here)} is not in the chart's values.yaml"
                   f"{_siblings(key, defaults, path)}")
            continue
        default = defaults[key]
        if isinstance(value, Mapping):
            yield from unknown_keys(value, default, here, commented, skip)
        elif isinstance(default, Mapping) and default and value is not None:
            yield (f"values give a {_type(value)} at {_path(here)}, where values.yaml has a map "
                   f"with keys {', '.join(sorted(default)[:8])}")


# Value names whose maps are labels, annotations or node selectors: any key is the user's own.
_STRING_MAP = re.compile(r"(?i).*(labels|annotations|nodeselector)")
# Value names charts pass through as a Kubernetes type (rendered with toYaml into the pod spec).
_KUBE_TYPED = ((re.compile(r"(?i).*resources"), ("ResourceRequirements",)),
               (re.compile(r"(?i).*affinity"), ("Affinity",)),
               (re.compile(r"(?i)(pod)?securitycontext"), ("PodSecurityContext", "SecurityContext")),
               (re.compile(r"(?i).+securitycontext"), ("SecurityContext",)))


def kube_type(name: str, default: Any) -> tuple[str, list[str]] | None:
    """(type, fields) when the value at `name` is a Kubernetes type the chart passes through:
    its name says so and its default is null or a map of that type's fields (keda's `resources`,
    a map of per-component requirements, is the chart's own)."""
    for pattern, types in _KUBE_TYPED:
        if not pattern.fullmatch(name):
            continue
        fields = sorted({f for t in types for f in corekinds.fields(t)})
        if default is None or (isinstance(default, Mapping) and set(default) <= set(fields)):
            return " or ".join(types), fields
    return None


def free_form(default: Any, name: str = "") -> bool:
    """Whether values.yaml leaves the value open: an empty map, null or a list; a map of labels,
    annotations or node selectors; a map keyed like labels (`kubernetes.io/os`)."""
    if default is None or isinstance(default, list):
        return True
    if not isinstance(default, Mapping):
        return False
    if not default or any("/" in str(k) for k in default):
        return True
    return bool(_STRING_MAP.fullmatch(name)) and all(isinstance(v, str) for v in default.values())


def _siblings(key: str, defaults: Mapping[str, Any], path: list[str]) -> str:
    close = difflib.get_close_matches(key, list(defaults), n=1, cutoff=0.75)
    if close:
        return f" (did you mean {_path([*path, close[0]])}?)"
    where = f"under {_path(path)}" if path else "at the top level"
    names = sorted(defaults)
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    return f" ({where} it has {shown})"


def schema_errors(schema: dict[str, Any], values: Any, path: list[str]) -> Iterator[str]:
    """Each violation of the chart's values schema by the coalesced `values`."""
    validator = _validator_class(schema)(schema)
    errors = sorted(validator.iter_errors(values), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        if error.instance == SECRET_MARK:
            continue  # the record hides secret values; their real type is unknown here
        yield _schema_message(error, path)


# Helm reads values schemas as JSON Schema draft 4 to 7 (draft 7 when `$schema` names none of
# them, as `http://json-schema.org/schema#` does); newer drafts by their own `$schema`.
_DRAFTS: dict[str, type[Any]] = {
    "draft-04": jsonschema.Draft4Validator, "draft-06": jsonschema.Draft6Validator,
    "draft-07": jsonschema.Draft7Validator, "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}


def _validator_class(schema: dict[str, Any]) -> type[Any]:
    named = str(schema.get("$schema", ""))
    return next((cls for key, cls in _DRAFTS.items() if key in named), jsonschema.Draft7Validator)


def _schema_message(error: ValidationError, path: list[str]) -> str:
    where = _path([*path, *(str(p) for p in error.absolute_path)])
    return f"values at {where} fail the schema: {error.message}"


__all__ = ["CHECK", "check_release", "check_values", "free_form", "schema_errors", "unknown_keys"]
