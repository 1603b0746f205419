"""The Trace: an immutable record of what ran where and when. Every metric is derived from it.

The engine hands over its records as plain tuples in recording order (`Record`); the
`Interval` objects, sorted by start, are made only when someone asks for `intervals` (a
Perfetto export, a plot, the advisor), so a sweep that only needs step metrics never builds
them. Metrics read the records directly (`kernel_records`, `host_records`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sim.costmodel import KernelCost
from sim.graph import Graph

HOST_TRACK = "host"

# (start_s, end_s, track, name, cat, op, args): one interval as the engine records it.
Record = tuple[float, float, str, str, str, int, Mapping[str, Any]]


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
                 records: Sequence[Record] | None = None) -> None:
        if (intervals is None) == (records is None):
            raise ValueError("Trace needs exactly one of intervals or records")
        self.graph = graph
        self.hardware = hardware
        self.costs = tuple(costs)
        self.end_s = end_s
        self._records = records
        self._intervals = tuple(intervals) if intervals is not None else None

    @property
    def intervals(self) -> tuple[Interval, ...]:
        """Every interval, ordered by start (host before streams at one instant, then track, then op)."""
        if self._intervals is None:
            assert self._records is not None
            self._intervals = tuple(Interval(r[2], r[3], r[4], r[0], r[1], r[5], r[6])
                                    for r in sorted(self._records, key=_interval_order))
        return self._intervals

    def kernel_records(self) -> list[Record]:
        """The kernels' intervals as records, in the order of `intervals`."""
        if self._records is None:
            return [(iv.start_s, iv.end_s, iv.track, iv.name, iv.cat, iv.op, iv.args)
                    for iv in self.intervals if iv.track != HOST_TRACK]
        if self._intervals is not None:
            return [(iv.start_s, iv.end_s, iv.track, iv.name, iv.cat, iv.op, iv.args)
                    for iv in self._intervals if iv.track != HOST_TRACK]
        return sorted((r for r in self._records if r[2] != HOST_TRACK), key=lambda r: (r[0], r[2], r[5]))

    def host_records(self) -> list[Record]:
        """The host's intervals as records (any order)."""
        if self._records is None:
            return [(iv.start_s, iv.end_s, iv.track, iv.name, iv.cat, iv.op, iv.args)
                    for iv in self.intervals if iv.track == HOST_TRACK]
        return [r for r in self._records if r[2] == HOST_TRACK]

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
