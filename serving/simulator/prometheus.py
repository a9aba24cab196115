"""The simulated Prometheus's storage and the arithmetic of its two subtle functions.

- `Store`: samples by metric name and label set; a target that disappears gets a staleness marker,
  after which its series has no instant value (Prometheus's staleness handling).
- `extrapolated_rate`: Prometheus's `extrapolatedRate` (promql/functions.go) behind `rate` and
  `increase`: counter resets add the pre-reset value; the increase over the samples in the window is
  extrapolated to the window's edges when the gap to an edge is under 1.1 average sample intervals
  (else by half an interval), and a counter is not extrapolated below zero at the start.
- `bucket_quantile`: Prometheus's `bucketQuantile` (promql/quantile.go): linear interpolation inside
  the bucket holding rank q x count; the upper bound of the last finite bucket if the rank falls in
  +Inf; NaN with fewer than two buckets, no +Inf bucket or no observations.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from serving.kube_names import NAME_ALPHABET, POD_CREATED, POD_READY, ZONE_KEY, predictor_name

Labels = tuple[tuple[str, str], ...]
LOOKBACK_S = 300.0
UP = "up"  # what Prometheus writes for each scrape of a target: 1 answered, 0 failed
SCRAPE_DURATION = "scrape_duration_seconds"  # and how long the scrape took (to its timeout at most)
TARGET_SERIES = (UP, SCRAPE_DURATION)  # the series Prometheus writes itself for a failed scrape
_SIM_TEMPLATE_HASH = "5d8f9c4b7"  # the one pod template the simulator runs


def pod_name(model: str, rid: int) -> str:
    """The name of the simulator's replica `rid` of `model`, shaped as a ReplicaSet names its
    pods: `<deployment>-<template hash>-<5 characters>`, the suffix the replica's number written
    in NAME_ALPHABET (unique for up to 27^5 replicas)."""
    digits, n = [], rid
    for _ in range(5):
        n, d = divmod(n, len(NAME_ALPHABET))
        digits.append(NAME_ALPHABET[d])
    return f"{predictor_name(model)}-{_SIM_TEMPLATE_HASH}-{''.join(reversed(digits))}"


_INVALID_LABEL_CHAR = re.compile(r"[^a-zA-Z0-9_]")


def monitor_target_labels(spec: Mapping[str, Any]) -> dict[str, str]:
    """The target labels a PodMonitor `spec` writes on every target (its `podTargetLabels`), each
    valued as its selector requires of the pods it scrapes (a label it leaves free has no one
    value, so it is left out)."""
    required = (spec.get("selector") or {}).get("matchLabels") or {}
    return {pod_target_label(str(k)): str(required[k]) for k in spec.get("podTargetLabels") or []
            if k in required}


# Prometheus's pod discovery, with the node's metadata attached (`attach_metadata: node`, a
# PodMonitor's `attachMetadata.node`), gives each target every label of its pod's node as
# `__meta_kubernetes_node_label_<name>`, the name sanitised as a label name (discovery/kubernetes
# pod.go `attachNodeMetadata`: strutil.SanitizeLabelName, every character outside [a-zA-Z0-9_]
# made '_'). Meta labels are dropped after relabelling: only a relabelling keeps one.
NODE_LABEL_META = "__meta_kubernetes_node_label_"
NODE_ZONE_META = NODE_LABEL_META + _INVALID_LABEL_CHAR.sub("_", ZONE_KEY)


def monitor_zone_label(spec: Mapping[str, Any]) -> str | None:
    """The target label a PodMonitor `spec` writes its pod's node's zone into on every target, if
    it does: the node's metadata attached (`attachMetadata.node` true) and, on every endpoint, a
    relabelling that copies NODE_ZONE_META whole into one target label (action `replace` with the
    default regex and replacement). A later relabelling of the same label is not looked for."""
    if (spec.get("attachMetadata") or {}).get("node") is not True:
        return None
    per_endpoint = [{str(r["targetLabel"]) for r in endpoint.get("relabelings") or []
                     if r.get("sourceLabels") == [NODE_ZONE_META] and r.get("targetLabel")
                     and str(r.get("action", "replace")).lower() == "replace"
                     and r.get("regex", "(.*)") == "(.*)" and r.get("replacement", "$1") in ("$1", "${1}")}
                    for endpoint in spec.get("podMetricsEndpoints") or []]
    written = set.intersection(*per_endpoint) if per_endpoint else set()
    return min(written) if written else None


def pod_samples(store: Store, now: float, namespace: str, pod: str, created_s: float,
                ready: bool | None) -> None:
    """kube-state-metrics' samples of a pod: its creation time and, once a kubelet has set its
    Ready condition (`ready` not None), that condition's "true" series."""
    labels = (("namespace", namespace), ("pod", pod))
    store.add(now, POD_CREATED, labels, created_s)
    if ready is not None:
        store.add(now, POD_READY, (*labels, ("condition", "true")), 1.0 if ready else 0.0)


