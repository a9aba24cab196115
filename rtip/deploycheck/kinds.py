"""Kinds served: every Kubernetes object in a record must be served on its cluster.

Built-in kinds must be served by the cluster's Kubernetes version (the cluster component's
`kubernetesVersion`, against corekinds.py's table). A custom resource needs a CRD serving its
group, version and kind, installed by a Helm release on the same cluster (chart facts, with the
chart's install conditions read against the release's values) or by a CustomResourceDefinition in
the record, and it must wait for that release or object: otherwise `pulumi up` may apply it first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rtip import chartfacts
from rtip.chartfacts import ChartFacts, corekinds
from rtip.chartfacts.conditions import describe
from rtip.deploycheck.findings import Finding, Severity
from rtip.deploycheck.graph import (
    CRD_TYPE,
    HELM_RELEASE,
    ApiKind,
    api_kind,
    cluster_of,
    object_name,
    waits_for,
)
from rtip.offline import Record, Resource

CHECK = "kinds"


@dataclass(frozen=True)
class Source:
    """Something on a cluster that may install a CRD: a Helm release or a CRD object."""

    resource: Resource
    label: str  # `release rtip-prod-...-kserve-crd (kserve-crd v0.20.0)`
    facts: ChartFacts | None  # None: a CRD object, or a release of a chart with no vendored facts
    # (group, kind) -> (served versions, installed under its values: True/False/None, condition)
    crds: dict[tuple[str, str], tuple[tuple[str, ...], bool | None, str]]


def _release_source(resource: Resource) -> Source:
    chart, version = str(resource.inputs.get("chart", "")), str(resource.inputs.get("version", ""))
    facts = chartfacts.for_release(chart, version)
    name = resource.inputs.get("name") or resource.name
    if facts is None:
        return Source(resource, f"release {name} ({chartfacts.chart_name(chart)} {version})", None, {})
    crds: dict[tuple[str, str], tuple[tuple[str, ...], bool | None, str]] = {}
    for crd, installed in facts.installs(resource.inputs.get("values")):
        key = (crd.group, crd.kind)
        prior = crds.get(key)
        # One CRD in several files (Gateway API channels): the file the values select wins.
        if prior is None or (prior[1] is not True and installed is not False):
            crds[key] = (crd.versions, installed, describe(crd.condition))
    return Source(resource, f"release {name} ({facts.label})", facts, crds)


def _crd_source(resource: Resource) -> Source:
    spec: dict[str, Any] = resource.inputs.get("spec") or {}
    names = spec.get("names") or {}
    versions = tuple(str(v.get("name")) for v in spec.get("versions") or [] if v.get("served"))
    key = (str(spec.get("group", "")), str(names.get("kind", "")))
    return Source(resource, f"CustomResourceDefinition {object_name(resource)}", None,
                  {key: (versions, True, "always")})


def _sources(record: Record) -> dict[str, list[Source]]:
    """Every release and CRD object, by the URN of its cluster."""
    by_cluster: dict[str, list[Source]] = {}
    for resource in record.resources:
        if resource.type == HELM_RELEASE:
            source = _release_source(resource)
        elif resource.type == CRD_TYPE:
            source = _crd_source(resource)
        else:
            continue
        cluster = cluster_of(record, resource)
        if cluster is not None:
            by_cluster.setdefault(cluster.urn, []).append(source)
    return by_cluster


def check_kinds(record: Record) -> list[Finding]:
    findings: list[Finding] = []
    sources = _sources(record)
    for resource in record.resources:
        kind = api_kind(resource)
        if kind is None:
            continue
        what = f"{kind.kind} {object_name(resource)}"
        cluster = cluster_of(record, resource)
        if cluster is None:
            findings.append(Finding(CHECK, resource.urn, f"{what}: its provider belongs to no cluster "
                                    f"component, so what the cluster serves is unknown", Severity.WARNING))
            continue
        where = f"{what} on cluster {cluster.name}"
        if corekinds.is_builtin_group(kind.group):
            findings.extend(_check_builtin(resource, kind, where, cluster))
        else:
            findings.extend(_check_custom(record, resource, kind, where, sources.get(cluster.urn, [])))
    return findings


def _check_builtin(resource: Resource, kind: ApiKind, where: str, cluster: Resource) -> list[Finding]:
    version = str(cluster.inputs.get("kubernetesVersion") or "")
    served = corekinds.served(version)
    if served is None:
        known = corekinds.known_versions()
        return [Finding(CHECK, resource.urn, f"{where}: Kubernetes version {version or '(none set)'} of "
                        f"the cluster is not in the core kinds table ({known[0]}–{known[-1]}); "
                        f"{kind} not checked", Severity.INFO)]
    if kind.kind in served.get(kind.group_version, []):
        if "alpha" in kind.version:
            return [Finding(CHECK, resource.urn, f"{where}: {kind} is an alpha API, served only where "
                            f"the cluster enables it (--runtime-config)", Severity.WARNING)]
        return []
    others = sorted(gv for gv, kinds in served.items()
                    if kind.kind in kinds and gv.split("/")[0] == kind.group_version.split("/")[0])
    hint = f"; it serves {kind.kind} as {', '.join(others)}" if others else ""
    return [Finding(CHECK, resource.urn, f"{where}: Kubernetes {corekinds.minor(version)} does not "
                    f"serve {kind}{hint}")]


def _check_custom(record: Record, resource: Resource, kind: ApiKind, where: str,
                  sources: list[Source]) -> list[Finding]:
    key = (kind.group, kind.kind)
    waited = waits_for(record, resource)
    having = [s for s in sources if key in s.crds]
    good = [s for s in having if s.crds[key][1] is True and kind.version in s.crds[key][0]]
    if any(s.resource.urn in waited for s in good):
        return []
    if good:
        names = ", ".join(s.label for s in good)
        return [Finding(CHECK, resource.urn, f"{where}: {names} installs {kind} but the object does "
                        f"not depend on it, so it may be applied before its CRD exists")]
    problems = []
    for s in having:
        versions, installed, condition = s.crds[key]
        if installed is False:
            problems.append(f"{s.label} installs it only when {condition}, which its values turn off")
        elif installed is None:
            problems.append(f"{s.label} installs it only when {condition}, which cannot be evaluated")
        else:
            problems.append(f"{s.label} serves {kind.group} {kind.kind} as "
                            f"{', '.join(versions) or 'no version'}, not {kind.version}")
    unknown = [s for s in sources if s.facts is None and s.resource.type == HELM_RELEASE
               and s.resource.urn in waited]
    if problems:
        undecided = all(s.crds[key][1] is None for s in having)
        return [Finding(CHECK, resource.urn, f"{where}: {'; '.join(problems)}",
                        Severity.WARNING if undecided else Severity.ERROR)]
    if unknown:
        return [Finding(CHECK, resource.urn, f"{where}: no vendored chart facts for "
                        f"{', '.join(s.label for s in unknown)}, which it waits for; cannot tell "
                        f"whether {kind} is served", Severity.WARNING)]
    return [Finding(CHECK, resource.urn, f"{where}: no release it depends on installs {kind}"
                    f"{_nearby(kind, sources, waited)}{_elsewhere(kind)}")]


def _nearby(kind: ApiKind, sources: Iterable[Source], waited: set[str]) -> str:
    """What the releases it does wait for install in the same API group."""
    said = []
    for s in sources:
        if s.resource.urn not in waited:
            continue
        kinds = sorted(k for (g, k), (_, on, _) in s.crds.items() if g == kind.group and on is not False)
        if kinds and s.facts is not None:
            said.append(f"{s.facts.label} installs {', '.join(kinds)}")
    return f" ({'; '.join(said)})" if said else ""


def _elsewhere(kind: ApiKind) -> str:
    """Which vendored charts have the CRD at this version."""
    have = [f for f in chartfacts.providing(kind.group, kind.kind)
            if any(c.group == kind.group and c.kind == kind.kind and kind.version in c.versions
                   for c in f.crds)]
    if not have:
        return "; no vendored chart has it"
    have.sort(key=lambda f: (f.chart is None, len(f.folder), f.folder))
    charts = [f.label for f in have]
    noun = "chart" if len(charts) == 1 else "charts"
    return f"; {noun} {', '.join(charts)} {'has' if len(charts) == 1 else 'have'} it"


__all__ = ["CHECK", "check_kinds"]
