"""A simulated Prometheus: a sample store and a small PromQL evaluator.

Enough PromQL for autoscaling queries: instant and range selectors with `=`, `!=`, `=~`, `!~`
matchers; `sum`/`avg`/`max`/`min`/`count` with `by (...)` or `without (...)` in either position;
`rate`, `increase`, `avg_over_time`, `max_over_time`; `histogram_quantile`; `clamp_min`,
`clamp_max`, `abs`, `scalar`, `vector`; `+ - * /` between expressions and numbers, with
parentheses and unary minus. Semantics follow Prometheus (promql/functions.go, quantile.go):
- an instant selector takes each series' newest sample within the 5-minute lookback, unless the
  series went stale (its target disappeared) before;
- a range selector takes the samples in (t - range, t];
- `rate`/`increase` are Prometheus's `extrapolatedRate`: counter resets add the pre-reset value,
  the result is extrapolated to the window edges when the gap is under 1.1 average sample
  intervals (else by half an interval), and never below zero at the start;
- `histogram_quantile` interpolates linearly inside the bucket holding rank q x count, returns the
  upper bound of the last finite bucket if the rank falls in +Inf, and NaN without data;
- binary operators between two vectors match series with identical labels (one-to-one); the metric
  name is dropped by functions, aggregations and arithmetic.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from serving.simulator.prometheus import LOOKBACK_S, Labels, Series, Store, bucket_quantile, extrapolated_rate

Vector = dict[Labels, float]
RangeVector = dict[Labels, tuple[list[float], list[float]]]
Value = float | Vector



class PromQLError(ValueError):
    """A query that does not parse or cannot be evaluated."""


# -- parsing ------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)(?![a-zA-Z_:\d.])
  | (?P<dur>\d+(?:ms|s|m|h|d|w|y))
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>=~|!~|!=|==|[-+*/(){}\[\],=])
)""", re.VERBOSE)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
AGGREGATIONS = frozenset({"sum", "avg", "max", "min", "count"})


