"""Prometheus's own promtool (Debian package `promtool`, FACTS.md section 8) for the tests:
`check rules` parses rule files with Prometheus's parser, `test rules` evaluates rules and
queries over given series with Prometheus's engine. `make test` unpacks the version tools.lock
pins (3.5: Prometheus 3's engine, as the chart's v3.14 runs) and sets RTIP_PROMTOOL; likewise
Alertmanager's amtool (package `prometheus-alertmanager`, 0.33 beside the chart's v0.34,
RTIP_AMTOOL).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rtip.stackfile import PROJECT_DIR

# What `promtool test rules` prints for a query whose result differs from the expected samples.
_FAILED = re.compile(r'expr: ("(?:[^"\\]|\\.)*"), time: (\S+),\n\s+exp: .*\n\s+got: (.*)')
_SAMPLE = re.compile(r"(\{[^}]*\}) (\S+?)(?:,|$)")


def binary(name: str = "promtool", env: str = "RTIP_PROMTOOL", package: str = "promtool") -> Path:
    given = os.environ.get(env)
    # Absolute: the tools run in a scratch folder, where a relative path would not resolve.
    found = Path(given).resolve() if given else PROJECT_DIR / ".tools" / package / "usr" / "bin" / name
    if not found.exists():
        pytest.fail(f"{name} not found: run `make test`, which unpacks tools.lock's packages into .tools/ "
                    f"and sets {env}")
    return found


def amtool(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = binary("amtool", "RTIP_AMTOOL", "prometheus-alertmanager")
    return subprocess.run([str(tool), *args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=120)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary()), *args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=300)


def check_rules(groups: list[dict[str, Any]], folder: Path) -> subprocess.CompletedProcess[str]:
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return run(["check", "rules", path.name], folder)


def run_rule_tests(groups: list[dict[str, Any]], tests: list[dict[str, Any]], folder: Path,
               interval: str = "1m") -> subprocess.CompletedProcess[str]:
    """`promtool test rules` over `groups` (one rule file) with the unit tests `tests`."""
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    (folder / "test.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": interval, "tests": tests}, sort_keys=False))
    return run(["test", "rules", "test.yaml"], folder)


def evaluate(series: dict[str, str], queries: list[tuple[str, str]], folder: Path,
             interval: str = "15s", rules: list[dict[str, Any]] | None = None) -> list[dict[str, float]]:
    """Prometheus's value of each (query, eval time) over `series` (promtool's expanding notation
    at `interval`), with `rules` (groups) evaluated alongside: label set -> value. promtool prints
    what a query returned only when it differs from the expectation, so every query expects a
    sample no query can return."""
    impossible = [{"labels": '{__name__="never_returned"}', "value": -1}]
    tests = [{"interval": interval,
              "input_series": [{"series": s, "values": v} for s, v in series.items()],
              "promql_expr_test": [{"expr": q, "eval_time": t, "exp_samples": impossible}
                                   for q, t in queries]}]
    done = run_rule_tests(rules or [], tests, folder, interval)
    found = _FAILED.findall(done.stdout + done.stderr)
    assert len(found) == len(queries), done.stdout + done.stderr
    out = []
    for (expr, time, got), (query, at) in zip(found, queries, strict=True):
        assert json.loads(expr) == query and time == at, (expr, time)
        out.append({} if got.strip() == "nil" else {labels: float(v) for labels, v in _SAMPLE.findall(got)})
    return out


__all__ = ["amtool", "binary", "check_rules", "evaluate", "run", "run_rule_tests"]
