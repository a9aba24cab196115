"""The simulated PromQL's subqueries, `deriv` and `predict_linear` against Prometheus's own engine
(promtool 3.5's `test rules`, tools.lock) over the same series, and the subquery memo against
evaluation without it.

Most comparisons keep every window's edges off the samples (evaluation times off the 15 s grid, a
61 s rate window, so a subquery step less 61 s never lands on a sample), where Prometheus 2 and 3
agree; one compares on the grid, where the simulator polls and where only Prometheus 3's
left-open windows give its answers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from serving.simulator.promql import PromQLError, Store, evaluate
from tests import promtool

STEP_S = 15.0
# Two pods' request counters whose rate climbs, then falls (promtool's expanding notation: `a+bxn`
# is a, a + b, ..., a + n b), and a gauge that steps.
SERIES = {
    'req_total{pod="a"}': "0+2x40 80+5x40 280+1x40",
    'req_total{pod="b"}': "0+1x40 40+3x40 160+3x40",
    'queue{pod="a"}': "1x20 4x20 2x20 7x20 3x40",
}


def expand(notation: str) -> list[float]:
    """promtool's values notation (`a+bxn`, `axn`, plain numbers) as one value per interval."""
    out: list[float] = []
    for part in notation.split():
        m = re.fullmatch(r"(-?[\d.]+)(?:([+-][\d.]+)?x(\d+))?", part)
        assert m is not None, part
        start, step, n = float(m.group(1)), float(m.group(2) or 0), int(m.group(3) or 0)
        out.extend(start + step * i for i in range(n + 1))
    return out


def store(until_s: float = math.inf) -> Store:
    s = Store()
    for series, notation in SERIES.items():
        name, labels = series.split("{")
        key = tuple(sorted(tuple(kv.split("=")) for kv in labels.rstrip("}").replace('"', "").split(",")))
        for i, v in enumerate(expand(notation)):
            if i * STEP_S <= until_s:
                s.add(i * STEP_S, name, key, v)  # type: ignore[arg-type]
    return s


QUERIES = [
    "predict_linear(sum(rate(req_total[61s]))[5m:15s], 700)",
    "deriv(sum(rate(req_total[61s]))[10m:15s])",
    "clamp_min(predict_linear(sum(rate(req_total[61s]))[5m:15s], 700), scalar(sum(rate(req_total[61s]))))",
    "predict_linear(queue[3m], 120)",
    "deriv(queue[5m])",
    "max_over_time(rate(req_total[61s])[4m:1m])",
    "avg_over_time(sum(queue)[2m:30s])",
    # The trigger's persistence (serving/persistence.py): a nested subquery's lowest recent step.
    "min_over_time(clamp_min(predict_linear(sum(rate(req_total[61s]))[5m:15s], 700), "
    "scalar(sum(rate(req_total[61s]))))[1m:15s])",
    "min_over_time(queue[2m])",
]
TIMES = ["7m7s", "12m52s", "17m3s", "22m44s", "31m8s", "38m11s"]


def _seconds(text: str) -> float:
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", text)
    assert m is not None
    return 60.0 * int(m.group(1) or 0) + int(m.group(2) or 0)


def _labels(key: tuple[tuple[str, str], ...]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in key) + "}"


def _agree_with_prometheus(queries: list[str], times: list[str], folder: Path) -> list[tuple[str, str, dict]]:
    """Each query at each time, by the simulator over SERIES, equal to promtool's answer;
    returns (query, time, the simulator's answer)."""
    pairs = [(q, t) for q in queries for t in times]
    want = promtool.evaluate(SERIES, pairs, folder, interval="15s")
    full = store()
    out = []
    for (query, at), expected in zip(pairs, want, strict=True):
        got = evaluate(query, full, _seconds(at))
        assert isinstance(got, dict)
        assert {_labels(k) for k in got} == set(expected), (query, at, got, expected)
        for key, value in got.items():
            assert value == pytest.approx(expected[_labels(key)], rel=1e-9, abs=1e-9), (query, at)
        out.append((query, at, got))
    return out


