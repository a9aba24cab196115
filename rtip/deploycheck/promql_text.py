"""The series selectors written in a PromQL expression, read off its text: every
`metric{label op "value", ...}`, with each matcher's operator (=, !=, =~, !~). Enough for the
plan's own queries and rules, which write each selector with a metric name and quoted values
without commas (a regex alternation uses `|`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)"\s*')

Matcher = tuple[str, str, str]  # label, operator, value


def matchers(query: str) -> Iterator[tuple[str, list[Matcher]]]:
    """Each `metric{...}` of `query` with its matchers, in the order written."""
    for metric, body in _SELECTOR.findall(query):
        found = [m.groups() for part in body.split(",") if (m := _MATCHER.fullmatch(part))]
        yield metric, [(label, op, value) for label, op, value in found]


__all__ = ["Matcher", "matchers"]
