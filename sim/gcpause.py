"""The cyclic garbage collector around kernelsim's hot phases: paused within a phase, and kept off
the objects a sweep worker's points leave alive.

paused_gc: building, simulating and measuring a step allocate millions of small objects (ops,
events, records) and free them together, with no cycles worth chasing meanwhile; with the collector
on, its full passes over the growing heap make these phases superlinear (a 100k-kernel step's
metrics took 5-10x longer than 10x the 10k-kernel time). Reference counting still frees
everything; the collector's state is restored on exit, and nested pauses are harmless.

frozen_survivors: a sweep worker runs thousands of points and keeps what they share (graphs,
prices and costs in its caches) alive between them. Every full collection walks all of it again,
and full collections come each time the objects that survived younger collections grew by a
quarter: in serial runs of the benchmark sweep (benchmarks/bench_engine.py) the collector's full
passes took 2.3 of 15.8 CPU seconds over 300 points and 5.1-5.4 of 26.5-30.4 over 250 others. After each point what is alive is frozen (gc.freeze: out of every
generation, never walked again while frozen); every `collect_every` points it is unfrozen and one
full collection frees any cycle that became garbage meanwhile, so garbage cycles wait at most that
many points. Reference counting frees frozen objects as usual; results cannot change (the
collector frees only unreachable objects).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Points between two full collections of a sweep worker's frozen objects (frozen_survivors).
COLLECT_EVERY_POINTS = 256


class paused_gc:  # lower case: used as the function it was (`with paused_gc():`)
    """The collector paused for a `with` block and restored on exit (a class: a generator-based
    context manager costs several times more per use, and a sweep point uses a hundred)."""

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()


class SurvivorFreezer:
    """Call `point_done()` after each point of a sweep worker: it freezes what is alive, and every
    `collect_every` points unfreezes it and runs one full collection first (see the module doc)."""

    def __init__(self, collect_every: int = COLLECT_EVERY_POINTS) -> None:
        if collect_every < 1:
            raise ValueError(f"collect_every must be >= 1, got {collect_every}")
        self.collect_every = collect_every
        self.points = 0

    def point_done(self) -> None:
        self.points += 1
        if self.points % self.collect_every == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    def close(self) -> None:
        """Give the frozen objects back to the collector (they join the oldest generation)."""
        gc.unfreeze()


@contextmanager
def frozen_survivors(collect_every: int = COLLECT_EVERY_POINTS) -> Iterator[Callable[[], None]]:
    """A SurvivorFreezer for a block of points in this process; unfrozen on exit. Yields its point_done."""
    freezer = SurvivorFreezer(collect_every)
    try:
        yield freezer.point_done
    finally:
        freezer.close()
