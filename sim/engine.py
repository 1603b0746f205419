"""The discrete-event engine (simpy): host thread, launch queues, in-order streams, shared GPU.

The engine schedules; it never prices and reads no profile: kernel costs and host prices come in
precomputed (sim.costmodel, sim.costmodel.host.HostCosts).

- The host issues ops in program order and pays per-op host cost by execution mode:
  eager (framework dispatch + driver launch per kernel), compiled (one wrapper call per
  region, a Triton launcher per kernel), CUDA graph (one replay call per region; kernels
  follow each other on the device, each paying the graph's per-kernel fixed cost
  instead of a stream launch's).
- Each stream has a bounded launch queue (simpy.Store); the host blocks when it is full.
- Streams run their kernels in order; a kernel waits for its dependencies (events of
  earlier ops on other streams) and starts no earlier than its launch plus launch latency.
- Kernels that overlap share the GPU as a fluid: each running kernel demands a share of
  HBM bandwidth and of SMs; when the demands add up to more than 1, all slow down in
  proportion (two bandwidth-bound kernels side by side take as long as one after another).
- A `sync` op blocks the host until every stream is idle; the step ends when the host is
  done and every stream has drained.
- Several ranks (Ranks, simulate_ranks) share one clock, each with its host, streams and
  GPU. A collective kernel holds its CTAs' SMs from the moment its stream starts it; it moves
  data only once every rank of its group has arrived (the rendezvous), then pays its latency
  and its transfer, sharing links with the other collectives in flight (LinkShare) and
  streaming HBM on each member GPU. One rank never takes this path: its results are the
  same, bit for bit, as before ranks existed.

Speed (benchmarks/bench_engine.py): the hot loop creates only the simpy events that carry
the model: one timeout per host busy span, one timeout for the launch latency, one completion
event per kernel and one wake-up timeout per change of the set of running kernels; the launch
queue (LaunchQueue) costs an event only when a stream or the host has to wait on it (about 4
events per kernel on the benchmark's eager graph, 5.3 with a simpy.Store). A kernel that ends alone
resumes its stream at once where simpy would process its completion next anyway (succeed_in_turn),
and the host or a stream that would wait on a timeout, or on a kernel alone on the GPU, that is the
next event anyway goes on at once (advance_in_turn, finish_in_turn; event counts in the commit
messages). Completion events of
ops are created only when someone waits for them, the GPU's wake-up is a timeout with a callback
(not a process per wake-up), and intervals are kept in columns (sim.trace.Records) that the Trace
takes as they are. Processor sharing is written once (ProcessorSharing: the GPU's kernels, the
links' collectives); the GPU keeps its rate between changes instead of recomputing it, and a
kernel starting or ending alone on an idle GPU takes a written-out path with the same float
operations (tests/test_engine_outputs.py and the goldens hold the results bit for bit). The hot loops
build their events as simpy's __init__ would (new_event, then the same fields; a timeout pushed on the
queue as Environment.schedule does), a stream waits on one pending dependency through a relay event
instead of an AllOf (the same place in the callbacks, the same event id: the same order), and a kernel
starting on an idle GPU takes finish_in_turn and run()'s idle path as one block in the stream loop.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from heapq import heappop, heappush
from itertools import count
from types import MappingProxyType
from typing import Any

import simpy
from simpy.events import NORMAL, Event, Timeout

from sim.costmodel.host import HostCosts
from sim.gcpause import paused_gc
from sim.graph import Graph
from sim.kernelcost import KernelCost, release_beside, release_loss, rounds_beside
from sim.trace import HOST_TRACK, Records, Trace, stream_track

_EPS = 1e-15
_FILLING = 1.0 - 1e-9  # a kernel whose blocks alone cover every SM (sm_demand is capped at 1)
_FREE_SM_FLOOR = 0.02  # held CTAs never leave the other kernels less than this share of SMs
_NO_ARGS: MappingProxyType[str, Any] = MappingProxyType({})
# False: every timeout and kernel goes through simpy's queue (advance_in_turn, finish_in_turn and the
# host's written-out check never skip one); tests hold the in-turn paths against that, record for record.
IN_TURN = True
_DUE_NOW: list[Any] = [(-math.inf,)]  # a queue whose first event is always due: nothing goes in turn
new_event = object.__new__  # an event's object without its __init__ (the hot loops set its fields as simpy's would)


class ProcessorSharing:
    """Processor sharing, written once: jobs that would take `remaining_s` alone progress at rates
    that change only when the set of jobs (or a demand) changes; one wake-up timeout per change.

    Every change goes `_advance()` (progress at the rates in force since the last change), edit
    the jobs, `_settle()`: jobs that are done fire their events (in start order), `_after_done()`,
    `_rerate()` sets the new rates and gives the time to the next completion, a wake-up timeout is
    scheduled for it (a timeout with a callback, not a process: a later settle supersedes it),
    `_after_settle()`. Subclasses say how demands become rates: the GPU one rate for all its
    kernels (FluidGPU, HoldingGPU), the links one rate per flow (LinkShare).
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.jobs: dict[int, Any] = {}  # id -> job (remaining_s, done, ...), in start order
        self._next_id = 0
        self._last = 0.0
        self._wakeup: simpy.Event | None = None  # the one pending wake-up that still counts

    def _advance(self) -> None:
        """Progress every job at its rate from the last change to now."""
        now = self.env._now
        dt = now - self._last
        if dt > 0:
            for j in self.jobs.values():
                j.remaining_s -= dt * j.rate
        self._last = now

    def _rerate(self) -> float | None:
        """Set the jobs' rates for what runs now; the time to the soonest completion (None: none)."""
        raise NotImplementedError

    def _after_done(self) -> None:
        """After finished jobs fired, before the rates are set (HoldingGPU's admissions)."""

    def _after_settle(self) -> None:
        """After the wake-up is scheduled (HoldingGPU tells the links its HBM load changed)."""

    def _done(self, jid: int) -> None:
        self.jobs.pop(jid).done.succeed()

    def _schedule_wake(self) -> None:
        """Set the running jobs' rates and schedule the wake-up at the soonest end (none when idle)."""
        soonest = self._rerate() if self.jobs else None
        if soonest is not None:
            wake = Timeout(self.env, max(0.0, soonest))
            wake.callbacks.append(self._wake)
            self._wakeup = wake
        else:
            self._wakeup = None
        self._after_settle()

    def _settle(self) -> None:
        jobs = self.jobs
        limit = _EPS * max(1.0, self.env._now)
        for jid in [jid for jid, j in jobs.items() if j.remaining_s <= limit]:
            self._done(jid)
        self._after_done()
        self._schedule_wake()

    def _wake(self, event: simpy.Event) -> None:
        if event is not self._wakeup:
            return
        self._advance()
        for j in self.jobs.values():
            if j.remaining_s < 1e-12:
                j.remaining_s = 0.0
        self._settle()


class _Job:
    __slots__ = ("remaining_s", "bw", "sm", "done")

    def __init__(self, remaining_s: float, bw: float, sm: float, done: simpy.Event) -> None:
        self.remaining_s = remaining_s
        self.bw = bw
        self.sm = sm
        self.done = done


