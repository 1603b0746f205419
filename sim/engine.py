"""The discrete-event engine (simpy): host thread, launch queues, in-order streams, shared GPU.

The engine schedules; it never prices. Kernel costs come in precomputed (sim.costmodel).

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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

import simpy

from sim.costmodel import KernelCost
from sim.graph import Graph, Op
from sim.hardware import Hardware
from sim.trace import HOST_TRACK, Interval, Trace, stream_track

_EPS = 1e-15


@dataclass
class _Job:
    remaining_s: float
    bw: float
    sm: float
    done: simpy.Event


class FluidGPU:
    """Processor sharing of SMs and HBM bandwidth among the kernels running at once."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.jobs: dict[int, _Job] = {}
        self._next_id = 0
        self._last = 0.0
        self._generation = 0

    def _rate(self) -> float:
        bw = sum(j.bw for j in self.jobs.values())
        sm = sum(j.sm for j in self.jobs.values())
        return 1.0 / max(1.0, bw, sm)

    def _advance(self) -> None:
        dt = self.env.now - self._last
        if dt > 0 and self.jobs:
            progress = dt * self._rate()
            for j in self.jobs.values():
                j.remaining_s -= progress
        self._last = self.env.now

    def _settle(self) -> None:
        for jid in [jid for jid, j in self.jobs.items() if j.remaining_s <= _EPS * max(1.0, self.env.now)]:
            self.jobs.pop(jid).done.succeed()
        if self.jobs:
            rate = self._rate()
            delay = max(0.0, min(j.remaining_s for j in self.jobs.values()) / rate)
            self._generation += 1
            self.env.process(self._wake(delay, self._generation))

    def _wake(self, delay: float, generation: int):
        yield self.env.timeout(delay)
        if generation == self._generation:
            self._advance()
            for j in self.jobs.values():
                if j.remaining_s < 1e-12:
                    j.remaining_s = 0.0
            self._settle()

    def run(self, work_s: float, bw: float, sm: float) -> simpy.Event:
        """Start a kernel that would take `work_s` alone; the event fires when it is done."""
        self._advance()
        ev = self.env.event()
        self.jobs[self._next_id] = _Job(max(work_s, 0.0), bw, sm, ev)
        self._next_id += 1
        self._settle()
        return ev


@dataclass(frozen=True)
class _Launch:
    op: int
    issued_s: float
    graph_member: bool


