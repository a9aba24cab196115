"""Conditions under which a chart installs a CRD, and the Helm values they are read against.

A condition is a small JSON tree, written by the generator from the chart's own words (the
`[if ...]` of a KINDS.txt line, a Chart.yaml dependency `condition`) and evaluated at check time
against the release's values coalesced over the chart's defaults, the way Helm reads them:

    ["value", [path...]]          Go template truthiness of .Values.<path> (missing is false);
                                  `.Values.<path> | default false` reads the same (a falsy
                                  default changes no truth value)
    ["lit", "text"]               a string literal (only as an `eq`/`ne` operand)
    ["and", c...] / ["or", c...]  / ["not", c]
    ["eq", a, b] / ["ne", a, b]
    ["chart", [path...], ...]     a Chart.yaml dependency condition: the first path that is set
                                  decides; none set means the subchart is enabled (Helm's rule)
    ["unknown", "text"]           a condition this reader cannot evaluate
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Condition = list[Any]
MISSING = object()

_TOKEN = re.compile(r'\(|\)|"(?:[^"\\]|\\.)*"|[^\s()]+')
_FUNCS = {"and", "or", "not", "eq", "ne"}


class Unparsed(ValueError):
    """Template text outside the small grammar above."""


def parse(text: str, prefix: tuple[str, ...] = ()) -> Condition:
    """`if or .Values.a.b .Values.c` as a condition tree; `prefix` roots .Values of a subchart
    under its key in the parent's values. Text outside the grammar becomes ["unknown", text]."""
    try:
        tokens = _TOKEN.findall(text.strip())
        if not tokens or tokens[0] not in ("if", "with"):
            raise Unparsed(text)
        tree, rest = _pipeline(tokens[1:], prefix)
        if rest:
            raise Unparsed(text)
        return tree
    except Unparsed:
        return ["unknown", text.strip()]


def _pipeline(tokens: list[str], prefix: tuple[str, ...]) -> tuple[Condition, list[str]]:
    if not tokens:
        raise Unparsed("empty")
    head = tokens[0]
    if head in _FUNCS:
        args: list[Condition] = []
        rest = tokens[1:]
        while rest and rest[0] != ")":
            arg, rest = _term(rest, prefix)
            args.append(arg)
        if head == "not" and len(args) == 1:
            return ["not", args[0]], rest
        if head in ("eq", "ne") and len(args) == 2:
            return [head, *args], rest
        if head in ("and", "or") and len(args) >= 2:
            return [head, *args], rest
        raise Unparsed(head)
    term, rest = _term(tokens, prefix)
    if rest[:2] == ["|", "default"]:
        if rest[2:3] not in (["false"], ['""'], ["0"]):
            raise Unparsed("default")
        rest = rest[3:]
    return term, rest


def _term(tokens: list[str], prefix: tuple[str, ...]) -> tuple[Condition, list[str]]:
    head, rest = tokens[0], tokens[1:]
    if head == "(":
        tree, rest = _pipeline(rest, prefix)
        if not rest or rest[0] != ")":
            raise Unparsed("unbalanced")
        return tree, rest[1:]
    if head.startswith('"'):
        return ["lit", head[1:-1]], rest
    if head.startswith(".Values.") and re.fullmatch(r"\.Values(\.[A-Za-z0-9_-]+)+", head):
        return ["value", [*prefix, *head.split(".")[2:]]], rest
    raise Unparsed(head)


def chart_condition(text: str) -> Condition:
    """A Chart.yaml dependency `condition:` (comma-separated value paths)."""
    return ["chart", *[p.strip().split(".") for p in text.split(",") if p.strip()]]


def lookup(values: Mapping[str, Any], path: list[str]) -> Any:
    node: Any = values
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return MISSING
        node = node[key]
    return node


def truthy(value: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings and collections are false."""
    return value is not MISSING and bool(value)


def evaluate(cond: Condition | None, values: Mapping[str, Any]) -> bool | None:
    """True/False under `values`; None when the condition cannot be evaluated."""
    if cond is None:
        return True
    op = cond[0]
    if op == "value":
        return truthy(lookup(values, cond[1]))
    if op == "chart":
        for path in cond[1:]:
            found = lookup(values, path)
            if found is not MISSING and isinstance(found, bool):
                return found
        return True
    if op in ("and", "or"):
        parts = [evaluate(c, values) for c in cond[1:]]
        if op == "and":
            return False if False in parts else (None if None in parts else True)
        return True if True in parts else (None if None in parts else False)
    if op == "not":
        inner = evaluate(cond[1], values)
        return None if inner is None else not inner
    if op in ("eq", "ne"):
        a, b = (_operand(c, values) for c in cond[1:3])
        if a is MISSING or b is MISSING:
            same = a is b
        else:
            same = a == b
        return same if op == "eq" else not same
    return None


def _operand(cond: Condition, values: Mapping[str, Any]) -> Any:
    if cond[0] == "lit":
        return cond[1]
    if cond[0] == "value":
        return lookup(values, cond[1])
    return MISSING


def describe(cond: Condition | None) -> str:
    """The condition in plain words, e.g. `crds.enabled or installCRDs`."""
    if cond is None:
        return "always"
    op = cond[0]
    if op == "value":
        return ".".join(cond[1])
    if op == "lit":
        return f'"{cond[1]}"'
    if op == "chart":
        return " / ".join(".".join(p) for p in cond[1:]) + " (subchart condition, on unless set false)"
    if op in ("and", "or"):
        return f" {op} ".join(_wrapped(c) for c in cond[1:])
    if op == "not":
        return f"not {_wrapped(cond[1])}"
    if op in ("eq", "ne"):
        sign = "==" if op == "eq" else "!="
        return f"{describe(cond[1])} {sign} {describe(cond[2])}"
    return f"[{cond[1]}]"


def _wrapped(cond: Condition) -> str:
    text = describe(cond)
    return f"({text})" if cond[0] in ("and", "or") else text


def all_of(*conds: Condition | None) -> Condition | None:
    """The conjunction of the conditions that are set (None: unconditional)."""
    present = [c for c in conds if c is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else ["and", *present]


def coalesce(defaults: Any, overrides: Any) -> Any:
    """Helm's merge of user values over chart defaults: maps merge key by key, anything else
    replaces, and an explicit null deletes the default."""
    if not isinstance(defaults, Mapping) or not isinstance(overrides, Mapping):
        return overrides
    merged: dict[str, Any] = dict(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = coalesce(merged[key], value)
        else:
            merged[key] = value
    return merged


__all__ = ["MISSING", "Condition", "all_of", "chart_condition", "coalesce", "describe", "evaluate",
           "lookup", "parse", "truthy"]
