"""Write a plan to a folder: plan.json and every Kubernetes object as YAML, a folder per cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from rtip.offline import Record, Resource

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def cluster_of(record: Record, resource: Resource) -> str:
    """The cluster a Kubernetes object lands on: the component that owns its provider."""
    if resource.provider is None:
        raise ValueError(f"{resource.urn} has no provider")
    provider = record.get(resource.provider)
    for ancestor in record.ancestors(provider):
        if ancestor.type.startswith("rtip:") and ancestor.type.endswith(":Cluster"):
            return ancestor.name
    raise ValueError(f"provider {provider.urn} belongs to no cluster")


def manifest(resource: Resource) -> dict[str, Any]:
    """The object as `kubectl apply` would take it (Helm releases as chart, repo, version, values)."""
    body = {k: v for k, v in resource.inputs.items() if not k.startswith("__")}
    if resource.type == HELM_RELEASE:
        return {"kind": "HelmRelease", **body}
    return body


def _file_name(doc: dict[str, Any], resource: Resource) -> str:
    meta = doc.get("metadata") or {}
    parts = [str(doc.get("kind", resource.type.rsplit(":", 1)[-1])),
             str(meta.get("namespace") or ""), str(meta.get("name") or doc.get("name") or resource.name)]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in parts if p)).lower() + ".yaml"


def write(out: Path, plan_doc: dict[str, Any], record: Record) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "plan.json"]
    written[0].write_text(json.dumps(plan_doc, indent=2, sort_keys=True) + "\n")
    for resource in record.resources:
        if not resource.type.startswith("kubernetes:") or not resource.custom:
            continue
        if resource.type.startswith("pulumi:providers:"):
            continue
        doc = manifest(resource)
        folder = out / cluster_of(record, resource)
        folder.mkdir(exist_ok=True)
        path = folder / _file_name(doc, resource)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        written.append(path)
    return written


__all__ = ["cluster_of", "manifest", "write"]
