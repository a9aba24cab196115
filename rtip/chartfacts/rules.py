"""The alerts a kube-prometheus-stack release's default rules fire, vendored as
`<folder>@<version>.alerts.json` beside the chart's other facts.

The toolkit routes some of the chart's alerts by name (serving/alert_routes.py: `Watchdog` to a
heartbeat, the delivery alerts to the SLO receivers). Alertmanager never says that a route
matches nothing: a renamed alert, or a rule group a release turns off, leaves the route silent.
So the plan checks each route's names against the rules that really exist (rtip/deploycheck/
alerts.py), and that needs the chart's rule templates, which shared/charts does not carry.

    python -m rtip.chartfacts.rules CHART_DIR VERSION SOURCE

reads `CHART_DIR/templates/prometheus/rules-1.14/*.yaml` (a checkout of the chart at its tag) and
writes, for every `- alert:` line, the alert's name, its template, the condition under which the
template renders it (every enclosing `if`, in the chart conditions' grammar: conditions.py, which
evaluates it against a release's values as Helm would), and its severity (the default of
`dig NAME "severity" DEFAULT .Values.customRules`, which a release may override). The rule
templates' Kubernetes version gate (`semverCompare ">=1.14.0-0"` and `"<9.9.9-9"` on
`$kubeTargetVersion`) holds on every cluster the toolkit builds and is left out. A template shape
this reader does not model (`else`, an alert inside `range` or `with`, a condition outside the
grammar) stops it with an error rather than a wrong table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rtip.chartfacts import ALERTS_SUFFIX, FACTS_DIR
from rtip.chartfacts.conditions import MISSING, Condition, all_of, describe, evaluate, lookup, parse

RULES_DIR = Path("templates/prometheus/rules-1.14")
_ACTION = re.compile(r"^\{\{-?\s*(if|range|with|end|else)\b(.*?)-?\}\}$")
_ALERT = re.compile(r"^\s*- alert:\s*(\S+)\s*$")
_SEVERITY = re.compile(r'^\s*severity:\s*\{\{\s*dig\s+"([^"]+)"\s+"severity"\s+"([^"]+)"\s+'
                       r'\.Values\.customRules\s*\}\}\s*$')
_KUBE_VERSION = re.compile(r'\(semverCompare "[^"]*" \$kubeTargetVersion\)\s*')


@dataclass(frozen=True)
class ChartAlert:
    alert: str
    file: str
    condition: Condition | None  # conditions.py's grammar; None: rendered always
    severity: str  # the default; `customRules.<alert>.severity` overrides it

    def renders(self, values: Mapping[str, Any]) -> bool:
        return evaluate(self.condition, values) is True

    def why_not(self, values: Mapping[str, Any]) -> str:
        """Why the template does not render this alert under `values`, in plain words."""
        shown = ", ".join(f"{'.'.join(p)} is {_shown(lookup(values, p))}" for p in _paths(self.condition))
        return f"its template renders it only if {describe(self.condition)} ({shown})"

    def labels(self, values: Mapping[str, Any]) -> dict[str, str]:
        """alertname and severity: sprig's `dig` gives the release's `customRules` value where the
        key is there, an empty one included (no severity label then), else the default."""
        custom = lookup(values, ["customRules", self.alert, "severity"])
        severity = self.severity if custom is MISSING or custom is None else str(custom)
        return {"alertname": self.alert, **({"severity": severity} if severity else {})}


def _paths(cond: Condition | None) -> list[list[str]]:
    """The value paths a condition reads, in order."""
    if not cond:
        return []
    if cond[0] == "value":
        return [cond[1]]
    return [p for c in cond[1:] if isinstance(c, list) for p in _paths(c)]


def _shown(value: Any) -> str:
    return "unset" if value is MISSING else json.dumps(value)


def _condition(body: str, where: str) -> Condition:
    """One `if` action's text in the conditions grammar; ValueError where it falls outside."""
    cond = parse("if " + _KUBE_VERSION.sub("", body.strip()))
    if cond[0] == "unknown":
        raise ValueError(f"{where}: a condition outside the grammar: {body.strip()}")
    return cond


def read_template(text: str, name: str) -> list[ChartAlert]:
    """The alerts of one rule template (see the module docstring)."""
    stack: list[tuple[str, str]] = []  # (action, its text) for each open block
    out: list[ChartAlert] = []
    pending: tuple[str, Condition | None] | None = None
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
            for kind, _ in stack:
                if kind != "if":
                    raise ValueError(f"{where}: an alert inside `{kind}` is not modelled")
            pending = (alert.group(1), all_of(*(_condition(body, where) for _, body in stack)))
            continue
        severity = _SEVERITY.match(line)
        if severity and pending:
            if severity.group(1) != pending[0]:
                raise ValueError(f"{where}: severity of {severity.group(1)} under alert {pending[0]}")
            out.append(ChartAlert(pending[0], name, pending[1], severity.group(2)))
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
    return tuple(ChartAlert(a["alert"], a["file"], a["condition"], a["severity"]) for a in doc["alerts"])


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
           "templates": str(RULES_DIR), "alerts": [asdict(a) for a in alerts]}
    path = args.out / f"{args.chart_dir.name}@{args.version}{ALERTS_SUFFIX}"
    rows = ",\n".join(f"  {json.dumps(a, sort_keys=True)}" for a in doc.pop("alerts"))
    path.write_text(json.dumps(doc, sort_keys=True)[:-1] + f', "alerts": [\n{rows}\n]}}\n')
    print(f"{path}: {len(alerts)} alerts from {len({a.file for a in alerts})} templates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
