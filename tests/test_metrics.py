"""sim.metrics' array helpers against the plain computations they replace, and its list and array paths
against each other (bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

from sim import metrics
from sim.metrics import _distinct_sorted, _union_length, step_metrics
from tests.test_engine_outputs import cases


def test_distinct_sorted_is_numpy_unique() -> None:
    rng = np.random.default_rng(23)
    # Repeated values (kernels starting where others end) and a few lone ones, unsorted.
    values = np.concatenate((rng.integers(0, 50, 400) * 1e-6, rng.random(37), [0.0, 0.0]))
    rng.shuffle(values)
    got = _distinct_sorted(values.copy())
    want = np.unique(values)
    assert got.tobytes() == want.tobytes()
    assert _distinct_sorted(np.array([]))[:0].size == 0 and _distinct_sorted(np.array([2.5])).tolist() == [2.5]


def test_union_length_sums_in_start_order_across_chunks() -> None:
    rng = np.random.default_rng(15)
    n = 40_000  # more than one chunk of host intervals
    starts = rng.integers(0, 200_000, n) * 1e-7
    ends = starts + rng.integers(1, 30, n) * 1e-7
    # The reference: a stable sort by start, the union summed interval by interval (issue 15's sum).
    order = sorted(range(n), key=lambda k: starts[k])
    busy = covered = 0.0
    for k in order:
        s, e = float(starts[k]), float(ends[k])
        if e > covered:
            busy += e - max(s, covered)
            covered = e
    assert _union_length(starts, ends) == busy
    assert _union_length(np.zeros(0), np.zeros(0)) == 0.0


@pytest.mark.parametrize("name", ["streams_16", "synthetic_2000", "queue_depth_1_free_host", "compiled_and_cuda_graph",
                                  "ranks_4"])
def test_small_and_large_traces_measure_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """step_metrics gives the same floats, bit for bit, whether a trace is measured in Python lists (small
    traces) or in numpy arrays, in one chunk of points or in many (the engine's output cases: many
    streams, eager, compiled and graph regions, four ranks with collectives)."""
    traces = cases()[name]()
    got = {}
    for path, small_max, chunk in (("lists", 10**9, metrics._CHUNK), ("arrays", 0, metrics._CHUNK), ("chunks", 0, 7)):
        monkeypatch.setattr(metrics, "SMALL_TRACE_RECORDS", small_max)
        monkeypatch.setattr(metrics, "_CHUNK", chunk)
        got[path] = [repr(step_metrics(t)) for t in traces]
    assert got["lists"] == got["arrays"] == got["chunks"]
