"""The simulated PromQL's comparisons, `and` / `or` / `unless` with `on` and `ignoring`, and
`present_over_time`, against Prometheus's own engine (promtool 3.5's `test rules`, tools.lock)
over series with staleness markers: the autoscaling query's lost-pod term
(`serving.autoscaling.lost_pods`) rests on all of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from serving.autoscaling import lost_pods
from serving.simulator.promql import PromQLError, Store, evaluate
from tests import promtool
from tests.test_promql_subquery import _labels, _seconds

STEP_S = 15.0
# Pods of model x in namespace m, scraped every 15 s from 0 s: a serves throughout; b served to
# 90 s, then its scrapes time out (its series end; `up` 0 after the 10 s timeout); c never served
# (loading its model: refused at once); d was scaled in after 30 s (its target gone: every series
# ends); f served to 90 s, then refused its scrapes at once (stopping on SIGTERM) until its target
# went after 135 s. Pod e serves model y and is lost after 150 s.
SERIES = {
    'up{namespace="m",pod="a"}': "1x30",
    'up{namespace="m",pod="b"}': "1x6 0x24",
    'up{namespace="m",pod="c"}': "0x30",
    'up{namespace="m",pod="d"}': "1x2 stale",
    'up{namespace="m",pod="e"}': "1x10 0x20",
    'up{namespace="m",pod="f"}': "1x6 0x3 stale",
    'scrape_duration_seconds{namespace="m",pod="a"}': "0.05x30",
    'scrape_duration_seconds{namespace="m",pod="b"}': "0.05x6 10x24",
    'scrape_duration_seconds{namespace="m",pod="c"}': "0.001x30",
    'scrape_duration_seconds{namespace="m",pod="d"}': "0.05x2 stale",
    'scrape_duration_seconds{namespace="m",pod="e"}': "0.05x10 10x20",
    'scrape_duration_seconds{namespace="m",pod="f"}': "0.05x6 0.002x3 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="a"}': "3x30",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="b"}': "4x6 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="d"}': "5x2 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="f"}': "2x6 stale",
    'vllm:num_requests_running{model_name="y",namespace="m",pod="e"}': "1x10 stale",
}
LOST = lost_pods('{namespace="m",model_name="x"}', "m", 105.0)
QUERIES = [
    LOST,
    "up == 0",
    "0 < up",
    'up{pod="a"} > 0.5 or up',
    "(up == 0) unless on(namespace, pod) vllm:num_requests_running",
    'up and ignoring(pod) up{pod="a"}',
    "vllm:num_requests_running >= 4",
    "present_over_time(vllm:num_requests_running[1m])",
    "count(up == 7) or vector(0)",
    # Precedence and matching: `and` binds tighter than `or`, `+` than `>`; a comparison of two
    # vectors matches series one to one.
    'up{pod="a"} or up{pod="b"} and up{pod="c"}',
    "up + 1 > 1",
    "scrape_duration_seconds > up",
]
# Before b is lost, while it counts, its last good sample (90 s) 105 s old at 195 s (a range
# leaves its left edge out) and on either side, and late; off and on the scrape grid.
TIMES = ["1m", "2m", "3m14s", "3m15s", "3m16s", "4m", "6m"]


def _store() -> Store:
    s = Store()
    for series, notation in SERIES.items():
        name, labels = series.split("{")
        key = tuple(sorted(tuple(kv.split("=")) for kv in labels.rstrip("}").replace('"', "").split(",")))
        i = 0
        for part in notation.split():
            if part == "stale":  # promtool's staleness marker, at the next step
                s.series(name)[key].stale_at = i * STEP_S  # type: ignore[index]
                i += 1
                continue
            value, _, count = part.partition("x")
            for _ in range(int(count or 0) + 1):
                s.add(i * STEP_S, name, key, float(value))  # type: ignore[arg-type]
                i += 1
    return s


def _unnamed(labels: str) -> str:
    """A label set without its metric name: Prometheus keeps it through comparisons and set
    operators, the simulator's vectors never carry it (both match on the other labels)."""
    return re.sub(r'__name__="[^"]*", ', "", labels)


def test_set_operators_comparisons_and_presence_agree_with_prometheus(tmp_path: Path) -> None:
    pairs = [(q, t) for q in QUERIES for t in TIMES]
    want = promtool.evaluate(SERIES, pairs, tmp_path, interval="15s")
    assert sum(bool(w) for w in want) > len(pairs) * 3 // 4  # mostly answers, not empty vectors
    store = _store()
    for (query, at), named in zip(pairs, want, strict=True):
        expected = {_unnamed(k): v for k, v in named.items()}
        got = evaluate(query, store, _seconds(at))
        assert isinstance(got, dict)
        assert {_labels(k) for k in got} == set(expected), (query, at, got, expected)
        for key, value in got.items():
            assert value == pytest.approx(expected[_labels(key)]), (query, at)
    # By hand, the lost-pod term: b alone from its first timed-out scrape while its last good
    # sample is within 105 s (not at 195 s); neither the loading c, the scaled-in d, the refusing
    # f, nor y's e.
    counts = [evaluate(LOST, store, _seconds(t)) for t in TIMES]
    assert counts == [{(): 0.0}, {(): 1.0}, {(): 1.0}, {(): 0.0}, {(): 0.0}, {(): 0.0}, {(): 0.0}]


def test_a_comparison_of_two_numbers_needs_bool_as_in_prometheus() -> None:
    with pytest.raises(PromQLError, match="bool"):
        evaluate("1 < 2", Store(), 0.0)
    with pytest.raises(PromQLError, match="`bool` after '>'"):
        evaluate("up > bool 0", Store(), 0.0)
    with pytest.raises(PromQLError, match="`on` after '>'"):
        evaluate("up > on(pod) up", Store(), 0.0)
    with pytest.raises(PromQLError, match="`ignoring` after '\\+'"):
        evaluate("up + ignoring(pod) up", Store(), 0.0)
    with pytest.raises(PromQLError, match="group_left"):
        evaluate("up and on(pod) group_left up", Store(), 0.0)
