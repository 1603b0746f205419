"""Run a sweep plan: skip cached points on resume, run the rest, save each point as it finishes, then the tables.

Output folder:
- `points/<key>.json`: one record per point (kernelsim.sweep-point/v1), written atomically as
  soon as the point finishes, so an interrupted sweep loses only the points in flight.
- `results.csv` (and `results.parquet` when pyarrow is importable): the tidy table.
- `sweep.json` (kernelsim.sweep/v1): axes, every point's key and status, the summary.
Nothing here depends on the executor or the completion order.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from sim import __version__
from sim.errors import InputError
from sim.outputs import write_json_atomic
from sim.sweep.executors import EXECUTORS, default_workers, run_dask, run_local
from sim.sweep.grid import POINT_SCHEMA, SWEEP_SCHEMA, SweepPlan
from sim.sweep.results import summarize, tidy_rows, write_csv, write_parquet


@dataclass
class SweepOutcome:
    records: list[dict[str, Any]]  # one per point, grid order
    rows: list[dict[str, Any]]  # the tidy table
    summary: dict[str, Any]
    computed: int
    cached: int
    seconds: float
    files: list[Path] = field(default_factory=list)

    @property
    def infeasible(self) -> int:
        return int(self.summary["counts"]["infeasible"])

    @property
    def invalid(self) -> int:
        return int(self.summary["counts"]["invalid"])


class _RateColumn(ProgressColumn):
    """Points computed (not from cache) per second since the start: the figure the summary prints.
    (rich's own speed is a moving window over recent updates, which disagreed with the summary.)"""

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        computed = task.completed - float(task.fields.get("cached", 0))
        if not elapsed or computed <= 0:
            return Text("", style="progress.data.speed")
        return Text(f"{computed / elapsed:,.1f} points/s", style="progress.data.speed")


def _cached(path: Path, key: str) -> dict[str, Any] | None:
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing or unreadable: run the point again
    if not isinstance(rec, dict) or rec.get("schema") != POINT_SCHEMA or rec.get("key") != key:
        return None
    return rec


def run_sweep(plan: SweepPlan, out: Path, *, workers: int | None = None, executor: str = "local",
              scheduler: str | None = None, resume: bool = False, progress: bool = True,
              console: Console | None = None) -> SweepOutcome:
    """Run every point not already finished (with `resume`), write the point files and the tables."""
    if executor not in EXECUTORS:
        raise InputError("unknown executor", value=executor, expected=" or ".join(EXECUTORS))
    if scheduler and executor != "dask":
        raise InputError("--scheduler needs --executor dask", value=scheduler)
    workers = workers or default_workers()
    if workers < 1:
        raise InputError("--workers must be at least 1", value=workers)
    console = console or Console(stderr=True)
    points_dir = out / "points"
    records: list[dict[str, Any] | None] = [None] * len(plan.points)
    if resume:
        for p in plan.points:
            rec = _cached(points_dir / f"{p.key}.json", p.key)
            if rec is not None:
                records[p.index] = {**rec, "index": p.index}
    todo = [p for p in plan.points if records[p.index] is None]
    cached = len(plan.points) - len(todo)
    t0 = time.perf_counter()
    columns = (TextColumn("[bold]sweep[/bold]"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("points", total=len(plan.points), completed=cached, cached=cached)
        if executor == "dask":
            stream = run_dask(plan, todo, workers, scheduler)
        else:
            stream = run_local(plan, todo, workers)
        for index, rec in stream:
            write_json_atomic(points_dir / f"{rec['key']}.json", rec)
            records[index] = rec
            bar.advance(task)
    seconds = time.perf_counter() - t0
    done = [r for r in records if r is not None]
    rows = tidy_rows(done)
    summary = summarize(done)
    files = [out / "results.csv"]
    write_csv(files[0], rows)
    if write_parquet(out / "results.parquet", rows):
        files.append(out / "results.parquet")
    manifest = {
        "schema": SWEEP_SCHEMA,
        "kernelsim": __version__,
        "scenario": plan.scenario.spec.name,
        "file": str(plan.file),
        "axes": plan.axes,
        "variants": ["baseline", *plan.variants],
        "points": [{"index": r["index"], "key": r["key"], "hardware": r["hardware"], "params": r["params"],
                    "status": r["status"]} for r in done],
        "summary": summary,
    }
    write_json_atomic(out / "sweep.json", manifest)
    files.append(out / "sweep.json")
    return SweepOutcome(records=done, rows=rows, summary=summary, computed=len(todo), cached=cached,
                        seconds=seconds, files=files)
