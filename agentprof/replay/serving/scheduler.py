"""The discrete-event serving engine: sessions issue calls, a router picks a replica, each replica runs
continuous batching with chunked prefill under a KV-capacity admission limit.

Each replica admits queued requests while their KV (prompt plus generated tokens, in the deployed KV dtype)
fits its pool; admission looks the prompt up in the shared cache, loads lower-tier hits over the host link,
and prefills the rest in chunks of the framework's token budget alongside the running decodes. When decode
growth overflows the pool, the latest-admitted request is preempted and recomputed later (vLLM's default).
Stretches of pure decode between events advance in one macro-step (their per-step times summed in closed
form), so the event count scales with calls, not tokens.

Disaggregated serving (:class:`agentprof.replay.serving.pools.Pools`): the first replicas are prefill workers
(the router sends calls to them; they batch prompts under the token budget and keep the prefix cache), the rest
decode workers. A finished prefill frees its prefill KV and moves to a decode worker after the KV transfer over
the link between the pools; the decode worker admits it when its KV fits and emits the first token after the
recipe's scheduler interval, then decodes it with continuous batching; a decode worker runs at most its
recipe's decode slots (``Pools.max_running``), the rest wait in its queue.

Data-parallel attention ranks (``Options.lockstep``) step as a group: one event per group step, as long as its
slowest rank's step; a rank without work runs an empty batch.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from agentprof.replay.serving.cache import TieredCache
from agentprof.replay.serving.pools import Pools
from agentprof.replay.serving.sessions import SessionPlan
from agentprof.replay.serving.stepcost import StepCost

LOAD, PREFILL, FIRST, DECODE = 0, 1, 2, 3
EV_ISSUE, EV_ARRIVE, EV_STEP, EV_WAKE, EV_SESSION, EV_HANDOFF, EV_FIXED = 0, 1, 2, 3, 4, 5, 6
ROUTERS = ("round-robin", "prefix-affinity")


class Req:
    """One model call in flight."""

    __slots__ = ("call", "slot", "node_off", "issue_t", "arrive_t", "queued_t", "queue_s", "admit_t", "first_t",
                 "done_t", "replica", "state", "inp", "out", "need", "cached", "todo", "done_pf",
                 "timer", "gen", "hits", "preempted", "prompt_blocks", "ids", "load_s", "overhead", "ready_t",
                 "series", "series_at", "hand_s", "g0", "base", "hkey")

    def __init__(self, call: int, slot: int, ids: np.ndarray, issue_t: float, inp: float, out: float) -> None:
        self.call, self.slot, self.ids = call, slot, ids
        self.issue_t = issue_t
        self.arrive_t = self.queued_t = self.admit_t = self.first_t = self.done_t = math.nan
        self.queue_s = 0.0
        self.replica = -1
        self.state = LOAD
        self.inp, self.out = inp, max(out, 1.0)
        self.need = inp  # tokens to hold (prompt + generated so far)
        self.cached = self.todo = self.done_pf = self.timer = self.gen = 0.0
        self.hits = (0.0, 0.0, 0.0)
        self.preempted = 0
        self.prompt_blocks = 0
        self.load_s = 0.0
        self.overhead = 0.0  # waiting for a running step + decode work in its prefill steps
        self.ready_t = math.nan
        self.series: tuple[tuple[float, float, bool], list[float], list[float]] | None = None  # prices ahead
        self.series_at = 0
        self.hand_s = 0.0  # KV transfer from the prefill to the decode pool (disaggregated)
        # on a decode worker (:meth:`Engine._step_decode`): generated = worker's G - g0, held = base + G; hkey
        # names the request's live entry in the worker's heaps
        self.g0 = self.base = 0.0
        self.hkey = -1


@dataclass
class Options:
    """What the engine needs besides the plan and the step costs."""

    concurrency: int
    replicas: int
    budget_tokens: float
    router: str = "round-robin"
    batch_tokens: float | None = None
    """Prompt tokens a prefill worker's pass holds before it takes no further waiting prompt (SGLang's
    ``--max-prefill-tokens`` where smaller than the step's budget); None: ``budget_tokens``."""
    batch_prompts: float = math.inf
    """Prompts a prefill worker holds at once (its recipe's ``--max-running-requests``, all its ranks)."""
    cpu_blocks: float = 0.0
    disk_blocks: float = 0.0
    hbm_blocks: float | None = None  # None: the KV pool; math.inf: unbounded (tests)
    ttl_s: float | None = None
    arrival_rate_per_h: float | None = None
    seed: int = 0
    copies: int = 1
    sessions: int | None = None
    """Session instances the loop runs (the recorded sessions cycled, ``copies`` times at most); None: the
    recorded sessions, or one per slot when the concurrency is larger."""
    failed: np.ndarray | None = None
    """Per plan session: its task fails (``--overflow reject``): it frees its slot but is not a completed task."""
    ramp_s: float = 0.0  # slot i starts its first session at i * ramp_s
    warm_ids: np.ndarray | None = None  # blocks already in every replica's HBM at the start (benchmarks)
    quiet_steps: bool = True  # False: every step is an event, each chunk priced alone (the reference for tests)
    lockstep: int = 1
    """Replicas per lockstep group: data-parallel attention ranks of one instance (consecutive replicas) whose
    forward passes are aligned: the group runs each step together, as long as its slowest rank's (1: none)."""