def test_subqueries_deriv_and_predict_linear_agree_with_prometheus(tmp_path: Path) -> None:
    answers = _agree_with_prometheus(QUERIES, TIMES, tmp_path)
    nonzero = sum(value != 0 for _, _, got in answers for value in got.values())
    assert nonzero > len(answers) // 2  # the series move: a query of zeros would prove little


# On the scrape grid, with windows of whole scrape intervals: every window's left edge is a sample.
GRID_QUERIES = [
    "sum(rate(req_total[1m]))",
    "max_over_time(queue[2m])",
    "avg_over_time(sum(rate(req_total[1m]))[5m:15s])",
    "deriv(queue[3m])",
    "min_over_time((sum(queue) + sum(rate(req_total[1m])))[1m:15s])",
]
GRID_TIMES = ["7m", "10m", "12m45s", "20m", "31m"]


def test_on_the_scrape_grid_windows_leave_out_their_left_edge_as_prometheus_3s_do(tmp_path: Path) -> None:
    """The simulator polls on the scrape grid, where a window's left edge holds a sample: Prometheus
    3 leaves it out (promql/engine.go, a range selects (t - range, t]) and the simulator with it;
    Prometheus 2 (and promtool 2.42, which these tests ran before) counted it. The same queries with
    the edge counted (each window 1 s longer) give other values at some of these times (5 of the
    20 here: a counter rising steadily has one rate either way), so this comparison tells the two
    readings apart: promtool 2.42 fails it."""
    full = store()
    edge_counts = 0
    for query, at, got in _agree_with_prometheus(GRID_QUERIES, GRID_TIMES, tmp_path):
        closed = evaluate(query.replace("[1m]", "[61s]").replace("[2m]", "[121s]").replace("[3m]", "[181s]"),
                          full, _seconds(at))
        assert isinstance(closed, dict)
        edge_counts += any(closed[k] != pytest.approx(v, rel=1e-9, abs=1e-9) for k, v in got.items())
    assert edge_counts > 0


def test_min_and_max_over_time_skip_nan_steps_as_prometheus_does(tmp_path: Path) -> None:
    """g / h is 0 / 0 = NaN at 0, 15 and 60 s: Prometheus's min_over_time and max_over_time skip
    such a step, and give NaN only where every step is (here at 15 s: steps 0 and 15). By hand
    at 75 s: steps 30-75 read 5, 4, NaN, 3; min 3, max 5; at 60 s (below) a NaN comes first. The
    trigger meets this where the in-flight sum is empty at a step (`scalar` of nothing is NaN)."""
    series = {"g": "0 0 5 4 0 3 2", "h": "0 0 1 1 0 1 1"}
    queries = [f"{f}((sum(g) / sum(h))[1m:15s])" for f in ("min_over_time", "max_over_time")]
    pairs = [(q, t) for q in queries for t in ("15s", "30s", "1m15s", "1m30s")]
    want = promtool.evaluate(series, pairs, tmp_path, interval="15s")
    s = Store()
    for name, notation in series.items():
        for i, v in enumerate(expand(notation)):
            s.add(i * STEP_S, name, (), v)
    for (query, at), expected in zip(pairs, want, strict=True):
        (got,) = evaluate(query, s, _seconds(at)).values()  # type: ignore[union-attr]
        (value,) = expected.values()
        assert got == pytest.approx(value, nan_ok=True), (query, at)
    assert math.isnan(evaluate(queries[0], s, 15.0)[()])  # type: ignore[index]
    assert evaluate(queries[0], s, 75.0) == {(): 3.0} and evaluate(queries[1], s, 75.0) == {(): 5.0}
    # At 60 s the steps 15-60 read NaN, 5, 4, NaN: a NaN first (where plain min and max would
    # stop) is skipped too, so min 4 and max 5.
    assert evaluate(queries[0], s, 60.0) == {(): 4.0} and evaluate(queries[1], s, 60.0) == {(): 5.0}


