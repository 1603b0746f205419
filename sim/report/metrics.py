"""Metrics derived from a Trace: step time, the breakdown by term, the dominant term.

The breakdown splits the step's wall time so that its parts add up to the step time:
while kernels run, time goes to their categories (compute, memory, layout, comm; a
kernel's fixed launch-to-completion cost goes to launch), shared evenly among kernels
running at once; while no kernel runs and the host is busy dispatching or launching,
time goes to launch; otherwise it is idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.trace import HOST_TRACK, Interval, Trace

TERMS = ("compute", "memory", "launch", "comm", "layout", "idle")
_HOST_BUSY = {"dispatch", "launch", "compiled_call", "graph_launch", "host"}


@dataclass(frozen=True)
class StepMetrics:
    time_s: float
    breakdown_s: dict[str, float]
    dominant: str
    kernels: int
    hbm_bytes: float
    kernel_time_s: float  # sum of kernel durations (the microbenchmark view)
    host_busy_s: float = 0.0  # the host thread busy dispatching, launching, in compiled calls or host ops

    @property
    def host_share(self) -> float:
        """Fraction of the step the host was busy: near 1, the step is host-bound (the GPU waits)."""
        return self.host_busy_s / self.time_s if self.time_s > 0 else 0.0


def step_metrics(trace: Trace) -> StepMetrics:
    end = trace.end_s
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK]
    host_busy = [iv for iv in trace.intervals if iv.track == HOST_TRACK and iv.cat in _HOST_BUSY]
    points = {0.0, end}
    for iv in kernels + host_busy:
        points.add(iv.start_s)
        points.add(iv.end_s)
    times = sorted(points)
    breakdown = dict.fromkeys(TERMS, 0.0)
    # Sweep: for each elementary segment, which kernels and whether the host is busy.
    k_sorted = sorted(kernels, key=lambda iv: iv.start_s)
    h_sorted = sorted(host_busy, key=lambda iv: iv.start_s)
    ki = hi = 0
    active_k: list[Interval] = []
    active_h: list[Interval] = []
    for a, b in zip(times, times[1:], strict=False):
        if b <= a:
            continue
        while ki < len(k_sorted) and k_sorted[ki].start_s <= a:
            active_k.append(k_sorted[ki])
            ki += 1
        while hi < len(h_sorted) and h_sorted[hi].start_s <= a:
            active_h.append(h_sorted[hi])
            hi += 1
        active_k = [iv for iv in active_k if iv.end_s > a]
        active_h = [iv for iv in active_h if iv.end_s > a]
        dt = b - a
        if active_k:
            share = dt / len(active_k)
            for iv in active_k:
                cost = trace.costs[iv.op]
                assert cost is not None
                fixed_frac = min(1.0, cost.fixed_s / cost.time_s) if cost.time_s > 0 else 1.0
                breakdown["launch"] += share * fixed_frac
                breakdown[iv.cat] += share * (1.0 - fixed_frac)
        elif active_h:
            breakdown["launch"] += dt
        else:
            breakdown["idle"] += dt
    dominant = max(TERMS, key=lambda t: (breakdown[t], -TERMS.index(t)))
    costs = [c for c in trace.costs if c is not None]
    busy = covered = 0.0
    for iv in h_sorted:  # union of the host's busy intervals
        if iv.end_s > covered:
            busy += iv.end_s - max(iv.start_s, covered)
            covered = iv.end_s
    return StepMetrics(
        time_s=end,
        breakdown_s=breakdown,
        dominant=dominant,
        kernels=len(kernels),
        hbm_bytes=sum(c.hbm_bytes for c in costs),
        kernel_time_s=sum(c.time_s for c in costs),
        host_busy_s=busy,
    )


@dataclass(frozen=True)
class CollectiveMetrics:
    """One collective call on one rank: its kernel interval and how much of it no compute hid."""

    name: str
    collective: str
    bytes: float
    start_s: float
    end_s: float
    exposed_s: float  # time in the interval while no other kernel of this rank ran
    wait_s: float  # waiting for the group's other ranks (rendezvous), part of the interval
    args: dict[str, object]


@dataclass(frozen=True)
class CommMetrics:
    """Communication of one rank's step: how long collectives ran and how much of it was exposed."""

    comm_s: float  # union of collective intervals
    exposed_s: float  # the part of comm_s with no non-collective kernel running on this rank
    wait_s: float  # rendezvous waits, summed
    collectives: tuple[CollectiveMetrics, ...]

    @property
    def hidden_s(self) -> float:
        return self.comm_s - self.exposed_s


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _covered(a: float, b: float, spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans if y > a and x < b)


def comm_metrics(trace: Trace) -> CommMetrics:
    """Exposed communication: collective time during which no compute (or memory, layout) kernel
    of the same rank runs. A collective fully hidden behind compute has exposed_s 0."""
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK]
    comm = [iv for iv in kernels if iv.cat == "comm"]
    busy = _union([(iv.start_s, iv.end_s) for iv in kernels if iv.cat != "comm"])
    comm_union = _union([(iv.start_s, iv.end_s) for iv in comm])
    total = sum(b - a for a, b in comm_union)
    exposed = total - sum(_covered(a, b, busy) for a, b in comm_union)
    calls = []
    for iv in comm:
        op = trace.graph.ops[iv.op] if iv.op >= 0 else None
        calls.append(CollectiveMetrics(
            name=iv.name, collective=str(op.attrs.get("collective", "")) if op else "",
            bytes=float(op.attrs.get("bytes", 0.0)) if op else 0.0, start_s=iv.start_s, end_s=iv.end_s,
            exposed_s=(iv.end_s - iv.start_s) - _covered(iv.start_s, iv.end_s, busy),
            wait_s=float(iv.args.get("wait_us", 0.0) or 0.0) * 1e-6, args=dict(iv.args)))
    return CommMetrics(comm_s=total, exposed_s=max(0.0, exposed), wait_s=sum(c.wait_s for c in calls),
                       collectives=tuple(calls))
