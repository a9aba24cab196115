"""How fast traffic grows: the headroom a fleet needs while a new replica cold-starts.

A replica asked for at time t serves at t + cold start; the traffic that arrives meanwhile must
fit the replicas already running. The share of peak by which traffic can grow within a window is
read off an Azure LLM inference trace 2023 (`../shared/traces`): its per-minute arrival counts,
and for each window length the largest rise of the count within at most that window, as a share
of the busiest minute. The conversation trace is the default; a model whose stack says `traffic:
code` takes the code trace's, which rises from nothing to its busiest minute within one minute.
`serving/data/growth_azure_{conv,code}.json` keep the tables (windows of 1 to 30 minutes) so
planning never needs the traces; `tests/test_burst.py` recomputes them.

The planner holds max(tier burst_headroom, growth over the cold start) above peak unless the
stack states a growth rate (serving.capacity.region_replicas).
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("data") / "growth_azure_conv.json"
# The stack's `traffic` names the trace whose growth a model's traffic is taken to have: chat
# traffic (the conversation trace: 40 % of peak within 12 minutes) or on/off bursts (the code
# trace: from nothing to its busiest minute within one minute).
TRAFFIC = {"conversation": DATA, "code": DATA.with_name("growth_azure_code.json")}
BIN_S = 60.0
WINDOWS_MIN = tuple(range(1, 31))  # window lengths in minutes


def growth_table(arrival_s: np.ndarray, windows_min: tuple[int, ...] = WINDOWS_MIN) -> list[float]:
    """Per window length (minutes): the largest rise of the per-minute arrival count within at
    most that window (a rise over a shorter window also happens within a longer one), as a share
    of the busiest minute, rounded to 4 digits."""
    counts = np.histogram(arrival_s, bins=np.arange(0.0, float(arrival_s.max()) + BIN_S, BIN_S))[0]
    peak = float(counts.max())
    out: list[float] = []
    worst = 0.0
    for k in windows_min:
        rise = counts[k:] - counts[:-k] if k < len(counts) else np.zeros(1)
        worst = max(worst, float(rise.max()) / peak)
        out.append(round(worst, 4))
    return out


@cache
def _table(traffic: str = "conversation") -> tuple[tuple[float, float], ...]:
    raw = json.loads(TRAFFIC[traffic].read_text())
    return tuple((m * BIN_S, g) for m, g in zip(raw["windows_min"], raw["growth"], strict=True))


def growth_within(seconds: float, traffic: str = "conversation") -> float:
    """The share of peak traffic can grow by within `seconds` (linear between table rows, the
    first row's share per second below it, the last row's value above it), for traffic shaped
    like the `traffic` trace (a key of TRAFFIC)."""
    points = _table(traffic)
    if seconds <= points[0][0]:
        return points[0][1] * max(0.0, seconds) / points[0][0]
    for (s0, g0), (s1, g1) in itertools.pairwise(points):
        if seconds <= s1:
            return g0 + (g1 - g0) * (seconds - s0) / (s1 - s0)
    return points[-1][1]


__all__ = ["BIN_S", "DATA", "TRAFFIC", "WINDOWS_MIN", "growth_table", "growth_within"]
