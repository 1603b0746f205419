"""Run one sweep point: a pure function of (scenario, profile, point), safe in any process or Dask worker."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from sim.costmodel.cache import CostCache
from sim.errors import InfeasibleError, KernelsimError
from sim.gcpause import SurvivorFreezer
from sim.hardware import Hardware
from sim.run import GraphCache, Scenario, run_scenario
from sim.sweep.grid import POINT_SCHEMA, Point, point_scenario


def run_point(scn: Scenario, hardware: dict[str, Hardware], variants: tuple[str, ...], point: Point,
              cache: CostCache | None = None, graphs: GraphCache | None = None) -> dict[str, Any]:
    """The point's record: its result (kernelsim.run/v1 with one profile), or why it could not run.

    An infeasible configuration (a launch that fits no SM, ...) is a result, not a failure:
    status `infeasible`. A parameter value that makes the workload or a transform invalid
    is status `invalid`. Both carry the reason and are counted by the sweep.
    """
    record: dict[str, Any] = {"schema": POINT_SCHEMA, **point.as_dict()}
    try:
        result, _ = run_scenario(point_scenario(scn, hardware[point.hardware], dict(point.params), variants),
                                 cache=cache, graphs=graphs)
    except InfeasibleError as exc:
        return {**record, "status": "infeasible", "reason": str(exc)}
    except KernelsimError as exc:
        return {**record, "status": "invalid", "reason": str(exc)}
    return {**record, "status": "ok", "result": result}


# -- process-pool workers: the plan is sent once per process, then points are small tasks. -----------
_WORKER_STATE: dict[str, Any] = {}


def init_worker(scn: Scenario, hardware: dict[str, Hardware], variants: tuple[str, ...],
                parent_pid: int | None = None) -> None:
    die_with_parent(parent_pid)
    # One cost and one graph cache per worker process, shared by all its points (the same ops on the
    # same profiles; the same parameter values on other profiles).
    # What the points leave alive (those caches) is kept off the collector's full passes (sim.gcpause).
    _WORKER_STATE.update(scn=scn, hardware=hardware, variants=variants, costs=CostCache(), graphs=GraphCache(),
                         freezer=SurvivorFreezer())


def die_with_parent(parent_pid: int | None = None, poll_s: float = 0.5) -> None:
    """End this worker process when the sweep's main process dies (even by SIGKILL).

    A pool worker blocks on a pipe that its siblings keep open, so it never sees the parent
    go: on Linux the kernel sends SIGKILL at the parent's death (PR_SET_PDEATHSIG); elsewhere,
    and as a second line, a daemon thread notices the parent change and exits. `parent_pid` is
    the sweep's pid as the parent saw it: a worker still starting when the parent died is
    already orphaned here and exits at once.
    """
    parent = parent_pid if parent_pid is not None else os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the call above took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="kernelsim-parent-watch", daemon=True).start()


def run_point_in_worker(point: Point) -> dict[str, Any]:
    s = _WORKER_STATE
    return run_point(s["scn"], s["hardware"], s["variants"], point, s["costs"], s["graphs"])


def run_points_in_worker(points: list[Point]) -> list[dict[str, Any]]:
    out = []
    for p in points:
        out.append(run_point_in_worker(p))
        _WORKER_STATE["freezer"].point_done()
    return out
