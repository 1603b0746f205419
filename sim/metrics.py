"""Metrics derived from a Trace: step time, the breakdown by term, the dominant term.

The breakdown splits the step's wall time so that its parts add up to the step time:
while kernels run, time goes to their categories (compute, memory, layout, comm; a
kernel's fixed launch-to-completion cost goes to launch), shared evenly among kernels
running at once; while no kernel runs and the host is busy dispatching or launching,
time goes to launch; otherwise it is idle.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

from sim.gcpause import paused_gc
from sim.trace import HOST_TRACK, Records, Trace

TERMS = ("compute", "memory", "launch", "comm", "layout", "idle")
_TERM_INDEX = {t: i for i, t in enumerate(TERMS)}
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


# Up to this many kernels at once, a segment's time is added kernel by kernel in start order (the
# reference summation, bit for bit); above it, kernels sharing (category, fixed fraction) are added
# as one group, so a segment costs O(distinct kernels), not O(kernels running): the same sum up to
# rounding, and metrics time stays flat from 1 to hundreds of streams.
EXACT_SUM_MAX_KERNELS = 8


_CHUNK = 1 << 14  # time points (or host intervals) turned into Python floats at a time


def _distinct_sorted(values: np.ndarray) -> np.ndarray:
    """np.unique(values) for a fresh 1-d float array, sorted in place: numpy's own unique sorts a
    copy (the same sort and the same mask of first occurrences, one array less at the peak)."""
    values.sort()
    if len(values) < 2:
        return values
    first = np.empty(len(values), dtype=np.bool_)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]


#: Traces of at most this many records are measured in Python lists, larger ones in numpy arrays. Both
#: give the same time points in the same order and the same counts per point (numpy's stable argsort and
#: searchsorted(side="right") are Python's stable sort and bisect_right on floats), and both feed the
#: one summing loop (_sum_points): the same floats, bit for bit (tests/test_metrics.py). Numpy's fixed
#: cost per call weighs on a small trace's metrics (a sweep point's steps have tens of kernels); lists
#: would take more memory than arrays on a large one.
SMALL_TRACE_RECORDS = 2048


def _union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """The length of the union of intervals (starts[k], ends[k]) given in trace order, summed in start
    order (ties in trace order) as issue 15 sums the host's busy time."""
    by_start = np.argsort(starts, kind="stable")  # the order a stable sort by start gives
    busy = covered = 0.0
    for c0 in range(0, len(by_start), _CHUNK):  # Python floats for one chunk at a time (peak memory)
        chunk = by_start[c0:c0 + _CHUNK]
        busy, covered = _union_add(starts[chunk].tolist(), ends[chunk].tolist(), busy, covered)
    return busy


def _union_add(starts: list[float], ends: list[float], busy: float, covered: float) -> tuple[float, float]:
    """_union_length's sum over intervals given in start order, from (busy, covered) so far."""
    for start_s, end_s in zip(starts, ends, strict=True):
        if end_s > covered:
            busy += end_s - (covered if covered > start_s else start_s)  # max(start_s, covered), without the call
            covered = end_s
    return busy, covered


def step_metrics(trace: Trace) -> StepMetrics:
    """Step time, breakdown and dominant term in one pass over the trace's time points.

    Cost: sorting the interval ends (the distinct time points and, per point, how many kernels have
    started and ended) plus O(1) per time point and per kernel start or end (the set of running
    kernels is kept incrementally, never rescanned).
    """
    with paused_gc():
        return _step_metrics(trace)


# Per chunk of time points: the points, and at each how many kernels have started (in start order),
# how many have ended (in end order), and whether the host is busy.
_Chunk = tuple[list[float], list[int], list[int], list[bool]]