@dataclass
class Replica:
    cost: StepCost
    role: str = "mixed"  # "mixed" (aggregated), "prefill" or "decode" (disaggregated pools)
    queue: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    busy: bool = False
    version: int = 0
    kv_used: float = 0.0
    prompt_blocks: int = 0
    busy_s: float = 0.0
    steps: int = 0
    step_dec: list = field(default_factory=list)
    step_pf: list = field(default_factory=list)
    step_k: float = 0.0
    wake_at: float = math.inf
    q_len: int = 0
    q_last: float = 0.0
    q_area: float = 0.0
    q_entries: int = 0
    q_wait: float = 0.0
    # decode workers of a disaggregated deployment (:meth:`Engine._step_decode`): every decoding sequence
    # gains the same tokens per step, so one counter ``G`` advances them all; heaps of finish levels and of
    # first-token timers; sums that give the held KV and the mean context without visiting the batch
    g: float = 0.0
    dec_heap: list = field(default_factory=list)
    first_heap: list = field(default_factory=list)
    n_dec: int = 0
    held: int = 0  # decoding requests the running prefill pass holds (an engine that runs prefill alone)
    sum_base: float = 0.0
    kv_first: float = 0.0
    peak_running: int = 0  # most requests a decode worker held at once (its decode slots bound it)
    # an independent replica's running macro-step of pure decode: (start, alpha, beta, ctx, accept, steps, prefill
    # seconds), so that an arrival can end it at the step it falls in (:meth:`Engine._split`)
    macro: tuple | None = None


