"""One replica as vLLM 0.11.0's V1 engine runs it: continuous batching, chunked prefill under a
per-step token budget, KV blocks with preemption by recompute, optional prefix caching.

The scheduling step follows `Scheduler.schedule` in `vllm/v1/core/sched/scheduler.py` (v0.11.0,
lines 179-524):
- RUNNING requests first, in order (lines 208-313): each gets `num_tokens - num_computed_tokens`
  new tokens (the rest of its prompt, a recompute after preemption, or 1 when decoding), capped by
  the remaining `token_budget` (initially `max_num_batched_tokens`); the loop stops when the budget
  is spent, so a long prompt is split over steps (chunked prefill).
- When `allocate_slots` finds too few free blocks the *last* running request is popped (FCFS
  policy, line 271 `self.running.pop()`), its blocks freed, `num_computed_tokens` reset to 0 and
  it is put back at the *head* of the waiting queue (`prepend_request`); if the victim is the
  request being scheduled, the RUNNING loop ends (lines 256-293).
- WAITING requests are admitted only if nothing was preempted in this step (line 335
  `if not preempted_reqs`), while the budget lasts and `len(running) < max_num_seqs` (line 337);
  the head of the queue that does not get its blocks blocks everyone behind it (line 482 `break`).
  A prefix-cache hit skips the cached full blocks (`get_computed_blocks`).
- `num_computed_tokens` advances when the step is scheduled (`_update_after_schedule`, line 629);
  a token is sampled when a request's computed tokens reach its length, so a partial prefill chunk
  emits nothing and the step that completes the prompt emits the first token.

Speed: a step in which every running request decodes, nothing was preempted and nothing new was
admitted is followed by identical steps until a request finishes, a request arrives or the KV cache
might run short; the engine plans that span as one *run* of k equal steps and commits it lazily
(`advance`), which is exact, because the scheduler would repeat the same decision at each step.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from serving.simulator.config import EngineConfig
from serving.simulator.kvcache import KVPool
from serving.simulator.metrics import ReplicaMetrics


class SimRequest:
    """A request's state in the simulation (mutable, slotted for speed)."""

    __slots__ = (
        "arrival",
        "blocks",
        "computed",
        "done",
        "failed",
        "first_token",
        "group",
        "last_token",
        "max_out",
        "out",
        "preemptions",
        "prefix_tokens",
        "prompt",
        "replica",
        "rid",
        "shared",
    )

    def __init__(self, rid: int, arrival: float, prompt: int, max_out: int, group: int = -1,
                 prefix_tokens: int = 0) -> None:
        self.rid = rid
        self.arrival = arrival
        self.prompt = prompt
        self.max_out = max_out
        self.group = group
        self.prefix_tokens = prefix_tokens
        self.out = 0  # tokens generated so far
        self.computed = 0  # tokens whose KV is computed (vLLM num_computed_tokens)
        self.blocks = 0  # private KV blocks held
        self.shared = 0  # blocks referenced from the group's cached prefix
        self.first_token = -1.0
        self.last_token = -1.0
        self.done = -1.0  # finish time
        self.failed = False
        self.preemptions = 0
        self.replica = -1


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One planned step (or run of `steps` equal decode steps), when `Engine.log_steps` is on."""

    start_s: float
    duration_s: float
    decode_seqs: int
    prefill_tokens: int
    steps: int


class Engine:
    """The scheduler and KV cache of one replica. The caller owns time: `submit` and `on_step_end`
    return the time the current run ends (when it changed), and `gen` tells stale events apart."""

    def __init__(self, cfg: EngineConfig, metrics: ReplicaMetrics | None = None,
                 log_steps: bool = False) -> None:
        self.cfg = cfg
        self.kv = KVPool(cfg.kv_blocks)
        self.metrics = metrics or ReplicaMetrics()
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        self.finished: list[SimRequest] = []  # drained by the caller
        self.busy = False
        self.gen = 0
        self.log: list[StepRecord] | None = [] if log_steps else None
        self._bs = cfg.block_size
        self._run_start = 0.0
        self._run_end = 0.0
        self._d = 0.0
        self._k = 0
        self._sched: list[tuple[SimRequest, int]] | None = None  # None: a decode run

    # -- state ---------------------------------------------------------------------------------
    @property
    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    @property
    def run_end(self) -> float:
        return self._run_end

    # -- inputs --------------------------------------------------------------------------------
    def submit(self, req: SimRequest, now: float) -> float | None:
        """Queue `req`; returns the new end of the current run if it changed (the caller then
        schedules a step-end event at that time with `gen`)."""
        self.waiting.append(req)
        if not self.busy:
            return self._start(now)
        if self._sched is None and self._k > 1:
            # The scheduler looks at the new request at the next step boundary: cut the run after
            # the step in progress.
            done = int((now - self._run_start) / self._d)
            k = min(self._k, done + 1)
            if k < self._k:
                self._k = k
                self._run_end = self._run_start + k * self._d
                self.gen += 1
                return self._run_end
        return None

    def on_step_end(self, now: float) -> float | None:
        """The current run has ended at `now`: commit it and plan the next one."""
        if self._sched is not None:
            self._commit_step(self._sched, now)
        else:
            self._commit_decode(self._k, now, in_progress=False)
        self.busy = False
        return self._start(now)

    def advance(self, now: float) -> None:
        """Commit the steps of a decode run completed by `now` (for an exact scrape)."""
        if not self.busy or self._sched is not None or self._k <= 1:
            return
        m = min(int((now - self._run_start) / self._d), self._k - 1)
        if m > 0:
            t = self._run_start + m * self._d
            self._commit_decode(m, t, in_progress=True)
            self._run_start = t
            self._k -= m

    def kill(self) -> list[SimRequest]:
        """The replica is gone: every request on it is lost."""
        lost = [*self.running, *self.waiting]
        self.running.clear()
        self.waiting.clear()
        self.busy = False
        self.gen += 1
        return lost

    # -- scheduling ----------------------------------------------------------------------------
    def _start(self, now: float) -> float | None:
        sched, decode, prefill, preempted = self._schedule()
        if not sched:
            return None
        d = self.cfg.step.step_s(decode, prefill)
        k = 1
        if prefill == 0 and not preempted and len(sched) == len(self.running):
            # Identical decode steps until one finishes or the free blocks might not cover growth:
            # over s more steps a sequence needs at most ceil(s / block_size) new blocks.
            k = min(min(r.max_out - r.out for r in self.running), 1 + self._bs * (self.kv.free // decode))
            self._sched = None
        else:
            self._sched = sched
        self.busy = True
        self._run_start = now
        self._d = d
        self._k = k
        self._run_end = now + k * d
        self.gen += 1
        if self.log is not None:
            self.log.append(StepRecord(now, d, decode, prefill, k))
        return self._run_end

    def _schedule(self) -> tuple[list[tuple[SimRequest, int]], int, int, bool]:
        bs = self._bs
        kv = self.kv
        budget = self.cfg.max_num_batched_tokens
        sched: list[tuple[SimRequest, int]] = []
        decode = prefill = 0
        preempted = False
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = min(r.prompt + r.out - r.computed, budget)
            need = -(-(r.computed + n) // bs) - r.shared - r.blocks
            scheduled = True
            while need > kv.free:
                victim = running.pop()
                self._preempt(victim)
                preempted = True
                if victim is r:
                    scheduled = False
                    break
            if not scheduled:
                break
            kv.take(need)
            r.blocks += need
            sched.append((r, n))
            if n == 1 and r.out > 0 and r.computed == r.prompt + r.out - 1:
                decode += 1
            else:
                prefill += n
            budget -= n
            i += 1
        if not preempted:
            waiting = self.waiting
            caching = self.cfg.enable_prefix_caching
            limit = self.cfg.max_num_seqs
            while waiting and budget > 0 and len(running) < limit:
                r = waiting[0]
                total = r.prompt + r.out
                hit = pin = 0
                if caching and r.group >= 0 and kv.has_prefix(r.group):
                    cached = kv.cached_blocks(r.group)
                    if cached <= (total - 1) // bs:  # at least the last token is computed anew
                        hit = cached
                        pin = cached if kv._entries[r.group].refs == 0 else 0
                n = min(total - hit * bs, budget)
                need = -(-(hit * bs + n) // bs) - hit
                if need + pin > kv.free:
                    break
                waiting.popleft()
                if hit:
                    kv.acquire_prefix(r.group)
                    r.shared = hit
                kv.take(need)
                r.blocks = need
                r.computed = hit * bs
                running.append(r)
                sched.append((r, n))
                prefill += n
                budget -= n
        return sched, decode, prefill, preempted

    def _preempt(self, r: SimRequest) -> None:
        self.kv.give_back(r.blocks)
        r.blocks = 0
        if r.shared:
            self.kv.release_prefix(r.group)
            r.shared = 0
        r.computed = 0
        r.preemptions += 1
        self.metrics.preemptions += 1
        self.waiting.appendleft(r)

    # -- commits -------------------------------------------------------------------------------
    def _commit_step(self, sched: list[tuple[SimRequest, int]], t: float) -> None:
        self.metrics.busy_s += self._d
        caching = self.cfg.enable_prefix_caching
        bs = self._bs
        finished = False
        for r, n in sched:
            r.computed += n
            if caching and r.group >= 0 and not r.shared and r.prefix_tokens >= bs \
                    and r.computed >= r.prefix_tokens:
                blocks = r.prefix_tokens // bs
                if r.blocks >= blocks and self.kv.donate_prefix(r.group, blocks):
                    r.shared = blocks
                    r.blocks -= blocks
            if r.computed == r.prompt + r.out:
                finished |= self._emit(r, t)
        if finished:
            self.running = [r for r in self.running if r.done < 0]

    def _emit(self, r: SimRequest, t: float) -> bool:
        """A token is sampled for `r` at `t`; True when `r` is finished."""
        m = self.metrics
        r.out += 1
        m.generation_tokens += 1
        if r.out == 1:
            r.first_token = t
            m.ttft.observe(t - r.arrival)
            m.prompt_tokens += r.prompt
        else:
            m.itl.observe(t - r.last_token)
        r.last_token = t
        if r.out >= r.max_out:
            self._finish(r, t)
            return True
        return False

    def _commit_decode(self, m: int, t: float, in_progress: bool) -> None:
        """`m` decode steps of the current run, the last ending at `t`. With `in_progress`, the
        step after them has started, so its KV slot is allocated too."""
        if m <= 0:
            return
        bs = self._bs
        kv = self.kv
        metrics = self.metrics
        metrics.busy_s += m * self._d
        running = self.running
        metrics.itl.observe(self._d, m * len(running))
        metrics.generation_tokens += m * len(running)
        extra = 1 if in_progress else 0
        finished = False
        for r in running:
            r.computed += m
            r.out += m
            r.last_token = t
            need = -(-(r.computed + extra) // bs) - r.shared - r.blocks
            if need > 0:
                if not kv.take(need):
                    raise AssertionError("decode run outgrew the free KV blocks")
                r.blocks += need
            if r.out >= r.max_out:
                self._finish(r, t)
                finished = True
        if finished:
            self.running = [r for r in running if r.done < 0]

    def _finish(self, r: SimRequest, t: float) -> None:
        r.done = t
        self.kv.give_back(r.blocks)
        r.blocks = 0
        if r.shared:
            self.kv.release_prefix(r.group)
            r.shared = 0
        self.metrics.success += 1
        self.metrics.e2e.observe(t - r.arrival)
        self.metrics.request_tpot.observe((t - r.first_token) / (r.out - 1) if r.out > 1 else 0.0)
        self.finished.append(r)


__all__ = ["Engine", "SimRequest", "StepRecord"]
