"""Write compact facts for every chart folder of the upstream chart copies (shared/charts).

    python -m rtip.chartfacts.generate /path/to/shared/charts [--out DIR]

For each `<folder>/<version>/` (SOURCES.md beside it tells where each came from) this writes
`<folder>@<version>.json` into rtip/chartfacts/ with:

- `chart`, `version`: the Chart.yaml name (None for the folders that are not charts) and the
  release version, which is the folder name (several Chart.yaml files carry placeholders);
- `crds`: each CustomResourceDefinition in crds/: group, kind, served versions, scope, the file
  it comes from upstream (KINDS.txt) and the condition under which the chart installs it, read
  from the KINDS.txt `[if ...]` and the Chart.yaml dependency condition of a subchart's CRDs;
- `dependencies`: Chart.yaml dependencies, the key their values live under, their condition and
  the facts file of the subchart when its folder is here too (`file://../<folder>`);
- `values`: values.yaml as data (comments dropped): the key tree and the defaults conditions
  read; `commentedKeys`: keys values.yaml documents only as a comment (`# podAnnotations: {}`);
- `schema`: whether values.schema.json exists; it is then copied byte for byte as
  `<folder>@<version>.values.schema.json`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from rtip.chartfacts import ALERTS_SUFFIX, FACTS_DIR
from rtip.chartfacts.conditions import Condition, all_of, chart_condition, lookup, parse

# Conditions a KINDS.txt states only in a header comment, not in a line's `[if ...]`: the comment
# must still be in the file (or generation stops), and the condition is written in template words.
HEADER_CONDITIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("kserve-llmisvc-resources", "files/llmisvc/resources.yaml"): (
        "its 4 GIE/llm-d CRDs are dropped when .Values.kserve.llmisvc.createGIECRDs is false",
        "if .Values.kserve.llmisvc.createGIECRDs"),
}


# Keys a values.yaml documents by a link in a comment rather than by example: the chart passes the
# map through whole (gateway-helm renders `config.envoyGateway` into its EnvoyGateway ConfigMap).
# (folder, the comment that must still be in values.yaml, the keys) -> recorded as commented keys.
# The keys are fields of the EnvoyGateway API type the link names (rateLimit, extensionManager).
REFERENCED_KEYS: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    ("gateway-helm", "https://gateway.envoyproxy.io/docs/api/extension_types/#envoygateway",
     (("config", "envoyGateway", "rateLimit"), ("config", "envoyGateway", "extensionManager"))),
)


def referenced_keys(folder: str, text: str) -> list[list[str]]:
    found: list[list[str]] = []
    for name, comment, keys in REFERENCED_KEYS:
        if name != folder:
            continue
        if comment not in text:
            raise ValueError(f"{folder}/values.yaml no longer says {comment!r}: recheck REFERENCED_KEYS")
        found += [list(k) for k in keys]
    return found


class _CrdLoader(yaml.CSafeLoader):
    """kube-prometheus-stack's alertmanagerconfigs CRD has bare `- =` enum items (SOURCES.md)."""


_CrdLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))

# Subtrees of a CRD this reader never needs; they hold nearly all of its bytes.
_BULKY = re.compile(r"^( *)(- )?(?:schema|subresources|additionalPrinterColumns|selectableFields):\s*$")


def prune(text: str) -> str:
    """`text` without the bulky block subtrees of each CRD version (schemas), so that parsing takes
    a tenth of a second instead of seconds; the structural keys stay as they were."""
    out: list[str] = []
    skip: int | None = None
    for line in text.split("\n"):
        if skip is not None:
            body = line.lstrip(" ")
            indent = len(line) - len(body)
            # Deeper lines, and an indentless sequence under the key, belong to the subtree.
            if not body or body.startswith("#") or indent > skip or (
                    indent == skip and body.startswith("- ")):
                continue
            skip = None
        bulky = _BULKY.match(line)
        if bulky:
            indent = len(bulky.group(1))
            if bulky.group(2):
                out.append(" " * indent + "- _pruned: 0")
                skip = indent + 2
            else:
                skip = indent
            continue
        out.append(line)
    return "\n".join(out)