@dataclass
class EngineResult:
    """Per request (one row per simulated call instance) and per session instance, plus engine counters."""

    req_call: np.ndarray
    issue_t: np.ndarray
    first_t: np.ndarray
    done_t: np.ndarray
    queue_s: np.ndarray
    hits: np.ndarray  # (n, 3) tokens by tier
    load_s: np.ndarray  # KV loaded from the CPU/disk tiers, seconds
    inp: np.ndarray
    out: np.ndarray
    sess_plan: np.ndarray  # session index in the plan
    sess_start: np.ndarray
    sess_end: np.ndarray
    makespan_s: float
    busy_s: list[float]
    queue_area: float
    queue_entries: int
    preemptions: int
    oversize: int
    peak_in_flight: int
    mean_in_flight: float
    evicted_blocks: dict[str, int]
    roles: list[str] = field(default_factory=list)
    queue_by_role: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per pool (``mixed``, ``prefill``, ``decode``): time-averaged queue length ``area``/makespan, entries and
    the summed waits, for Little's law on each queue."""
    handoff_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per request: the KV transfer from the prefill to the decode pool (0 when aggregated)."""
    peak_running: list[int] = field(default_factory=list)
    """Per replica: the most requests a decode worker ran at once (first token pending or decoding; 0 for
    the others)."""
    group_busy_s: list[float] = field(default_factory=list)
    """Per lockstep group (data-parallel attention instance): the time any of its ranks ran a step (the others
    run empty batches then); empty without lockstep."""
    lockstep_wait_s: float = 0.0
    """Step time added by the lockstep (ranks waiting for a sibling's longer step), summed over ranks."""
    sess_failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Per session instance: its task failed (ended without completing)."""


class Engine:
    def __init__(self, plan: SessionPlan, cost: StepCost, opt: Options, pools: Pools | None = None) -> None:
        """``cost``: the step costs of a replica (the decode workers' when ``pools`` makes the deployment
        disaggregated: then ``pools.n_prefill`` prefill workers come first, then ``pools.n_decode`` decode
        workers, and ``opt.replicas`` is ignored)."""
        self.plan, self.cost, self.opt, self.pools = plan, cost, opt, pools
        self.bs = plan.block_size
        if pools is None:
            self.reps = [Replica(cost) for _ in range(opt.replicas)]
            self.n_entry = opt.replicas
        else:
            self.reps = ([Replica(pools.prefill, "prefill") for _ in range(pools.n_prefill)]
                         + [Replica(cost, "decode") for _ in range(pools.n_decode)])
            self.n_entry = pools.n_prefill
        entry_cost = self.reps[0].cost
        pool_blocks = entry_cost.pool_tokens / self.bs
        hbm = pool_blocks if opt.hbm_blocks is None else opt.hbm_blocks
        self.unbounded = opt.hbm_blocks is not None and math.isinf(opt.hbm_blocks)
        # the prefix cache lives on the replicas that prefill (all of them, or the prefill pool)
        self.cache = TieredCache(plan.n_nodes * opt.copies, self.n_entry, hbm, opt.cpu_blocks, opt.disk_blocks,
                                 opt.ttl_s)
        if opt.warm_ids is not None and opt.warm_ids.size:
            for k in range(self.n_entry):
                self.cache.hbm[k].touch(opt.warm_ids, 0.0)
        self.heap: list = []  # every event but the ends of replicas' steps
        self.step_heap: list = []  # the ends of replicas' steps (EV_STEP)
        self.seq = 0
        self.now = 0.0
        self.rr = 0
        self.done: list[Req] = []
        self.q_len = 0
        self.q_last = 0.0
        self.q_area = 0.0
        self.q_entries = 0
        self.preemptions = 0
        self.oversize = 0
        self.in_flight = 0
        self.in_flight_area = 0.0
        self.in_flight_last = 0.0
        self.peak_in_flight = 0
        self.quiet_ends = 0  # steps ended without an event (:meth:`_quiet_end`)
        ls = max(int(opt.lockstep), 1)
        self.lockstep = ls if pools is None else 1
        n_groups = (len(self.reps) + ls - 1) // ls if self.lockstep > 1 else 0
        self.group_busy = [0.0] * n_groups
        self.group_version = [0] * n_groups
        # per group: the ranks that work in its running step, each (replica, alpha, beta, context) of its decode
        # (zeros for a step with prefill), and the step's pure-decode macro-step (:meth:`_split_group`) or None
        self.group_rows: list[list[tuple[int, float, float, float]]] = [[] for _ in range(n_groups)]
        self.group_macro: list[tuple | None] = [None] * n_groups
        self.lockstep_wait = 0.0

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, a: object, b: object = None) -> None:
        self.seq += 1
        heapq.heappush(self.step_heap if kind == EV_STEP else self.heap, (t, self.seq, kind, a, b))

    def _next_t(self) -> float:
        """When the next event of any kind is due (inf when none is)."""
        return min(self.heap[0][0] if self.heap else math.inf, self.step_heap[0][0] if self.step_heap else math.inf)

    def _q(self, delta: int, k: int | None = None) -> None:
        self.q_area += self.q_len * (self.now - self.q_last)
        self.q_last = self.now
        self.q_len += delta
        if k is not None:
            rep = self.reps[k]
            rep.q_area += rep.q_len * (self.now - rep.q_last)
            rep.q_last = self.now
            rep.q_len += delta
            if delta > 0:
                rep.q_entries += delta

    def _enqueue(self, k: int, r: Req, front: bool = False) -> None:
        r.queued_t = self.now
        rep = self.reps[k]
        if front:
            rep.queue.appendleft(r)
        else:
            rep.queue.append(r)
        self._q(+1, k)
        self.q_entries += 1

    def _dequeue(self, k: int) -> Req:
        rep = self.reps[k]
        r = rep.queue.popleft()
        self._q(-1, k)
        w = self.now - r.queued_t
        r.queue_s += w
        rep.q_wait += w
        return r

    def _flight(self, delta: int) -> None:
        self.in_flight_area += self.in_flight * (self.now - self.in_flight_last)
        self.in_flight_last = self.now
        self.in_flight += delta
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    # --- sessions ----------------------------------------------------------------------------------------
    def run(self) -> EngineResult:
        p, o = self.plan, self.opt
        n_inst = o.sessions or (max(p.n_sessions, o.concurrency) if o.copies > 1 else p.n_sessions)
        n_inst = min(n_inst, p.n_sessions * max(o.copies, 1))
        self.order = [(i % p.n_sessions, i // p.n_sessions) for i in range(n_inst)]
        self.sess_start = np.full(n_inst, np.nan)
        self.sess_end = np.full(n_inst, np.nan)
        # which calls each reply releases (CSR over the plan's calls; -1, the session's start, in the last row)
        after, self.after_gap = p.waits_for()
        key = np.where(after < 0, p.n_calls, after)
        self.released = np.argsort(key, kind="stable")
        self.released_at = np.searchsorted(key[self.released], np.arange(p.n_calls + 2))
        self.roots = self.released[self.released_at[p.n_calls]:]  # ascending (a stable sort)
        self.pending = np.zeros(n_inst, dtype=np.int64)  # per instance: calls not yet done
        self.next_inst = 0
        self.waiting_sessions: deque = deque()
        slots = min(o.concurrency, n_inst)
        if o.arrival_rate_per_h:
            rng = np.random.default_rng(o.seed)
            arrivals = np.cumsum(rng.exponential(3600.0 / o.arrival_rate_per_h, n_inst))
            for i, t in enumerate(arrivals.tolist()):
                self._push(t, EV_SESSION, i, "arrive")
            self.free_slots = slots
        else:
            self.free_slots = 0
            for i in range(slots):
                self._push(i * o.ramp_s, EV_SESSION, self.next_inst, "start")
                self.next_inst += 1
        heap, steps = self.heap, self.step_heap
        while heap or steps:
            t, _, kind, a, b = heapq.heappop(steps if steps and (not heap or steps[0] < heap[0]) else heap)
            self.now = t
            if kind == EV_STEP:
                self._end_step(a, b)
            elif kind == EV_ARRIVE:
                self._arrive(a)
            elif kind == EV_ISSUE:
                self._issue(a, b)
            elif kind == EV_WAKE:
                rep = self.reps[a]
                if rep.wake_at == t:
                    rep.wake_at = math.inf
                    if not rep.busy:
                        self._start_step(a)
            elif kind == EV_SESSION:
                self._session_event(a, b)
            elif kind == EV_HANDOFF:
                self._handoff(a)
            elif kind == EV_FIXED:
                self._released_by(a, b)
        return self._result()

    def _session_event(self, inst: int, what: str) -> None:
        if what == "start":
            self._start_session(inst, self.now)
        elif what == "arrive":
            if self.free_slots > 0:
                self.free_slots -= 1
                self._start_session(inst, self.now)
            else:
                self.waiting_sessions.append(inst)
        else:  # "end"
            self.sess_end[inst] = self.now
            if self.opt.arrival_rate_per_h:
                if self.waiting_sessions:
                    self._start_session(self.waiting_sessions.popleft(), self.now)
                else:
                    self.free_slots += 1
            elif self.next_inst < len(self.order):
                self._start_session(self.next_inst, self.now)
                self.next_inst += 1

    def _start_session(self, inst: int, t: float) -> None:
        s, _ = self.order[inst]
        p = self.plan
        self.sess_start[inst] = t
        lo, hi = int(p.start[s]), int(p.start[s + 1])
        self.pending[inst] = hi - lo
        if hi == lo:
            self._push(t + float(p.tail_s[s]), EV_SESSION, inst, "end")
            return
        # the calls no reply releases: the first, and any a parallel branch started before a reply came
        t0 = t + float(p.head_s[s])
        a, b = np.searchsorted(self.roots, (lo, hi))
        for c in self.roots[a:b].tolist():
            self._schedule_call(inst, c, t0 + float(self.after_gap[c]))

    def _schedule_call(self, inst: int, call: int, t: float) -> None:
        """Issue ``call`` of session instance ``inst`` at ``t``; a call the server does not see takes its recorded
        duration, then releases the calls that waited for it."""
        if math.isnan(self.plan.fixed_s[call]):
            self._push(t, EV_ISSUE, inst, call)
        else:
            self._push(t + float(self.plan.fixed_s[call]), EV_FIXED, inst, call)

    def _released_by(self, inst: int, call: int) -> None:
        """``call`` of instance ``inst`` is done: schedule the calls that waited for its reply; the session ends
        ``tail_s`` after its last call."""
        for c in self.released[self.released_at[call]:self.released_at[call + 1]].tolist():
            self._schedule_call(inst, c, self.now + float(self.after_gap[c]))
        self.pending[inst] -= 1
        if not self.pending[inst]:
            s, _ = self.order[inst]
            self._push(self.now + float(self.plan.tail_s[s]), EV_SESSION, inst, "end")

    def _issue(self, inst: int, call: int) -> None:
        p = self.plan
        _, copy = self.order[inst]
        ids = p.node_ids[p.node_offsets[call]:p.node_offsets[call + 1]]
        if copy:
            ids = ids + copy * p.n_nodes
        r = Req(call, inst, ids, self.now, float(p.input_tokens[call]), float(p.output_tokens[call]))
        r.prompt_blocks = int(ids.size)
        self._flight(+1)
        self._push(self.now + self.cost.arrival_s(r.inp), EV_ARRIVE, r)

    def _call_done(self, r: Req) -> None:
        self._flight(-1)
        self.done.append(r)
        self._released_by(r.slot, r.call)

    # --- routing and admission ---------------------------------------------------------------------------
    def _arrive(self, r: Req) -> None:
        n = self.n_entry
        if n == 1:
            k = 0
        elif self.opt.router == "prefix-affinity":
            # Dynamo-style: matched prefix blocks against the replica's load (queued + running tokens)
            hits = self.cache.affinity(r.ids, self.now)
            load = [sum(x.need for x in rep.running) + sum(x.need for x in rep.queue) for rep in self.reps[:n]]
            k = max(range(n), key=lambda i: hits[i] * self.bs - 0.5 * load[i] / max(n, 1) - 1e-9 * i)
        else:
            k = self.rr % n
            self.rr += 1
        r.replica = k
        r.arrive_t = self.now
        rep = self.reps[k]
        self._enqueue(k, r)
        if not rep.busy:
            self._start_step(k)
        elif rep.macro is not None:
            self._split(k)
        elif self.lockstep > 1 and self.group_macro[k // self.lockstep] is not None:
            self._split_group(k // self.lockstep)

    def _split(self, k: int) -> None:
        """End replica ``k``'s running macro-step of pure decode at the first of its steps that ends at or after now
        (the request that just arrived joins the batch there, as it would after a single step)."""
        rep = self.reps[k]
        t0, alpha, beta, ctx, acc, k_steps, pf_s = rep.macro
        rep.macro = None
        j = self._steps_within(alpha, beta, ctx, acc, self.now - t0 - pf_s, int(k_steps))
        if j >= k_steps:
            return
        ran = self._steps_s(alpha, beta, ctx, acc, j)
        rep.busy_s -= self._steps_s(alpha, beta, ctx, acc, k_steps) - ran  # the steps not run
        rep.steps -= int(k_steps) - j
        rep.step_k = float(j)
        rep.version += 1
        self._push(t0 + pf_s + ran, EV_STEP, k, rep.version)

    def _handoff(self, r: Req) -> None:
        """A prefilled request's KV has reached the decode pool: the least-loaded decode worker queues it."""
        dec = range(self.n_entry, len(self.reps))
        k = min(dec, key=lambda i: (self._kv_decode(self.reps[i]) + sum(x.need for x in self.reps[i].queue), i))
        r.replica = k
        self._enqueue(k, r)
        if not self.reps[k].busy:
            self._start_step(k)

    def _admit_decode(self, k: int, r: Req) -> None:
        """A decode worker takes a handed-off request: its KV is all there; the first token comes after the
        recipe's scheduler interval at the worker's batch (a recomputed one resumes decoding)."""
        rep = self.reps[k]
        r.cached, r.todo, r.done_pf = r.need, 0.0, 0.0
        if math.isnan(r.first_t):
            r.first_t = self.now + rep.cost.first_token_s(rep.n_dec + 1, r.inp + r.out / 2.0)
            if r.out <= 1.0:  # a single-token reply is done at its first token
                r.done_t = r.first_t
                self._finish_at(r)
                return
            when = r.first_t
        else:
            when = self.now
        rep.kv_used += r.need
        rep.kv_first += r.need
        rep.prompt_blocks += r.prompt_blocks
        rep.running.append(r)
        rep.peak_running = max(rep.peak_running, len(rep.running))
        r.state, r.timer = FIRST, when
        self.seq += 1
        r.hkey = self.seq
        heapq.heappush(rep.first_heap, (when, self.seq, r))

    @staticmethod
    def _kv_decode(rep: Replica) -> float:
        return rep.kv_first + rep.sum_base + rep.n_dec * rep.g

    def _step_decode(self, k: int) -> None:
        """A decode worker's next step: admit handed-off requests, start the ones whose first token is out,
        and decode the batch until the next event (a macro-step summed in closed form, as :meth:`_step`)."""
        rep = self.reps[k]
        self._admit(k)
        now = self.now
        fh, dh = rep.first_heap, rep.dec_heap
        while fh and (fh[0][2].hkey != fh[0][1] or fh[0][0] <= now + 1e-12):
            _, key, r = heapq.heappop(fh)
            if r.hkey != key:
                continue
            rep.kv_first -= r.need
            r.state = DECODE
            r.g0 = rep.g - r.gen
            r.base = r.need - rep.g
            rep.sum_base += r.base
            rep.n_dec += 1
            self.seq += 1
            r.hkey = self.seq
            heapq.heappush(dh, (r.g0 + r.out - 1.0, self.seq, r))
        pending = fh[0][0] if fh else math.inf
        b = rep.n_dec
        if not b:
            if pending < math.inf and pending < rep.wake_at:
                rep.wake_at = pending
                self._push(pending, EV_WAKE, k)
            return
        while dh[0][2].hkey != dh[0][1]:
            heapq.heappop(dh)
        ctx = (rep.sum_base + b * rep.g) / b
        alpha, beta = rep.cost.decode_linear(b, ctx)
        acc = rep.cost.accept
        k1 = max(math.ceil((dh[0][0] - rep.g) / acc - 1e-9), 1)
        horizon = min(self._next_t(), pending) - now
        k_steps = float(min(k1, self._steps_within(alpha, beta, ctx, acc, horizon, k1)))
        dt = self._steps_s(alpha, beta, ctx, acc, k_steps)
        rep.busy = True
        rep.version += 1
        rep.step_dec, rep.step_pf, rep.step_k = [], [], k_steps
        rep.busy_s += dt
        rep.steps += int(k_steps)
        self._push(now + dt, EV_STEP, k, rep.version)

    @staticmethod
    def _steps_s(alpha: float, beta: float, ctx: float, acc: float, k: float) -> float:
        """``k`` decode steps from mean context ``ctx``, each at ``alpha + beta·context`` while the context grows by
        ``acc`` tokens a step, summed in closed form."""
        return k * (alpha + beta * (ctx + acc * (k - 1.0) / 2.0))

    @staticmethod
    def _steps_within(alpha: float, beta: float, ctx: float, acc: float, horizon: float, k1: int) -> int:
        """Smallest step count ``k`` with ``k·(alpha + beta·(ctx + acc·(k−1)/2)) >= horizon`` (``k1`` if none)."""
        if horizon == math.inf:
            return k1
        qa, qb = beta * acc / 2.0, alpha + beta * ctx - beta * acc / 2.0
        if qa > 1e-18:
            kk = (-qb + math.sqrt(qb * qb + 4 * qa * max(horizon, 0.0))) / (2 * qa)
        else:
            kk = max(horizon, 0.0) / max(qb, 1e-12)
        return max(math.ceil(kk - 1e-9), 1)

    def _end_step_decode(self, k: int) -> None:
        rep = self.reps[k]
        now = self.now
        rep.g += rep.step_k * rep.cost.accept
        finished: list[Req] = []
        dh = rep.dec_heap
        while dh and (dh[0][2].hkey != dh[0][1] or dh[0][0] <= rep.g + 1e-9):
            _, key, r = heapq.heappop(dh)
            if r.hkey != key:
                continue
            r.hkey = -1
            r.gen = r.out - 1.0
            r.need = r.base + r.g0 + r.gen
            rep.sum_base -= r.base
            rep.n_dec -= 1
            r.done_t = now
            rep.running.remove(r)
            rep.prompt_blocks -= r.prompt_blocks
            finished.append(r)
        rep.kv_used = self._kv_decode(rep)
        # preemption (recompute in the prefill pool) when decode growth overflows the pool
        while rep.kv_used > rep.cost.pool_tokens and len(rep.running) > 1:
            victim = max(rep.running, key=lambda x: x.admit_t)
            rep.running.remove(victim)
            rep.prompt_blocks -= victim.prompt_blocks
            if victim.state == DECODE:
                victim.gen = rep.g - victim.g0
                victim.need = victim.base + rep.g
                rep.sum_base -= victim.base
                rep.n_dec -= 1
            else:
                rep.kv_first -= victim.need
            victim.hkey = -1
            victim.preempted += 1
            self.preemptions += 1
            rep.kv_used = self._kv_decode(rep)
            self._arrive(victim)
        for r in finished:
            self._finish_at(r)
        self._start_step(k)

    def _admit(self, k: int) -> None:
        rep = self.reps[k]
        pool = rep.cost.pool_tokens
        if rep.role == "decode":
            rep.kv_used = self._kv_decode(rep)
        # a prefill worker batches from its queue what one step's token budget holds (the rest waits there)
        pf_left = (sum(x.todo - x.done_pf for x in rep.running) if rep.role == "prefill" else -math.inf)
        # ... and, with a batch budget (SGLang's input budget), a further prompt only while its tokens (before the
        # cache lookup) fit what is left of it [S77]
        batch = self.opt.batch_tokens
        # a decode worker runs at most its recipe's decode slots, a prefill worker its recipe's prompts at once (the
        # rest wait in its queue)
        slots = (self.opt.batch_prompts if rep.role == "prefill"
                 else self.pools.max_running if rep.role == "decode" and self.pools is not None else math.inf)
        while rep.queue:
            r = rep.queue[0]
            if len(rep.running) >= slots:
                break
            fits = rep.kv_used + r.need <= pool
            if not fits and rep.running:
                break
            if rep.running and (pf_left >= self.opt.budget_tokens if batch is None else pf_left + r.need >= batch):
                break
            if not fits:
                self.oversize += 1
            self._dequeue(k)
            if math.isnan(r.admit_t):
                r.admit_t = self.now
            if rep.role == "decode":
                self._admit_decode(k, r)
                continue
            h, c, d = self.cache.lookup(k, r.ids, self.now) if r.ids.size else (0, 0, 0)
            limit = max(r.need - 1.0, 0.0)
            hbm_t = min(h * self.bs, limit)
            cpu_t = min(c * self.bs, limit - hbm_t)
            disk_t = min(d * self.bs, limit - hbm_t - cpu_t)
            if not r.preempted:
                r.hits = (hbm_t, cpu_t, disk_t)
            r.cached = hbm_t + cpu_t + disk_t
            r.todo = r.need - r.cached
            r.done_pf = 0.0
            load = rep.cost.load_s(cpu_t, disk_t)
            r.load_s += load
            if r.ids.size:
                self.cache.store(k, r.ids, self.now, h)
            rep.kv_used += r.need
            rep.prompt_blocks += r.prompt_blocks
            rep.running.append(r)
            pf_left += r.todo
            if load > 0:
                r.state, r.timer = LOAD, self.now + load
            else:
                r.state, r.ready_t = PREFILL, self.now

    def _hbm_room(self, k: int) -> None:
        """The HBM prefix cache holds what the running requests leave free (their prompts are in it)."""
        if self.unbounded or k >= self.n_entry:
            return
        rep = self.reps[k]
        cap = max(rep.cost.pool_tokens - rep.kv_used, 0.0) / self.bs + rep.prompt_blocks
        tier = self.cache.hbm[k]
        if self.opt.hbm_blocks is not None:
            cap = min(cap, self.opt.hbm_blocks)
        tier.capacity = max(cap, 0.0)
        if tier.count > tier.capacity * 1.01 + 1.0:  # decode growth evicts in bulk, not every step
            tier.evict(tier.capacity)

    # --- steps -------------------------------------------------------------------------------------------
    def _start_step(self, k: int) -> None:
        """Start replica ``k``'s next step. Steps whose end would change nothing but their requests' progress
        (see :meth:`_quiet_end`) run here one after another without an event; the first step that can change
        anything else is scheduled as an event and ends in :meth:`_end_step`."""
        if self.reps[k].role == "decode":
            self._step_decode(k)
            return
        if self.lockstep > 1:
            self._start_group(k // self.lockstep)
            return
        saved = self.now
        while self._step(k):
            pass
        self.now = saved

    def _compose(self, k: int) -> tuple[list[Req], list[tuple[Req, float]], float, float] | None:
        """Admit into replica ``k`` and compose its next step at ``self.now``: the decoding requests, the prefill
        chunks (the framework's token budget), the chunks' price and the earliest load or first-token timer still
        pending. None, with a wake-up set at that timer, when the replica has nothing to run."""
        rep = self.reps[k]
        self._admit(k)
        now = self.now
        pending = math.inf
        dec: list[Req] = []
        pf: list[Req] = []
        for r in rep.running:
            if r.state in (LOAD, FIRST) and r.timer <= now + 1e-12:
                if r.state == LOAD:
                    r.state, r.ready_t = PREFILL, r.timer
                else:
                    r.state = DECODE
            if r.state == DECODE:
                dec.append(r)
            elif r.state == PREFILL:
                pf.append(r)
            else:
                pending = min(pending, r.timer)
        cost = rep.cost
        # an engine that runs prefill alone (SGLang) gives the prompts the whole token budget and runs their pass
        # first: the decoding requests wait for it
        alone = bool(pf) and cost.prefill_alone
        budget = max(self.opt.budget_tokens - (0 if alone else len(dec)), 0.0)
        chunks: list[tuple[Req, float]] = []
        priced: list[tuple[float, float, float]] = []
        for r in pf:
            if budget <= 0:
                break
            c = min(r.todo - r.done_pf, budget)
            if c <= 0 and r.todo > 0:
                continue
            budget -= c
            chunks.append((r, c))
            priced.append((c, r.cached + r.done_pf, c / r.todo if r.todo > 0 else 1.0))
        rep.held = len(dec) if alone and chunks else 0
        if rep.held:
            dec = []
        pf_s = (self._chunk_price(cost, chunks[0][0], priced[0], len(dec)) if len(priced) == 1
                else cost.chunks_s(priced, len(dec)))
        if not dec and not chunks:
            if pending < math.inf and pending < rep.wake_at:
                rep.wake_at = pending
                self._push(pending, EV_WAKE, k)
            return None
        if chunks:
            b = len(dec)
            dec_part = cost.decode_s(b, sum(r.need for r in dec) / b) if b else 0.0
            for r, _ in chunks:
                if r.done_pf == 0.0 and not math.isnan(r.ready_t):
                    r.overhead += now - r.ready_t
                r.overhead += dec_part
        return dec, chunks, pf_s, pending

    @staticmethod
    def _decode_terms(cost: StepCost, dec: list[Req]) -> tuple[float, float, float, int]:
        """A batch's decode step ``alpha + beta·context`` at its mean context, and the steps until its first
        sequence finishes: (alpha, beta, context, steps)."""
        b = len(dec)
        ctx = sum(r.need for r in dec) / b
        alpha, beta = cost.decode_linear(b, ctx)
        rem = min(r.out - 1.0 - r.gen for r in dec)
        return alpha, beta, ctx, max(math.ceil(rem / cost.accept - 1e-9), 1)

    def _step(self, k: int) -> bool:
        """Compose and price one step; True when it ended here quietly (the next one follows at ``self.now``)."""
        c = self._compose(k)
        if c is None:
            return False
        dec, chunks, pf_s, pending = c
        rep = self.reps[k]
        now = self.now
        k_steps = 1.0
        dt = pf_s
        if dec:
            alpha, beta, ctx, k1 = self._decode_terms(rep.cost, dec)
            acc = rep.cost.accept
            if not chunks:
                # a replica runs on past other replicas' step ends (nothing they do reaches it but a request, and
                # an arrival ends the macro-step at the step it falls in: _split)
                horizon = min(self.heap[0][0] if self.heap else math.inf, pending) - now
                k_steps = float(min(k1, self._steps_within(alpha, beta, ctx, acc, horizon, k1)))
            dt += self._steps_s(alpha, beta, ctx, acc, k_steps)
        rep.macro = ((now, alpha, beta, ctx, acc, k_steps, pf_s) if dec and not chunks and k_steps > 1.0 else None)
        rep.busy = True
        rep.version += 1
        rep.step_dec, rep.step_pf, rep.step_k = dec, chunks, k_steps
        rep.busy_s += dt
        rep.steps += int(k_steps)
        end = now + dt
        if self.opt.quiet_steps and len(chunks) == 1 and self._quiet_end(k, end, pending):
            self.now = end
            return True
        self._push(end, EV_STEP, k, rep.version)
        return False

    # --- lockstep groups (data-parallel attention ranks) --------------------------------------------------
    def _ranks(self, gi: int) -> range:
        lo = gi * self.lockstep
        return range(lo, min(lo + self.lockstep, len(self.reps)))

    def _start_group(self, gi: int) -> None:
        """Start lockstep group ``gi``'s next step: each rank composes its own batch and every rank's forward pass
        is aligned (ranks meet in the MoE layers' collectives; a rank without work runs an empty batch), so the
        step takes as long as its slowest rank's. While every working rank only decodes, the steps run as one
        macro-step to the first finishing sequence or the next event, paced by the rank whose steps sum longest
        (an arrival ends it at the step it falls in: :meth:`_split_group`)."""
        now = self.now
        parts = []
        pending = math.inf
        prefill = False
        for k in self._ranks(gi):
            c = self._compose(k)
            if c is not None:
                parts.append((k, *c))
                pending = min(pending, c[3])
                prefill = prefill or bool(c[1])
        if not parts:
            return
        rows: list[tuple[int, float, float, float]] = []
        k1 = math.inf
        for k, dec, _, _, _ in parts:
            if dec:
                alpha, beta, ctx, kd = self._decode_terms(self.reps[k].cost, dec)
                rows.append((k, alpha, beta, ctx))
                k1 = min(k1, kd)
            else:
                rows.append((k, 0.0, 0.0, 0.0))
        acc = self.reps[parts[0][0]].cost.accept
        k_steps = 1.0
        if not prefill:
            pace = max(rows, key=lambda w: self._steps_s(w[1], w[2], w[3], acc, k1))
            horizon = min(self.heap[0][0] if self.heap else math.inf, pending) - now
            k_steps = float(min(k1, self._steps_within(pace[1], pace[2], pace[3], acc, horizon, int(k1))))
        own = [pf_s + (self._steps_s(w[1], w[2], w[3], acc, k_steps) if dec else 0.0)
               for (_, dec, _, pf_s, _), w in zip(parts, rows, strict=True)]
        dt = max(own)
        for (k, dec, chunks, _, _), mine in zip(parts, own, strict=True):
            rep = self.reps[k]
            rep.step_dec, rep.step_pf, rep.step_k = dec, chunks, k_steps
            rep.busy_s += dt
            rep.steps += int(k_steps)
            self.lockstep_wait += dt - mine
        for k in self._ranks(gi):
            self.reps[k].busy = True
        self.group_busy[gi] += dt
        self.group_rows[gi] = rows
        if not prefill and k_steps > 1.0:
            pace = rows[max(range(len(own)), key=own.__getitem__)]
            self.group_macro[gi] = (now, pace[1], pace[2], pace[3], acc, k_steps, dt)
        else:
            self.group_macro[gi] = None
        self.group_version[gi] += 1
        self._push(now + dt, EV_STEP, gi, self.group_version[gi])

    def _split_group(self, gi: int) -> None:
        """End group ``gi``'s running macro-step of pure decode at the first of its steps that ends at or after now
        (the request that just arrived joins a rank's batch there)."""
        t0, alpha, beta, ctx, acc, k_steps, dt = self.group_macro[gi]
        self.group_macro[gi] = None
        j = self._steps_within(alpha, beta, ctx, acc, self.now - t0, int(k_steps))
        if j >= k_steps:
            return
        rows = self.group_rows[gi]
        ran = max(self._steps_s(w[1], w[2], w[3], acc, j) for w in rows)
        for k, a, b, c in rows:
            rep = self.reps[k]
            rep.busy_s -= dt - ran
            rep.steps -= int(k_steps) - j
            rep.step_k = float(j)
            self.lockstep_wait -= (dt - self._steps_s(a, b, c, acc, k_steps)) - (ran - self._steps_s(a, b, c, acc, j))
        self.group_busy[gi] -= dt - ran
        self.group_version[gi] += 1
        self._push(t0 + ran, EV_STEP, gi, self.group_version[gi])

    def _end_group(self, gi: int, version: int) -> None:
        if version != self.group_version[gi]:
            return
        for k in self._ranks(gi):
            self.reps[k].busy = False
        finished: list[Req] = []
        for k, *_ in self.group_rows[gi]:
            finished.extend(self._advance(k))
        for r in finished:
            self._finish_at(r)
        self._start_group(gi)

    def _chunk_price(self, cost: StepCost, r: Req, chunk: tuple[float, float, float], decoding: int) -> float:
        """``cost.chunks_s([chunk], decoding)`` for a request's prefill chunk ``(tokens, context, share)``. A
        long prefill runs as a series of equal chunks at growing context; the series is priced in one vectorized
        call when its first chunk is asked for and looked up (exact match of tokens, share, whether the step
        decodes, and context) for the rest."""
        if not self.opt.quiet_steps:
            return cost.chunks_s([chunk], decoding)
        t, ctx, share = chunk
        key = (t, share, decoding > 0)
        series = r.series
        if series is not None:
            j = r.series_at
            if j < len(series[1]) and series[0] == key and series[1][j] == ctx:
                r.series_at = j + 1
                return series[2][j]
        left = r.todo - r.done_pf
        n = min(int(left // t), 256) if t > 0 else 1
        if n <= 1:
            r.series = None
            return cost.chunks_s([chunk], decoding)
        # the contexts as the engine will compute them (done_pf accumulated chunk by chunk)
        ctxs = []
        done = r.done_pf
        for _ in range(n):
            ctxs.append(r.cached + done)
            done += t
        r.series = (key, ctxs, cost.chunk_series_s(t, ctxs, share, decoding))
        r.series_at = 1
        return r.series[2][0]

    def _quiet_end(self, k: int, end: float, pending: float) -> bool:
        """End the step just composed on replica ``k`` here, if its end changes nothing but progress: no event
        or timer falls before it, its one prefill chunk does not finish the prompt, no decode finishes, and
        the KV growth preempts nothing. What ``_end_step`` then does is exactly the updates below (and
        ``_hbm_room``); the step that follows is composed by the caller at ``end`` as the event would."""
        if self._next_t() <= end or pending <= end + 1e-12:
            return False
        rep = self.reps[k]
        r1, c = rep.step_pf[0]
        if r1.done_pf + c >= r1.todo - 1e-9:
            return False
        grow = rep.step_k * rep.cost.accept
        dec = rep.step_dec
        if dec:
            kv = rep.kv_used
            gs = []
            for r in dec:
                left = r.out - 1.0 - r.gen
                g = left if left < grow else grow  # min(grow, left), as _end_step takes it
                if r.gen + g >= r.out - 1.0 - 1e-9:
                    return False
                kv += g
                gs.append(g)
            if kv > rep.cost.pool_tokens and len(rep.running) > 1:
                return False
            for r, g in zip(dec, gs, strict=True):
                r.gen += g
                r.need += g
            rep.kv_used = kv
        r1.done_pf += c
        rep.busy = False
        self._hbm_room(k)
        self.quiet_ends += 1
        return True

    def _end_step(self, k: int, version: int) -> None:
        """The step of replica ``k`` (of lockstep group ``k`` with lockstep) that ends now."""
        if self.lockstep > 1:
            self._end_group(k, version)
            return
        rep = self.reps[k]
        if version != rep.version:
            return
        rep.busy = False
        if rep.role == "decode":
            self._end_step_decode(k)
            return
        for r in self._advance(k):
            self._finish_at(r)
        self._start_step(k)

    def _advance(self, k: int) -> list[Req]:
        """Apply the step replica ``k`` just ended to its requests (tokens generated, chunks prefilled, first
        tokens, hand-offs, preemptions) and return the requests it finished."""
        rep = self.reps[k]
        now = self.now
        acc = rep.cost.accept
        finished: list[Req] = []
        handed: list[Req] = []
        grow = rep.step_k * acc
        n_dec = len(rep.step_dec) + rep.held  # a pass run alone held the batch: it still decodes
        for r in rep.step_dec:
            g = min(grow, r.out - 1.0 - r.gen)
            r.gen += g
            r.need += g
            rep.kv_used += g
            if r.gen >= r.out - 1.0 - 1e-9:
                finished.append(r)
        for r, c in rep.step_pf:
            r.done_pf += c
            if r.done_pf >= r.todo - 1e-9:
                if rep.role == "prefill":  # its KV moves to the decode pool
                    handed.append(r)
                    continue
                if not math.isnan(r.first_t):  # a recomputed request resumes decoding
                    r.state = DECODE
                    continue
                # the scheduler's polling / streaming interval (waiting for the running step and riding the
                # batch's decode are simulated, r.overhead says how long they took)
                delay = rep.cost.first_token_s(n_dec + 1, r.inp + r.out / 2.0)
                r.first_t = now + delay
                if r.out <= 1.0:
                    r.state, r.timer = FIRST, r.first_t
                    finished.append(r)
                else:
                    r.state, r.timer = FIRST, r.first_t
        for r in finished:
            if r.out <= 1.0 and r.first_t > now:
                # single-token reply: done at its first token
                r.done_t = r.first_t
            else:
                r.done_t = now
            rep.running.remove(r)
            rep.kv_used -= r.need
            rep.prompt_blocks -= r.prompt_blocks
        assert self.pools is not None or not handed
        for r in handed:
            rep.running.remove(r)
            rep.kv_used -= r.need
            rep.prompt_blocks -= r.prompt_blocks
            r.series = None
            r.hand_s = self.pools.transfer_s(r.need)  # type: ignore[union-attr]
            self._push(now + self.pools.handoff_s(r.need), EV_HANDOFF, r)  # type: ignore[union-attr]
        # preemption (recompute) when decode growth overflows the pool
        while rep.kv_used > rep.cost.pool_tokens and len(rep.running) > 1:
            victim = max(rep.running, key=lambda x: x.admit_t)
            rep.running.remove(victim)
            rep.kv_used -= victim.need
            rep.prompt_blocks -= victim.prompt_blocks
            victim.preempted += 1
            self.preemptions += 1
            self._enqueue(k, victim, front=True)
        self._hbm_room(k)
        return finished

    def _finish_at(self, r: Req) -> None:
        saved = self.now
        self.now = max(self.now, r.done_t)
        self._call_done(r)
        self.now = saved

    def _result(self) -> EngineResult:
        self._q(0)
        self._flight(0)
        d = self.done
        makespan = float(np.nanmax(self.sess_end)) if self.sess_end.size else 0.0
        by_role: dict[str, dict[str, float]] = {}
        for k, rep in enumerate(self.reps):
            self._q(0, k)
            q = by_role.setdefault(rep.role, {"area": 0.0, "entries": 0.0, "wait_s": 0.0})
            q["area"] += rep.q_area
            q["entries"] += rep.q_entries
            q["wait_s"] += rep.q_wait
        return EngineResult(
            req_call=np.array([r.call for r in d], dtype=np.int64),
            issue_t=np.array([r.issue_t for r in d]), first_t=np.array([r.first_t for r in d]),
            done_t=np.array([r.done_t for r in d]), queue_s=np.array([r.queue_s for r in d]),
            hits=np.array([r.hits for r in d], dtype=float).reshape(-1, 3),
            load_s=np.array([r.load_s for r in d]),
            inp=np.array([r.inp for r in d]), out=np.array([r.out for r in d]),
            sess_plan=np.array([s for s, _ in self.order], dtype=np.int64),
            sess_start=self.sess_start, sess_end=self.sess_end, makespan_s=makespan,
            busy_s=[rep.busy_s for rep in self.reps], queue_area=self.q_area, queue_entries=self.q_entries,
            preemptions=self.preemptions, oversize=self.oversize, peak_in_flight=self.peak_in_flight,
            mean_in_flight=self.in_flight_area / makespan if makespan > 0 else 0.0,
            evicted_blocks={"hbm": sum(t.evicted for t in self.cache.hbm), "cpu": self.cache.cpu.evicted,
                            "disk": self.cache.disk.evicted},
            roles=[rep.role for rep in self.reps], queue_by_role=by_role,
            handoff_s=np.array([r.hand_s for r in d]), peak_running=[rep.peak_running for rep in self.reps],
            group_busy_s=list(self.group_busy), lockstep_wait_s=self.lockstep_wait,
            sess_failed=(self.opt.failed[np.array([s for s, _ in self.order], dtype=np.int64)]
                         if self.opt.failed is not None else np.zeros(len(self.order), dtype=bool)))
