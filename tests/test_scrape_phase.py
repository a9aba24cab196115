"""Where the scrapes fall on Prometheus's evaluation grid (`SimConfig.scrape_phase_s`).

A subquery's steps sit on whole multiples of its step (Prometheus 3, engine.go), while a
cluster's targets are scraped at a phase of their own. The expected reads below are derived by
hand from that rule and checked against the raw samples the simulated Prometheus stored, not
against the PromQL evaluator."""
from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import replace

import pytest

from serving.autoscaling import RUNNING
from serving.persistence import persistent
from serving.simulator import KedaAutoscaler, Simulation, poisson
from tests.test_benchmarks import _deployment

INTERVAL = 15.0


def _run(phase: float, offset: float = 0.0) -> tuple[Simulation, KedaAutoscaler]:
    """The 8B's prod deployment under Poisson load for 200 s, its trigger the persistence over the
    fleet's running requests alone (so each read is a minimum of stored sums)."""
    _, dep = _deployment("prod", "llama-8b")
    spec = copy.deepcopy(dep.scaled_object)
    (trigger,) = spec["triggers"]
    selector = f'{{namespace="{dep.sim_config().namespace}",model_name="{dep.plan.model}"}}'
    trigger["metadata"]["query"] = persistent(f"sum({RUNNING}{selector})", int(INTERVAL))
    auto = KedaAutoscaler(spec)
    shifted = replace(dep, scrape_phase_s=phase, autoscale_offset_s=offset)
    sim = Simulation(poisson(30.0, 200.0, (1155, 211), seed=4), shifted.sim_config(end_s=200.0),
                     "least-loaded", auto)
    sim.run()
    return sim, auto


def _sums(sim: Simulation) -> dict[float, float]:
    """The fleet's running requests at each scrape, summed from the stored series."""
    out: dict[float, float] = defaultdict(float)
    for series in sim.store.series(RUNNING).values():
        for t, v in zip(series.times, series.values, strict=True):
            out[t] += v
    return dict(out)


def test_scrapes_and_reads_follow_the_phase() -> None:
    """Scrapes at phase + 15 j; a Prometheus reader at phase + offset + 15 j."""
    for phase, offset in ((0.0, 0.0), (7.5, 0.0), (4.0, 12.0)):
        sim, auto = _run(phase, offset)
        times = sorted(_sums(sim))
        assert times[:3] == [phase, phase + INTERVAL, phase + 2 * INTERVAL]
        assert [t for t, *_ in auto.history][:2] == [phase + offset, phase + offset + INTERVAL]


@pytest.mark.parametrize(("phase", "offset", "ages"), [
    # On the grid: the steps t-45 .. t hold the scrapes of their instants, the newest included.
    (0.0, 0.0, (0.0, 15.0, 30.0, 45.0)),
    # Half an interval past it, read at the scrape: each step (t-52.5 .. t-7.5) holds the scrape
    # 7.5 s before it, so the newest is missed and one 60 s old counts.
    (7.5, 0.0, (15.0, 30.0, 45.0, 60.0)),
    # Phase 4, read 9 s later (13 s into the grid's interval): the last step, 13 s back, lies
    # before the newest scrape and holds the one before it, 24 s old.
    (4.0, 9.0, (24.0, 39.0, 54.0, 69.0)),
    # Phase 4, read 12 s later (1 s past a step): that step holds the newest scrape, 12 s old.
    (4.0, 12.0, (12.0, 27.0, 42.0, 57.0)),
])
def test_the_persistence_reads_the_scrapes_its_aligned_steps_hold(
        phase: float, offset: float, ages: tuple[float, ...]) -> None:
    sim, auto = _run(phase, offset)
    sums = _sums(sim)
    newest = tuple(offset + k * INTERVAL for k in range(4))  # what steps on the scrapes would hold
    checked = differs = 0
    for t, metric, _ in auto.history:
        held = [sums.get(round(t - age, 6)) for age in ages]
        if t < 75.0 or None in held:
            continue  # the first minute's window holds fewer scrapes
        assert metric == pytest.approx(min(held)), t  # type: ignore[type-var]
        checked += 1
        differs += metric != pytest.approx(min(sums[round(t - a, 6)] for a in newest))
    assert checked >= 8
    # Where the steps miss the newest scrape the reads are not what holding it would give (so
    # the check above tells the two apart on this load).
    assert (differs > 0) == (ages != newest)
    if phase + offset == 0.0:
        # On the grid a step would sit at t - 60 if the range were closed: left-open, it does not,
        # and the scrape 60 s old would lower some read on this rising load.
        closed = sum(metric != pytest.approx(min(sums[round(t - a, 6)] for a in (*ages, 60.0)))
                     for t, metric, _ in auto.history if t >= 75.0)
        assert closed > 0


def test_a_phase_of_a_whole_interval_or_more_is_refused() -> None:
    """Phase 15 s is the grid again, one scrape later: refused, as a read offset of 15 s is."""
    _, dep = _deployment("prod", "llama-8b")
    for phase in (-1.0, INTERVAL):
        with pytest.raises(ValueError, match="scrape_phase_s"):
            replace(dep, scrape_phase_s=phase).sim_config()