def crd_documents(path: Path, pruned: bool = True) -> list[dict[str, Any]]:
    text = path.read_text()
    docs = yaml.load_all(prune(text) if pruned else text, Loader=_CrdLoader)
    return [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# `# key:` then nothing, one token, a quoted string or a flow collection (prose has more words).
_COMMENTED_KEY = re.compile(
    r"""^( *)# ([A-Za-z_][A-Za-z0-9_-]*):(?:\s+(?:[^\s#'"{\[]\S*|"[^"]*"|'[^']*'|\{.*\}|\[.*\]))?"""
    r"""(?:\s+#.*)?\s*$""")
_KEY_LINE = re.compile(r"^( *)(- +)?([^\s#:'\"{\[][^:]*?|'[^']*'|\"[^\"]*\"):(?:\s+(.*))?$")


def commented_keys(text: str, values: Any) -> list[list[str]]:
    """Keys values.yaml documents only as a comment at a key's place (cert-manager's
    `  # podAnnotations: {}` under `webhook:`): the chart reads them though the file sets none.
    Only `# key:` with one space, at the indentation of the keys around it, under a map, and
    followed by at most one value (`# Note: the chart ...` is prose)."""
    found: list[list[str]] = []
    stack: list[tuple[int, str | None]] = []  # (indent, key); None marks a list item
    block: int | None = None  # indent of a key whose block scalar is being skipped
    for line in text.splitlines():
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        if block is not None:
            if not body or indent > block:
                continue
            block = None
        if not body:
            continue
        comment = _COMMENTED_KEY.match(line)
        if comment:
            parents = [k for i, k in stack if i < indent]
            if None not in parents:
                path = [str(k) for k in parents]
                node = lookup(values or {}, path) if path else values
                if isinstance(node, dict) and comment.group(2) not in node:
                    found.append([*path, comment.group(2)])
            continue
        if body.startswith("#"):
            continue
        key = _KEY_LINE.match(line)
        if key is None:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if key.group(2):
            stack.append((indent, None))
            indent += len(key.group(2))
        stack.append((indent, key.group(3).strip("'\"")))
        if re.fullmatch(r"[|>][-+0-9]*(\s+#.*)?", (key.group(4) or "").strip()):
            block = indent
    return sorted({tuple(p): p for p in found}.values())


def _kinds_crd_lines(kinds_txt: str) -> dict[tuple[str, str], list[tuple[str, str | None]]]:
    """KINDS.txt `crd <group>/<Kind>   # <file> [cond]; <file> [cond]` as (file, condition text)."""
    found: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
    for line in kinds_txt.splitlines():
        if not line.startswith("crd "):
            continue
        head, _, tail = line.partition("#")
        group, _, kind = head.split()[1].rpartition("/")
        alts = []
        for alt in tail.split("; "):
            m = re.fullmatch(r"\s*(\S+)(?:\s+\[(.*)\])?\s*", alt)
            if m is None:
                raise ValueError(f"KINDS.txt line not understood: {line!r}")
            alts.append((m.group(1), m.group(2)))
        found[(group, kind)] = alts
    return found


def _dependencies(chart_yaml: dict[str, Any]) -> list[dict[str, Any]]:
    deps = []
    for dep in chart_yaml.get("dependencies") or []:
        cond = dep.get("condition")
        deps.append({
            "name": dep["name"],
            "alias": dep.get("alias"),
            "valuesKey": dep.get("alias") or dep["name"],
            "version": str(dep.get("version", "")),
            "repository": dep.get("repository"),
            "condition": chart_condition(cond) if cond else None,
            "facts": None,
        })
    return deps


def _condition(folder: str, source: str, bracket: str | None, deps: list[dict[str, Any]],
               kinds_txt: str) -> Condition | None:
    """The condition under which the chart installs a CRD from `source` (a path in the chart)."""
    prefix: tuple[str, ...] = ()
    dep_cond: Condition | None = None
    sub = re.match(r"charts/([^/]+)/", source)
    if sub:
        dep = next((d for d in deps if sub.group(1) in (d["name"], d["alias"])), None)
        if dep is None:
            raise ValueError(f"{folder}: {source} is under a subchart Chart.yaml does not list")
        prefix, dep_cond = (dep["valuesKey"],), dep["condition"]
    text = bracket
    header = HEADER_CONDITIONS.get((folder, source))
    if header is not None:
        if header[0] not in kinds_txt:
            raise ValueError(f"{folder}/KINDS.txt no longer says {header[0]!r}: recheck HEADER_CONDITIONS")
        text = header[1] if text is None else text
    return all_of(dep_cond, parse(text, prefix) if text else None)


def chart_facts(version_dir: Path) -> dict[str, Any]:
    folder, version = version_dir.parent.name, version_dir.name
    chart_path = version_dir / "Chart.yaml"
    chart_yaml = yaml.safe_load(chart_path.read_text()) if chart_path.exists() else None
    kinds_txt = (version_dir / "KINDS.txt").read_text() if (version_dir / "KINDS.txt").exists() else ""
    deps = _dependencies(chart_yaml or {})
    lines = _kinds_crd_lines(kinds_txt)
    crds = []
    for path in sorted((version_dir / "crds").glob("*.yaml")):
        for doc in crd_documents(path):
            spec = doc["spec"]
            group, kind = spec["group"], spec["names"]["kind"]
            alts = lines.get((group, kind), [])
            if len(alts) > 1:  # the same CRD in several files (Gateway API channels): pick this one
                alts = [a for a in alts if Path(a[0]).name == path.name] or alts
            if len(alts) > 1:
                raise ValueError(f"{version_dir}: cannot tell which KINDS.txt file {path.name} is")
            source, bracket = alts[0] if alts else (None, None)
            crds.append({
                "group": group, "kind": kind, "scope": spec.get("scope", "Namespaced"),
                "versions": [v["name"] for v in spec.get("versions", []) if v.get("served")],
                "file": f"crds/{path.name}", "from": source,
                "condition": _condition(folder, source, bracket, deps, kinds_txt) if source else None,
            })
    crds.sort(key=lambda c: (c["group"], c["kind"], c["file"]))
    values_path = version_dir / "values.yaml"
    values = yaml.safe_load(values_path.read_text()) if values_path.exists() else None
    return {
        "folder": folder,
        "version": version,
        "chart": chart_yaml["name"] if chart_yaml else None,
        "chartYamlVersion": str(chart_yaml.get("version")) if chart_yaml else None,
        "dependencies": deps,
        "crds": crds,
        "values": _jsonable(values) if values else {},
        "commentedKeys": sorted(commented_keys(values_path.read_text(), values)
                                + referenced_keys(folder, values_path.read_text()))
        if values_path.exists() else [],
        "schema": (version_dir / "values.schema.json").exists(),
    }


def facts_name(folder: str, version: str) -> str:
    return f"{folder}@{version}"


def _link_subcharts(all_facts: dict[str, dict[str, Any]]) -> None:
    """Point each dependency at the facts of its subchart when that chart's folder is here."""
    by_chart = {(f["chart"], f["version"].lstrip("v")): name for name, f in all_facts.items() if f["chart"]}
    for facts in all_facts.values():
        for dep in facts["dependencies"]:
            repo = dep["repository"] or ""
            local = re.fullmatch(r"file://\.\./([^/]+)/?", repo)
            if local:
                same = facts_name(local.group(1), facts["version"])
                others = sorted(n for n in all_facts if n.startswith(f"{local.group(1)}@"))
                dep["facts"] = same if same in all_facts else (others[0] if len(others) == 1 else None)
            else:
                dep["facts"] = by_chart.get((dep["name"], dep["version"].lstrip("v")))


def generate(charts_dir: Path, out: Path) -> list[Path]:
    """Write every folder's facts (and schema copies) into `out`; return the files written."""
    all_facts: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Path] = {}
    for version_dir in sorted(p for p in charts_dir.glob("*/*") if p.is_dir()):
        facts = chart_facts(version_dir)
        name = facts_name(facts["folder"], facts["version"])
        all_facts[name] = facts
        if facts["schema"]:
            schemas[name] = version_dir / "values.schema.json"
    seen: dict[tuple[str, str], str] = {}
    for name, facts in all_facts.items():
        if facts["chart"]:
            key = (facts["chart"], facts["version"].lstrip("v"))
            if key in seen:
                raise ValueError(f"{name} and {seen[key]} are both chart {key[0]} {key[1]}")
            seen[key] = name
    _link_subcharts(all_facts)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, facts in sorted(all_facts.items()):
        path = out / f"{name}.json"
        path.write_text(json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n")
        written.append(path)
        if name in schemas:
            copy = out / f"{name}.values.schema.json"
            shutil.copyfile(schemas[name], copy)
            written.append(copy)
    return written


def data_files(folder: Path) -> list[Path]:
    """The generated files in `folder` (what `generate` writes there)."""
    return sorted(p for p in folder.glob("*@*.json") if not p.name.endswith(ALERTS_SUFFIX))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("charts", type=Path, help="the shared/charts folder")
    parser.add_argument("--out", type=Path, default=FACTS_DIR)
    args = parser.parse_args(argv)
    if not args.charts.is_dir():
        parser.error(f"{args.charts} is not a folder")
    stale = set(data_files(args.out))
    written = generate(args.charts, args.out)
    for old in stale - set(written):
        old.unlink()
    size = sum(p.stat().st_size for p in written)
    print(f"wrote {len(written)} files ({size / 1e6:.2f} MB) to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