def _step_metrics(trace: Trace) -> StepMetrics:
    end = trace.end_s
    costs = trace.costs
    launch_i, idle_i = _TERM_INDEX["launch"], _TERM_INDEX["idle"]
    recs, order = trace.kernel_order()  # kernels in the order of trace.intervals (the reference sums)
    r_start, r_end, r_cat, r_op = recs.start, recs.end, recs.cat, recs.op
    # Stable by start, ties in that order.
    order.sort(key=r_start.__getitem__)
    n_k = len(order)
    # Times in float arrays and time points merged lazily: no float object per point (peak memory).
    # (packed by struct: array("d", a_list) converts each item through PyArg_Parse, several times slower)
    k_start = array("d", struct.pack(f"{n_k}d", *[r_start[k] for k in order]))
    k_end = array("d", struct.pack(f"{n_k}d", *[r_end[k] for k in order]))
    # Per kernel: its term, fixed fraction of its time, the rest, and the (term, fixed fraction) pair
    # that groups it (_sum_points); made once per (cost object, category), shared by repeated kernels.
    per_cost: dict[tuple[int, str], tuple[int, float, float, tuple[int, float]]] = {}
    k_term: list[int] = []
    k_fixed: list[float] = []
    k_rest: list[float] = []
    k_group: list[tuple[int, float]] = []
    for k in order:
        cost = costs[r_op[k]]
        assert cost is not None
        cat = r_cat[k]
        fr = per_cost.get((id(cost), cat))
        if fr is None:
            fixed_frac = min(1.0, cost.fixed_s / cost.time_s) if cost.time_s > 0 else 1.0
            term = _TERM_INDEX[cat]
            fr = per_cost[id(cost), cat] = (term, fixed_frac, 1.0 - fixed_frac, (term, fixed_frac))
        k_term.append(fr[0])
        k_fixed.append(fr[1])
        k_rest.append(fr[2])
        k_group.append(fr[3])
    del order
    if len(recs) <= SMALL_TRACE_RECORDS:
        host_busy_s, by_end, chunks = _points_in_lists(recs, end, k_start, k_end)
    else:
        host_busy_s, by_end, chunks = _points_in_arrays(recs, end, k_start, k_end)
    acc = [0.0] * len(TERMS)
    active: dict[int, None] = {}  # running kernels, in start order (insertion order)
    groups: dict[tuple[int, float], int] = {}  # (term, fixed fraction) -> running kernels
    ki = ei = 0
    for chunk in chunks:
        ki, ei = _sum_points(chunk, ki, ei, acc, active, groups, k_term, k_fixed, k_rest, k_group, by_end,
                             launch_i, idle_i)
    breakdown = dict(zip(TERMS, acc, strict=True))
    dominant = max(TERMS, key=lambda t: (breakdown[t], -TERMS.index(t)))
    priced = [c for c in costs if c is not None]
    return StepMetrics(
        time_s=end,
        breakdown_s=breakdown,
        dominant=dominant,
        kernels=n_k,
        hbm_bytes=sum(c.hbm_bytes for c in priced),
        kernel_time_s=sum(c.time_s for c in priced),
        host_busy_s=host_busy_s,
    )


def _points_in_arrays(recs: Records, end: float, k_start: array[float],
                      k_end: array[float]) -> tuple[float, Sequence[int], Iterator[_Chunk]]:
    """The host's busy time, the kernels in end order (stable) and the time points in chunks, through
    numpy (a large trace: no Python object per interval or per point beyond one chunk)."""
    r_track, r_cat = recs.track, recs.cat
    n_r = len(recs)
    n_k = len(k_start)
    # The host's busy intervals in trace order, in float arrays (no Python object per interval).
    # One pass over the records picks them (a mask); numpy takes their times from the columns' buffers.
    busy_cats = _HOST_BUSY
    host_busy = np.fromiter((track == HOST_TRACK and cat in busy_cats for track, cat in zip(r_track, r_cat, strict=True)),
                            dtype=np.bool_, count=n_r)
    h_start_trace = np.frombuffer(recs.start, dtype=np.float64)[host_busy] if n_r else np.zeros(0)
    h_end_trace = np.frombuffer(recs.end, dtype=np.float64)[host_busy] if n_r else np.zeros(0)
    h_start = np.sort(h_start_trace)
    h_end = np.sort(h_end_trace)
    host_busy_s = _union_length(h_start_trace, h_end_trace)
    del h_start_trace, h_end_trace, host_busy
    k_end_np = np.frombuffer(k_end, dtype=np.float64) if n_k else np.zeros(0)
    by_end_np = np.argsort(k_end_np, kind="stable")  # the order a stable sort by end gives
    k_end_sorted = k_end_np[by_end_np]
    by_end = array("q", by_end_np.astype(np.int64).tobytes())
    del by_end_np
    k_start_np = np.frombuffer(k_start, dtype=np.float64) if n_k else np.zeros(0)
    # Every distinct time point, sorted; per point (a chunk at a time, below), how many kernels have
    # started and ended and whether the host is busy (counts of starts and ends at or before it).
    times = _distinct_sorted(np.concatenate((np.array([0.0, end]), k_start_np, k_end_sorted, h_start, h_end)))

    def chunks() -> Iterator[_Chunk]:
        n_t = len(times)
        # In chunks of points, so that Python floats and ints exist for one chunk at a time (peak memory).
        for c0 in range(0, n_t - 1, _CHUNK):
            c1 = min(n_t, c0 + _CHUNK + 1)
            points = times[c0:c1]
            yield (points.tolist(), np.searchsorted(k_start_np, points, side="right").tolist(),
                   np.searchsorted(k_end_sorted, points, side="right").tolist(),
                   (np.searchsorted(h_start, points, side="right") > np.searchsorted(h_end, points, side="right")).tolist())

    return host_busy_s, by_end, chunks()


