"""Request traces: loaders, rescaling and generators.

A `Trace` is arrival times (seconds from the start, sorted) with prompt and output token counts,
and optionally a prefix group per request (requests of one group share their first
`prefix_tokens` prompt tokens, e.g. a system prompt).

Loaders: the Azure LLM inference traces 2023 (`TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock
timestamps with 7 decimals, shared/traces/SOURCES.md section 1); any CSV or JSONL with a time, an
input-token and an output-token field (time in seconds or an ISO-8601 string).

Peak rate: the most arrivals in any window of `window_s` seconds (default 60) over the window,
`max_i #{t in [t_i, t_i + window_s)} / window_s`; the busiest window always starts at an arrival.
A 60 s window is the "busiest minute" of SOURCES.md and is long enough that a handful of
simultaneous arrivals does not set the peak. Two ways to reach a peak: `scaled_to_peak` compresses or
stretches time by one factor, so the trace keeps every request, its burstiness and token mix but
changes k times faster (the factor is found by bisection, and the peak it reaches is exact to one
request per window); `rate_scaled_to_peak` keeps the clock and multiplies the arrivals per 10 s bin
(serving.simulator.rescale), so traffic grows as fast per real minute as the original did, which
is what a plan's burst headroom is sized for.

Generators: a bursty trace from the ServeGen per-client windows (SOURCES.md section 3), a diurnal
ramp, and Poisson arrivals.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from scipy import stats

PEAK_WINDOW_S = 60.0


@dataclass(frozen=True, eq=False)
class Trace:
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        set_ = object.__setattr__
        set_(self, "arrival_s", np.asarray(self.arrival_s, dtype=float))
        set_(self, "prompt_tokens", np.asarray(self.prompt_tokens, dtype=np.int64))
        set_(self, "output_tokens", np.asarray(self.output_tokens, dtype=np.int64))
        set_(self, "prefix_group", np.full(n, -1, dtype=np.int64) if self.prefix_group is None
             else np.asarray(self.prefix_group, dtype=np.int64))
        set_(self, "prefix_tokens", np.zeros(n, dtype=np.int64) if self.prefix_tokens is None
             else np.asarray(self.prefix_tokens, dtype=np.int64))
        for name in ("prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Trace.{name} has {len(getattr(self, name))} entries, expected {n}")
        if n and (not np.all(np.isfinite(self.arrival_s)) or self.arrival_s[0] < 0
                  or np.any(np.diff(self.arrival_s) < 0)):
            raise ValueError("Trace.arrival_s must be finite, >= 0 and sorted")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("Trace expects at least one prompt token and one output token per request")
        if n and (self.prefix_tokens.min() < 0 or np.any(self.prefix_tokens > self.prompt_tokens)):
            raise ValueError("Trace.prefix_tokens must be between 0 and the prompt length")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0

    @property
    def mean_qps(self) -> float:
        return (len(self) - 1) / self.duration_s if self.duration_s > 0 else float("nan")

    def peak_qps(self, window_s: float = PEAK_WINDOW_S) -> float:
        """Most arrivals in any `window_s`-second window, per second (see the module docstring)."""
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if not len(self):
            return 0.0
        t = self.arrival_s
        ends = np.searchsorted(t, t + window_s, side="left")
        return float((ends - np.arange(len(t))).max()) / window_s

    def _with(self, arrival_s: np.ndarray, keep: np.ndarray | None = None, source: str = "") -> Trace:
        pick = (lambda a: a) if keep is None else (lambda a: a[keep])
        return Trace(arrival_s, pick(self.prompt_tokens), pick(self.output_tokens), pick(self.prefix_group),
                     pick(self.prefix_tokens), source or self.source)

    def time_scaled(self, factor: float) -> Trace:
        """Every time multiplied by `factor` (> 1 stretches, so rates fall by `factor`)."""
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"time scale factor must be a positive number, got {factor}")
        return self._with(self.arrival_s * factor, source=f"{self.source} x{factor:g} time")

    def scaled_to_peak(self, peak_qps: float, window_s: float = PEAK_WINDOW_S) -> Trace:
        """The trace time-scaled so that `peak_qps(window_s)` is `peak_qps`."""
        if not peak_qps > 0:
            raise ValueError(f"target peak_qps must be positive, got {peak_qps}")
        if len(self) < 2:
            raise ValueError("rate scaling needs at least two requests")
        t = self.arrival_s - self.arrival_s[0]
        idx = np.arange(len(t))

        def peak(factor: float) -> float:  # peak of t * factor over window_s
            return float((np.searchsorted(t, t + window_s / factor, side="left") - idx).max()) / window_s

        lo, hi = 1e-9, 1e9  # peak(lo) is everything in one window, peak(hi) is one request
        if peak(lo) < peak_qps:
            raise ValueError(f"peak {peak_qps} req/s needs more than the trace's {len(t)} requests in "
                             f"one {window_s:g} s window")
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if peak(mid) >= peak_qps:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-12:
                break
        factor = lo if abs(peak(lo) - peak_qps) <= abs(peak(hi) - peak_qps) else hi
        return self._with(t * factor, source=f"{self.source} scaled to peak {peak_qps:g}/s")

    def rate_scaled_to_peak(self, peak_qps: float, window_s: float = PEAK_WINDOW_S, seed: int = 0) -> Trace:
        """The trace on its own clock with its rate scaled so `peak_qps(window_s)` is `peak_qps`
        (serving.simulator.rescale: the growth per real minute is kept, unlike `scaled_to_peak`)."""
        from serving.simulator.rescale import rate_scaled_to_peak

        return rate_scaled_to_peak(self, peak_qps, window_s, seed=seed)

    def window(self, start_s: float, end_s: float) -> Trace:
        """Requests arriving in [start_s, end_s), re-based to start at 0."""
        keep = (self.arrival_s >= start_s) & (self.arrival_s < end_s)
        return self._with(self.arrival_s[keep] - start_s, keep)

    def with_prefix_groups(self, groups: int, prefix_tokens: int, seed: int = 0) -> Trace:
        """Each request assigned to one of `groups` shared prefixes of `prefix_tokens` tokens (cut
        to the prompt)."""
        if groups < 1 or prefix_tokens < 0:
            raise ValueError("with_prefix_groups expects groups >= 1 and prefix_tokens >= 0")
        rng = np.random.default_rng(seed)
        group = rng.integers(0, groups, len(self))
        return Trace(self.arrival_s, self.prompt_tokens, self.output_tokens, group,
                     np.minimum(prefix_tokens, self.prompt_tokens), f"{self.source} {groups} prefixes")


# -- loaders ------------------------------------------------------------------------------------
def _seconds(stamp: str) -> float:
    """Seconds since the epoch of a wall-clock string, keeping all fractional digits (Azure's
    timestamps have 7, more than datetime parses on every Python version)."""
    text = stamp.strip()
    whole, _, frac = text.partition(".")
    base = datetime.fromisoformat(whole.replace("Z", "+00:00"))
    return base.timestamp() + (float("0." + frac) if frac else 0.0)


def _time_value(raw: object, where: str) -> float:
    if isinstance(raw, int | float):
        return float(raw)
    text = str(raw).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return _seconds(text)
    except ValueError as err:
        raise ValueError(f"{where}: time {raw!r} is neither seconds nor an ISO-8601 timestamp") from err


def _build(rows: Iterable[tuple[float, int, int]], source: str) -> Trace:
    data = sorted(rows)
    if not data:
        raise ValueError(f"{source}: no requests")
    times = np.array([r[0] for r in data], dtype=float)
    return Trace(times - times[0], [r[1] for r in data], [r[2] for r in data], source=source)


def _int(raw: object, where: str) -> int:
    try:
        value = int(float(str(raw)))
    except ValueError as err:
        raise ValueError(f"{where}: expected a token count, got {raw!r}") from err
    return value


def load_csv(path: str | Path, time_col: str = "timestamp", input_col: str = "input_tokens",
             output_col: str = "output_tokens", min_tokens: int = 1) -> Trace:
    """A CSV with a header naming the time, input-token and output-token columns. Rows with fewer
    than `min_tokens` input or output tokens are dropped (a request emits at least one token)."""
    path = Path(path)
    rows = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = {time_col, input_col, output_col} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}; header is {reader.fieldnames}")
        for n, row in enumerate(reader, start=2):
            where = f"{path}:{n}"
            prompt, out = _int(row[input_col], where), _int(row[output_col], where)
            if prompt >= min_tokens and out >= min_tokens:
                rows.append((_time_value(row[time_col], where), prompt, out))
    return _build(rows, path.name)


def load_azure_2023(path: str | Path) -> Trace:
    """An Azure LLM inference trace 2023 file (code or conversation). Requests with zero generated
    tokens are dropped (a request emits at least one token); see `azure_dropped`."""
    return load_csv(path, "TIMESTAMP", "ContextTokens", "GeneratedTokens")


def load_jsonl(path: str | Path, time_key: str = "timestamp", input_key: str = "input_tokens",
               output_key: str = "output_tokens", min_tokens: int = 1) -> Trace:
    path = Path(path)
    rows = []
    with path.open() as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not JSON ({err.msg})") from err
            if not isinstance(obj, dict) or not {time_key, input_key, output_key} <= obj.keys():
                raise ValueError(f"{where}: expected an object with {time_key!r}, {input_key!r}, "
                                 f"{output_key!r}")
            prompt, out = _int(obj[input_key], where), _int(obj[output_key], where)
            if prompt >= min_tokens and out >= min_tokens:
                rows.append((_time_value(obj[time_key], where), prompt, out))
    return _build(rows, path.name)


# -- generators ---------------------------------------------------------------------------------
def _lengths(lengths: Trace | tuple[int, int], n: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(lengths, Trace):
        pick = rng.integers(0, len(lengths), n)
        return lengths.prompt_tokens[pick], lengths.output_tokens[pick]
    prompt, out = lengths
    if prompt < 1 or out < 1:
        raise ValueError(f"fixed lengths must be >= 1, got {lengths}")
    return np.full(n, prompt), np.full(n, out)


def poisson(rate_qps: float, duration_s: float, lengths: Trace | tuple[int, int], seed: int = 0) -> Trace:
    """Poisson arrivals at `rate_qps` for `duration_s`; lengths fixed or drawn from a trace."""
    if rate_qps <= 0 or duration_s <= 0:
        raise ValueError("poisson expects positive rate_qps and duration_s")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate_qps, int(rate_qps * duration_s * 1.2 + 50))
    times = np.cumsum(gaps)
    while times[-1] < duration_s:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1 / rate_qps, len(times)))])
    times = times[times < duration_s]
    prompt, out = _lengths(lengths, len(times), rng)
    return Trace(times, prompt, out, source=f"poisson {rate_qps:g}/s")


def diurnal(duration_s: float, min_qps: float, peak_qps: float, lengths: Trace | tuple[int, int],
            period_s: float = 86400.0, seed: int = 0) -> Trace:
    """A diurnal ramp: Poisson arrivals at rate min + (peak - min) (1 - cos(2 pi t / period)) / 2,
    from the trough at t = 0 to the peak at period / 2 (thinning of a peak-rate Poisson process)."""
    if not 0 <= min_qps <= peak_qps or peak_qps <= 0 or period_s <= 0:
        raise ValueError("diurnal expects 0 <= min_qps <= peak_qps, peak_qps > 0, period_s > 0")
    rng = np.random.default_rng(seed)
    base = poisson(peak_qps, duration_s, (1, 1), seed=seed).arrival_s
    rate = min_qps + (peak_qps - min_qps) * (1 - np.cos(2 * np.pi * base / period_s)) / 2
    times = base[rng.random(len(base)) < rate / peak_qps]
    prompt, out = _lengths(lengths, len(times), rng)
    return Trace(times, prompt, out, source=f"diurnal {min_qps:g}-{peak_qps:g}/s")


@dataclass(frozen=True)
class ClientWindow:
    client: int
    start_s: float
    rate_qps: float
    dist: str
    shape: float
    scale: float


def read_servegen_windows(path: str | Path) -> list[ClientWindow]:
    path = Path(path)
    expected = ["client_id", "window_start_s", "rate_rps", "cv", "iat_dist", "param1", "param2"]
    out = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != expected:
            raise ValueError(f"{path}: expected the ServeGen windows header {expected}, "
                             f"got {reader.fieldnames}")
        for row in reader:
            out.append(ClientWindow(int(row["client_id"]), float(row["window_start_s"]),
                                    float(row["rate_rps"]), row["iat_dist"], float(row["param1"]),
                                    float(row["param2"])))
    return out


def servegen_bursty(windows: list[ClientWindow] | str | Path, start_s: float, duration_s: float,
                    lengths: Trace | tuple[int, int], window_s: float = 600.0, seed: int = 0) -> Trace:
    """Arrivals from ServeGen per-client windows over [start_s, start_s + duration_s).

    In each client's 600 s window, inter-arrival times are drawn from its Gamma(shape, scale) or
    Weibull(shape, scale) (scipy's parameterisation, SOURCES.md) and then rescaled so their mean is
    1 / rate_rps: the window's rate is the measured quantity, the fitted distribution gives the
    burstiness (its coefficient of variation is unchanged by the rescaling). Token lengths are
    fixed or drawn from `lengths` (ServeGen's length distributions are not on file).
    """
    if isinstance(windows, str | Path):
        windows = read_servegen_windows(windows)
    if duration_s <= 0:
        raise ValueError("servegen_bursty expects a positive duration_s")
    rng = np.random.default_rng(seed)
    end_s = start_s + duration_s
    chunks: list[np.ndarray] = []
    for w in windows:
        lo, hi = max(w.start_s, start_s), min(w.start_s + window_s, end_s)
        if hi <= lo or w.rate_qps <= 0 or w.dist not in ("Gamma", "Weibull"):
            continue
        dist = (stats.gamma(w.shape, scale=w.scale) if w.dist == "Gamma"
                else stats.weibull_min(w.shape, scale=w.scale))
        expected = int(w.rate_qps * (hi - lo) * 1.5) + 20
        gaps = dist.rvs(size=expected, random_state=rng)
        gaps = gaps / gaps.mean() / w.rate_qps if gaps.mean() > 0 else np.full(expected, 1 / w.rate_qps)
        times = lo + rng.random() * gaps[0] + np.cumsum(gaps) - gaps[0]
        chunks.append(times[times < hi])
    times = np.sort(np.concatenate(chunks)) - start_s if chunks else np.zeros(0)
    if not len(times):
        raise ValueError(f"no ServeGen arrivals in [{start_s}, {end_s})")
    prompt, out = _lengths(lengths, len(times), rng)
    return Trace(times, prompt, out, source=f"servegen {start_s:g}+{duration_s:g}s")


__all__ = ["PEAK_WINDOW_S", "ClientWindow", "Trace", "diurnal", "load_azure_2023", "load_csv", "load_jsonl",
           "poisson", "read_servegen_windows", "servegen_bursty"]
