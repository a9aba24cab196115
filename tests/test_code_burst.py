"""The code trace's sharpest burst as the 8B's replay holds it: the README's figures (558
requests in 855-866 s, 2.25 x its busiest minute's rate) read off the replayed trace itself."""
from __future__ import annotations

import numpy as np

from tests.test_benchmarks import _load


def test_the_8bs_code_replay_holds_the_readmes_burst() -> None:
    from rtip.stackfile import load
    from stacks.slo_check import busiest_minute

    replay = _load("replay")
    (trace,) = [t for _, mp, _, t in replay.replays(load("prod"), ["code"]) if mp.model == "llama-8b"]
    arrival = np.sort(trace.arrival_s)
    start, end = busiest_minute(arrival)
    busiest = int(((arrival >= start) & (arrival < end)).sum())
    burst = int(((arrival >= 855.0) & (arrival < 866.0)).sum())
    assert (burst, busiest) == (558, 1353)
    assert round((burst / 11) / (busiest / 60), 2) == 2.25
    # ... inside the clock minute from 840 s, which holds fewer requests than the busiest one.
    assert int(((arrival >= 840.0) & (arrival < 900.0)).sum()) < busiest
