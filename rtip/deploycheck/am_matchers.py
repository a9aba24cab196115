"""Alertmanager's route matchers as its configuration loader reads them (prometheus/alertmanager
`pkg/labels/parse.go` and `matcher.go`, the classic parser): `name op value`, the name
`[a-zA-Z_:][a-zA-Z0-9_:]*`, op one of `=`, `!=`, `=~`, `!~`; the value double-quoted or bare,
either way unescaped (`\\\\`, `\\"` and `\\n`; any other backslash kept), a quote left unescaped
inside it refused; several matchers in one string, comma-separated, an empty one refused, a
leading `{` and a trailing `}` trimmed; the older `match` and `match_re` maps of a route as
well. A regex is anchored (`^(?:value)$`) and RE2's, as Go's is; a label the alert lacks
matches as the empty string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2

_ONE = re.compile(r'^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$', re.S)
_LITERALS = re.compile(r"[A-Za-z0-9_:]+(\|[A-Za-z0-9_:]+)*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def __str__(self) -> str:
        return f'{self.name} {self.op} "{self.value}"'

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.name, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (_compiled(self.value).fullmatch(have) is not None) == (self.op == "=~")

    def names(self) -> list[str] | None:
        """The alert names an `alertname` matcher names: its value for `=`, each alternative of a
        regex that is only literal alternatives for `=~`; None otherwise."""
        if self.name != "alertname":
            return None
        if self.op == "=":
            return [self.value]
        if self.op == "=~" and _LITERALS.fullmatch(self.value):
            return self.value.split("|")
        return None


def _unescape(body: str, text: str) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], c + body[i + 1]))
            i += 2
            continue
        if c == '"':
            raise ValueError(f"matcher {text!r}: an unescaped quote inside the value")
        out.append(c)
        i += 1
    return "".join(out)


def _unquote(value: str, text: str) -> str:
    if not value.startswith('"'):
        return _unescape(value, text)
    body = value[1:-1] if len(value) >= 2 and value.endswith('"') else None
    # An odd run of backslashes before the last quote escapes it: the value never closes.
    if body is None or (len(body) - len(body.rstrip("\\"))) % 2:
        raise ValueError(f"matcher {text!r}: an unterminated quoted value")
    return _unescape(body, text)


def _split(text: str) -> list[str]:
    """The comma-separated parts of `text`, commas inside quotes kept."""
    parts, current, quoted, escaped = [], [], False, False
    for c in text:
        if c == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(c)
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
    parts.append("".join(current))
    return parts


def parse(text: str) -> list[Matcher]:
    """The matchers of one `matchers` entry; ValueError naming what cannot be read."""
    body = text.strip().removeprefix("{").removesuffix("}")
    if not body.strip():
        return []
    out = []
    for part in _split(body):
        if not part.strip():
            raise ValueError(f"matcher {text!r}: an empty matcher between commas")
        m = _ONE.match(part)
        if m is None:
            raise ValueError(f"matcher {text!r}: not `name op value`")
        out.append(_checked(Matcher(m.group(1), m.group(2), _unquote(m.group(3), text)), f"matcher {text!r}"))
    return out


@cache
def _compiled(value: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is raised, and reported as a finding
    return re2.compile(f"^(?:{value})$", options)


def _checked(matcher: Matcher, where: str) -> Matcher:
    if matcher.op in ("=~", "!~"):
        try:
            _compiled(matcher.value)
        except re2.error as err:
            raise ValueError(f"{where}: the regex is not RE2 ({err})") from None
    return matcher


def of_route(route: Mapping[str, Any]) -> list[Matcher]:
    """Every matcher of one route: `matchers`, `match` and `match_re`."""
    out = [m for text in route.get("matchers") or [] for m in parse(str(text))]
    out += [Matcher(str(k), "=", str(v)) for k, v in (route.get("match") or {}).items()]
    out += [_checked(Matcher(str(k), "=~", str(v)), f"match_re {k!r}")
            for k, v in (route.get("match_re") or {}).items()]
    return out


__all__ = ["Matcher", "of_route", "parse"]
