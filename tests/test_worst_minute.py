"""`stacks/slo_check.worst_minute`: the clock minute furthest over the tier, by hand."""
from __future__ import annotations

import pytest


def test_the_worst_minute_is_the_one_furthest_over_the_tier() -> None:
    """Three clock minutes of 100 requests each, by hand: the first within the tier; the second
    with two requests at 50 ms TPOT, so its p99 (numpy's, 99 % of the way along 100 sorted values:
    between the 99th and the 100th, both 50 ms) is 50 ms, 1.67 x a 30 ms target; the third with
    two at 0.8 s TTFT, 1.6 x a 0.5 s target. One such request would not do: the p99 would sit 1 %
    of the way from 0.1 s to it, 0.107 s."""
    from types import SimpleNamespace

    import numpy as np

    from stacks.slo_check import latency_series, worst_minute

    arrival = np.concatenate([np.linspace(m * 60, m * 60 + 59, 100) for m in range(3)])
    ttft = np.full(300, 0.1)
    tpot = np.full(300, 0.01)
    tpot[[150, 160]] = 0.05
    ttft[[250, 260]] = 0.8
    result = SimpleNamespace(arrival_s=arrival, ok=np.ones(300, bool), ttft_s=ttft, tpot_s=tpot)
    series = latency_series(result)  # type: ignore[arg-type]
    assert worst_minute(series, 0.5, 0.03) == {"t_s": 60.0, "ttft_p99_s": 0.1, "tpot_p99_s": 0.05,
                                               "minutes_over": 2, "minutes": 3}
    assert worst_minute(series, 0.5, 0.06)["t_s"] == 120.0  # with a looser TPOT target, TTFT's minute
    ttft[250] = 0.1
    series = latency_series(result)  # type: ignore[arg-type]
    assert series["ttft_p99_s"][2] == pytest.approx(0.107)
    assert worst_minute(series, 0.5, 0.06)["minutes_over"] == 0
    empty = {"t": [], "ttft_p99_s": [], "tpot_p99_s": []}
    assert worst_minute(empty, 0.5, 0.03) == {"t_s": None, "ttft_p99_s": None, "tpot_p99_s": None,  # type: ignore[arg-type]
                                              "minutes_over": 0, "minutes": 0}
