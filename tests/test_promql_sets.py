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
# Pods in namespace m, scraped every 15 s from 0 s, their targets labelled with their model as
# the PodMonitor's podTargetLabels have it. Model x: a serves throughout; b served to 90 s, then
# its scrapes time out (its series end; `up` 0 after the 10 s timeout), and it is deleted at 195 s
# (kube-state-metrics' deletion timestamp, away from 270 s to 390 s while the exporter restarts;
# its target stays: its node is lost); c never served
# (loading its model: refused at once); d was scaled in after 30 s (its target gone: every series
# ends); f served to 90 s, then refused its scrapes at once (stopping on SIGTERM, deleted at 105
# s) until its target went after 135 s; g was loading its model (refused) and is lost at 60 s; h
# is lost after 90 s and never deleted (its zone partially disrupted: evictions stop). Pod e
# serves model y and is lost after 150 s.
SERIES = {
    'up{namespace="m",pod="a",rtip_dev_model="x"}': "1x30",
    'up{namespace="m",pod="b",rtip_dev_model="x"}': "1x6 0x24",
    'up{namespace="m",pod="c",rtip_dev_model="x"}': "0x30",
    'up{namespace="m",pod="d",rtip_dev_model="x"}': "1x2 stale",
    'up{namespace="m",pod="e",rtip_dev_model="y"}': "1x10 0x20",
    'up{namespace="m",pod="f",rtip_dev_model="x"}': "1x6 0x3 stale",
    'up{namespace="m",pod="g",rtip_dev_model="x"}': "0x30",
    'up{namespace="m",pod="h",rtip_dev_model="x"}': "1x6 0x24",
    'scrape_duration_seconds{namespace="m",pod="a",rtip_dev_model="x"}': "0.05x30",
    'scrape_duration_seconds{namespace="m",pod="b",rtip_dev_model="x"}': "0.05x6 10x24",
    'scrape_duration_seconds{namespace="m",pod="c",rtip_dev_model="x"}': "0.001x30",
    'scrape_duration_seconds{namespace="m",pod="d",rtip_dev_model="x"}': "0.05x2 stale",
    'scrape_duration_seconds{namespace="m",pod="e",rtip_dev_model="y"}': "0.05x10 10x20",
    'scrape_duration_seconds{namespace="m",pod="f",rtip_dev_model="x"}': "0.05x6 0.002x3 stale",
    'scrape_duration_seconds{namespace="m",pod="g",rtip_dev_model="x"}': "0.001x3 10x26",
    'scrape_duration_seconds{namespace="m",pod="h",rtip_dev_model="x"}': "0.05x6 10x24",
    'kube_pod_deletion_timestamp{namespace="m",pod="b",uid="ub"}': "_x13 195x4 stale _x7 195x4",
    'kube_pod_deletion_timestamp{namespace="m",pod="f",uid="uf"}': "_x7 105x2 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="a"}': "3x30",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="b"}': "4x6 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="d"}': "5x2 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="f"}': "2x6 stale",
    'vllm:num_requests_running{model_name="x",namespace="m",pod="h"}': "1x6 stale",
    'vllm:num_requests_running{model_name="y",namespace="m",pod="e"}': "1x10 stale",
}
LOST = lost_pods("x", "m")
QUERIES = [
    LOST,
    "up == 0",
    "0 < up",
    'up{pod="a"} > 0.5 or up',
    "(up == 0) unless on(namespace, pod) vllm:num_requests_running",
    "(up == 0) unless on(namespace, pod) kube_pod_deletion_timestamp",
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
# Before b is lost, while it counts, its deletion at 195 s and on either side, and late; off and
# on the scrape grid.
TIMES = ["1m", "2m", "3m14s", "3m15s", "3m16s", "4m", "6m"]


def _store(series_notation: dict[str, str] | None = None, step_s: float = STEP_S) -> Store:
    """A simulated Prometheus holding `series_notation` (promtool's expanding notation, one
    sample a `step_s` from 0 s); SERIES by default."""
    s = Store()
    for series, notation in (series_notation or SERIES).items():
        name, labels = series.split("{")
        key = tuple(sorted(tuple(kv.split("=")) for kv in labels.rstrip("}").replace('"', "").split(",")))
        i = 0
        for part in notation.split():
            if part.startswith("_"):  # promtool's missing samples: `_xn` is n of them
                i += int(part.partition("x")[2] or 1)
                continue
            if part == "stale":  # promtool's staleness marker, at the next step
                s.series(name)[key].stale_at = i * step_s  # type: ignore[index]
                i += 1
                continue
            value, _, count = part.partition("x")
            for _ in range(int(count or 0) + 1):
                s.add(i * step_s, name, key, float(value))  # type: ignore[arg-type]
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
    # By hand, the lost-pod term: g from its first timed-out scrape (60 s), though it never
    # served; b and h from theirs (105 s); b no more once its deletion shows (195 s), also while
    # the exporter is away (6 min: an instant read of the deletion would count b again); h to the end;
    # never the loading c, the scaled-in d, the refusing f, nor y's e.
    counts = [evaluate(LOST, store, _seconds(t)) for t in TIMES]
    assert counts == [{(): 1.0}, {(): 3.0}, {(): 3.0}, {(): 2.0}, {(): 2.0}, {(): 2.0}, {(): 2.0}]


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