class FluidGPU(ProcessorSharing):
    """Processor sharing of SMs and HBM bandwidth among the kernels running at once: one rate for
    every kernel, 1 / the larger of the summed HBM and SM demands (at least 1)."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self.rate = 1.0  # in force since the last change (set by _rerate)

    def _rate(self) -> float:
        jobs = self.jobs
        if len(jobs) == 1:  # the common case, and the same float as the sums below
            for j in jobs.values():
                return 1.0 / max(1.0, j.bw, j.sm)
        bw = sum(j.bw for j in jobs.values())
        sm = sum(j.sm for j in jobs.values())
        return 1.0 / max(1.0, bw, sm)

    def _advance(self) -> None:
        now = self.env._now
        dt = now - self._last
        if dt > 0 and self.jobs:
            progress = dt * self.rate
            for j in self.jobs.values():
                j.remaining_s -= progress
        self._last = now

    def _rerate(self) -> float | None:
        rate = self.rate = self._rate()
        jobs = self.jobs
        if len(jobs) == 1:
            for j in jobs.values():
                return j.remaining_s / rate
        return min(j.remaining_s for j in jobs.values()) / rate

    def run(self, work_s: float, bw: float, sm: float) -> simpy.Event:
        """Start a kernel that would take `work_s` alone; the event fires when it is done."""
        env = self.env
        ev = simpy.Event(env)
        jobs = self.jobs
        if not jobs and type(self) is FluidGPU:
            # The generic path below for a kernel starting on an idle GPU, written out: the same
            # float operations, in the same order.
            # (max() written as comparisons that pick the same operand max() would.)
            now = self._last = env._now
            remaining = 0.0 if 0.0 > work_s else work_s
            if remaining <= _EPS * (now if now > 1.0 else 1.0):
                self._next_id += 1
                ev.succeed()
                self._wakeup = None
                return ev
            jobs[self._next_id] = _Job(remaining, bw, sm, ev)
            self._next_id += 1
            demand = bw if bw > 1.0 else 1.0
            rate = self.rate = 1.0 / (sm if sm > demand else demand)
            delay = remaining / rate
            wake = Timeout(env, delay if delay > 0.0 else 0.0)
            wake.callbacks.append(self._wake)
            self._wakeup = wake
            return ev
        self._advance()
        jobs[self._next_id] = _Job(max(work_s, 0.0), bw, sm, ev)
        self._next_id += 1
        self._settle()
        return ev

    def finish_in_turn(self, work_s: float, bw: float, sm: float) -> bool:
        """`yield self.run(work_s, bw, sm)` for a kernel that starts alone on this idle GPU and ends
        before any scheduled event is due, by a process resumed as the last callback of the event
        being processed (advance_in_turn's condition): the kernel runs and ends, and the clock moves
        to its end, without its wake-up timeout and completion event (True); otherwise nothing
        changes (False: run it). The float operations are run()'s idle path, then _wake's for one
        kernel, in the same order; its wake-up would be the next event (due before every scheduled
        one) and its completion would resume the caller at once (succeed_in_turn: nothing else due
        at its end), so nothing else runs in between either way. Only a FluidGPU proper (one rank)."""
        env = self.env
        now = env._now
        queue = env._queue if IN_TURN else _DUE_NOW
        if self.jobs or (queue and queue[0][0] <= now):  # busy, or an event due now (it ends no earlier)
            return False
        remaining = 0.0 if 0.0 > work_s else work_s
        if remaining <= _EPS * (now if now > 1.0 else 1.0):
            return False  # done at once: run() succeeds its event now
        demand = bw if bw > 1.0 else 1.0
        rate = 1.0 / (sm if sm > demand else demand)
        delay = remaining / rate
        end = now + (delay if delay > 0.0 else 0.0)  # the wake-up's time, as simpy's schedule adds it
        if queue and queue[0][0] <= end:
            return False
        dt = end - now
        if dt > 0:
            remaining = remaining - dt * rate
        if remaining < 1e-12:
            remaining = 0.0
        if remaining > _EPS * (end if end > 1.0 else 1.0):
            return False  # not done at its wake-up (rounding): the generic path takes another
        self._last = end
        self.rate = rate
        self._next_id += 1
        self._wakeup = None
        env._now = end
        return True

    def _wake(self, event: simpy.Event) -> None:
        # ProcessorSharing._wake, written out for the common case of one kernel running alone that
        # ends now: the same float operations, in the same order, without the generic calls.
        jobs = self.jobs
        if event is not self._wakeup or len(jobs) != 1:  # (HoldingGPU takes ProcessorSharing._wake)
            return ProcessorSharing._wake(self, event)
        now = self.env._now
        dt = now - self._last
        self._last = now
        for jid, j in jobs.items():
            remaining = j.remaining_s
            if dt > 0:
                remaining = j.remaining_s = remaining - dt * self.rate
            if remaining < 1e-12:
                remaining = j.remaining_s = 0.0
            if remaining <= _EPS * (now if now > 1.0 else 1.0):
                del jobs[jid]
                self._wakeup = None
                # succeed_in_turn(self.env, j.done), written out
                done = j.done
                env = self.env
                queue = env._queue
                if queue and queue[0][0] <= now:  # another event is due now: it goes first, as in simpy
                    # done.succeed(), written out (Event.succeed, Environment.schedule)
                    done._ok = True
                    done._value = None
                    heappush(queue, (now, NORMAL, next(env._eid), done))
                    return None
                done._ok = True
                done._value = None
                callbacks, done.callbacks = done.callbacks, None  # as simpy's step
                for callback in callbacks:
                    callback(done)
                return None
            break
        self._settle()
        return None


def succeed_in_turn(env: simpy.Environment, event: simpy.Event) -> None:
    """`event.succeed()`, called last in the last callback of the event being processed: where no
    other event is scheduled for now, simpy would process this one next, so its callbacks run at
    once instead of through the queue (a push and a pop less; the order of everything is simpy's).
    A kernel ending alone on the GPU resumes its stream this way (about one event in four)."""
    queue = env._queue
    if queue and queue[0][0] <= env._now:  # another event is due now: it goes first, as in simpy
        event.succeed()
        return
    event._ok = True
    event._value = None
    callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]  # as simpy's step
    for callback in callbacks:
        callback(event)


def advance_in_turn(env: simpy.Environment, delay: float) -> bool:
    """`yield Timeout(env, delay)`, for a process resumed as the last callback of the event being
    processed: where no scheduled event is due by then, the timeout would be the next event simpy
    processes and its only callback resumes this process, so the clock moves on to its time at once
    and the caller goes on without yielding (True). Otherwise nothing changes (False: yield it).

    Why the order of everything stays simpy's: simpy processes events by (time, priority, id); a
    timeout created now would take an id above every scheduled one, so it goes next exactly when
    every scheduled event is due later than it (an event due at the same instant has a smaller id and
    goes first: then this answers False). Nothing else runs between this call and the caller's
    resumption in either case, so the same code runs in the same order on the same state; only the
    ids of later events are one lower, all of them, which keeps their relative order. The time is
    `env._now + delay`, the float simpy's schedule computes."""
    at = env._now + delay
    queue = env._queue if IN_TURN else _DUE_NOW
    if queue and queue[0][0] <= at:
        return False
    env._now = at
    return True


def run_to_end(env: simpy.Environment) -> None:
    """`env.run()` (no `until`): process every scheduled event, in simpy's own order, until none is
    left. simpy's Environment.step, written out in the loop: one Python call less per event (the
    engine processes about 4 events per kernel). A failed event nobody waited for raises as in
    simpy; nothing here sets `until`, so StopSimulation is not handled."""
    queue = env._queue
    pop = heappop
    while queue:
        env._now, _, _, event = pop(queue)
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]  # as simpy's step
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


class Environment(simpy.Environment):
    """simpy's Environment, except that it binds `process`, `timeout`, `event`, `all_of` and
    `any_of` to itself on each access instead of once at creation (simpy's BoundClass.bind_early
    stores them on the instance: a reference cycle through every environment). Without the cycle,
    reference counting frees a finished simulation at once, and the collector never has to find
    it (a sweep worker ran 42 simulations a point, each leaving 14 objects of cyclic garbage).
    The engine's hot loop creates its events as `Timeout(env, ...)`, `simpy.Event(env)`."""

    def __init__(self, initial_time: float = 0) -> None:
        # simpy.Environment.__init__ without BoundClass.bind_early (simpy 4.1).
        self._now = initial_time
        self._queue = []
        self._eid = count()
        self._active_proc: simpy.Process | None = None


class LaunchQueue:
    """A stream's bounded launch queue: the host appends, the stream takes in order.

    Built on simpy events but lighter than simpy.Store: an item handed to a stream that is
    already running is taken without any event, and a stream or host that has to wait waits on
    one event (a Store costs a put and a get event per item).
    """

    __slots__ = ("env", "capacity", "items", "taker", "room")

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self.env = env
        self.capacity = capacity
        self.items: deque[tuple[int, float, bool]] = deque()
        self.taker: simpy.Event | None = None  # the stream, waiting for an item
        self.room: simpy.Event | None = None  # the host, waiting for a free slot

    def full(self) -> bool:
        return len(self.items) >= self.capacity

    def wait_room(self) -> simpy.Event:
        ev = self.room = simpy.Event(self.env)
        return ev

    def put(self, item: tuple[int, float, bool]) -> None:
        self.items.append(item)
        taker = self.taker
        if taker is not None:
            self.taker = None
            taker.succeed()

    def wait_item(self) -> simpy.Event:
        ev = self.taker = simpy.Event(self.env)
        return ev

    def take(self) -> tuple[int, float, bool]:
        item = self.items.popleft()
        room = self.room
        if room is not None:
            self.room = None
            room.succeed()
        return item


class Simulation:
    """One simulation of one graph on one profile; owns all its state."""

    def __init__(self, graph: Graph, costs: Sequence[KernelCost | None], host: HostCosts,
                 env: simpy.Environment | None = None) -> None:
        self.graph = graph
        self.costs = tuple(costs)
        self.host_costs = host
        # One rank owns its environment; ranks of one run share theirs (Ranks) and hold collectives' SMs.
        self.env = Environment() if env is None else env
        self.gpu: FluidGPU = FluidGPU(self.env) if env is None else HoldingGPU(self.env)
        self._records = Records()  # every interval, in columns; the Trace takes them as they are
        # what each op waits for, in two int arrays (Graph.dependency_columns: no tuple per op)
        self.dep_starts, self.dep_flat = graph.dependency_columns()
        self.finished = [False] * len(graph.ops)
        self.waiters: dict[int, simpy.Event] = {}  # op → event, only for ops someone waits for
        streams = graph.kernel_streams()
        self.queues = {s: LaunchQueue(self.env, host.launch_queue_depth) for s in streams}
        self.outstanding = {s: 0 for s in streams}
        self.idle_events: dict[int, simpy.Event] = {}
        self.rank = 0
        self.rendezvous: Ranks | None = None  # set when this is one rank of several (Ranks)
        self._stream_loops: list[Any] = []  # the streams' generators: they wait for work forever

    # -- ops' completion ----------------------------------------------------------------
    def _finish(self, i: int) -> None:
        self.finished[i] = True
        ev = self.waiters.pop(i, None)
        if ev is not None:
            ev.succeed()

    def _waiter(self, i: int) -> simpy.Event:
        ev = self.waiters.get(i)
        if ev is None:
            ev = self.waiters[i] = simpy.Event(self.env)
        return ev

    # -- host -------------------------------------------------------------------------
    def _host_interval(self, name: str, cat: str, start: float, op: int = -1) -> None:
        now = self.env._now
        if now > start:
            self._records.add(start, now, HOST_TRACK, name, cat, op, _NO_ARGS)

    def _blocked_interval(self, op_name: str, start: float, op: int) -> None:
        """The host waited for room in a launch queue from `start` to now (`blocked: OP`)."""
        now = self.env._now
        if now > start:
            self._records.add_blocked(start, now, HOST_TRACK, op_name, op)

    def _wait_idle(self):
        for s in self.queues:
            if self.outstanding[s] > 0:
                ev = simpy.Event(self.env)
                self.idle_events[s] = ev
                yield ev

    def host(self):
        hc, ops, env = self.host_costs, self.graph.ops, self.env
        record, queues, outstanding = self._records.add, self.queues, self.outstanding
        launch_s = hc.launch_s
        # Eager dispatch priced once per eager_dispatch_key (by content); its lookup by attrs object inline.
        dispatch_prices = hc.dispatch_prices
        dispatch_by_object, dispatch_miss = dispatch_prices.by_object.get, dispatch_prices.miss
        host_op_prices = hc.host_op_prices
        host_op_by_object, host_op_miss = host_op_prices.by_object.get, host_op_prices.miss
        finished, waiters = self.finished, self.waiters
        # The host is the only process waiting on its events (its timeouts, its queues' free slots,
        # the streams' idle events), so it resumes as the last callback of the event being processed
        # and may skip a timeout that would be the next event anyway (advance_in_turn).
        heap = env._queue if IN_TURN else _DUE_NOW
        env_queue, event_ids = env._queue, env._eid
        recs = self._records  # Records.add_pair, written out below
        start_rows, flushed = recs.start_rows, recs.start  # a row's index: len(flushed) + len(start_rows)
        r_start, r_end, r_track, r_name = start_rows.extend, recs.end_rows.extend, recs.track.extend, recs.name.extend
        r_cat, r_op, r_args = recs.cat.extend, recs.op_rows.extend, recs.args.extend
        b_row, b_start, b_end, b_track = recs.blocked_rows.append, start_rows.append, recs.end_rows.append, recs.track.append
        b_name, b_cat, b_op, b_args = recs.name.append, recs.cat.append, recs.op_rows.append, recs.args.append
        host_pair, dispatch_launch, no_args_pair = (HOST_TRACK, HOST_TRACK), ("dispatch", "launch"), (_NO_ARGS, _NO_ARGS)
        n = len(ops)
        i = 0
        while i < n:
            if not i & 0x3FFF:  # every 16384 ops, the records' rows go into their arrays (memory)
                recs.flush()
            op = ops[i]
            kind = op.kind
            if kind == "sync":
                start = env._now
                yield from self._wait_idle()
                self._host_interval(f"sync: {op.name}", "sync", start, i)
                if hc.sync_s > 0:
                    start = env._now
                    if not advance_in_turn(env, hc.sync_s):
                        yield Timeout(env, hc.sync_s)
                    self._host_interval(op.name, "sync", start, i)
                self._finish(i)
                i += 1
                continue
            if kind == "host":
                # hc.host_op_s(op), _host_interval and _finish, written out (a sweep point's small
                # steps have about as many host ops as kernels); the memo's lookup as for dispatch.
                seconds = op.host_s
                if seconds is None:
                    attrs = op.attrs
                    hit = host_op_by_object((id(attrs), kind, op.library))
                    seconds = hit[1] if hit is not None and hit[0] is attrs else host_op_miss(op)
                if seconds > 0:
                    start = env._now
                    if not advance_in_turn(env, seconds):
                        yield Timeout(env, seconds)
                    if env._now > start:
                        record(start, env._now, HOST_TRACK, op.name, "host", i, _NO_ARGS)
                finished[i] = True
                if waiters:
                    ev = waiters.pop(i, None)
                    if ev is not None:
                        ev.succeed()
                i += 1
                continue
            if op.mode in ("compiled", "cuda_graph"):
                j = i
                while j < n and ops[j].mode == op.mode and ops[j].region == op.region and ops[j].is_kernel:
                    j += 1
                label = op.region or op.name
                if op.mode == "compiled":
                    call_s = hc.compiled_call_s(op)
                    if call_s > 0:
                        start = env._now
                        if not advance_in_turn(env, call_s):
                            yield Timeout(env, call_s)
                        self._host_interval(f"compiled call: {label}", "compiled_call", start, i)
                    for k in range(i, j):
                        if hc.compiled_kernel_s > 0:
                            start = env._now
                            if not advance_in_turn(env, hc.compiled_kernel_s):
                                yield Timeout(env, hc.compiled_kernel_s)
                            self._host_interval(ops[k].name, "launch", start, k)
                        yield from self._enqueue(k, False)
                else:
                    if hc.graph_launch_s > 0:
                        start = env._now
                        if not advance_in_turn(env, hc.graph_launch_s):
                            yield Timeout(env, hc.graph_launch_s)
                        self._host_interval(f"graph replay: {label}", "graph_launch", start, i)
                    for k in range(i, j):
                        yield from self._enqueue(k, True)
                i = j
                continue
            if op.host_s is not None:
                if op.host_s > 0:
                    start = env._now
                    if not advance_in_turn(env, op.host_s):
                        yield Timeout(env, op.host_s)
                    self._host_interval(op.name, "dispatch", start, i)
            else:
                start = env._now
                # EagerDispatchPrices.__call__, written out: a repeat block's copies share their
                # declaration's attrs object, found here; other ops go by content (eager_dispatch_key).
                attrs = op.attrs
                hit = dispatch_by_object((id(attrs), kind, op.library))
                dispatch_s = hit[1] if hit is not None and hit[0] is attrs else dispatch_miss(op)
                dispatched = start + dispatch_s
                launched = dispatched + launch_s
                if dispatch_s > 0 and launch_s > 0 and start + (launched - start) == launched:
                    # One timeout for dispatch + launch when it lands on the same float as two would;
                    # none where it would be the next event anyway (advance_in_turn, written out).
                    if heap and heap[0][0] <= launched:
                        # Timeout(env, launched - start), written out (Timeout.__init__, Environment.schedule)
                        delay = launched - start
                        wait = new_event(Timeout)
                        wait.env = env
                        wait.callbacks = []
                        wait._value = None
                        wait._delay = delay
                        wait._ok = True
                        heappush(env_queue, (env._now + delay, NORMAL, next(event_ids), wait))
                        yield wait
                    else:
                        env._now = launched
                    if launched > dispatched > start:
                        # Records.add_pair, written out (the hot path of eager mode).
                        name = op.name
                        r_start((start, dispatched))
                        r_end((dispatched, launched))
                        r_track(host_pair)
                        r_name((name, name))
                        r_cat(dispatch_launch)
                        r_op((i, i))
                        r_args(no_args_pair)
                    else:
                        if dispatched > start:
                            record(start, dispatched, HOST_TRACK, op.name, "dispatch", i, _NO_ARGS)
                        if launched > dispatched:
                            record(dispatched, launched, HOST_TRACK, op.name, "launch", i, _NO_ARGS)
                else:
                    if dispatch_s > 0:
                        if not advance_in_turn(env, dispatch_s):
                            yield Timeout(env, dispatch_s)
                        if env._now > start:
                            record(start, env._now, HOST_TRACK, op.name, "dispatch", i, _NO_ARGS)
                    if hc.launch_s > 0:
                        start = env._now
                        if not advance_in_turn(env, hc.launch_s):
                            yield Timeout(env, hc.launch_s)
                        if env._now > start:
                            record(start, env._now, HOST_TRACK, op.name, "launch", i, _NO_ARGS)
            # _enqueue inlined (the hot path of eager mode). A put that fits is done at once and the
            # host goes on; the stream still receives it when simpy processes the put.
            start = env._now
            stream = op.stream
            outstanding[stream] += 1
            queue = queues[stream]
            if len(queue.items) >= queue.capacity:  # the host blocks until the stream takes a kernel
                # queue.wait_room(), written out (the event without simpy's __init__ call)
                room = queue.room = new_event(Event)
                room.env = env
                room.callbacks = []
                yield room
                if env._now > start:  # Records.add_blocked (_blocked_interval), written out
                    b_row(len(flushed) + len(start_rows))
                    b_start(start)
                    b_end(env._now)
                    b_track(HOST_TRACK)
                    b_name(op.name)
                    b_cat("blocked")
                    b_op(i)
                    b_args(_NO_ARGS)
            # LaunchQueue.put, written out: issued when the host got to it, as before it blocked.
            queue.items.append((i, start, False))
            taker = queue.taker
            if taker is not None:
                queue.taker = None
                taker.succeed()
            i += 1

    def _enqueue(self, i: int, graph_member: bool):
        op = self.graph.ops[i]
        start = self.env._now
        self.outstanding[op.stream] += 1
        queue = self.queues[op.stream]
        if queue.full():
            yield queue.wait_room()
            self._blocked_interval(op.name, start, i)
        queue.put((i, start, graph_member))

    # -- device -----------------------------------------------------------------------
    def stream(self, s: int):
        hc, env, gpu = self.host_costs, self.env, self.gpu
        ops, costs, finished = self.graph.ops, self.costs, self.finished
        dep_starts, dep_flat = self.dep_starts, self.dep_flat
        queue = self.queues[s]
        track = stream_track(s)
        recs = self._records  # Records.add, written out in the loop below
        r_start, r_end, r_track, r_name = recs.start_rows.append, recs.end_rows.append, recs.track.append, recs.name.append
        r_cat, r_op, r_args = recs.cat.append, recs.op_rows.append, recs.args.append
        latency = hc.launch_latency_s
        args_by_cost: dict[int, MappingProxyType[str, Any]] = {}
        meet = self.rendezvous  # None on one rank: collectives run as plain kernels
        items = queue.items
        popleft = items.popleft
        waiters, outstanding, idle_events = self.waiters, self.outstanding, self.idle_events
        collective_ops = meet.collective_ops if meet is not None else frozenset()
        run, gpu_wake, in_turn = gpu.run, gpu._wake, IN_TURN
        heap, event_ids, gpu_jobs = env._queue, env._eid, gpu.jobs
        busy_until = 0.0  # when this stream's last kernel ended
        while True:
            if not items:
                yield queue.wait_item()
            # LaunchQueue.take, written out.
            i, issued_s, graph_member = popleft()
            room = queue.room
            if room is not None:
                queue.room = None
                # room.succeed(), written out (Event.succeed, Environment.schedule): only the host
                # waits on it, and it is pending until here
                room._ok = True
                room._value = None
                heappush(heap, (env._now, NORMAL, next(event_ids), room))
            lo, hi = dep_starts[i], dep_starts[i + 1]
            if hi == lo + 1:  # one dependency (the usual case): the same condition, without a list pass
                d = dep_flat[lo]
                if not finished[d]:
                    # `yield env.all_of([waiter])` for one pending event, without simpy's Condition: the
                    # condition's _check would sit at this place in the waiter's callbacks and, when the
                    # waiter is processed, schedule the condition now (one event id, NORMAL); the relay
                    # does the same with a plain event, and the stream resumes when it is processed.
                    relay = new_event(Event)
                    relay.env = env
                    relay.callbacks = []
                    self._waiter(d).callbacks.append(relay.succeed)  # type: ignore[arg-type]  # its return value is unused
                    yield relay
            elif hi > lo:
                pending = [self._waiter(d) for d in dep_flat[lo:hi] if not finished[d]]
                if len(pending) == 1:  # as above
                    relay = new_event(Event)
                    relay.env = env
                    relay.callbacks = []
                    pending[0].callbacks.append(relay.succeed)  # type: ignore[arg-type]
                    yield relay
                elif pending:
                    yield env.all_of(pending)
            cost = costs[i]
            assert cost is not None
            if graph_member:
                # Inside a graph the per-kernel fixed cost is the graph's, not a stream launch's.
                work = cost.time_s - cost.fixed_s + hc.graph_kernel_s
                earliest = max(busy_until, issued_s + latency)
            else:
                work = cost.time_s
                earliest = issued_s + latency
            now = env._now
            if earliest > now:
                # One rank: the stream is the only process waiting on its events (its queue's next
                # item, its dependencies' condition, its timeouts, its kernels' completions), so it
                # resumes as the last callback of the event being processed and may skip a timeout or
                # a kernel alone that would be the next event anyway (advance_in_turn, finish_in_turn).
                # Ranks share a collective's completion between streams: they always yield.
                if meet is not None or not advance_in_turn(env, earliest - now):
                    yield Timeout(env, earliest - now)
                now = env._now
            if meet is None:
                bw, sm = cost.bw_demand, cost.sm_demand
                if gpu_jobs:
                    yield run(work, bw, sm)
                else:
                    # The GPU is idle (a FluidGPU proper: one rank). finish_in_turn, then run()'s idle
                    # path where the kernel does not end in turn, written out as one: the same float
                    # operations in the same order, the same events created at the same points.
                    remaining = 0.0 if 0.0 > work else work
                    if remaining <= _EPS * (now if now > 1.0 else 1.0):  # done at once: run() succeeds it now
                        gpu._last = now
                        gpu._next_id += 1
                        ev = new_event(Event)
                        ev.env = env
                        ev.callbacks = []
                        gpu._wakeup = None
                        ev.succeed()
                        yield ev
                    else:
                        demand = bw if bw > 1.0 else 1.0
                        rate = 1.0 / (sm if sm > demand else demand)
                        delay = remaining / rate
                        if not delay > 0.0:  # as run()'s `delay if delay > 0.0 else 0.0`
                            delay = 0.0
                        end = now + delay  # the wake-up's time, as simpy's schedule adds it
                        done_in_turn = False
                        if in_turn and not (heap and heap[0][0] <= end):
                            # finish_in_turn: the wake-up would be the next event and the kernel's
                            # completion would resume this stream at once
                            left = remaining
                            dt = end - now
                            if dt > 0:
                                left = left - dt * rate
                            if left < 1e-12:
                                left = 0.0
                            done_in_turn = left <= _EPS * (end if end > 1.0 else 1.0)
                        if done_in_turn:
                            gpu._last = end
                            gpu.rate = rate
                            gpu._next_id += 1
                            gpu._wakeup = None
                            env._now = end
                        else:
                            gpu._last = now
                            ev = new_event(Event)
                            ev.env = env
                            ev.callbacks = []
                            job = new_event(_Job)  # _Job(remaining, bw, sm, ev), without the __init__ call
                            job.remaining_s = remaining
                            job.bw = bw
                            job.sm = sm
                            job.done = ev
                            gpu_jobs[gpu._next_id] = job
                            gpu._next_id += 1
                            gpu.rate = rate
                            # Timeout(env, delay) with the GPU's wake-up as its callback, written out
                            # (Timeout.__init__, Environment.schedule)
                            wake = new_event(Timeout)
                            wake.env = env
                            wake.callbacks = [gpu_wake]
                            wake._value = None
                            wake._delay = delay
                            wake._ok = True
                            heappush(heap, (env._now + delay, NORMAL, next(event_ids), wake))
                            gpu._wakeup = wake
                            yield ev
                args = args_by_cost.get(id(cost))
                if args is None:
                    args = args_by_cost[id(cost)] = MappingProxyType({"limiter": cost.limiter, "alone_us": cost.time_s * 1e6})
            elif i in collective_ops:
                args = yield from meet.collective(self, i, cost)
            else:
                yield gpu.run_kernel(work, cost)  # type: ignore[attr-defined]
                args = args_by_cost.get(id(cost))
                if args is None:
                    args = args_by_cost[id(cost)] = MappingProxyType({"limiter": cost.limiter, "alone_us": cost.time_s * 1e6})
            busy_until = env._now
            r_start(now)
            r_end(busy_until)
            r_track(track)
            r_name(ops[i].name)
            r_cat(cost.category)
            r_op(i)
            r_args(args)
            finished[i] = True
            if waiters:
                waiter = waiters.pop(i, None)
                if waiter is not None:
                    waiter.succeed()
            left = outstanding[s] = outstanding[s] - 1
            if left == 0 and s in idle_events:
                idle_events.pop(s).succeed()

    def run(self) -> Trace:
        host = self._start()
        # Streams wait on their queues forever; the run ends when no event is left.
        run_to_end(self.env)
        self._stop_streams()
        if not host.triggered or any(self.outstanding.values()):
            raise RuntimeError(f"simulation of '{self.graph.name}' deadlocked (a wait on an op that never ran)")
        return self._trace(max(self._records.last_end(), self.env._now))

    def _start(self) -> simpy.Process:
        host = self.env.process(self.host())
        self._start_streams()
        return host

    def _start_streams(self) -> None:
        for s in self.queues:
            loop = self.stream(s)
            self._stream_loops.append(loop)
            self.env.process(loop)

    def _stop_streams(self) -> None:
        """End the streams' loops once no event is left. Each waits on its queue's next item: its process
        holds that event and the event holds the process's resume callback, a cycle only the
        collector would free. Nothing can fire the event any more, so the callback is dropped."""
        for queue in self.queues.values():
            if queue.taker is not None:
                queue.taker.callbacks.clear()
                queue.taker = None
        for loop in self._stream_loops:
            loop.close()
        self._stream_loops.clear()

    def _trace(self, end: float) -> Trace:
        # The records go to the Trace as they are: Interval objects are made only if someone asks.
        return Trace(self.graph, self.host_costs.profile_name, self.costs, end_s=end, records=self._records)


class HoldingGPU(FluidGPU):
    """A FluidGPU that can also hold work of no set length: a collective kernel waiting for its
    peers keeps its CTAs on their SMs (and, while it moves data, streams HBM) until released.

    Block-level SM allocation, as the hardware's block scheduler does it:
    - a held kernel's CTAs stay resident on their SMs: the other kernels share what is left
      (their SM demand is measured against 1 - the held share);
    - where HBM is oversubscribed, the collectives' transfers and the other kernels share it by
      the SMs that issue their requests (`_hbm_factors`);
    - a collective that becomes ready while a machine-filling kernel runs (its blocks alone cover
      every SM) gets no SM until that kernel's blocks are all dispatched: the scheduler serves the
      earlier kernel's pending blocks first. It then takes the SMs that free up before any kernel
      that became ready after it (admission order), so it waits for the kernels running when it
      became ready, not for their successors (`admission`); a kernel that starts at the very
      instant the collective becomes ready does not hold it back (measured in the calibrated DDP
      workload's profiled steps: the all-reduce's CTAs start ~2 us before the stream's next kernel;
      over every committed DDP profile the next kernel mostly starts first: docs/communication.md);
    - where the collective's cost says how many SMs it takes from the kernels beside it (`taken_sm`,
      the profile's measured SMs lost per channel), a GEMM (work units: tiles x K splits) that starts
      beside it is priced by `release_beside` (its left-out CTAs start when the collective releases),
      one already running runs in rounds over the SMs left (`rounds_beside`), the other kernels share
      them as a fluid; and a collective that waited for SMs takes them before the next kernel of the
      stream whose kernel ended (`_settle`);
    - a collective whose cost says `start_s` starts its CTAs that long after its stream reaches it
      (RendezVous.collective): a kernel of another stream released at the same instant goes first;
    - where the collective's cost says `release_loss_units` (the profile's measured loss), a GEMM that
      starts beside it with CTAs left out is priced by `release_loss` instead (loss x its unit time x
      how long the collective stays, as a share of the GEMM's time alone, at most 1), re-priced when
      the collective releases; it runs at full rate on the SMs left meanwhile.
    """

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self.held: set[int] = set()
        self._admissions: list[tuple[frozenset[int], simpy.Event]] = []
        self.links: LinkShare | None = None  # the ranks' links: told when this GPU's HBM load changes
        self._started: dict[int, float] = {}  # job -> when it started (kernels, not holds)
        self._units: dict[int, float] = {}  # kernel job -> its work units (GEMM tiles x K splits)
        self._taken: dict[int, float] = {}  # held job -> share of SMs it takes from the other kernels
        self.sm_count = 0  # learned from a collective that says what it takes
        # GEMMs that started with CTAs left out by resident collectives: job -> (start, time alone,
        # the collectives, work units, free SMs); priced by release_beside when those release
        self._late: dict[int, tuple[float, float, frozenset[int], float, float]] = {}
        self._loss: dict[int, float] = {}  # held job -> the measured loss of a GEMM started beside it
        self._late_loss: dict[int, float] = {}  # a _late GEMM -> the loss it is priced with
        self._loss_sm_count = 0  # learned from a collective that declares a loss

    def run_kernel(self, work_s: float, cost: KernelCost) -> simpy.Event:
        """`run` for a priced kernel: a GEMM's work units are kept for the wave rule beside a collective."""
        d = cost.detail
        tiles = d.get("tiles") if d else None
        if tiles:
            units = float(tiles) * float(d.get("split_k", 1))
            free = self._free_sms()
            sm_count = self.sm_count or self._loss_sm_count
            if free is not None and free < min(units, sm_count) - 1e-9:
                # CTAs left out by the resident collectives: priced as if they hold on, re-priced
                # when they release (release)
                self._late[self._next_id] = (self.env.now, work_s, frozenset(self.held), units, free)
                losses = [self._loss[h] for h in self.held if h in self._loss]
                if losses:  # the measured loss (the largest, if several collectives declare one)
                    self._late_loss[self._next_id] = max(losses)
                return self.run(self._beside(self._next_id, units, free, work_s, math.inf),
                                cost.bw_demand, cost.sm_demand)
            self._units[self._next_id] = units
        return self.run(work_s, cost.bw_demand, cost.sm_demand)

    def _free_sms(self) -> float | None:
        """SMs the resident collectives leave to the other kernels, where they say what they take or
        declare a loss (their own SM share then; None: no such collective resident)."""
        if self._loss and self._loss_sm_count > 0 and any(h in self._loss for h in self.held):
            jobs, taken = self.jobs, self._taken
            share = sum(taken.get(h, jobs[h].sm) for h in self.held)
            return self._loss_sm_count * (1.0 - min(share, 1.0 - _FREE_SM_FLOOR))
        held = [h for h in self.held if h in self._taken]
        if not held or self.sm_count <= 0:
            return None
        return self.sm_count * (1.0 - min(sum(self._taken[h] for h in held), 1.0 - _FREE_SM_FLOOR))

    def _beside(self, job: int, units: float, free: float, alone_s: float, released_after_s: float) -> float:
        """GEMM `job`, started with CTAs left out: the measured loss where a collective resident at its
        start declared one (release_loss), else the tile queue (release_beside)."""
        loss = self._late_loss.get(job)
        if loss is not None:
            return release_loss(units, self._loss_sm_count, free, alone_s, released_after_s, loss)
        return release_beside(units, self.sm_count, free, alone_s, released_after_s)

    def run(self, work_s: float, bw: float, sm: float) -> simpy.Event:
        self._started[self._next_id] = self.env.now
        return super().run(work_s, bw, sm)

    _wake = ProcessorSharing._wake  # FluidGPU's is written out for a FluidGPU proper

    def _hbm_factors(self) -> tuple[float, float]:
        """How much slower than alone (>= 1) the kernels and the collectives' transfers stream HBM.

        When the kernels running here ask for more HBM bandwidth than there is, the two classes
        share it by the SMs that issue their requests (a memory controller serves the requests in
        flight, and each SM keeps about as many in flight): the collectives' CTAs by their SM share,
        the other kernels by the rest; a class that asks for less than its share gets what it asks
        for and the other the remainder. Among the kernels, HBM is processor-shared as on one rank."""
        jobs, held = self.jobs, self.held
        d_comm = sum(jobs[h].bw for h in held)
        d_kern = sum(j.bw for jid, j in jobs.items() if jid not in held)
        total = d_comm + d_kern
        if total <= 1.0 or d_comm == 0.0 or d_kern == 0.0:
            return max(1.0, total), max(1.0, total)
        s_comm = min(sum(jobs[h].sm for h in held), 1.0 - _FREE_SM_FLOOR)
        s_kern = 1.0 - s_comm
        if d_comm <= s_comm:
            b_comm, b_kern = d_comm, 1.0 - d_comm
        elif d_kern <= s_kern:
            b_comm, b_kern = 1.0 - d_kern, d_kern
        else:
            b_comm, b_kern = s_comm, s_kern
        return d_kern / b_kern, d_comm / b_comm

    def transfer_hbm_factor(self) -> float:
        """How much slower than alone a collective's transfer streams HBM here (>= 1)."""
        return self._hbm_factors()[1] if self.held else 1.0

    def _rate(self) -> float:
        jobs, held = self.jobs, self.held
        if not held:
            return super()._rate()
        held_sm = min(sum(jobs[h].sm for h in held), 1.0 - _FREE_SM_FLOOR)
        taken = self._taken
        if taken and self.sm_count > 0:
            # GEMMs run in rounds over the SMs the collectives leave them; other kernels (blocks that
            # fit beside a collective's CTA) share the SMs not held as a fluid
            taken_sm = min(sum(taken.get(h, jobs[h].sm) for h in held), 1.0 - _FREE_SM_FLOOR)
            free_sms, units = self.sm_count * (1.0 - taken_sm), self._units
            late = self._late
            # a GEMM that started beside them carries its rounds in its work (release_beside) and
            # runs its resident CTAs on the SMs left
            sm = sum(1.0 if jid in late else
                     rounds_beside(units[jid], self.sm_count, free_sms) if jid in units else j.sm / (1.0 - held_sm)
                     for jid, j in jobs.items() if jid not in held)
            return 1.0 / max(1.0, self._hbm_factors()[0], sm)
        late = self._late
        if late:  # a GEMM priced by release_loss runs its resident CTAs on the SMs left
            sm = sum(1.0 if jid in late else j.sm / (1.0 - held_sm) for jid, j in jobs.items() if jid not in held)
            return 1.0 / max(1.0, self._hbm_factors()[0], sm)
        sm = sum(j.sm for jid, j in jobs.items() if jid not in held)
        return 1.0 / max(1.0, self._hbm_factors()[0], sm / (1.0 - held_sm))

    def admission(self) -> simpy.Event | None:
        """None when a collective's CTAs can take SMs now; else an event that fires when every
        machine-filling kernel running now has ended."""
        now = self.env.now
        blockers = frozenset(jid for jid, j in self.jobs.items()
                             if jid not in self.held and j.sm >= _FILLING and self._started.get(jid, now) < now)
        if not blockers:
            return None
        ev = simpy.Event(self.env)
        self._admissions.append((blockers, ev))
        return ev

    def hold(self, bw: float, sm: float, taken: float | None = None, sm_count: int | None = None,
             loss: float | None = None) -> int:
        """Hold SMs (share `sm`) with no set length; `taken`: the share of SMs it takes from the other
        kernels when that differs from `sm` (on a GPU of `sm_count` SMs); `loss`: the measured loss of a
        GEMM that starts beside it (release_loss)."""
        self._advance()
        jid = self._next_id
        self._next_id += 1
        self.jobs[jid] = _Job(math.inf, bw, sm, simpy.Event(self.env))
        self.held.add(jid)
        if taken is not None and sm_count:
            self._taken[jid] = float(taken)
            self.sm_count = int(sm_count)
        if loss is not None and sm_count:
            self._loss[jid] = float(loss)
            self._loss_sm_count = int(sm_count)
        self._settle()
        return jid

    def set_demand(self, jid: int, bw: float, sm: float) -> None:
        self._advance()
        job = self.jobs[jid]
        job.bw, job.sm = bw, sm
        self._settle()

    def release(self, jid: int) -> None:
        self._advance()
        del self.jobs[jid]
        self.held.discard(jid)
        self._taken.pop(jid, None)
        self._loss.pop(jid, None)
        if self._late:
            now = self.env.now
            for g, (start, alone_s, holders, units, free) in list(self._late.items()):
                if holders & self.held:
                    continue
                # every collective it started beside has released: the left-out CTAs start now
                del self._late[g]
                end = start + self._beside(g, units, free, alone_s, now - start)
                self._late_loss.pop(g, None)
                self.jobs[g].remaining_s = max(0.0, end - now)
        self._settle()

    def _settle(self) -> None:
        """ProcessorSharing._settle, except where a collective waits for SMs beside a GEMM that it
        measures (`_late`'s rule is on): the collectives admitted by the kernels ending now take
        their SMs before the streams of those kernels start their next ones (the block scheduler
        serves the earlier-waiting CTAs first)."""
        if not self._admissions or self.sm_count <= 0:
            return super()._settle()
        jobs = self.jobs
        limit = _EPS * max(1.0, self.env.now)
        finished = [jid for jid, j in jobs.items() if j.remaining_s <= limit]
        done = [jobs[jid].done for jid in finished]
        for jid in finished:
            del jobs[jid]
            self._started.pop(jid, None)
            self._units.pop(jid, None)
            self._late.pop(jid, None)
            self._late_loss.pop(jid, None)
        self._after_done()
        for ev in done:
            ev.succeed()
        self._schedule_wake()

    def _done(self, jid: int) -> None:
        self.jobs.pop(jid).done.succeed()
        self._started.pop(jid, None)
        self._units.pop(jid, None)
        self._late.pop(jid, None)
        self._late_loss.pop(jid, None)

    def _after_done(self) -> None:
        if self._admissions:
            jobs = self.jobs
            waiting = []
            for blockers, ev in self._admissions:
                if any(b in jobs for b in blockers):
                    waiting.append((blockers, ev))
                else:
                    ev.succeed()
            self._admissions = waiting

    def _rerate(self) -> float | None:
        self.rate = self._rate()
        finite = [j.remaining_s for j in self.jobs.values() if j.remaining_s != math.inf]
        return min(finite) / self.rate if finite else None

    def _after_settle(self) -> None:
        if self.links is not None:
            self.links.reflow()


class _Flow:
    __slots__ = ("remaining_s", "demands", "gpus", "rate", "done")

    def __init__(self, remaining_s: float, demands: tuple[tuple[Any, float], ...], done: simpy.Event,
                 gpus: tuple[HoldingGPU, ...] = ()) -> None:
        self.remaining_s = remaining_s
        self.demands = demands
        self.gpus = gpus
        self.rate = 1.0
        self.done = done


class LinkShare(ProcessorSharing):
    """Processor sharing of links among the collectives moving data at once.

    A flow demands a share of each link it crosses (a GPU's NVLink port, a node's NICs) when
    alone; a flow's rate is 1 / the most loaded of its links (at least 1). Collectives on
    disjoint links do not slow each other; two on the same links take about twice as long.
    A collective also streams HBM on every member GPU: where the kernels running there ask for
    more HBM than there is, its transfer slows by its GPU's HBM factor (HoldingGPU._hbm_factors;
    NCCL's protocols read and write their buffers through HBM).
    """

    def _rerate(self) -> float | None:
        load: dict[Any, float] = {}
        flows = self.jobs.values()
        for f in flows:
            for link, share in f.demands:
                load[link] = load.get(link, 0.0) + share
        for f in flows:
            hbm = max([gpu.transfer_hbm_factor() for gpu in f.gpus], default=1.0)
            f.rate = 1.0 / max([hbm, *(load[link] for link, _ in f.demands)])
        return min(f.remaining_s / f.rate for f in flows)

    def reflow(self) -> None:
        """A member GPU's HBM load changed: flows go on at their new rates from now."""
        if self.jobs:
            self._advance()
            self._settle()

    def run(self, work_s: float, demands: tuple[tuple[Any, float], ...],
            gpus: tuple[HoldingGPU, ...] = ()) -> simpy.Event:
        """Move data that would take `work_s` alone over `demands` ((link, share), ...), streaming
        HBM on `gpus`."""
        self._advance()
        ev = simpy.Event(self.env)
        self.jobs[self._next_id] = _Flow(max(work_s, 0.0), demands, ev, gpus)
        self._next_id += 1
        self._settle()
        return ev


class _Meeting:
    """One collective call of one group: who has arrived, their held SMs, when it completes."""

    __slots__ = ("members", "arrived", "holds", "started_s", "done")

    def __init__(self, members: tuple[int, ...], done: simpy.Event) -> None:
        self.members = members
        self.arrived: dict[int, float] = {}
        self.holds: dict[int, tuple[HoldingGPU, int]] = {}
        self.started_s = math.nan
        self.done = done


class Ranks:
    """Several ranks in one simulation: a host thread, streams and a GPU per rank, one clock.

    A collective kernel starts on a rank's stream like any kernel and holds its CTAs' SMs at
    once; it moves data only when every member of its group has arrived (the rendezvous), so a
    slow rank delays the others. Then it pays its latency (kernel fixed cost + NCCL latency)
    and its transfer, shared with the other collectives on the same links (LinkShare), while
    streaming its HBM traffic on every member's GPU. Calls meet by op name within a group.
    """

    def __init__(self, graphs: Sequence[Graph], costs: Sequence[Sequence[KernelCost | None]],
                 hosts: Sequence[HostCosts], groups: Sequence[Sequence[tuple[int, ...] | None]],
                 node_of: Sequence[int], host_delay_s: Sequence[float] | None = None) -> None:
        self.env = Environment()
        self.links = LinkShare(self.env)
        self.node_of = tuple(node_of)
        self.groups = groups  # groups[rank][op] = the op's group members (None: not a rendezvous)
        self.meetings: dict[tuple[str, tuple[int, ...]], _Meeting] = {}
        self.host_delay_s = tuple(host_delay_s) if host_delay_s is not None else (0.0,) * len(graphs)
        self.sims = []
        for r, (g, c, host) in enumerate(zip(graphs, costs, hosts, strict=True)):
            sim = Simulation(g, c, host, env=self.env)
            sim.rank = r
            sim.rendezvous = self
            assert isinstance(sim.gpu, HoldingGPU)
            sim.gpu.links = self.links
            self.sims.append(sim)
        self.collective_ops = frozenset(i for i, o in enumerate(graphs[0].ops) if o.kind == "collective")

    def collective(self, sim: Simulation, i: int, cost: KernelCost):
        """The stream process of `sim` runs op `i`, a collective: hold SMs, meet, move data. Returns the interval's args."""
        members = self.groups[sim.rank][i]
        gpu = sim.gpu
        assert isinstance(gpu, HoldingGPU)
        if members is None or len(members) < 2:
            yield gpu.run(cost.time_s, cost.bw_demand, cost.sm_demand)
            return MappingProxyType({"limiter": cost.limiter, "alone_us": cost.time_s * 1e6})
        key = (sim.graph.ops[i].name, members)
        meeting = self.meetings.get(key)
        if meeting is None:
            meeting = self.meetings[key] = _Meeting(members, simpy.Event(self.env))
        start_s = float(cost.detail.get("start_s", 0.0))
        if start_s > 0:  # its CTAs start this long after its stream reaches it (a queued kernel goes first)
            yield Timeout(self.env, start_s)
        admitted = gpu.admission()
        if admitted is not None:  # no SM for its CTAs until the filling kernels' blocks are dispatched
            yield admitted
        arrived = self.env.now
        meeting.arrived[sim.rank] = arrived
        d = cost.detail
        meeting.holds[sim.rank] = (gpu, gpu.hold(0.0, cost.sm_demand, d.get("taken_sm"), d.get("sm_count"),
                                                 d.get("release_loss_units")))
        if len(meeting.arrived) == len(members):
            del self.meetings[key]
            self.env.process(self._transfer(meeting, cost))
        yield meeting.done
        gpu_, jid = meeting.holds[sim.rank]
        gpu_.release(jid)
        return MappingProxyType({
            "limiter": cost.limiter, "alone_us": cost.time_s * 1e6, "wait_us": (meeting.started_s - arrived) * 1e6,
            "algorithm": d.get("algorithm"), "protocol": d.get("protocol"), "channels": d.get("channels"),
            "ranks": len(members), "nodes": d.get("nodes"), "busbw_gbps": d.get("busbw_gbps"),
        })

    def _transfer(self, meeting: _Meeting, cost: KernelCost):
        env = self.env
        meeting.started_s = env.now
        d = cost.detail
        # the start delay is part of the collective's measured time alone: taken out of its latency
        latency = cost.fixed_s + float(d.get("latency_s", 0.0))
        latency -= min(latency, float(d.get("start_s", 0.0)))
        if latency > 0:
            yield Timeout(env, latency)
        transfer = float(d.get("transfer_s", cost.time_s - latency))
        for gpu, jid in meeting.holds.values():
            gpu.set_demand(jid, cost.bw_demand, cost.sm_demand)
        demands: list[tuple[Any, float]] = []
        intra, net = float(d.get("intra_share", 1.0)), float(d.get("net_share", 0.0))
        if intra > 0:
            demands.extend((("gpu", r), intra) for r in meeting.members)
        if net > 0:
            demands.extend((("node", node), net) for node in sorted({self.node_of[r] for r in meeting.members}))
        if transfer > 0:
            yield self.links.run(transfer, tuple(demands), tuple(gpu for gpu, _ in meeting.holds.values()))
        meeting.done.succeed()

    def _delayed_host(self, sim: Simulation, delay_s: float):
        yield Timeout(self.env, delay_s)
        sim._host_interval("straggler delay", "host", 0.0)
        yield from sim.host()

    def run(self) -> list[Trace]:
        hosts = []
        for sim, delay in zip(self.sims, self.host_delay_s, strict=True):
            if delay > 0:
                hosts.append(self.env.process(self._delayed_host(sim, delay)))
                sim._start_streams()
            else:
                hosts.append(sim._start())
        run_to_end(self.env)
        for sim in self.sims:
            sim._stop_streams()
            # the ranks and their GPUs point back at this object: cut, so reference counting frees them
            sim.rendezvous = None
            assert isinstance(sim.gpu, HoldingGPU)
            sim.gpu.links = None
        stuck = [sim.rank for sim, h in zip(self.sims, hosts, strict=True) if not h.triggered or any(sim.outstanding.values())]
        if stuck:
            waiting = "; ".join(f"{name} (arrived: {sorted(m.arrived)} of {list(m.members)})"
                                for (name, _), m in self.meetings.items())
            raise RuntimeError(f"simulation of '{self.sims[0].graph.name}' on {len(self.sims)} ranks deadlocked: ranks "
                               f"{stuck} never finished" + (f"; collectives still waiting: {waiting}" if waiting else ""))
        return [sim._trace(sim._records.last_end()) for sim in self.sims]


def simulate_ranks(graphs: Sequence[Graph], costs: Sequence[Sequence[KernelCost | None]], hosts: Sequence[HostCosts],
                   groups: Sequence[Sequence[tuple[int, ...] | None]], node_of: Sequence[int],
                   host_delay_s: Sequence[float] | None = None) -> list[Trace]:
    """Simulate one step on several ranks (one graph, costs, host prices and group table per rank); a Trace per rank."""
    with paused_gc():
        return Ranks(graphs, costs, hosts, groups, node_of, host_delay_s).run()


def simulate(graph: Graph, costs: Sequence[KernelCost | None], host: HostCosts) -> Trace:
    """Simulate `graph` with its precomputed kernel `costs` and `host` prices (sim.costmodel.host.host_costs)."""
    # A run allocates hundreds of thousands of small objects (events, records) and frees them
    # at the end: the cyclic collector's passes over the growing heap cost about a third of a
    # 10k-kernel run (sim.gcpause).
    with paused_gc():
        return Simulation(graph, costs, host).run()