def _points_in_lists(recs: Records, end: float, k_start: array[float],
                     k_end: array[float]) -> tuple[float, Sequence[int], Iterator[_Chunk]]:
    """_points_in_arrays in Python lists, all points in one chunk (a small trace)."""
    r_track, r_cat, r_start, r_end = recs.track, recs.cat, recs.start, recs.end
    busy_cats = _HOST_BUSY
    host = [k for k, (track, cat) in enumerate(zip(r_track, r_cat, strict=True)) if track == HOST_TRACK and cat in busy_cats]
    h_start_trace = [r_start[k] for k in host]
    h_end_trace = [r_end[k] for k in host]
    by_start = sorted(range(len(host)), key=h_start_trace.__getitem__)  # stable, as numpy's stable argsort
    host_busy_s = _union_add([h_start_trace[k] for k in by_start], [h_end_trace[k] for k in by_start], 0.0, 0.0)[0]
    h_start = sorted(h_start_trace)
    h_end = sorted(h_end_trace)
    by_end = sorted(range(len(k_end)), key=k_end.__getitem__)
    k_end_sorted = [k_end[k] for k in by_end]
    times = sorted({0.0, end, *k_start, *k_end_sorted, *h_start, *h_end})
    if len(times) < 2:
        return host_busy_s, by_end, iter(())
    chunk = (times, [bisect_right(k_start, t) for t in times], [bisect_right(k_end_sorted, t) for t in times],
             [bisect_right(h_start, t) > bisect_right(h_end, t) for t in times])
    return host_busy_s, by_end, iter((chunk,))


def _sum_points(chunk: _Chunk, ki: int, ei: int, acc: list[float], active: dict[int, None],
                groups: dict[tuple[int, float], int], k_term: list[int], k_fixed: list[float], k_rest: list[float],
                k_group: list[tuple[int, float]], by_end: Sequence[int], launch_i: int, idle_i: int) -> tuple[int, int]:
    """Add the time from each point of the chunk to the next (the last point only ends a span) to the
    breakdown `acc`, kernels started and ended as the counts say; returns the counts reached.
    `k_group[k]` is kernel k's (term, fixed fraction), one tuple shared by the kernels of one cost."""
    t_chunk, s_chunk, e_chunk, h_chunk = chunk
    # zip stops at the shortest: the last point only ends the span before it.
    for a, b, started, ended, host_busy in zip(t_chunk, islice(t_chunk, 1, None), s_chunk, e_chunk, h_chunk,
                                               strict=False):
        while ki < started:
            active[ki] = None
            g = k_group[ki]
            groups[g] = groups.get(g, 0) + 1
            ki += 1
        while ei < ended:
            k = by_end[ei]
            del active[k]
            g = k_group[k]
            left = groups[g] - 1
            if left:
                groups[g] = left
            else:
                del groups[g]
            ei += 1
        n = len(active)
        if n:
            share = (b - a) / n
            if n <= EXACT_SUM_MAX_KERNELS:
                for k in active:
                    acc[launch_i] += share * k_fixed[k]
                    acc[k_term[k]] += share * k_rest[k]
            else:
                for (term, fixed_frac), count in groups.items():
                    acc[launch_i] += share * fixed_frac * count
                    acc[term] += share * (1.0 - fixed_frac) * count
        elif host_busy:
            acc[launch_i] += b - a
        else:
            acc[idle_i] += b - a
    return ki, ei


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