def test_the_memo_of_past_steps_gives_what_a_fresh_store_gives() -> None:
    """Polled every 15 s as the samples arrive (the simulator's order: a scrape, then the poll),
    each answer equals the same query on a store built afresh to that instant (no memo)."""
    query = QUERIES[2]
    growing = Store()
    items = sorted((i * STEP_S, series, v) for series, notation in SERIES.items()
                   for i, v in enumerate(expand(notation)))
    polls = 0
    for n, (t, series, v) in enumerate(items):
        name, labels = series.split("{")
        key = tuple(sorted(tuple(kv.split("=")) for kv in labels.rstrip("}").replace('"', "").split(",")))
        growing.add(t, name, key, v)  # type: ignore[arg-type]
        if n + 1 == len(items) or items[n + 1][0] > t:  # every series scraped at t
            assert evaluate(query, growing, t) == evaluate(query, store(t), t), t
            polls += 1
    assert polls > 100 and growing.memo  # the memo was used, and answers stayed right


def test_a_sample_out_of_time_order_drops_the_memo() -> None:
    s = store(600.0)
    before = evaluate("avg_over_time(sum(queue)[5m:15s])", s, 600.0)
    s.add(450.0, "queue", (("pod", "a"),), 100.0)  # late, into a series already past 450 s
    after = evaluate("avg_over_time(sum(queue)[5m:15s])", s, 600.0)
    times = s.series("queue")[(("pod", "a"),)].times
    assert times == sorted(times) and 450.0 in times  # the late sample stands in time order
    fresh = Store()
    for name in ("queue", "req_total"):
        for labels, series in s.series(name).items():
            for t, v in sorted(zip(series.times, series.values, strict=True)):
                fresh.add(t, name, labels, v)
    assert after == evaluate("avg_over_time(sum(queue)[5m:15s])", fresh, 600.0) != before


def test_a_sample_after_a_gap_still_drops_the_memo_of_the_steps_it_changes() -> None:
    """g = 1 at 0 s only; at 120 s the 2-minute average memoises its steps 15-105 s, each reading
    g = 1 through the lookback. A scrape at 60 s then arrives (after every sample so far, but
    before memoised steps): steps 60-120 read 100. By hand, steps 15, 30, 45 read 1 and 60, 75,
    90, 105, 120 read 100: (3 + 500) / 8 = 62.875."""
    s = Store()
    s.add(0.0, "g", (), 1.0)
    assert evaluate("avg_over_time(sum(g)[2m:15s])", s, 120.0) == {(): 1.0}
    s.add(60.0, "g", (), 100.0)
    assert evaluate("avg_over_time(sum(g)[2m:15s])", s, 120.0) == {(): 62.875}


def test_the_first_step_is_strictly_after_the_range_start_as_in_prometheus_3() -> None:
    """On the grid, where the simulator polls: g = 100 at 0 s and 1 at 15-60 s. At 60 s a
    `[1m:15s]` subquery takes steps 15, 30, 45, 60 (engine.go: the first multiple of the step
    after t - range, `<=`), averaging 1; Prometheus 2's `<` would take the step at 0 too:
    (100 + 4) / 5 = 20.8."""
    s = Store()
    for t, v in ((0.0, 100.0), (15.0, 1.0), (30.0, 1.0), (45.0, 1.0), (60.0, 1.0)):
        s.add(t, "g", (), v)
    assert evaluate("avg_over_time(sum(g)[1m:15s])", s, 60.0) == {(): 1.0}


def test_a_subquery_separator_may_have_spaces_and_names_keep_their_colons() -> None:
    s = store()
    want = evaluate("max_over_time(sum(queue)[5m:15s])", s, 900.0)
    assert evaluate("max_over_time(sum(queue)[5m: 15s])", s, 900.0) == want
    assert evaluate("max_over_time(sum(queue)[5m : 15s])", s, 900.0) == want
    s.add(900.0, "slo:sli_error:ratio_rate5m", (), 0.25)
    assert evaluate("slo:sli_error:ratio_rate5m", s, 900.0) == {(): 0.25}


