"""The Trace: an immutable record of what ran where and when. Every metric is derived from it.

The engine hands over its records in columns, in recording order (`Records`); the `Interval`
objects, sorted by start, are made only when someone asks for `intervals` (a Perfetto export,
a plot, the advisor), so a sweep that only needs step metrics never builds them. Metrics read
the columns directly (`kernel_order`, `host_order`).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sim.graph import Graph
from sim.kernelcost import KernelCost

HOST_TRACK = "host"
_NO_ARGS: Mapping[str, Any] = MappingProxyType({})

# (start_s, end_s, track, name, cat, op, args): one interval as the engine records it.
Record = tuple[float, float, str, str, str, int, Mapping[str, Any]]


class Records:
    """The engine's intervals in recording order, one column per field: times in float arrays (8
    bytes each, no float objects), names, tracks, categories and args as references to shared
    objects. About 56 bytes per interval against about 180 for a tuple of Python objects.

    A host interval blocked on a full launch queue is named `blocked: OP`: its row keeps OP's own
    name (shared with the op) and its index in `blocked` (ascending), and `record` writes the name
    out (no string per blocked launch; a 1M-kernel step blocks about 800k times)."""

    __slots__ = ("start", "end", "track", "name", "cat", "op", "args", "blocked", "start_rows", "end_rows", "op_rows",
                 "blocked_rows")

    def __init__(self) -> None:
        self.start = array("d")
        self.end = array("d")
        self.track: list[str] = []
        self.name: list[str] = []
        self.cat: list[str] = []
        self.op = array("q")
        self.args: list[Mapping[str, Any]] = []
        self.blocked = array("q")  # rows named `blocked: ` + their name column (add_blocked)
        # The times, ops and blocked-row indices recorded since the last flush(), in Python lists: a list's append
        # is about half an array's (array's converts each item through PyArg_Parse), and flush() packs a
        # chunk at a time into the arrays (struct: the same doubles and int64s). Readers see the arrays:
        # the Trace flushes its records when it takes them, record() and last_end() flush first.
        self.start_rows: list[float] = []
        self.end_rows: list[float] = []
        self.op_rows: list[int] = []
        self.blocked_rows: list[int] = []

    def __len__(self) -> int:
        return len(self.start) + len(self.start_rows)

    def flush(self) -> None:
        """Move the rows recorded since the last flush into the arrays."""
        n = len(self.start_rows)
        if n:
            self.start.frombytes(struct.pack(f"{n}d", *self.start_rows))
            self.end.frombytes(struct.pack(f"{n}d", *self.end_rows))
            self.op.frombytes(struct.pack(f"{n}q", *self.op_rows))
            self.start_rows.clear()
            self.end_rows.clear()
            self.op_rows.clear()
        m = len(self.blocked_rows)
        if m:
            self.blocked.frombytes(struct.pack(f"{m}q", *self.blocked_rows))
            self.blocked_rows.clear()

    def add(self, start: float, end: float, track: str, name: str, cat: str, op: int, args: Mapping[str, Any]) -> None:
        self.start_rows.append(start)
        self.end_rows.append(end)
        self.track.append(track)
        self.name.append(name)
        self.cat.append(cat)
        self.op_rows.append(op)
        self.args.append(args)

    def add_pair(self, start: float, mid: float, end: float, track: str, name: str, first_cat: str, second_cat: str,
                 op: int, args: Mapping[str, Any]) -> None:
        """Two back-to-back intervals of one op on one track (an eager op's dispatch, then its launch)."""
        self.start_rows.extend((start, mid))
        self.end_rows.extend((mid, end))
        self.track.extend((track, track))
        self.name.extend((name, name))
        self.cat.extend((first_cat, second_cat))
        self.op_rows.extend((op, op))
        self.args.extend((args, args))

    def add_blocked(self, start: float, end: float, track: str, op_name: str, op: int) -> None:
        """The interval `blocked: OP` (category `blocked`) of op `op` named `op_name`."""
        self.blocked_rows.append(len(self))
        self.add(start, end, track, op_name, "blocked", op, _NO_ARGS)

    def record(self, k: int) -> Record:
        if self.start_rows or self.blocked_rows:
            self.flush()
        name = self.name[k]
        blocked = self.blocked
        if blocked and self.cat[k] == "blocked":
            j = bisect_left(blocked, k)
            if j < len(blocked) and blocked[j] == k:
                name = "blocked: " + name
        return (self.start[k], self.end[k], self.track[k], name, self.cat[k], self.op[k], self.args[k])

    def last_end(self) -> float:
        self.flush()
        return max(self.end, default=0.0)


def stream_track(stream: int) -> str:
    return f"stream {stream}"


@dataclass(frozen=True)
class Interval:
    track: str
    name: str
    cat: str  # host: dispatch|launch|compiled_call|graph_launch|host|sync|blocked; gpu: compute|memory|layout|comm
    start_s: float
    end_s: float
    op: int = -1
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _interval_order(r: Record) -> tuple[float, bool, str, int]:
    # Start time, host before streams, track name, op; ties keep recording order.
    return (r[0], r[2] != HOST_TRACK, r[2], r[5])


class Trace:
    """One simulated step: the graph, its costs, the intervals and when the step ended.

    Built either from the engine's records (recording order; `intervals` sorts them on first
    use) or from ready Interval objects (kept in the order given).
    """

    __slots__ = ("graph", "hardware", "costs", "end_s", "_records", "_intervals")

    def __init__(self, graph: Graph, hardware: str, costs: Sequence[KernelCost | None],
                 intervals: Sequence[Interval] | None = None, end_s: float = 0.0, *,
                 records: Records | None = None) -> None:
        if (intervals is None) == (records is None):
            raise ValueError("Trace needs exactly one of intervals or records")
        self.graph = graph
        self.hardware = hardware
        self.costs = tuple(costs)
        self.end_s = end_s
        if records is not None:
            records.flush()
        self._records = records
        self._intervals = tuple(intervals) if intervals is not None else None

    @property
    def intervals(self) -> tuple[Interval, ...]:
        """Every interval, ordered by start (host before streams at one instant, then track, then op)."""
        if self._intervals is None:
            recs = self._records
            assert recs is not None
            self._intervals = tuple(Interval(r[2], r[3], r[4], r[0], r[1], r[5], r[6])
                                    for r in sorted((recs.record(k) for k in range(len(recs))), key=_interval_order))
        return self._intervals

    def _columns(self) -> tuple[Records, bool]:
        """The records, and whether they are already in the order of `intervals` (a Trace made
        from Interval objects keeps their order)."""
        if self._records is not None:
            return self._records, False
        recs = Records()
        for iv in self.intervals:
            recs.add(iv.start_s, iv.end_s, iv.track, iv.name, iv.cat, iv.op, iv.args)
        recs.flush()
        return recs, True

    def kernel_order(self) -> tuple[Records, list[int]]:
        """The records and the indices of the kernels' records, in the order of `intervals`
        (start, track, op; ties in recording order), without making Interval objects."""
        recs, ordered = self._columns()
        track = recs.track
        order = [k for k in range(len(recs)) if track[k] != HOST_TRACK]
        if not ordered:
            # Three stable sorts with plain keys (least significant first): one key per kernel at a time.
            order.sort(key=recs.op.__getitem__)
            order.sort(key=track.__getitem__)
            order.sort(key=recs.start.__getitem__)
        return recs, order

    def host_order(self) -> tuple[Records, list[int]]:
        """The records and the indices of the host's records (any order)."""
        recs, _ = self._columns()
        track = recs.track
        return recs, [k for k in range(len(recs)) if track[k] == HOST_TRACK]

    def kernel_records(self) -> list[Record]:
        """The kernels' intervals as records, in the order of `intervals`."""
        recs, order = self.kernel_order()
        return [recs.record(k) for k in order]

    def host_records(self) -> list[Record]:
        """The host's intervals as records (any order)."""
        recs, order = self.host_order()
        return [recs.record(k) for k in order]

    def kernels(self) -> list[Interval]:
        return [iv for iv in self.intervals if iv.track != HOST_TRACK]

    def host(self) -> list[Interval]:
        return [iv for iv in self.intervals if iv.track == HOST_TRACK]

    def with_intervals(self, intervals: Sequence[Interval]) -> Trace:
        """The same step with other intervals (e.g. one rank's of a merged trace)."""
        return Trace(self.graph, self.hardware, self.costs, intervals=intervals, end_s=self.end_s)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (self.graph == other.graph and self.hardware == other.hardware and self.costs == other.costs
                and self.end_s == other.end_s and self.intervals == other.intervals)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self._records) if self._records is not None else len(self._intervals or ())
        return f"Trace(graph={self.graph.name!r}, hardware={self.hardware!r}, intervals={n}, end_s={self.end_s!r})"