def duration_s(text: str) -> float:
    """A PromQL duration of one unit (`30s`, `5m`, `3d`) in seconds."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if m is None:
        raise PromQLError(f"PromQL: {text!r} is not a duration like 5m")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _tokens(query: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    query = query.rstrip()
    while pos < len(query):
        m = _TOKEN.match(query, pos)
        if m is None or m.end() == pos:
            raise PromQLError(f"PromQL: unexpected text at {pos}: {query[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


Node = Callable[["Evaluator"], "Value | RangeVector"]


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def __call__(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        hit = re.fullmatch(self.value, have) is not None
        return hit if self.op == "=~" else not hit


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

    def expr(self) -> Node:
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            node = _binary(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
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
        window: float | None = None
        if self.peek()[1] == "[":
            self.take()
            kind, raw = self.take()
            if kind != "dur":
                raise PromQLError(f"PromQL: expected a duration like 5m in {self.query!r}, got {raw!r}")
            window = duration_s(raw)
            self.take("]")
        return _selector(name, tuple(matchers), window)


# -- evaluation ---------------------------------------------------------------------------------
class Evaluator:
    def __init__(self, store: Store, t: float) -> None:
        self.store = store
        self.t = t


def _select(ev: Evaluator, name: str, matchers: tuple[Matcher, ...]) -> Iterable[tuple[Labels, Series]]:
    for labels, series in ev.store.series(name).items():
        if matchers:
            as_dict = dict(labels)
            if not all(m(as_dict) for m in matchers):
                continue
        yield labels, series


def _selector(name: str, matchers: tuple[Matcher, ...], window: float | None) -> Node:
    def instant(ev: Evaluator) -> Vector:
        out: Vector = {}
        for labels, s in _select(ev, name, matchers):
            i = bisect_right(s.times, ev.t) - 1
            if i >= 0 and s.times[i] >= ev.t - ev.store.lookback_s and s.stale_at > ev.t:
                out[labels] = s.values[i]
        return out

    def ranged(ev: Evaluator) -> RangeVector:
        out: RangeVector = {}
        start = ev.t - (window or 0.0)
        for labels, s in _select(ev, name, matchers):
            lo, hi = bisect_right(s.times, start), bisect_right(s.times, ev.t)
            if hi > lo:
                out[labels] = (s.times[lo:hi], s.values[lo:hi])
        return out

    if window is None:
        return instant
    ranged.window = window  # type: ignore[attr-defined]
    return ranged


def _range_arg(args: list[Node], name: str, query: str) -> Node:
    if len(args) != 1 or not hasattr(args[0], "window"):
        raise PromQLError(f"PromQL: {name}() takes one range vector like x[5m] in {query!r}")
    return args[0]


def _as_vector(value: Value | RangeVector, what: str) -> Vector:
    if not isinstance(value, dict):
        raise PromQLError(f"PromQL: {what} expects an instant vector, got a number")
    return value  # type: ignore[return-value]


def _as_scalar(value: Value | RangeVector, what: str) -> float:
    if isinstance(value, dict):
        raise PromQLError(f"PromQL: {what} expects a number")
    return value


def _function(name: str, args: list[Node], query: str) -> Node:
    if name in ("rate", "increase"):
        arg = _range_arg(args, name, query)
        window = arg.window  # type: ignore[attr-defined]

        def rate(ev: Evaluator) -> Vector:
            out: Vector = {}
            for labels, (times, values) in arg(ev).items():  # type: ignore[union-attr]
                v = extrapolated_rate(times, values, ev.t, window, name == "rate")
                if v is not None:
                    out[labels] = v
            return out
        return rate
    if name in ("avg_over_time", "max_over_time"):
        arg = _range_arg(args, name, query)
        reduce = max if name == "max_over_time" else (lambda v: sum(v) / len(v))
        return lambda ev: {lab: reduce(vals) for lab, (_, vals) in arg(ev).items()}  # type: ignore[union-attr]
    if name == "histogram_quantile":
        if len(args) != 2:
            raise PromQLError(f"PromQL: histogram_quantile(q, buckets) in {query!r}")
        q_node, v_node = args
        return lambda ev: _histogram_quantile(_as_scalar(q_node(ev), name),
                                              _as_vector(v_node(ev), name))
    if name in ("clamp_min", "clamp_max"):
        if len(args) != 2:
            raise PromQLError(f"PromQL: {name}(vector, number) in {query!r}")
        v_node, s_node = args
        pick = max if name == "clamp_min" else min
        return lambda ev: {lab: pick(v, _as_scalar(s_node(ev), name))
                           for lab, v in _as_vector(v_node(ev), name).items()}
    if name == "abs" and len(args) == 1:
        return lambda ev: {lab: abs(v) for lab, v in _as_vector(args[0](ev), name).items()}
    if name == "scalar" and len(args) == 1:
        def scalar(ev: Evaluator) -> float:
            vec = _as_vector(args[0](ev), name)
            return next(iter(vec.values())) if len(vec) == 1 else math.nan
        return scalar
    if name == "vector" and len(args) == 1:
        return lambda ev: {(): _as_scalar(args[0](ev), name)}
    raise PromQLError(f"PromQL: unsupported function {name}() with {len(args)} argument(s) in {query!r}")


def _histogram_quantile(q: float, buckets: Vector) -> Vector:
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, count in buckets.items():
        rest = tuple(kv for kv in labels if kv[0] != "le")
        le = dict(labels).get("le")
        if le is None:
            continue
        groups.setdefault(rest, []).append((math.inf if le == "+Inf" else float(le), count))
    out: Vector = {}
    for labels, pairs in groups.items():
        pairs.sort()
        out[labels] = bucket_quantile(q, pairs)
    return out


def _aggregate(op: str, grouping: tuple[str, tuple[str, ...]] | None, inner: Node) -> Node:
    def run(ev: Evaluator) -> Vector:
        vec = _as_vector(inner(ev), op)
        groups: dict[Labels, list[float]] = {}
        for labels, v in vec.items():
            if grouping is None:
                key: Labels = ()
            elif grouping[0] == "by":
                key = tuple(kv for kv in labels if kv[0] in grouping[1])
            else:
                key = tuple(kv for kv in labels if kv[0] not in grouping[1])
            groups.setdefault(key, []).append(v)
        reduce: Callable[[list[float]], float] = {
            "sum": math.fsum, "max": max, "min": min, "count": lambda v: float(len(v)),
            "avg": lambda v: math.fsum(v) / len(v)}[op]
        return {key: reduce(values) for key, values in groups.items()}
    return run


def _arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def _binary(op: str, left: Node, right: Node) -> Node:
    def run(ev: Evaluator) -> Value:
        a, b = left(ev), right(ev)
        if isinstance(a, dict) and isinstance(b, dict):
            return {lab: _arith(op, v, b[lab]) for lab, v in a.items() if lab in b}
        if isinstance(a, dict):
            return {lab: _arith(op, v, b) for lab, v in a.items()}  # type: ignore[arg-type]
        if isinstance(b, dict):
            return {lab: _arith(op, a, v) for lab, v in b.items()}
        return _arith(op, a, b)
    return run  # type: ignore[return-value]


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
