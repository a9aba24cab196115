"""The alerts a kube-prometheus-stack release's default rules fire, vendored as
`<folder>@<version>.alerts.json` beside the chart's other facts.

The toolkit routes some of the chart's alerts by name (serving/alert_routes.py: `Watchdog` to a
heartbeat, the delivery alerts to the SLO receivers). Alertmanager never says that a route
matches nothing: a renamed alert, or a rule group a release turns off, leaves the route silent.
So the plan checks each route's names against the rules that really exist (rtip/deploycheck/
alerts.py), and that needs the chart's rule templates, which shared/charts does not carry.

    python -m rtip.chartfacts.rules CHART_DIR VERSION SOURCE

reads `CHART_DIR/templates/prometheus/rules-1.14/*.yaml` (a checkout of the chart at its tag) and
writes, for every `- alert:` line, the alert's name, its template, the values that must be set
for the template to render it (every enclosing `if`: `requires` truthy, `unless` not true), and
its severity (the default of `dig NAME "severity" DEFAULT .Values.customRules`, which a release
may override). A template shape this reader does not model (`else`, `or` around an alert) stops
it with an error rather than a wrong table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rtip.chartfacts import ALERTS_SUFFIX, FACTS_DIR

RULES_DIR = Path("templates/prometheus/rules-1.14")
_ACTION = re.compile(r"^\{\{-?\s*(if|range|with|end|else)\b(.*?)-?\}\}$")
_ALERT = re.compile(r"^\s*- alert:\s*(\S+)\s*$")
_SEVERITY = re.compile(r'^\s*severity:\s*\{\{\s*dig\s+"([^"]+)"\s+"severity"\s+"([^"]+)"\s+'
                       r'\.Values\.customRules\s*\}\}\s*$')
_OFF = r"\.Values\.([A-Za-z0-9_.]+)\s*\|\s*default false\)"
_NEGATED = re.compile(rf"\(not \({_OFF}\)|^not \({_OFF}$")
_VALUE = re.compile(r"\.Values\.([A-Za-z0-9_.]+)")


@dataclass(frozen=True)
class ChartAlert:
    alert: str
    file: str
    requires: tuple[str, ...]  # values paths that must be truthy
    unless: tuple[str, ...]  # values paths that turn it off when true
    severity: str  # the default; `customRules.<alert>.severity` overrides it

    def renders(self, values: Mapping[str, Any]) -> bool:
        return (all(truthy(_get(values, p)) for p in self.requires)
                and not any(truthy(_get(values, p)) for p in self.unless))

    def why_not(self, values: Mapping[str, Any]) -> str:
        """The values that keep the template from rendering this alert ('' when it renders)."""
        off = [f"{p} is {_get(values, p)!r}" for p in self.requires if not truthy(_get(values, p))]
        off += [f"{p} is {_get(values, p)!r}" for p in self.unless if truthy(_get(values, p))]
        return "; ".join(off)

    def labels(self, values: Mapping[str, Any]) -> dict[str, str]:
        """alertname and severity: sprig's `dig` gives the release's `customRules` value where the
        key is there, an empty one included (no severity label then), else the default."""
        custom = _get(values, f"customRules.{self.alert}.severity")
        severity = self.severity if custom is None else str(custom)
        return {"alertname": self.alert, **({"severity": severity} if severity else {})}


def truthy(value: Any) -> bool:
    """Go template truth (`if`, `and`, `not`, sprig's `default`): false, 0, "", nil and empty
    maps and lists are false; anything else is true."""
    if isinstance(value, (bool, int, float, str, Mapping, list, tuple)):
        return bool(value)
    return value is not None


def _get(values: Mapping[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _condition(text: str, where: str) -> tuple[list[str], list[str]]:
    """(requires, unless) of one `if` action's text."""
    text = text.strip()
    if text.startswith("or ") or " or " in f" {text} ":
        raise ValueError(f"{where}: an `or` around an alert is not modelled: {text}")
    unless = [a or b for a, b in _NEGATED.findall(text)]
    rest = _NEGATED.sub("", text)
    if re.search(r"\bnot\b", rest):
        raise ValueError(f"{where}: a `not` of another shape is not modelled: {text}")
    return [p for p in _VALUE.findall(rest)], unless


def read_template(text: str, name: str) -> list[ChartAlert]:
    """The alerts of one rule template (see the module docstring)."""
    stack: list[tuple[str, str]] = []  # (action, its text) for each open block
    out: list[ChartAlert] = []
    pending: tuple[str, tuple[str, ...], tuple[str, ...]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        action = _ACTION.match(line.strip())
        if action:
            kind, body = action.groups()
            if kind == "end":
                if not stack:
                    raise ValueError(f"{where}: `end` without an open block")
                stack.pop()
            elif kind == "else":
                raise ValueError(f"{where}: `else` is not modelled")
            else:
                stack.append((kind, body))
            continue
        alert = _ALERT.match(line)
        if alert:
            if pending:
                raise ValueError(f"{where}: alert {pending[0]} has no severity line")
            requires: list[str] = []
            unless: list[str] = []
            for kind, body in stack:
                if kind != "if":
                    raise ValueError(f"{where}: an alert inside `{kind}` is not modelled")
                r, u = _condition(body, where)
                requires += r
                unless += u
            pending = (alert.group(1), tuple(dict.fromkeys(requires)), tuple(dict.fromkeys(unless)))
            continue
        severity = _SEVERITY.match(line)
        if severity and pending:
            if severity.group(1) != pending[0]:
                raise ValueError(f"{where}: severity of {severity.group(1)} under alert {pending[0]}")
            out.append(ChartAlert(pending[0], name, pending[1], pending[2], severity.group(2)))
            pending = None
    if pending:
        raise ValueError(f"{name}: alert {pending[0]} has no severity line")
    if stack:
        raise ValueError(f"{name}: {len(stack)} block(s) left open")
    return out


def read_chart(chart_dir: Path) -> list[ChartAlert]:
    files = sorted((chart_dir / RULES_DIR).glob("*.yaml"))
    if not files:
        raise ValueError(f"no rule templates under {chart_dir / RULES_DIR}")
    return [a for f in files for a in read_template(f.read_text(), f.name)]


@cache
def for_chart(folder: str, version: str) -> tuple[ChartAlert, ...] | None:
    """The vendored alerts of `folder` at `version`, or None when none are vendored."""
    path = FACTS_DIR / f"{folder}@{version}{ALERTS_SUFFIX}"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return tuple(ChartAlert(a["alert"], a["file"], tuple(a["requires"]), tuple(a["unless"]), a["severity"])
                 for a in doc["alerts"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chart_dir", type=Path, help="the chart's folder in a checkout at its tag")
    ap.add_argument("version")
    ap.add_argument("source", help="where the checkout came from (repository, tag, commit)")
    ap.add_argument("--out", type=Path, default=FACTS_DIR)
    args = ap.parse_args(argv)
    try:
        alerts = read_chart(args.chart_dir)
    except ValueError as err:
        print(f"rules: {err}", file=sys.stderr)
        return 2
    doc = {"chart": args.chart_dir.name, "version": args.version, "source": args.source,
           "templates": str(RULES_DIR), "alerts": [a.__dict__ for a in alerts]}
    path = args.out / f"{args.chart_dir.name}@{args.version}{ALERTS_SUFFIX}"
    rows = ",\n".join(f"  {json.dumps(a, sort_keys=True)}" for a in doc.pop("alerts"))
    path.write_text(json.dumps(doc, sort_keys=True)[:-1] + f', "alerts": [\n{rows}\n]}}\n')
    print(f"{path}: {len(alerts)} alerts from {len({a.file for a in alerts})} templates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
