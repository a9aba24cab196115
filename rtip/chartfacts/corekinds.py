"""The built-in API kinds each Kubernetes minor version serves, as a small vendored table.

`core_kinds.json` beside this file is derived from the OpenAPI schemas kubernetes-validate bundles
(one folder per minor version, `kubernetes-json-schema/v<X.Y.0>-local/_definitions.json`): every
definition with an `x-kubernetes-group-version-kind` and ObjectMeta metadata is a kind the API
server of that version serves. It also keeps the field names of a few pod-level types charts pass
through (PASS_THROUGH). `rtip plan` reads the table only; kubernetes-validate (a test
dependency) is needed only to regenerate it:

    python -m rtip.chartfacts.corekinds
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent / "core_kinds.json"
# Pod-level types charts pass through to Kubernetes as they are (`resources`, `affinity`, ...):
# their field names (latest version in the table) let the values check read such a value's keys.
PASS_THROUGH = ("Affinity", "PodSecurityContext", "ResourceRequirements", "SecurityContext")


def derive() -> dict[str, Any]:
    """The table from the installed kubernetes-validate's schemas."""
    import kubernetes_validate  # a test dependency: only regenerating the table needs it
    from kubernetes_validate.version import __version__

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions: dict[str, dict[str, list[str]]] = {}
    groups: set[str] = set()
    for folder in root.iterdir():
        m = re.fullmatch(r"v(\d+)\.(\d+)\.0-local", folder.name)
        if m is None:
            continue
        defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
        served: dict[str, set[str]] = {}
        for definition in defs.values():
            gvks = definition.get("x-kubernetes-group-version-kind") or []
            for gvk in gvks:
                groups.add(gvk["group"])
            meta = definition.get("properties", {}).get("metadata", {}).get("$ref", "")
            if not meta.endswith(".ObjectMeta"):
                continue  # lists, Status, WatchEvent, DeleteOptions: not objects one applies
            for gvk in gvks:
                served.setdefault(group_version(gvk["group"], gvk["version"]), set()).add(gvk["kind"])
        versions[f"{m.group(1)}.{m.group(2)}"] = {gv: sorted(k) for gv, k in sorted(served.items())}
    latest = max(versions, key=lambda v: tuple(map(int, v.split("."))))
    defs = json.loads((root / f"v{latest}.0-local" / "_definitions.json").read_text())["$defs"]
    return {
        "fields": {t: sorted(defs[f"io.k8s.api.core.v1.{t}"]["properties"]) for t in PASS_THROUGH},
        "source": f"kubernetes-validate {__version__}: "
                  "kubernetes-json-schema/v<X.Y>.0-local/_definitions.json",
        "groups": sorted(groups),
        "versions": dict(sorted(versions.items(), key=lambda kv: tuple(map(int, kv[0].split("."))))),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, separators=(",", ":")) + "\n"


def group_version(group: str, version: str) -> str:
    """`apps/v1`, and plain `v1` for the core group."""
    return f"{group}/{version}" if group else version


@cache
def table() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(TABLE.read_text())
    return loaded


def minor(version: str) -> str | None:
    """`1.33` from `1.33`, `v1.33.4`, `1.33-eks`; None if it is no Kubernetes version."""
    m = re.match(r"v?(\d+)\.(\d+)", version.strip())
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def known_versions() -> list[str]:
    return list(table()["versions"])


def is_builtin_group(group: str) -> bool:
    """Whether `group` is one of Kubernetes' own API groups (any version in the table)."""
    return group in table()["groups"]


def served(version: str) -> dict[str, list[str]] | None:
    """group/version -> kinds the API server of `version` serves; None if not in the table."""
    key = minor(version)
    found: dict[str, list[str]] | None = table()["versions"].get(key) if key else None
    return found


def fields(type_name: str) -> list[str]:
    """Field names of a PASS_THROUGH Kubernetes type."""
    found: list[str] = table()["fields"][type_name]
    return found


def main() -> int:
    TABLE.write_text(render(derive()))
    print(f"wrote {TABLE} ({TABLE.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
