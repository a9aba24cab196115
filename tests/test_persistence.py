"""The trigger counts load that held for a minute (serving/persistence.py): a one-scrape burst
asks for nothing, a rise asks for its replicas three scrapes after its first, and a lost pod's
replacement is not delayed."""

from __future__ import annotations

import math

import pytest

from serving.autoscaling import RUNNING, WAITING, in_flight_sum, with_lost_pods
from serving.persistence import PERSIST_S, persistent
from serving.simulator.prometheus import Store
from serving.simulator.promql import evaluate
from serving.tiers import Tier
from tests.test_autoscaling import _scaling

STEP_S = 15


def _store(threshold: float) -> Store:
    """Two pods scraped every 15 s from 0 to 330 s. In flight over both: 2.5 thresholds, 10 at the
    150 s scrape only (a burst), 6 from 225 s on (a rise that stays). A third pod serves nothing
    until 180 s; from the 195 s scrape on its scrapes time out (its node lost)."""
    store = Store()
    for t in range(0, 331, STEP_S):
        load = 10.0 if t == 150 else 6.0 if t >= 225 else 2.5
        for pod, share in (("p1", 0.4), ("p2", 0.6)):
            labels = (("model_name", "chat"), ("namespace", "models"), ("pod", pod))
            store.add(float(t), RUNNING, labels, load * threshold * share)
            store.add(float(t), WAITING, labels, 0.0)
        target = (("namespace", "models"), ("pod", "p3"), ("rtip_dev_model", "chat"))
        lost = t >= 195
        store.add(float(t), "up", target, 0.0 if lost else 1.0)
        store.add(float(t), "scrape_duration_seconds", target, 10.0 if lost else 0.05)
    return store


def test_a_burst_of_one_scrape_asks_for_nothing_and_a_rise_waits_three_scrapes() -> None:
    scaling, _, _ = _scaling(Tier.STANDARD, zones=1)
    threshold, floor = scaling.threshold, scaling.min_replicas
    assert floor * threshold < 2.5 * threshold  # above the floor's worth throughout
    store = _store(threshold)
    instant = with_lost_pods(in_flight_sum('{namespace="models",model_name="chat"}'), threshold, scaling.lost,
                             floor)

    def desired(query: str, t: float) -> int:
        (value,) = evaluate(query, store, t).values()  # type: ignore[union-attr]
        return math.ceil(value / threshold - 1e-9)

    # By hand, read at once: 10 replicas at the burst, 3 again 15 s later.
    assert [desired(instant, t) for t in (135, 150, 165)] == [3, 10, 3]
    # Held a minute (the four scrapes in (t - 60, t]), the burst never shows.
    assert [desired(scaling.query, t) for t in (135, 150, 165, 180)] == [3, 3, 3, 3]
    # The lost pod (scrapes timing out from 195 s) adds one replica at once, as read at once.
    assert desired(scaling.query, 195) == desired(instant, 195) == 4
    # The rise to 6 from 225 s: read at once 7 there (6 plus the lost pod); held, the scrapes at
    # 225, 240, 255 and 270 s must all show it, so 7 first at 270 s: 45 s later.
    assert desired(instant, 225) == 7
    assert [desired(scaling.query, t) for t in (225, 240, 255, 270, 285)] == [4, 4, 4, 7, 7]
    assert 270 - 225 == PERSIST_S - STEP_S


def test_a_window_shorter_than_a_step_is_refused() -> None:
    assert persistent("x", 15, 60) == "min_over_time((x)[60s:15s])"
    with pytest.raises(ValueError, match="no whole 15 s step"):
        persistent("x", 15, 10)