def pod_target_label(pod_label: str) -> str:
    """The target label a PodMonitor's `podTargetLabels` entry writes: the pod label's name with
    every character outside [a-zA-Z0-9_] made '_' (prometheus-operator pkg/prometheus/promcfg.go,
    `sanitizeLabelName`), valued the pod's label."""
    return _INVALID_LABEL_CHAR.sub("_", pod_label)


@dataclass(slots=True)
class Series:
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    stale_at: float = math.inf


class Store:
    """Samples by metric name, then by label set."""

    def __init__(self, lookback_s: float = LOOKBACK_S) -> None:
        self.lookback_s = lookback_s
        self._by_name: dict[str, dict[Labels, Series]] = {}
        # Subqueries' values at past steps (promql_eval._subquery). A step's value reads only
        # samples and staleness at or before it, so it stays right until something arrives at or
        # before the latest memoised step, and the memo is dropped when it does: in the simulator
        # a lost pod's failed scrape, written at its timeout with its start's stamp, after a poll.
        self.memo: dict[object, dict[float, object]] = {}
        self.memo_upto = -math.inf

    def _arrived(self, t: float) -> None:
        if t <= self.memo_upto:
            self.memo.clear()
            self.memo_upto = -math.inf

    def add(self, t: float, name: str, labels: Labels, value: float) -> None:
        self._arrived(t)
        series = self._by_name.setdefault(name, {}).get(labels)
        if series is None:
            series = self._by_name[name][labels] = Series()
        if series.times and t < series.times[-1]:  # late: keep the series in time order
            i = bisect_right(series.times, t)
            series.times.insert(i, t)
            series.values.insert(i, value)
            return
        series.times.append(t)
        series.values.append(value)

    def mark_stale(self, t: float, label: str, value: str, keep: tuple[str, ...] = ()) -> None:
        """Every series with `label`=`value` ends at `t`, but those of the metrics `keep`
        (Prometheus writes a staleness marker when a scrape target disappears or fails its scrape;
        a failed scrape still writes the target's own series: `up` 0, its duration)."""
        self._arrived(t)
        for name, by_labels in self._by_name.items():
            if name in keep:
                continue
            for labels, series in by_labels.items():
                if (label, value) in labels and series.stale_at > t:
                    series.stale_at = t

    def series(self, name: str) -> dict[Labels, Series]:
        return self._by_name.get(name, {})


def extrapolated_rate(times: list[float], values: list[float], t: float, window: float,
                       is_rate: bool) -> float | None:
    if len(values) < 2:
        return None
    delta = values[-1] - values[0]
    for prev, cur in pairwise(values):
        if cur < prev:
            delta += prev  # counter reset
    to_start = times[0] - (t - window)
    to_end = t - times[-1]
    sampled = times[-1] - times[0]
    average = sampled / (len(values) - 1)
    if delta > 0 and values[0] >= 0:
        to_zero = sampled * values[0] / delta
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    result = delta * interval / sampled
    return result / window if is_rate else result


def bucket_quantile(q: float, pairs: list[tuple[float, float]]) -> float:
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(pairs) < 2 or pairs[-1][0] != math.inf:
        return math.nan
    counts = [c for _, c in pairs]
    for i in range(1, len(counts)):  # rate() can break monotonicity slightly; Prometheus fixes it up
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total == 0:
        return math.nan
    rank = q * total
    b = bisect_left(counts, rank)
    if b == len(pairs) - 1:
        return pairs[-2][0]
    if b == 0 and pairs[0][0] <= 0:
        return pairs[0][0]
    start = 0.0 if b == 0 else pairs[b - 1][0]
    count = counts[b] - (counts[b - 1] if b > 0 else 0.0)
    rank -= counts[b - 1] if b > 0 else 0.0
    return start + (pairs[b][0] - start) * (rank / count if count else 1.0)


__all__ = ["LOOKBACK_S", "SCRAPE_DURATION", "TARGET_SERIES", "UP", "Labels", "Series", "Store",
           "bucket_quantile", "extrapolated_rate", "monitor_target_labels", "pod_name", "pod_samples",
           "pod_target_label"]