@pytest.mark.parametrize("query", ["sum(queue)[5m]", "queue[5m:]", "queue[5m:15s", "rate(queue[1m])[5m:x]",
                                   "max_over_time(queue[5m][10m:1m])",
                                   "max_over_time(queue[1m:15s][10m:1m])"])
def test_malformed_subqueries_are_refused(query: str) -> None:
    with pytest.raises(PromQLError):
        evaluate(query, Store(), 300.0)  # refused as written, not only when data flows


def test_clamping_follows_gos_max_and_min_at_nan_and_infinity() -> None:
    """Go's math.Max(+Inf, NaN) is +Inf and math.Min(-Inf, NaN) is -Inf; otherwise NaN wins."""
    s = Store()
    s.add(0.0, "up_inf", (), math.inf)
    s.add(0.0, "down_inf", (), -math.inf)
    assert evaluate("clamp_min(up_inf, scalar(absent_metric))", s, 1.0) == {(): math.inf}
    assert evaluate("clamp_max(down_inf, scalar(absent_metric))", s, 1.0) == {(): -math.inf}
    (value,) = evaluate("clamp_max(up_inf, scalar(absent_metric))", s, 1.0).values()  # type: ignore[union-attr]
    assert math.isnan(value)


def test_clamping_to_a_missing_scalar_gives_nan_as_prometheus_does() -> None:
    """scalar() of an empty vector is NaN, and Prometheus clamps with Go's math.Max/Min, which
    return NaN when either argument is NaN (Python's max(3.0, nan) would keep 3.0): the trigger's
    `clamp_min(..., scalar(in flight))` with no in-flight series answers NaN, a failed poll."""
    s = store(300.0)
    for fn in ("clamp_min", "clamp_max"):
        (value,) = evaluate(f"{fn}(sum(queue), scalar(sum(absent_metric)))", s, 300.0).values()  # type: ignore[union-attr]
        assert math.isnan(value)


def test_ceil_and_floor_round_each_sample_and_pass_nan_and_infinity_through(tmp_path: Path) -> None:
    """Prometheus's ceil() and floor() are Go's math.Ceil/Floor on each sample: NaN and the
    infinities are their own result (Python's math.ceil raises on both). promtool reads the
    finite cases the same."""
    s = Store()
    for name, value in (("a", 2.0000001), ("b", -2.5), ("c", 3.0), ("inf", math.inf),
                        ("ninf", -math.inf)):
        s.add(0.0, name, (), value)
    assert evaluate("ceil(a)", s, 1.0) == {(): 3.0} and evaluate("floor(a)", s, 1.0) == {(): 2.0}
    assert evaluate("ceil(b)", s, 1.0) == {(): -2.0} and evaluate("floor(b)", s, 1.0) == {(): -3.0}
    assert evaluate("ceil(c)", s, 1.0) == {(): 3.0}
    assert evaluate("ceil(inf)", s, 1.0) == {(): math.inf}
    assert evaluate("floor(ninf)", s, 1.0) == {(): -math.inf}
    (nan,) = evaluate("ceil(clamp_max(a, scalar(absent_metric)))", s, 1.0).values()  # type: ignore[union-attr]
    assert math.isnan(nan)
    # The same numbers from Prometheus's engine.
    cases = [("ceil(a)", 3), ("floor(b)", -3), ("ceil(b)", -2)]
    tests = [{"interval": "1m", "input_series": [{"series": "a", "values": "2.0000001"},
                                                 {"series": "b", "values": "-2.5"}],
              "promql_expr_test": [{"expr": expr, "eval_time": "0m",
                                    "exp_samples": [{"labels": "{}", "value": value}]}
                                   for expr, value in cases]}]
    done = promtool.run_rule_tests([], tests, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
