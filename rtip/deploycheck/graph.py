"""Reading a record as Kubernetes sees it: objects, their clusters and what they wait for."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rtip.offline import Record, Resource

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
# Pulumi types that are not one API object (Helm and YAML bundles, kustomizations).
_NOT_OBJECTS = re.compile(r"kubernetes:(helm\.sh|yaml|kustomize)(/v\d+)?:")
_OBJECT = re.compile(r"kubernetes:([^:/]+)/([^:/]+):([A-Za-z0-9]+)")


@dataclass(frozen=True)
class ApiKind:
    group: str  # "" for the core group
    version: str
    kind: str

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.group_version} {self.kind}"


def api_kind(resource: Resource) -> ApiKind | None:
    """The object's group, version and kind; None for what is not one Kubernetes object."""
    if not resource.custom or _NOT_OBJECTS.match(resource.type):
        return None
    m = _OBJECT.fullmatch(resource.type)
    if m is None:
        return None
    group = "" if m.group(1) == "core" else m.group(1)
    return ApiKind(group, m.group(2), m.group(3))


# Kubernetes' label-selector and node-selector operators: the label's value (None when the object
# lacks it) against the expression's values.
LABEL_OPERATORS: dict[str, Callable[[str | None, list[str]], bool]] = {
    "In": lambda have, values: have in values, "NotIn": lambda have, values: have not in values,
    "Exists": lambda have, values: have is not None, "DoesNotExist": lambda have, values: have is None}


def string_map(value: Any) -> dict[str, str]:
    """A labels-like map as strings ({} for anything else): labels, matchLabels, values maps."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def object_name(resource: Resource) -> str:
    """metadata.name as the object will have it, else the Pulumi name."""
    meta = resource.inputs.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name) if name else resource.name


def descendants(record: Record, urn: str) -> list[Resource]:
    """Every resource below `urn` in the component tree."""
    out, todo = [], [urn]
    while todo:
        for child in record.children(todo.pop()):
            out.append(child)
            todo.append(child.urn)
    return out


def cluster_of(record: Record, resource: Resource) -> Resource | None:
    """The cluster component that owns the resource's provider (as rtip/render.py finds it)."""
    if resource.provider is None:
        return None
    # A provider reference is `<urn>::<id>` on the wire; the record keeps the URN.
    urn = resource.provider
    try:
        provider = record.get(urn)
    except KeyError:
        return None
    for ancestor in record.ancestors(provider):
        if ancestor.type.startswith("rtip:") and ancestor.type.endswith(":Cluster"):
            return ancestor
    return None


def waits_for(record: Record, resource: Resource) -> set[str]:
    """URNs of everything `resource` is created after: its dependencies, theirs, and the
    dependencies of its ancestors; depending on a component means waiting for all its children."""
    index = {r.urn: r for r in record.resources}
    done: set[str] = set()
    seen_nodes: set[str] = set()
    stack = [resource.urn]
    while stack:
        urn = stack.pop()
        if urn in seen_nodes:
            continue
        seen_nodes.add(urn)
        node = index.get(urn)
        if node is None:
            continue
        for dep in node.dependencies:
            for waited in _with_descendants(record, index, dep):
                done.add(waited)
                stack.append(waited)
        if node.parent:
            done.add(node.parent)
            stack.append(node.parent)
    done.discard(resource.urn)
    return done


def _with_descendants(record: Record, index: dict[str, Resource], urn: str) -> list[str]:
    found, todo = [urn], [urn]
    while todo:
        node = index.get(todo.pop())
        if node is None or node.custom:
            continue
        for child in record.children(node.urn):
            found.append(child.urn)
            todo.append(child.urn)
    return found


def in_namespace(record: Record, cluster: Resource | None, kind: str, namespace: str) -> list[Resource]:
    """The Kubernetes objects of `kind` in `namespace` on `cluster` (as `cluster_of` finds it)."""
    out = []
    for res in record.resources:
        k = api_kind(res)
        if k and k.kind == kind and cluster_of(record, res) == cluster \
                and str((res.inputs.get("metadata") or {}).get("namespace") or "default") == namespace:
            out.append(res)
    return out


__all__ = ["CRD_TYPE", "HELM_RELEASE", "LABEL_OPERATORS", "ApiKind", "api_kind", "cluster_of",
           "descendants", "in_namespace", "object_name", "string_map", "waits_for"]
