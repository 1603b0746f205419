"""Executors: run sweep points in this process, in a local process pool, or on a Dask cluster.

Every executor yields (point index, record) as points finish; the runner puts records back in
grid order, so results and files do not depend on the executor or on completion order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from sim.costmodel.cache import CostCache
from sim.errors import InputError
from sim.gcpause import frozen_survivors
from sim.run import GraphCache
from sim.sweep.grid import Point, SweepPlan
from sim.sweep.worker import init_worker, run_point, run_points_in_worker

EXECUTORS = ("local", "dask")
DASK_EXTRA = "distributed"


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _chunks(points: Sequence[Point], workers: int) -> list[list[Point]]:
    """Small batches: few enough round trips, many enough for a smooth progress bar and balance."""
    size = max(1, min(8, len(points) // (workers * 8) or 1))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


def _by_values(points: Sequence[Point]) -> list[Point]:
    """Points with the same parameter values side by side (they share built graphs across profiles);
    the runner puts records back in grid order, so this changes only the work order."""
    return sorted(points, key=lambda p: (p.params, p.index))


def run_serial(plan: SweepPlan, points: Sequence[Point]) -> Iterator[tuple[int, dict[str, Any]]]:
    cache, graphs = CostCache(), GraphCache()  # shared by the points, as in a pool worker
    with frozen_survivors() as point_done:  # as in a pool worker (sim.gcpause)
        for p in _by_values(points):
            record = run_point(plan.scenario, plan.hardware, plan.variants, p, cache, graphs)
            point_done()
            yield p.index, record


def run_local(plan: SweepPlan, points: Sequence[Point], workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """A process pool; each process receives the plan once. One worker runs in this process."""
    if workers <= 1 or len(points) <= 1:
        yield from run_serial(plan, points)
        return
    # spawn, not fork: the parent runs a progress thread, and fork with threads can deadlock.
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=init_worker,
                               initargs=(plan.scenario, plan.hardware, plan.variants, os.getpid()))
    try:
        pending: set[Future[list[dict[str, Any]]]] = {
            pool.submit(run_points_in_worker, chunk) for chunk in _chunks(_by_values(points), workers)
        }
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                for record in fut.result():
                    yield record["index"], record
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_dask(plan: SweepPlan, points: Sequence[Point], workers: int,
             scheduler: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """dask.distributed: an existing scheduler (`scheduler` address) or a LocalCluster of `workers` processes."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError(
            "the dask executor needs dask.distributed", value="--executor dask",
            expected=f"pip install 'kernelsim[{DASK_EXTRA}]'",
        ) from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        payload = client.scatter((plan.scenario, plan.hardware, plan.variants), broadcast=True)
        chunks = _chunks(_by_values(points), workers)
        futures = [
            client.submit(_run_chunk_dask, payload, chunk, key=f"kernelsim-sweep-{chunk[0].key}-{len(chunk)}")
            for chunk in chunks
        ]
        for fut in as_completed(futures):
            for record in fut.result():
                yield record["index"], record
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _run_chunk_dask(payload: tuple[Any, Any, Any], chunk: list[Point]) -> list[dict[str, Any]]:
    scn, hardware, variants = payload
    cache, graphs = CostCache(), GraphCache()
    return [run_point(scn, hardware, variants, p, cache, graphs) for p in chunk]
