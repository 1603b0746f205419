"""paused_gc: run a block with Python's cyclic garbage collector off.

Building, simulating and measuring a step allocate millions of small objects (ops, events,
records) and free them together, with no cycles worth chasing meanwhile; with the collector
on, its full passes over the growing heap make these phases superlinear (a 100k-kernel step's
metrics took 5-10x longer than 10x the 10k-kernel time). Reference counting still frees
everything; the collector's state is restored on exit, and nested pauses are harmless.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
