"""Run a sweep plan: skip cached points on resume, run the rest, save each point as it finishes, then the tables.

Output folder:
- `points/<key>.json`: one record per point (kernelsim.sweep-point/v1), written atomically as
  soon as the point finishes, so an interrupted sweep loses only the points in flight.
- `results.csv` (and `results.parquet` when pyarrow is importable): the tidy table.
- `sweep.json` (kernelsim.sweep/v1): axes, every point's key and status, the summary.
Nothing here depends on the executor or the completion order.
"""

from __future__ import annotations

import hashlib
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

from sim.errors import InputError
from sim.outputs import write_json_atomic
from sim.sweep.executors import EXECUTORS, default_workers, run_dask, run_local
from sim.sweep.grid import POINT_SCHEMA, SWEEP_SCHEMA, SweepPlan
from sim.sweep.results import summarize, tidy_rows, write_csv, write_parquet
from sim.version import __version__


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


def record_checksum(rec: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON without its `checksum` field."""
    body = {k: v for k, v in rec.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")).hexdigest()


def with_checksum(rec: dict[str, Any]) -> dict[str, Any]:
    return {**rec, "checksum": record_checksum(rec)}


def check_cached(path: Path, key: str) -> tuple[dict[str, Any] | None, str | None]:
    """A cached point record, validated: (record, None), or (None, why it cannot be used).

    A missing file is (None, None). Anything else that is not a record kernelsim wrote for this
    point (a folder, unreadable or non-JSON text, a wrong schema or key, a missing result or
    reason, a checksum that does not match its content) is refused with the reason, and the
    point is computed again.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    if rec.get("schema") != POINT_SCHEMA or rec.get("key") != key:
        return None, "wrong schema or key"
    status = rec.get("status")
    if status == "ok":
        if not isinstance(rec.get("result"), dict) or not isinstance(rec["result"].get("hardware"), list):
            return None, "no result"
    elif status in ("infeasible", "invalid"):
        if not isinstance(rec.get("reason"), str):
            return None, "no reason"
    else:
        return None, "unknown status"
    try:
        ok = rec.get("checksum") == record_checksum(rec)
    except (ValueError, TypeError):
        ok = False
    if not ok:
        return None, "checksum does not match the content (edited or corrupted)"
    return rec, None


def _cached(path: Path, key: str) -> dict[str, Any] | None:
    return check_cached(path, key)[0]


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
    refused: list[str] = []
    if resume:
        for p in plan.points:
            rec, why = check_cached(points_dir / f"{p.key}.json", p.key)
            if rec is not None:
                records[p.index] = {**rec, "index": p.index}
            elif why is not None:
                refused.append(f"points/{p.key}.json: {why}")
    if refused:
        console.print(f"note: {len(refused)} cached point record(s) refused and computed again, e.g. {refused[0]}",
                      highlight=False, markup=False)
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
            rec = with_checksum(rec)
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
