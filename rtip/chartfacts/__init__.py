"""Facts about upstream Helm charts, vendored as compact JSON (written by `generate.py`).

One `<folder>@<version>.json` per chart folder of shared/charts: the CRDs the chart installs
(group, kind, served versions, scope, and the values condition they need), its Chart.yaml
dependencies, and its default values; `<folder>@<version>.values.schema.json` where the chart has a
values schema. A Helm release finds its facts by chart name and version (`for_release`).
`<folder>@<version>.alerts.json`, where vendored, lists the alerts of a chart's default rules
(`rules.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from rtip.chartfacts.conditions import Condition, coalesce, evaluate

FACTS_DIR = Path(__file__).resolve().parent
# `<folder>@<version>.alerts.json`: a chart's default alert rules (rules.py writes them from the
# chart's templates, which shared/charts does not carry; generate.py leaves them be).
ALERTS_SUFFIX = ".alerts.json"


@dataclass(frozen=True)
class Crd:
    group: str
    kind: str
    versions: tuple[str, ...]  # served
    scope: str
    file: str  # in the chart folder's crds/
    source: str | None  # where the chart keeps it upstream (KINDS.txt)
    condition: Condition | None  # None: installed whenever the chart is

    @property
    def ref(self) -> str:
        return f"{self.group}/{self.kind}"


@dataclass(frozen=True)
class Dependency:
    name: str
    alias: str | None
    values_key: str
    version: str
    repository: str | None
    condition: Condition | None
    facts: str | None  # the subchart's facts name, when its folder is vendored


@dataclass(frozen=True)
class ChartFacts:
    name: str  # <folder>@<version>
    folder: str
    version: str  # the release version (the folder name)
    chart: str | None  # Chart.yaml name; None for CRD sets that are not charts
    crds: tuple[Crd, ...]
    dependencies: tuple[Dependency, ...]
    defaults: Mapping[str, Any]
    has_schema: bool
    commented: frozenset[tuple[str, ...]] = frozenset()  # keys values.yaml has only as comments

    @property
    def label(self) -> str:
        """`kserve-crd v0.20.0` (`... (not a Helm chart)` for bare CRD sets)."""
        if self.chart is None:
            return f"{self.folder} {self.version} (not a Helm chart)"
        return f"{self.chart} {self.version}"

    @cached_property
    def schema(self) -> dict[str, Any] | None:
        if not self.has_schema:
            return None
        loaded: dict[str, Any] = json.loads((FACTS_DIR / f"{self.name}.values.schema.json").read_text())
        return loaded

    def values(self, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        """The release's values as the chart reads them: `overrides` coalesced over the defaults."""
        merged: dict[str, Any] = coalesce(dict(self.defaults), dict(overrides or {}))
        return merged

    def installs(self, overrides: Mapping[str, Any] | None) -> list[tuple[Crd, bool | None]]:
        """Every CRD with whether the release installs it under its values (None: cannot tell)."""
        values = self.values(overrides)
        return [(crd, evaluate(crd.condition, values)) for crd in self.crds]

    def dependency(self, key: str) -> Dependency | None:
        """The dependency whose values live under top-level key `key`."""
        return next((d for d in self.dependencies if d.values_key == key), None)


def _load(path: Path) -> ChartFacts:
    doc = json.loads(path.read_text())
    return ChartFacts(
        name=path.stem, folder=doc["folder"], version=doc["version"], chart=doc["chart"],
        crds=tuple(Crd(c["group"], c["kind"], tuple(c["versions"]), c["scope"], c["file"], c["from"],
                       c["condition"]) for c in doc["crds"]),
        dependencies=tuple(Dependency(d["name"], d["alias"], d["valuesKey"], d["version"],
                                      d["repository"], d["condition"], d["facts"])
                           for d in doc["dependencies"]),
        defaults=doc["values"], has_schema=doc["schema"],
        commented=frozenset(tuple(k) for k in doc["commentedKeys"]))


@cache
def all_facts() -> dict[str, ChartFacts]:
    """Every vendored chart folder by `<folder>@<version>`."""
    return {f.name: f for f in (_load(p) for p in sorted(FACTS_DIR.glob("*@*.json"))
                                if not p.name.endswith((".values.schema.json", ALERTS_SUFFIX)))}


def _plain(version: str) -> str:
    return version.strip().removeprefix("v")


def chart_name(reference: str) -> str:
    """The chart's name from a release's `chart` (`oci://host/path/cert-manager`, `repo/keda`, `keda`)."""
    return reference.rstrip("/").rsplit("/", 1)[-1]


def for_release(chart: str, version: str) -> ChartFacts | None:
    """The facts of chart `chart` (a name or a reference) at release `version`, if vendored."""
    name, plain = chart_name(chart), _plain(version)
    return next((f for f in all_facts().values() if f.chart == name and _plain(f.version) == plain), None)


def versions_of(chart: str) -> list[str]:
    """The release versions vendored for chart `chart` (for messages)."""
    name = chart_name(chart)
    return sorted(f.version for f in all_facts().values() if f.chart == name)


def providing(group: str, kind: str) -> list[ChartFacts]:
    """The vendored charts (and CRD sets) that have a CRD for `group`/`kind`."""
    return [f for f in all_facts().values() if any(c.group == group and c.kind == kind for c in f.crds)]


__all__ = ["FACTS_DIR", "ChartFacts", "Crd", "Dependency", "all_facts", "chart_name", "for_release",
           "providing", "versions_of"]
