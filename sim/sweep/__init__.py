"""Sweeps: expand a scenario's `sweep:` axes into points, run them on local processes or Dask, cache by input hash."""

from sim.sweep.executors import DASK_EXTRA, EXECUTORS, default_workers
from sim.sweep.grid import Point, SweepPlan, load_sweep, point_scenario
from sim.sweep.runner import SweepOutcome, run_sweep

__all__ = ["DASK_EXTRA", "EXECUTORS", "Point", "SweepOutcome", "SweepPlan", "default_workers", "load_sweep",
           "point_scenario", "run_sweep"]
