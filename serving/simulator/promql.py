"""A simulated Prometheus: a sample store and a small PromQL evaluator.

Enough PromQL for autoscaling queries: instant and range selectors with `=`, `!=`, `=~`, `!~`
matchers; `sum`/`avg`/`max`/`min`/`count` with `by (...)` or `without (...)` in either position;
`rate`, `increase`, `avg_over_time`, `max_over_time`, `min_over_time`, `present_over_time`, `deriv`,
`predict_linear`; `histogram_quantile`; `clamp_min`, `clamp_max`, `abs`, `ceil`, `floor`, `scalar`, `vector`,
`time` (the evaluation time: the simulation's clock stands for Unix time);
subqueries `expr[range:step]` (with their step); `+ - * /` between expressions and numbers, with
parentheses and unary minus; comparisons (`== != > < >= <=`, as filters, without `bool`); `and`,
`or`, `unless` with `on (...)` or `ignoring (...)`. Semantics follow Prometheus (promql/functions.go,
quantile.go):
- an instant selector takes each series' newest sample within the 5-minute lookback, unless the
  series went stale (its target disappeared) before;
- a range selector takes the samples in (t - range, t];
- `rate`/`increase` are Prometheus's `extrapolatedRate`: counter resets add the pre-reset value,
  the result is extrapolated to the window edges when the gap is under 1.1 average sample
  intervals (else by half an interval), and never below zero at the start;
- a subquery evaluates its expression at each multiple of its step after t - range, up to t;
- `deriv`/`predict_linear` fit a least-squares line to a range's samples (`predict_linear`'s
  intercept at the evaluation time, plus slope x its seconds);
- `histogram_quantile` interpolates linearly inside the bucket holding rank q x count, returns the
  upper bound of the last finite bucket if the rank falls in +Inf, and NaN without data;
- binary operators between two vectors match series with identical labels (one-to-one); the metric
  name is dropped by functions, aggregations and arithmetic;
- a comparison keeps the series that compare true, with the vector's value; `or` keeps every
  left series and adds the right ones whose labels (or `on` labels) no left series has.
"""

from __future__ import annotations

import re

from serving.simulator.prometheus import LOOKBACK_S, Labels, Series, Store
from serving.simulator.promql_eval import (
    COMPARISONS,
    Evaluator,
    Matcher,
    Node,
    PromQLError,
    Value,
    Vector,
    _aggregate,
    _binary,
    _filter,
    _function,
    _selector,
    _set_op,
    _subquery,
)