class Simulation:
    """One simulation of one graph on one profile; owns all its state."""

    def __init__(self, graph: Graph, costs: Sequence[KernelCost | None], hw: Hardware) -> None:
        self.graph = graph
        self.costs = tuple(costs)
        self.hw = hw
        self.env = simpy.Environment()
        self.gpu = FluidGPU(self.env)
        self.intervals: list[Interval] = []
        self.deps = graph.dependencies()
        self.done = [self.env.event() for _ in graph.ops]
        streams = sorted({o.stream for o in graph.ops if o.is_kernel})
        self.queues = {s: simpy.Store(self.env, capacity=hw.launch_queue_depth) for s in streams}
        self.stream_busy_until = {s: 0.0 for s in streams}
        self.outstanding = {s: 0 for s in streams}
        self.idle_events: dict[int, simpy.Event] = {}

    # -- host -------------------------------------------------------------------------
    def _host_interval(self, name: str, cat: str, start: float, op: int = -1) -> None:
        if self.env.now > start:
            self.intervals.append(Interval(HOST_TRACK, name, cat, start, self.env.now, op))

    def _busy(self, seconds: float, name: str, cat: str, op: int = -1):
        if seconds > 0:
            start = self.env.now
            yield self.env.timeout(seconds)
            self._host_interval(name, cat, start, op)

    def _enqueue(self, i: int, graph_member: bool):
        op = self.graph.ops[i]
        start = self.env.now
        self.outstanding[op.stream] += 1
        yield self.queues[op.stream].put(_Launch(i, self.env.now, graph_member))
        self._host_interval(f"blocked: {op.name}", "blocked", start, i)

    def _wait_idle(self):
        for s in self.queues:
            if self.outstanding[s] > 0:
                ev = self.env.event()
                self.idle_events[s] = ev
                yield ev

    def host(self):
        hw, ops = self.hw, self.graph.ops
        i = 0
        while i < len(ops):
            op = ops[i]
            if op.kind == "sync":
                start = self.env.now
                yield from self._wait_idle()
                self._host_interval(f"sync: {op.name}", "sync", start, i)
                yield from self._busy(hw.sync_s, op.name, "sync", i)
                self.done[i].succeed()
                i += 1
                continue
            if op.kind == "host":
                yield from self._busy(float(op.attrs["duration_us"]) * 1e-6, op.name, "host", i)
                self.done[i].succeed()
                i += 1
                continue
            if op.mode in ("compiled", "cuda_graph"):
                j = i
                while j < len(ops) and ops[j].mode == op.mode and ops[j].region == op.region and ops[j].is_kernel:
                    j += 1
                label = op.region or op.name
                if op.mode == "compiled":
                    yield from self._busy(hw.compiled_call_s, f"compiled call: {label}", "compiled_call", i)
                    for k in range(i, j):
                        yield from self._busy(hw.triton_launch_s, ops[k].name, "launch", k)
                        yield from self._enqueue(k, False)
                else:
                    yield from self._busy(hw.graph_launch_s, f"graph replay: {label}", "graph_launch", i)
                    for k in range(i, j):
                        yield from self._enqueue(k, True)
                i = j
                continue
            if op.host_s is not None:
                yield from self._busy(op.host_s, op.name, "dispatch", i)
            else:
                yield from self._busy(hw.eager_op_s, op.name, "dispatch", i)
                yield from self._busy(hw.launch_s, op.name, "launch", i)
            yield from self._enqueue(i, False)
            i += 1

    # -- device -----------------------------------------------------------------------
    def stream(self, s: int):
        hw = self.hw
        queue = self.queues[s]
        while True:
            launch: _Launch = yield queue.get()
            i = launch.op
            op: Op = self.graph.ops[i]
            pending = [self.done[d] for d in self.deps[i] if not self.done[d].triggered]
            if pending:
                yield self.env.all_of(pending)
            cost = self.costs[i]
            assert cost is not None
            work = cost.time_s
            if launch.graph_member:
                # Inside a graph the per-kernel fixed cost is the graph's, not a stream launch's.
                work = cost.time_s - cost.fixed_s + hw.graph_kernel_s
                earliest = max(self.stream_busy_until[s], launch.issued_s + hw.launch_latency_s)
            else:
                earliest = launch.issued_s + hw.launch_latency_s
            if earliest > self.env.now:
                yield self.env.timeout(earliest - self.env.now)
            start = self.env.now
            yield self.gpu.run(work, cost.bw_demand, cost.sm_demand)
            self.intervals.append(
                Interval(
                    stream_track(s),
                    op.name,
                    cost.category,
                    start,
                    self.env.now,
                    i,
                    MappingProxyType({"limiter": cost.limiter, "alone_us": cost.time_s * 1e6}),
                )
            )
            self.stream_busy_until[s] = self.env.now
            self.done[i].succeed()
            self.outstanding[s] -= 1
            if self.outstanding[s] == 0 and s in self.idle_events:
                self.idle_events.pop(s).succeed()

    def run(self) -> Trace:
        host = self.env.process(self.host())
        for s in self.queues:
            self.env.process(self.stream(s))
        # Streams wait on their queues forever; the run ends when no event is left.
        self.env.run()
        if not host.triggered or any(self.outstanding.values()):
            raise RuntimeError(f"simulation of '{self.graph.name}' deadlocked (a wait on an op that never ran)")
        end = max([iv.end_s for iv in self.intervals] + [self.env.now])
        ivs = tuple(sorted(self.intervals, key=lambda iv: (iv.start_s, iv.track != HOST_TRACK, iv.track, iv.op)))
        return Trace(graph=self.graph, hardware=self.hw.name, costs=self.costs, intervals=ivs, end_s=end)


def simulate(graph: Graph, costs: Sequence[KernelCost | None], hw: Hardware) -> Trace:
    return Simulation(graph, costs, hw).run()
