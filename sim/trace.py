"""The Trace: an immutable record of what ran where and when. Every metric is derived from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sim.costmodel import KernelCost
from sim.graph import Graph

HOST_TRACK = "host"


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


@dataclass(frozen=True)
class Trace:
    graph: Graph
    hardware: str
    costs: tuple[KernelCost | None, ...]
    intervals: tuple[Interval, ...]
    end_s: float

    def kernels(self) -> list[Interval]:
        return [iv for iv in self.intervals if iv.track != HOST_TRACK]

    def host(self) -> list[Interval]:
        return [iv for iv in self.intervals if iv.track == HOST_TRACK]