# -- parsing ------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)(?![a-zA-Z_:\d.])
  | (?P<dur>(?:\d+(?:ms|s|m|h|d|w|y))+)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/(){}\[\],=<>])
)""", re.VERBOSE)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
AGGREGATIONS = frozenset({"sum", "avg", "max", "min", "count"})


# Prometheus's duration (common/model ParseDuration, which the operator's CRDs pattern too): units
# largest first, each at most once, or a bare 0.
_DURATION_UNITS = ("y", "w", "d", "h", "m", "s", "ms")
_DURATION = re.compile(r"0|" + "".join(rf"(?:(\d+){u})?" for u in _DURATION_UNITS))


def duration_s(text: str) -> float:
    """A Prometheus duration (`30s`, `5m`, `1m30s`, `0`) in seconds."""
    m = _DURATION.fullmatch(text)
    if m is None or text == "":
        raise PromQLError(f"{text!r} is not a Prometheus duration like 5m or 1m30s")
    return sum((float(n) * _UNITS[u] for n, u in zip(m.groups(), _DURATION_UNITS, strict=True)
                if n is not None), 0.0)


_COLON = re.compile(r"\s*:")


def _tokens(query: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    depth = 0  # inside [...], as Prometheus's lexer, a ':' is the subquery's separator
    query = query.rstrip()
    while pos < len(query):
        if depth and (c := _COLON.match(query, pos)):
            out.append(("colon", ":"))
            pos = c.end()
            continue
        m = _TOKEN.match(query, pos)
        if m is None or m.end() == pos:
            raise PromQLError(f"PromQL: unexpected text at {pos}: {query[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        depth += {"[": 1, "]": -1}.get(m.group(kind), 0) if kind == "op" else 0
        pos = m.end()
    return out


class _Parser:
    def __init__(self, query: str) -> None:
        self.toks = _tokens(query)
        self.i = 0
        self.query = query

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok[0] == "eof" or (value is not None and tok[1] != value):
            raise PromQLError(f"PromQL: expected {value or 'more'} in {self.query!r}, "
                              f"got {tok[1] or 'end'!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.expr()
        if self.peek()[0] != "eof":
            raise PromQLError(f"PromQL: unexpected {self.peek()[1]!r} in {self.query!r}")
        return node

    # Precedence, lowest first, as Prometheus's: or; and, unless; comparisons; + -; * /.
    def expr(self) -> Node:
        node = self.conjunction()
        while self.peek() == ("name", "or"):
            self.take()
            node = _set_op("or", self.matching(), node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.comparison()
        while self.peek()[0] == "name" and self.peek()[1] in ("and", "unless"):
            op = self.take()[1]
            node = _set_op(op, self.matching(), node, self.comparison())
        return node

    def matching(self) -> tuple[str, tuple[str, ...]] | None:
        """A set operator's `on (...)` or `ignoring (...)`; group modifiers are not supported."""
        if self.peek()[0] == "name" and self.peek()[1] in ("on", "ignoring"):
            keep = self.take()[1]
            names = self.labels_list()
            if self.peek()[1] in ("group_left", "group_right"):
                raise PromQLError(f"PromQL: {self.peek()[1]} is not supported in {self.query!r}")
            return keep, names
        return None

    def no_matching(self, op: str) -> None:
        """Vector matching modifiers are read after `and`, `or`, `unless` only."""
        kind, text = self.peek()
        if kind == "name" and text in ("on", "ignoring", "bool"):
            raise PromQLError(f"PromQL: `{text}` after {op!r} is not supported (`on` and `ignoring` "
                              f"only after and/or/unless) in {self.query!r}")

    def comparison(self) -> Node:
        node = self.sum()
        while self.peek()[1] in COMPARISONS:
            op = self.take()[1]
            self.no_matching(op)
            node = _filter(op, node, self.sum(), self.query)
        return node

    def sum(self) -> Node:
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            self.no_matching(op)
            node = _binary(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            self.no_matching(op)
            node = _binary(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek()[1] == "-":
            self.take()
            return _binary("*", lambda ev: -1.0, self.unary())
        if self.peek()[1] == "+":
            self.take()
        return self.primary()

    def primary(self) -> Node:
        start = self.i
        node = self.operand()
        while self.peek()[1] == "[":  # a subquery of any instant expression: expr[range:step]
            node = self.subquery(node, start)
        return node

    def subquery(self, inner: Node, start: int) -> Node:
        if hasattr(inner, "window"):
            raise PromQLError(f"PromQL: a subquery is only allowed on an instant expression, not a "
                              f"range vector, in {self.query!r}")
        self.take("[")
        window = self.duration()
        if self.peek()[0] != "colon":
            raise PromQLError(f"PromQL: expected ':' in a subquery like x[10m:15s] in {self.query!r}")
        self.take()
        if self.peek()[1] == "]":
            raise PromQLError(f"PromQL: a subquery needs its step (the rule evaluation interval is "
                              f"not known here) in {self.query!r}")
        step = self.duration()
        self.take("]")
        # Its text is its memo's key: the same subquery written twice in a query is one memo.
        return _subquery(inner, window, step, tuple(self.toks[start:self.i]))

    def duration(self) -> float:
        kind, raw = self.take()
        if kind != "dur":
            raise PromQLError(f"PromQL: expected a duration like 5m in {self.query!r}, got {raw!r}")
        return duration_s(raw)

    def operand(self) -> Node:
        kind, text = self.peek()
        if kind == "num":
            self.take()
            value = float(text)
            return lambda ev: value
        if text == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        if kind != "name":
            raise PromQLError(f"PromQL: unexpected {text or 'end'!r} in {self.query!r}")
        self.take()
        if text in AGGREGATIONS:
            return self.aggregation(text)
        if self.peek()[1] == "(":
            return self.call(text)
        return self.selector(text)

    def labels_list(self) -> tuple[str, ...]:
        self.take("(")
        names: list[str] = []
        while self.peek()[1] != ")":
            names.append(self.take()[1])
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return tuple(names)

    def aggregation(self, op: str) -> Node:
        grouping: tuple[str, tuple[str, ...]] | None = None
        if self.peek()[1] in ("by", "without"):
            grouping = (self.take()[1], self.labels_list())
        self.take("(")
        inner = self.expr()
        self.take(")")
        if grouping is None and self.peek()[1] in ("by", "without"):
            grouping = (self.take()[1], self.labels_list())
        return _aggregate(op, grouping, inner)

    def call(self, name: str) -> Node:
        self.take("(")
        args: list[Node] = []
        while self.peek()[1] != ")":
            args.append(self.expr())
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return _function(name, args, self.query)

    def selector(self, name: str) -> Node:
        matchers: list[Matcher] = []
        if self.peek()[1] == "{":
            self.take()
            while self.peek()[1] != "}":
                label = self.take()[1]
                op = self.take()[1]
                if op not in ("=", "!=", "=~", "!~"):
                    raise PromQLError(f"PromQL: bad matcher operator {op!r} in {self.query!r}")
                kind, raw = self.take()
                if kind != "str":
                    raise PromQLError(f"PromQL: matcher value must be a quoted string in {self.query!r}")
                matchers.append(Matcher(label, op, raw[1:-1].encode().decode("unicode_escape")))
                if self.peek()[1] == ",":
                    self.take()
            self.take("}")
        instant = _selector(name, tuple(matchers), None)
        if self.peek()[1] != "[":
            return instant
        start = self.i
        self.take()
        window = self.duration()
        if self.peek()[0] == "colon":  # x[10m:15s] is a subquery of the instant selector
            self.i = start
            return instant
        self.take("]")
        return _selector(name, tuple(matchers), window)


_CACHE: dict[str, Node] = {}


def parse(query: str) -> Node:
    """Parse once; the same autoscaling query is evaluated thousands of times."""
    node = _CACHE.get(query)
    if node is None:
        node = _CACHE[query] = _Parser(query).parse()
    return node


def evaluate(query: str, store: Store, t: float) -> Value:
    """The value of `query` at time `t`: a number or an instant vector {labels: value}."""
    result = parse(query)(Evaluator(store, t))
    if isinstance(result, dict) and result and isinstance(next(iter(result.values())), tuple):
        raise PromQLError(f"PromQL: {query!r} is a range vector; wrap it in rate() or *_over_time()")
    return result  # type: ignore[return-value]


__all__ = ["LOOKBACK_S", "Labels", "Matcher", "PromQLError", "Series", "Store", "Vector", "duration_s",
           "evaluate", "parse"]
