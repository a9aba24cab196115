"""The simulated PromQL's evaluation: the nodes `promql` parses a query into.

Each node is a callable on an `Evaluator` (a store and an instant) returning a number, an instant
vector or a range vector. Semantics follow Prometheus (promql/engine.go, functions.go); see
`serving.simulator.promql` for the list.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from serving.simulator.prometheus import Labels, Series, Store, bucket_quantile, extrapolated_rate

Vector = dict[Labels, float]
RangeVector = dict[Labels, tuple[list[float], list[float]]]
Value = float | Vector


class PromQLError(ValueError):
    """A query that does not parse or cannot be evaluated."""


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


def _extreme(lower: bool) -> Callable[[list[float]], float]:
    """Prometheus's min_over_time / max_over_time (promql/functions.go): a step that is NaN
    (0 / 0, or `scalar` of nothing) is skipped, so NaN only where every value is."""
    def pick(values: list[float]) -> float:
        out = values[0]
        for v in values:
            if math.isnan(out) or (v < out if lower else v > out):
                out = v
        return out
    return pick


_OVER_TIME: dict[str, Callable[[list[float]], float]] = {
    "avg_over_time": lambda v: sum(v) / len(v), "max_over_time": _extreme(False),
    "min_over_time": _extreme(True)}


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
    if name == "present_over_time":
        # 1 for every series with a sample in the range: one whose target failed its last scrapes
        # still has the samples from before its staleness marker (range selectors skip only the
        # marker).
        arg = _range_arg(args, name, query)
        return lambda ev: dict.fromkeys(arg(ev), 1.0)  # type: ignore[arg-type]
    if name in _OVER_TIME:
        arg = _range_arg(args, name, query)
        reduce = _OVER_TIME[name]
        return lambda ev: {lab: reduce(vals) for lab, (_, vals) in arg(ev).items()}  # type: ignore[union-attr]
    if name == "deriv":
        arg = _range_arg(args, name, query)
        return lambda ev: {lab: slope for lab, (times, values) in arg(ev).items()  # type: ignore[union-attr]
                           if (slope := linear_regression(times, values, times[0])[0]) is not None}
    if name == "predict_linear":
        if len(args) != 2 or not hasattr(args[0], "window"):
            raise PromQLError(f"PromQL: predict_linear(range vector, seconds) in {query!r}")
        r_node, s_node = args

        def predict(ev: Evaluator) -> Vector:
            ahead = _as_scalar(s_node(ev), name)
            out: Vector = {}
            for lab, (times, values) in r_node(ev).items():  # type: ignore[union-attr]
                slope, at_t = linear_regression(times, values, ev.t)
                if slope is not None:
                    out[lab] = slope * ahead + at_t
            return out
        return predict
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
        bound = max if name == "clamp_min" else min

        def pick(v: float, s: float) -> float:
            # Go's math.Max/Min (Prometheus's clamp): the infinity that wins beats NaN, else NaN.
            win = math.inf if bound is max else -math.inf
            if v == win or s == win:
                return win
            return math.nan if math.isnan(v) or math.isnan(s) else bound(v, s)
        return lambda ev: {lab: pick(v, _as_scalar(s_node(ev), name))
                           for lab, v in _as_vector(v_node(ev), name).items()}
    if name in _ELEMENTWISE and len(args) == 1:
        fn = _ELEMENTWISE[name]
        return lambda ev: {lab: fn(v) for lab, v in _as_vector(args[0](ev), name).items()}
    if name == "scalar" and len(args) == 1:
        def scalar(ev: Evaluator) -> float:
            vec = _as_vector(args[0](ev), name)
            return next(iter(vec.values())) if len(vec) == 1 else math.nan
        return scalar
    if name == "time" and not args:  # the evaluation time, in seconds (Unix time in Prometheus)
        return lambda ev: ev.t
    if name == "vector" and len(args) == 1:
        return lambda ev: {(): _as_scalar(args[0](ev), name)}
    raise PromQLError(f"PromQL: unsupported function {name}() with {len(args)} argument(s) in {query!r}")


def linear_regression(times: list[float], values: list[float],
                      intercept_at: float) -> tuple[float | None, float]:
    """Least-squares slope (per second) and the line's value at `intercept_at`, as Prometheus's
    `linearRegression` (promql/functions.go): None with fewer than two samples; a constant series
    has slope 0 (exactly, not a rounding error's worth)."""
    n = len(values)
    if n < 2:
        return None, math.nan
    if all(v == values[0] for v in values):
        return (0.0, values[0]) if not math.isinf(values[0]) else (math.nan, math.nan)
    xs = [t - intercept_at for t in times]
    sum_x, sum_y = math.fsum(xs), math.fsum(values)
    cov = math.fsum(x * y for x, y in zip(xs, values, strict=True)) - sum_x * sum_y / n
    var = math.fsum(x * x for x in xs) - sum_x * sum_x / n
    slope = cov / var
    return slope, sum_y / n - slope * sum_x / n


def _subquery(inner: Node, window: float, step: float, key: object = None) -> Node:
    """`inner[window:step]`: `inner` evaluated at every multiple of `step` after t - window up to t
    (Prometheus 3's engine.go: the first aligned timestamp strictly after the start, so the range
    is left-open like a range selector's). The values at past steps are memoised on the store:
    the same autoscaling query is polled every 15 s and shares all but one of its steps with the
    last poll (the store drops the memo when a sample or a staleness mark arrives at or before
    the latest memoised step). `key` names the memo: the subquery's text, so one written twice
    (the zone branch's load) is evaluated once a step; None, a memo of its own."""
    key = object() if key is None else key

    def run(ev: Evaluator) -> RangeVector:
        first = math.floor((ev.t - window) / step)
        if first * step <= ev.t - window:
            first += 1
        out: RangeVector = {}
        memo = ev.store.memo.setdefault(key, {})
        for k in range(first, math.floor(ev.t / step) + 1):
            ts = k * step  # whole multiples, so a step is the same float at every poll
            got = memo.get(ts) if ts < ev.t else None
            if got is None:
                value = inner(Evaluator(ev.store, ts))
                if not isinstance(value, dict):
                    value = {(): value}
                elif value and isinstance(next(iter(value.values())), tuple):
                    raise PromQLError("PromQL: a subquery takes an instant expression, not a range vector")
                got = value
                if ts < ev.t:
                    memo[ts] = got
                    ev.store.memo_upto = max(ev.store.memo_upto, ts)
            for lab, v in got.items():  # type: ignore[union-attr]
                times, values = out.setdefault(lab, ([], []))
                times.append(ts)
                values.append(v)
        return out

    run.window = window  # type: ignore[attr-defined]
    return run


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


def _elementwise(left: Node, right: Node, each: Callable[[float, float, float], float | None],
                 numbers: Callable[[float, float], float]) -> Node:
    """`each(a, b, v)` for every pair of operands (a vector's series with a number on either
    side, or two vectors' series matched one-to-one on identical labels), `v` being the vector's
    value (the left one's between two vectors); a series whose result is None is dropped.
    `numbers` takes two numbers."""
    def run(ev: Evaluator) -> Value:
        a, b = left(ev), right(ev)
        if isinstance(a, dict) and isinstance(b, dict):
            pairs = [(lab, v, b[lab], v) for lab, v in a.items() if lab in b]
        elif isinstance(a, dict):
            pairs = [(lab, v, b, v) for lab, v in a.items()]  # type: ignore[misc]
        elif isinstance(b, dict):
            pairs = [(lab, a, v, v) for lab, v in b.items()]
        else:
            return numbers(a, b)  # type: ignore[arg-type]
        out: Vector = {}
        for lab, x, y, v in pairs:
            if (got := each(x, y, v)) is not None:
                out[lab] = got
        return out
    return run  # type: ignore[return-value]


def _binary(op: str, left: Node, right: Node) -> Node:
    return _elementwise(left, right, lambda a, b, _: _arith(op, a, b), lambda a, b: _arith(op, a, b))


COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")


def _go_round(fn: Callable[[float], int]) -> Callable[[float], float]:
    """Go's math.Ceil/Floor, which Prometheus's ceil() and floor() call: NaN and the infinities
    are their own result (Python's raise)."""
    return lambda v: v if not math.isfinite(v) else float(fn(v))


# Functions of one instant vector, applied to each sample.
_ELEMENTWISE: dict[str, Callable[[float], float]] = {
    "abs": abs, "ceil": _go_round(math.ceil), "floor": _go_round(math.floor)}


def _compares(op: str, a: float, b: float) -> bool:
    return {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op]


def _filter(op: str, left: Node, right: Node, query: str) -> Node:
    """A comparison without `bool`: the vector's series whose value compares true, each keeping
    its value (the vector's, on either side of a number; the left one's between two vectors
    matched one-to-one). Between two numbers Prometheus refuses it without `bool`."""
    def numbers(a: float, b: float) -> float:
        raise PromQLError(f"PromQL: a comparison between two numbers needs `bool` in {query!r}")
    return _elementwise(left, right, lambda a, b, v: v if _compares(op, a, b) else None, numbers)


def _set_op(op: str, matching: tuple[str, tuple[str, ...]] | None, left: Node, right: Node) -> Node:
    """`and`, `or`, `unless` between instant vectors, matching series on all their labels or on
    those `on (...)` names (or all but those `ignoring (...)` names): `and` keeps the left series
    with a match on the right, `unless` those without, `or` every left series and the right ones
    with no match on the left. The values are each side's own."""
    def key(labels: Labels) -> Labels:
        if matching is None:
            return tuple(sorted(labels))
        keep, names = matching
        return tuple(sorted(kv for kv in labels if (kv[0] in names) == (keep == "on")))

    def run(ev: Evaluator) -> Vector:
        a, b = _as_vector(left(ev), op), _as_vector(right(ev), op)
        if op == "or":
            seen = {key(lab) for lab in a}
            return {**a, **{lab: v for lab, v in b.items() if key(lab) not in seen}}
        other = {key(lab) for lab in b}
        return {lab: v for lab, v in a.items() if (key(lab) in other) == (op == "and")}
    return run
