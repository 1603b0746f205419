"""Reproducibility of calibration: fit several raw folders, compare the profiles and their predictions.

`python -m sim.calibrate.repro RAW_DIR RAW_DIR [...]` fits each raw folder over the same base
profile (as `kernelsim calibrate --from-raw` does), then reports
- per fitted parameter: its value in each calibration and the spread across them
  ((max - min) / median);
- per validation case (kernel- and step-level rows of `kernelsim validate`): the spread of the
  predictions across calibrations, against the acceptance limits (3 % on every step case, 5 % on
  every kernel case);
- per calibration: the thresholds `kernelsim validate --profile P` reports as exceeded;
- with --drivers: which fitted numbers drive the step-case spread. For the two calibrations whose
  step predictions differ most, each fitted number (and each correction table) of one is put into
  the other's profile alone, and the step cases are predicted again: the largest and the median
  change per number say how much of the disagreement it carries.
With --markdown FILE the tables replace the generated section of FILE (between the markers).
Exit 0 when every limit holds, 3 when one does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.errors import InputError
from sim.outputs import dumps, write_text_atomic

STEP_LIMIT = 0.03  # predictions of two calibrations on a step case: within 3 % of each other
KERNEL_LIMIT = 0.05  # ... on a kernel case: within 5 %
BEGIN = "<!-- BEGIN generated: python -m sim.calibrate.repro -->"
END = "<!-- END generated: python -m sim.calibrate.repro -->"
REPRO_EXIT = 3


class Interrupted(BaseException):
    """SIGTERM or SIGHUP in the parent of a repro run (SIGINT raises KeyboardInterrupt): a BaseException, so
    that no `except Exception` on the way swallows it, and the pool's `with` block stops its workers."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, in the main thread: SIGTERM and SIGHUP raise Interrupted, SIGINT KeyboardInterrupt, and
    every later one of the three is ignored while the first unwinds (elsewhere: nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, frame: object) -> None:
        for s in caught:  # a second signal must not cut short the cleanup this one starts
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)

    caught = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, raise_interrupted) for s in caught}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _worker_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _worker_signals() -> None:
    """A pool worker: SIGINT (a terminal's Ctrl-C reaches the whole process group) is left to the parent,
    which stops the pool; SIGTERM (how the pool stops a worker) exits through SystemExit, so a file the
    worker is writing (write_text_atomic) is removed, not left half-written."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_exit)
    signal.signal(signal.SIGHUP, _worker_exit)


@dataclass
class Calibration:
    name: str
    raw_dir: Path
    profile: Path
    params: dict[str, float]
    predictions: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    measured: dict[str, dict[str, float]] = field(default_factory=dict)  # validate's quantities per gated group


def measured_params(doc: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every measured scalar of a profile document by dotted key (op costs: their non-zero units)."""
    out: dict[str, float] = {}
    for key, node in doc.items():
        path = f"{prefix}{key}"
        if not isinstance(node, dict):
            continue
        if node.get("source") == "measured":
            if "value" in node:
                out[path] = float(node["value"])
            else:
                for unit in ("fp32", "sfu", "int"):
                    if node.get(unit):
                        out[f"{path}.{unit}"] = float(node[unit])
        elif key != "provenance":
            out.update(measured_params(node, f"{path}."))
    return out


def spread(values: list[float]) -> float:
    """(max - min) / median of positive values: the largest relative disagreement."""
    mid = statistics.median(values)
    if mid == 0:
        return 0.0 if max(values) == min(values) else float("inf")
    return (max(values) - min(values)) / abs(mid)


def _validate(profile: Path | str, base: str, validation_raw: str, cases: str, thresholds: str,
              out: Path) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """What `kernelsim validate --profile P --json OUT` writes (the same rows and thresholds), also written to
    `out`, and the quantities its gates check (per group: median_abs, p90_abs, coverage, ...)."""
    from sim.validate.suite import run_validation, validation_document

    v = run_validation(str(profile), base, Path(validation_raw), Path(cases), Path(thresholds))
    write_text_atomic(out, dumps(validation_document(v)))
    doc: dict[str, Any] = json.loads(out.read_text())  # as the command's file reads back
    return doc, {g: {k: round(float(x), 6) for k, x in q.items()} for g, q in sorted(v.measured.items())}


def reused_calibrations(doc: dict[str, Any]) -> dict[tuple[str, str], Calibration]:
    """The calibrations of a repro document (`--json` output) by (name, raw folder), as computed then."""
    if doc.get("schema") != REPRO_SCHEMA:
        raise InputError("not a reproducibility document", path="schema", value=doc.get("schema"), expected=REPRO_SCHEMA)
    keys = [(k[0], k[1], k[2], k[3]) for k in doc["cases"]]
    out = {}
    for c in doc["calibrations"]:
        cal = Calibration(c["name"], Path(c["raw_dir"]), Path(), dict(c["params"]), violations=list(c["violations"]),
                          measured=c["measured"])
        cal.predictions = {k: float(v) for k, v in zip(keys, c["predictions"], strict=True) if v is not None}
        out[(cal.name, str(cal.raw_dir))] = cal
    return out


def calibrate_one(raw_dir: Path, name: str, base: str, work: Path, validation_raw: str, cases: str,
                  thresholds: str, host: str = "fitted", host_reference: str = "h200-measured") -> Calibration:
    """Fit one raw folder over the base profile (as `kernelsim calibrate --from-raw`), validate the profile."""
    from sim.calibrate.fit import calibrate_from_raw
    from sim.hardware import resolve_profile

    base_path = resolve_profile(base, Path.cwd(), path="--base")
    out = work / f"{name}.yaml"
    profile_name = "repro-" + re.sub(r"[^a-z0-9_.-]", "-", name.lower())
    ref_path = resolve_profile(host_reference, Path.cwd(), path="--host-reference") if host == "reference" else None
    text, _ = calibrate_from_raw(raw_dir, base_path, out, profile_name, spreads=False, host=host,
                                 host_reference=ref_path)
    write_text_atomic(out, text)  # an interrupted run leaves whole profiles or none
    cal = Calibration(name, raw_dir, out, measured_params(yaml.safe_load(text)))
    doc, cal.measured = _validate(out, base, validation_raw, cases, thresholds, work / f"{name}.validation.json")
    seen: dict[tuple[str, str, str, str], int] = {}
    for row in doc["rows"]:
        key = (row["table"], row["family"], row["label"], row["split"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = (key[0], key[1], f"{key[2]} #{seen[key]}", key[3])
        cal.predictions[key] = float(row["predicted_us"])
    cal.violations = list(doc["violations"])
    return cal


LOW_PRIORITY_NICE = 10  # a calibration past --first N runs at this niceness: ~1/10 of a core beside normal ones
_RUN_NICE = 0  # the niceness of the process that starts the pool (set before it forks its workers)


def _calibrate_one_low_priority(*args: Any) -> Calibration:
    """calibrate_one at a lower CPU priority (os.nice): with more processes than cores the first calibrations get
    the cores and finish first (what a run stopped by a time limit keeps), the rest take the idle cycles and then
    the freed cores; the result is the same (priority changes only when each process runs)."""
    # the pool reuses its workers: the niceness is set to the run's own plus LOW_PRIORITY_NICE, not raised again by
    # each low-priority calibration a worker runs (a second one went to 19)
    os.nice(max(0, min(19, _RUN_NICE + LOW_PRIORITY_NICE) - os.nice(0)))
    return calibrate_one(*args)


def _reference_measured(reference: str, base: str, validation_raw: str, cases: str, thresholds: str,
                        work: Path) -> dict[str, dict[str, float]]:
    return _validate(reference, base, validation_raw, cases, thresholds, work / "reference.validation.json")[1]


def write_partial(partial: Path, reference_name: str, cal: Calibration | None = None,
                  ref: dict[str, dict[str, float]] | None = None) -> None:
    """One finished piece of a run as a repro document of its own in `partial`: `<name>.json` with one calibration,
    or `reference.json` with the reference validation and none. `--reuse` takes them back, so a run stopped part-way
    (a time limit, a signal) keeps what it finished."""
    if cal is not None:
        doc = repro_document([cal], "partial", "", reference_name, {}, None)
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", cal.name) + ".json"
    else:
        doc = repro_document([], "partial", "", reference_name, ref or {}, None)
        name = "reference.json"
    partial.mkdir(parents=True, exist_ok=True)
    write_text_atomic(partial / name, dumps(doc))


def calibrate_all(raw_dirs: list[Path], names: list[str], base: str, work: Path, validation_raw: str, cases: str,
                  thresholds: str, reuse: dict[tuple[str, str], Calibration] | None = None, jobs: int = 1,
                  reference: str | None = None, host: str = "fitted", partial: Path | None = None,
                  reference_name: str = "h200-measured", first: int | None = None
                  ) -> tuple[list[Calibration], dict[str, dict[str, float]] | None]:
    """Every calibration (fitted and validated, or taken from `reuse`), in the order given, and with `reference`
    the reference profile's validate quantities. With jobs > 1 the fits and validations run in that many
    processes (each is deterministic on its own, so the result does not depend on `jobs`). With `partial`, each
    calibration and the reference validation is also written there as soon as it is finished (write_partial),
    under `reference_name` (the reference profile's name as --reuse matches it). With `first` (jobs > 1), the
    calibrations to do after the first `first` run at a lower CPU priority (_calibrate_one_low_priority)."""
    from sim.hardware import resolve_profile

    def keep(cal: Calibration | None = None, ref: dict[str, dict[str, float]] | None = None) -> None:
        if partial is None:
            return
        try:
            write_partial(partial, reference_name, cal, ref)
        except Exception as exc:  # noqa: BLE001 - in the pool's result thread an exception would hang the pool
            print(f"warning: {partial}: partial result not written: {exc}", file=sys.stderr)

    resolve_profile(base, Path.cwd(), path="--base")  # bad input: one error before any work starts
    todo = [(r, n) for r, n in zip(raw_dirs, names, strict=True) if not (reuse and (n, str(r)) in reuse)]
    done: dict[str, Calibration] = {}
    ref: dict[str, dict[str, float]] | None = None
    if jobs <= 1:
        for raw_dir, name in todo:
            done[name] = calibrate_one(raw_dir, name, base, work, validation_raw, cases, thresholds, host)
            keep(cal=done[name])
        if reference is not None:
            ref = _reference_measured(reference, base, validation_raw, cases, thresholds, work)
            keep(ref=ref)
    else:
        import multiprocessing

        # multiprocessing.Pool, not concurrent.futures: leaving by any exception (a worker's error,
        # KeyboardInterrupt, the Interrupted that `stop_on_signals` raises for SIGTERM) terminates the workers and
        # joins them, so an interrupted run leaves no process behind. A finished run closes the pool and joins
        # its workers instead (each takes the pool's end-of-work sentinel and exits): Pool.terminate, which a
        # `with` block calls on every exit, can hang for good in its own shutdown (CPython issues 78178 and 96995,
        # open), which a run that has all its results needs no part of
        global _RUN_NICE
        _RUN_NICE = os.nice(0)
        pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_signals)
        try:
            ref_job = (pool.apply_async(_reference_measured, (reference, base, validation_raw, cases, thresholds, work),
                                        callback=lambda r: keep(ref=r))
                       if reference is not None else None)
            jobs_of = {name: pool.apply_async(_calibrate_one_low_priority if first is not None and i >= first
                                              else calibrate_one,
                                              (raw_dir, name, base, work, validation_raw, cases, thresholds, host),
                                              callback=lambda c: keep(cal=c))
                       for i, (raw_dir, name) in enumerate(todo)}
            done = {name: j.get() for name, j in jobs_of.items()}
            ref = ref_job.get() if ref_job is not None else None
        except BaseException:
            pool.terminate()
            pool.join()
            raise
        pool.close()
        pool.join()
    cals = [reuse[(n, str(r))] if reuse and (n, str(r)) in reuse else done[n]
            for r, n in zip(raw_dirs, names, strict=True)]
    return cals, ref


def _leaves(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict[str, Any]]:
    """Every measured entry of a profile document (numbers, op costs, correction tables) by key path."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for key, node in doc.items():
        if not isinstance(node, dict):
            continue
        if key == "framework_ops":  # the host table by framework op: one entry
            out[prefix + (key,)] = {"points": node}
            continue
        if node.get("source") == "measured" or (isinstance(node.get("provenance"), dict)
                                                 and node["provenance"].get("source") == "measured"):
            out[prefix + (key,)] = node
        else:
            out.update(_leaves(node, prefix + (key,)))
    gemm = doc.get("gemm") if not prefix else None
    if isinstance(gemm, dict) and "correction" in gemm:
        out[("gemm", "correction")] = {"points": gemm["correction"]}
    return out


def _numbers(node: dict[str, Any]) -> Any:
    return {k: v for k, v in node.items() if k in ("value", "fp32", "sfu", "int", "points")}


@dataclass
class Driver:
    parameter: str
    max_change: float  # largest |relative change| of a step prediction when this number alone is swapped
    median_change: float
    cases_over: int  # step cases it alone moves by more than the step limit


def step_predictions(profile: Path, cases: str) -> dict[tuple[str, str, str, str], float]:
    from sim.validate.steps import step_rows

    rows = step_rows(Path(cases), str(profile), 0.5)
    return {(r.table, r.family, r.label, r.split): r.predicted_us for r in rows.rows if r.table == "step"}


def drivers(a: Calibration, b: Calibration, cases: str, work: Path) -> list[Driver]:
    """Swap each measured entry of `b`'s profile into `a`'s, one at a time; the change of `a`'s step
    predictions per swap (largest first)."""
    import copy

    doc_a, doc_b = yaml.safe_load(a.profile.read_text()), yaml.safe_load(b.profile.read_text())
    base = step_predictions(a.profile, cases)
    la, lb = _leaves(doc_a), _leaves(doc_b)
    out = []
    for path in sorted(set(la) & set(lb)):
        if _numbers(la[path]) == _numbers(lb[path]):
            continue
        doc = copy.deepcopy(doc_a)
        node = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = copy.deepcopy(lb[path]["points"] if path in (("gemm", "correction"), ("host", "framework_ops"))
                                       else lb[path])
        swapped = work / "drivers-swap.yaml"
        write_text_atomic(swapped, yaml.safe_dump(doc, sort_keys=False))
        pred = step_predictions(swapped, cases)
        changes = [abs(pred[k] / v - 1) for k, v in base.items() if k in pred and v > 0]
        if changes:
            out.append(Driver(".".join(path), max(changes), statistics.median(changes),
                              sum(c > STEP_LIMIT for c in changes)))
    return sorted(out, key=lambda d: (-d.max_change, d.parameter))


def widest_pair(cals: list[Calibration]) -> tuple[Calibration, Calibration]:
    """The two calibrations whose step predictions differ most (largest median |ratio - 1|)."""
    best: tuple[float, int, int] = (-1.0, 0, 1)
    for i in range(len(cals)):
        for j in range(i + 1, len(cals)):
            keys = [k for k in cals[i].predictions if k[0] == "step" and k in cals[j].predictions]
            d = statistics.median(abs(cals[j].predictions[k] / cals[i].predictions[k] - 1) for k in keys) if keys else 0.0
            if d > best[0]:
                best = (d, i, j)
    return cals[best[1]], cals[best[2]]


def drivers_markdown(a: Calibration, b: Calibration, found: list[Driver], top: int = 20) -> list[str]:
    lines = ["", f"### What drives the step-case spread ({a.name} vs {b.name})", "",
             f"Each fitted number of {b.name} put alone into {a.name}'s profile ({a.name} and {b.name}: the pair whose "
             "step predictions differ most); change of the step predictions. Correction tables count as one entry.",
             "", f"| parameter | {a.name} → {b.name}: max change | median change | step cases moved > {STEP_LIMIT:.0%} |",
             "| --- | ---: | ---: | ---: |"]
    for d in found[:top]:
        lines.append(f"| {d.parameter} | {d.max_change:.1%} | {d.median_change:.2%} | {d.cases_over} |")
    rest = found[top:]
    if rest:
        lines += ["", f"{len(rest)} more entries differ; none moves a step case by more than {rest[0].max_change:.1%}."]
    return lines


@dataclass
class CaseSpread:
    table: str
    family: str
    label: str
    split: str
    predictions: list[float]
    spread: float
    limit: float

    @property
    def ok(self) -> bool:
        return self.spread <= self.limit


def case_spreads(cals: list[Calibration]) -> list[CaseSpread]:
    """Cases predicted by every calibration (a profile without a sustained clock skips some)."""
    keys = [k for k in cals[0].predictions if all(k in c.predictions for c in cals[1:])]
    out = []
    for key in keys:
        preds = [c.predictions[key] for c in cals]
        limit = STEP_LIMIT if key[0] == "step" else KERNEL_LIMIT
        out.append(CaseSpread(*key, preds, spread(preds), limit))
    return out


def report_markdown(cals: list[Calibration], cases: list[CaseSpread], command: str, note: str = "",
                    driver_lines: list[str] | None = None, exceeded_lines: list[str] | None = None) -> str:
    names = [c.name for c in cals]
    lines = [BEGIN, "", "## Reproducibility of calibration", "",
             f"Generated by `{command}`: each raw folder fitted over the same base profile, then every "
             "validation case predicted with each profile. Spread = (max − min) / median across the "
             f"calibrations; limits: {STEP_LIMIT:.0%} per step case, {KERNEL_LIMIT:.0%} per kernel case."
             + (f" {note}" if note else ""), "",
             "### Which limits apply to which profile", "",
             "`kernelsim validate` gates the shipped profile (validation/thresholds.yaml's `tripwire_profile`, "
             "byte for byte) with the tripwires: its own figures plus a margin, part of them in-sample for it "
             "(it was fitted on the calibrated-split records). Any other profile — a fresh `kernelsim calibrate` — "
             "is gated by the fresh-calibration limits (validation/fresh_limits.yaml: per tripwire metric the worst "
             "of the committed calibrations below plus the tripwire margin, never raised; `python -m "
             "sim.validate.fresh --write` derives them from calibration/h200/runs/repro.json), and gets the same "
             "goals as the shipped profile, reported, not failing. The limits were set from the first five "
             "calibrations (A–E, which passed them by construction) and only ever move down; every later "
             "calibration tests them, and what each exceeds is listed here (raw folders measured before a group "
             "entered `kernelsim calibrate` lack it and keep the base profile's number there). Passing them does not "
             "make a fresh profile as good as the shipped one: the table \"Goals: shipped profile vs fresh "
             "calibrations\" below says by how much they differ.", "",
             "| calibration | raw folder | fresh-calibration limits exceeded (what `kernelsim validate --profile` "
             "fails on) |",
             "| --- | --- | --- |"]
    for cal in cals:
        lines.append(f"| {cal.name} | `{cal.raw_dir}` | {len(cal.violations)}"
                     + (": " + "; ".join(cal.violations) if cal.violations else "") + " |")
    lines += ["", "### Prediction spread per level", "",
              "| level | cases | within limit | median spread | max spread | limit |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for table in sorted({c.table for c in cases}):
        rows = [c for c in cases if c.table == table]
        lines.append(f"| {table} | {len(rows)} | {sum(r.ok for r in rows)} | "
                     f"{statistics.median(r.spread for r in rows):.1%} | {max(r.spread for r in rows):.1%} | "
                     f"{rows[0].limit:.0%} |")
    if len(cals) > 2:
        lines += ["", "### Pairs of calibrations", "",
                  f"Cases where two calibrations agree (step within {STEP_LIMIT:.0%}, every other level within "
                  f"{KERNEL_LIMIT:.0%}).", "",
                  "| pair | step cases within | kernel-level cases within | fresh limits exceeded (each) |",
                  "| --- | ---: | ---: | ---: |"]
        for i, a in enumerate(cals):
            for b in cals[i + 1:]:
                pair = case_spreads([a, b])
                steps_ok = [c.ok for c in pair if c.table == "step"]
                kern_ok = [c.ok for c in pair if c.table != "step"]
                lines.append(f"| {a.name}–{b.name} | {sum(steps_ok)} of {len(steps_ok)} | {sum(kern_ok)} of "
                             f"{len(kern_ok)} | {len(a.violations)} / {len(b.violations)} |")
    worst = sorted((c for c in cases if not c.ok), key=lambda c: -c.spread)
    steps = [c for c in cases if c.table == "step"]
    lines += ["", "### Step cases", "", "| case | " + " | ".join(names) + " | spread |",
              "| --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for case in steps:
        lines.append(f"| {case.label} ({case.split}) | " + " | ".join(f"{p:.1f}" for p in case.predictions)
                     + f" | {case.spread:.1%}{'' if case.ok else ' ✗'} |")
    lines += ["", "### Kernel-level families", "", "| level | family | cases | over the limit | max spread |",
              "| --- | --- | ---: | ---: | ---: |"]
    for table, family in sorted({(c.table, c.family) for c in cases if c.table != "step"}):
        rows = [c for c in cases if (c.table, c.family) == (table, family)]
        lines.append(f"| {table} | {family} | {len(rows)} | {sum(not r.ok for r in rows)} | "
                     f"{max(r.spread for r in rows):.1%} |")
    kernel_bad = [c for c in worst if c.table != "step"]
    lines += ["", f"### Kernel cases over the limit ({len(kernel_bad)}; the 25 widest)", "",
              "| level | family | case | split | " + " | ".join(names) + " | spread |",
              "| --- | --- | --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for case in kernel_bad[:25]:
        lines.append(f"| {case.table} | {case.family} | {case.label} | {case.split} | "
                     + " | ".join(f"{p:.2f}" for p in case.predictions) + f" | {case.spread:.1%} |")
    params = sorted(set.intersection(*(set(cal.params) for cal in cals)))
    only_some = sorted(set.union(*(set(cal.params) for cal in cals)) - set(params))
    lines += ["", "### Fitted parameters", "", "| parameter | " + " | ".join(names) + " | spread |",
              "| --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for p in params:
        vals = [cal.params[p] for cal in cals]
        lines.append(f"| {p} | " + " | ".join(f"{v:g}" for v in vals) + f" | {spread(vals):.1%} |")
    if only_some:
        lines += ["", "Measured in some calibrations only (the others lack the raw group and keep the base "
                  "profile's number): " + ", ".join(f"`{p}`" for p in only_some) + "."]
    lines += exceeded_lines or []
    lines += driver_lines or []
    lines += ["", END, ""]
    return "\n".join(lines)


@dataclass
class Exceeded:
    """One tripwire limit that at least one calibration exceeds, with the reference profile's value."""
    gate: str
    metric: str
    limit: float
    goal: float | None
    reference: float | None
    values: list[float | None]

    @property
    def side(self) -> str:
        return "host" if self.gate.split("/")[0] in ("host", "host_gains") else "GPU"

    def fails(self, i: int) -> bool:
        """Whether calibration `i` exceeds the limit."""
        v = self.values[i]
        return v is not None and not _holds(self.metric, v, self.limit)

    @property
    def population(self) -> str:
        """`in-sample`: a calibrated-split group, whose records the shipped profile was fitted on (for another
        calibration they are another machine's measurements); `held-out`: every other group."""
        return "in-sample" if self.gate.endswith("/calibrated") else "held-out"

    @property
    def kind(self) -> str:
        """`noise`: the calibrations disagree among themselves by more than the tripwire's margin over the
        reference (the tripwire sits inside calibration-to-calibration spread); `systematic`: they do not,
        and every one that fails sits beyond the limit on the same side (the fit or the data differ)."""
        vals = [v for v in self.values if v is not None]
        if self.reference is None or len(vals) < 2:
            return "systematic"
        return "noise" if max(vals) - min(vals) > abs(self.limit - self.reference) else "systematic"


def _holds(metric: str, value: float, limit: float) -> bool:
    return value >= limit if metric.startswith("min_") else value <= limit


def exceeded_tripwires(cals: list[Calibration], reference: dict[str, dict[str, float]],
                       thresholds: dict[str, Any]) -> list[Exceeded]:
    """Every tripwire limit some calibration exceeds (from validate's quantities and the thresholds file)."""
    out = []
    for gate, spec in sorted((thresholds.get("gates") or {}).items()):
        trip = spec.get("tripwire") if isinstance(spec, dict) else None
        if not isinstance(trip, dict):
            continue
        goal = spec.get("goal") or {}
        for metric, limit in sorted(trip.items()):
            qty = metric[4:] if metric.startswith("min_") else metric
            values = [c.measured.get(gate, {}).get(qty) for c in cals]
            if all(v is None or _holds(metric, v, float(limit)) for v in values):
                continue
            ref = reference.get(gate, {}).get(qty)
            out.append(Exceeded(gate, metric, float(limit), goal.get(metric), ref, values))
    return out


def exceeded_markdown(cals: list[Calibration], found: list[Exceeded], reference_name: str) -> list[str]:
    """The classification of the thresholds the calibrations exceed (every exceeded limit is a tripwire:
    goals not met do not fail `validate`)."""
    names = [c.name for c in cals]
    lines = ["", "### The shipped profile's tripwires the calibrations exceed (not applied to them), classified", "",
             "Why the shipped profile's tripwires are not applied to a fresh profile. Tripwires sit "
             f"at the value of the shipped profile (`{reference_name}`) plus a margin. **noise**: the calibrations "
             "differ among themselves by more than that margin, so the tripwire sits inside the calibration-to-"
             "calibration spread; **systematic**: they agree within the margin and sit beyond it together (the fit "
             "or the raw data differ from the shipped ones). **host**: groups priced from host constants "
             "(`host.*`), which each calibration measures on its own VM while the host validation data come from "
             "the shipped VMs (calibration/h200/host_context). **in-sample**: a calibrated-split group, whose records "
             "the shipped profile was fitted on; for another calibration they are another machine's measurements.",
             "", "| side | population | kind | limits | " + " | ".join(f"{n} fails" for n in names) + " |",
             "| --- | --- | --- | ---: | " + " | ".join("---:" for _ in names) + " |"]
    for side in ("GPU", "host"):
        for pop in ("in-sample", "held-out"):
            for kind in ("noise", "systematic"):
                rows = [e for e in found if (e.side, e.population, e.kind) == (side, pop, kind)]
                if rows:
                    fails = [sum(e.fails(i) for e in rows) for i in range(len(cals))]
                    lines.append(f"| {side} | {pop} | {kind} | {len(rows)} | " + " | ".join(map(str, fails)) + " |")
    totals = [sum(e.fails(i) for e in found) for i in range(len(cals))]
    lines.append(f"| all | | | {len(found)} | " + " | ".join(map(str, totals)) + " |")
    lines += ["", "| gate | limit | goal | shipped | " + " | ".join(names) + " | side | kind |",
              "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in names) + " | --- | --- |"]

    def fmt(v: float | None, metric: str, limit: float | None = None) -> str:
        if v is None:
            return "—"
        mark = "" if limit is None or _holds(metric, v, limit) else " ✗"
        return f"{v:.3f}{mark}"

    for e in found:
        lines.append(f"| {e.gate}: {e.metric} | {e.limit:.3f} | {fmt(e.goal, e.metric)} | {fmt(e.reference, e.metric)} | "
                     + " | ".join(fmt(v, e.metric, e.limit) for v in e.values) + f" | {e.side} | {e.kind} |")
    return lines


REPRO_SCHEMA = "kernelsim.repro/v1"


def repro_document(cals: list[Calibration], command: str, note: str, reference_name: str,
                   reference: dict[str, dict[str, float]], driver_lines: list[str] | None) -> dict[str, Any]:
    """What the report is rendered from (committed as calibration/h200/runs/repro.json; the docs are
    generated from it by scripts/gen_docs.py). Predictions in us, to 4 decimals."""
    keys = list(dict.fromkeys(k for c in cals for k in c.predictions))
    return {"schema": REPRO_SCHEMA, "command": command, "note": note,
            "reference": {"profile": reference_name, "measured": reference},
            "cases": [list(k) for k in keys],  # [table, family, label, split]; predictions follow this order
            "calibrations": [{"name": c.name, "raw_dir": str(c.raw_dir), "params": c.params,
                              "violations": c.violations, "measured": c.measured,
                              "predictions": [round(c.predictions[k], 4) if k in c.predictions else None for k in keys]}
                             for c in cals],
            "drivers": driver_lines or []}


def goals_markdown(cals: list[Calibration], reference: dict[str, dict[str, float]], reference_name: str,
                   thresholds: dict[str, Any]) -> list[str]:
    """Every goal (one number for every profile) with the shipped profile's value and the calibrations'
    range: what a fresh profile loses against the shipped one, goal by goal."""
    names = [c.name for c in cals]
    rows = []
    met_ref, met = 0, [0] * len(cals)
    for gate, spec in sorted((thresholds.get("gates") or {}).items()):
        goal = spec.get("goal") if isinstance(spec, dict) else None
        if not isinstance(goal, dict):
            continue
        for metric, limit in sorted(goal.items()):
            qty = metric[4:] if metric.startswith("min_") else metric
            ref = reference.get(gate, {}).get(qty)
            vals = [c.measured.get(gate, {}).get(qty) for c in cals]
            if ref is None or any(v is None for v in vals):
                continue
            ok_ref = _holds(metric, ref, float(limit))
            oks = [_holds(metric, float(v), float(limit)) for v in vals if v is not None]
            met_ref += ok_ref
            met = [m + ok for m, ok in zip(met, oks, strict=True)]
            fv = [float(v) for v in vals if v is not None]
            rows.append(f"| {gate}: {metric} | {float(limit):.3f} | {ref:.3f}{'' if ok_ref else ' ✗'} | "
                        f"{min(fv):.3f}–{max(fv):.3f} | {statistics.median(fv):.3f} | {sum(oks)} of {len(oks)} |")
    n = len(rows)
    return ["", "### Goals: shipped profile vs fresh calibrations", "",
            f"Goals met: shipped (`{reference_name}`) {met_ref} of {n}; "
            + ", ".join(f"{name} {m}" for name, m in zip(names, met, strict=True))
            + f" of {n}. ✗: the shipped profile misses the goal too.", "",
            "| goal | limit | shipped | fresh range | fresh median | fresh meeting it |",
            "| --- | ---: | ---: | ---: | ---: | ---: |", *rows]


def shipped_vs_fresh_markdown(reference: dict[str, dict[str, float]], reference_name: str,
                              fresh: dict[str, dict[str, float]] | None) -> list[str]:
    """The shipped profile against the fresh limits: where the committed calibrations all do better than it."""
    if fresh is None:
        return []
    from sim.validate.fresh import exceeded

    over = exceeded(reference, fresh)
    return ["", f"The shipped profile (`{reference_name}`) itself exceeds {len(over)} of the fresh limits: there every "
            "committed fresh calibration does better than it (their fits over the datasheet base and their own VMs' "
            "host costs), so the fresh limits are not a looser copy of the tripwires."
            + (" " + "; ".join(over) + "." if over else "")]


def render_document(doc: dict[str, Any], thresholds: dict[str, Any],
                    fresh: dict[str, dict[str, float]] | None = None) -> str:
    """The generated Markdown section from a `repro_document`; with `fresh` (validation/fresh_limits.yaml's
    limits) the calibrations' failures are the fresh limits their validate quantities exceed."""
    if doc.get("schema") != REPRO_SCHEMA:
        raise InputError("not a reproducibility document", path="schema", value=doc.get("schema"), expected=REPRO_SCHEMA)
    cals = []
    for c in doc["calibrations"]:
        cal = Calibration(c["name"], Path(c["raw_dir"]), Path(), dict(c["params"]), violations=list(c["violations"]),
                          measured=c["measured"])
        cal.predictions = {(k[0], k[1], k[2], k[3]): float(v) for k, v in zip(doc["cases"], c["predictions"], strict=True)
                           if v is not None}
        if fresh is not None:
            from sim.validate.fresh import exceeded

            cal.violations = exceeded(cal.measured, fresh)
        cals.append(cal)
    ref = doc["reference"]
    found = exceeded_tripwires(cals, ref["measured"], thresholds)
    return report_markdown(cals, case_spreads(cals), doc["command"], doc["note"], doc["drivers"] or None,
                           exceeded_markdown(cals, found, ref["profile"])
                           + goals_markdown(cals, ref["measured"], ref["profile"], thresholds)
                           + shipped_vs_fresh_markdown(ref["measured"], ref["profile"], fresh))


def keep_generated_section(path: Path, text: str) -> str:
    """`text` with the generated reproducibility section of the file at `path` (if any) kept at its end."""
    try:
        old = path.read_text()
    except OSError:
        return text
    if BEGIN in old and END in old:
        section = old[old.index(BEGIN):old.index(END) + len(END)]
        return text.rstrip("\n") + "\n\n" + section + "\n"
    return text


def replace_generated_section(path: Path, section: str) -> str:
    old = path.read_text() if path.is_file() else ""
    if BEGIN in old and END in old:
        return old[:old.index(BEGIN)] + section.rstrip("\n") + "\n" + old[old.index(END) + len(END):].lstrip("\n")
    return (old.rstrip("\n") + "\n\n" if old else "") + section


def main(argv: list[str] | None = None) -> int:
    """The command. SIGINT, SIGTERM or SIGHUP stop it: the pool's workers are terminated and joined, the
    temporary folder removed, files being written removed (every output is written whole or not at all),
    one line on stderr, exit 128 + the signal's number."""
    with stop_on_signals():
        try:
            return _main(argv)
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
            print(f"interrupted by {signal.Signals(signum).name}: worker processes stopped; no output is left "
                  "half-written (outputs finished before are whole)", file=sys.stderr)
            return 128 + signum


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.calibrate.repro", description=__doc__.splitlines()[0])
    ap.add_argument("raw", nargs="+", metavar="RAW_DIR", help="raw calibration folders (two or more)")
    ap.add_argument("--names", help="comma-separated names of the calibrations (default: the folders' parents)")
    ap.add_argument("--base", default="h200-sxm", help="base profile the fits start from (default: h200-sxm)")
    ap.add_argument("--validation-raw", default="calibration/h200/raw", help="kernel-level measurements to predict")
    ap.add_argument("--cases", default="validation/h200/cases.yaml", help="step-level cases file")
    ap.add_argument("--thresholds", default="validation/thresholds.yaml", help="versioned thresholds file")
    ap.add_argument("--profiles-out", metavar="DIR", help="keep the fitted profiles in DIR")
    ap.add_argument("--markdown", metavar="FILE", help="write the tables into FILE's generated section")
    ap.add_argument("--note", default="", help="a sentence for the report (what the calibrations are)")
    ap.add_argument("--drivers", action="store_true",
                    help="also swap each fitted number between the two most different calibrations (a few minutes)")
    ap.add_argument("--check", action="store_true", help="with --markdown/--json: exit 1 if FILE is not up to date")
    ap.add_argument("--reference", default="h200-measured",
                    help="profile whose validation the exceeded tripwires are compared with (default: h200-measured)")
    ap.add_argument("--json", metavar="FILE", help="write what the report is rendered from (scripts/gen_docs.py renders "
                    "docs/validation.md's section from calibration/h200/runs/repro.json)")
    ap.add_argument("--reuse", metavar="FILE", action="append", default=[],
                    help="take the calibrations of the same name and raw folder, and the reference validation, from "
                    "this earlier --json document instead of fitting and validating them again (a cache for adding a "
                    "calibration: FILE must come from the same code and data; the document records the command "
                    "without --reuse; may be given more than once)")
    ap.add_argument("--host", choices=("fitted", "reference"), default="fitted",
                    help="host constants of each fitted profile, as `kernelsim calibrate --host` (default: fitted)")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="fit and validate the calibrations in N processes (default 1; the result does not depend on N)")
    ap.add_argument("--first", type=int, metavar="N",
                    help="with --jobs: the calibrations after the first N (of those to fit) run at a lower CPU priority "
                    "(nice), so that with more processes than cores the first N finish first (the result does not "
                    "depend on it)")
    ap.add_argument("--partial-dir", metavar="DIR",
                    help="also write each calibration (DIR/<name>.json) and the reference validation (DIR/reference.json) "
                    "as soon as it is finished, as documents --reuse takes: a run stopped part-way keeps what it "
                    "finished")
    ns = ap.parse_args(argv)
    try:
        if ns.jobs < 1:
            raise InputError("--jobs must be 1 or more", path="--jobs", value=ns.jobs, expected="an integer >= 1")
        if ns.first is not None and ns.first < 0:
            raise InputError("--first must be 0 or more", path="--first", value=ns.first, expected="an integer >= 0")
        raw_dirs = [Path(r) for r in ns.raw]
        if len(raw_dirs) < 2:
            raise InputError("a reproducibility report needs two or more raw folders", value=ns.raw)
        names = ns.names.split(",") if ns.names else [_default_name(p) for p in raw_dirs]
        if len(names) != len(raw_dirs) or len(set(names)) != len(names):
            raise InputError("--names must give one distinct name per raw folder", value=ns.names)
        if ns.reuse and ns.drivers:
            raise InputError("--drivers needs every calibration's profile: not with --reuse", value=ns.reuse)
        reuse: dict[tuple[str, str], Calibration] = {}
        reused_reference: dict[str, Any] | None = None
        for path in ns.reuse:
            try:
                old_doc = json.loads(Path(path).read_text())
            except (OSError, ValueError) as exc:
                raise InputError("cannot read the document to reuse", file=path, value=str(exc)) from exc
            if not isinstance(old_doc, dict):
                raise InputError("not a reproducibility document", file=path, expected=REPRO_SCHEMA)
            reuse.update(reused_calibrations(old_doc))
            ref = old_doc.get("reference") or {}
            if reused_reference is None and ref.get("profile") == ns.reference and ref.get("measured"):
                reused_reference = ref["measured"]
        with tempfile.TemporaryDirectory(prefix="kernelsim-repro-") as tmp:
            work = Path(ns.profiles_out) if ns.profiles_out else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            cals, fresh_ref = calibrate_all(raw_dirs, names, ns.base, work, ns.validation_raw, ns.cases,
                                            ns.thresholds, reuse, ns.jobs,
                                            None if reused_reference is not None else ns.reference, ns.host,
                                            Path(ns.partial_dir) if ns.partial_dir else None, ns.reference,
                                            ns.first)
            reference = reused_reference if reused_reference is not None else fresh_ref or {}
            driver_lines = None
            if ns.drivers:
                a, b = widest_pair(cals)
                driver_lines = drivers_markdown(a, b, drivers(a, b, ns.cases, work))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cases = case_spreads(cals)
    command = ("python -m sim.calibrate.repro " + " ".join(ns.raw) + (f" --names {ns.names}" if ns.names else "")
               + (" --drivers" if ns.drivers else "") + (f" --host {ns.host}" if ns.host != "fitted" else ""))
    doc = repro_document(cals, command, ns.note, ns.reference, reference, driver_lines)
    if ns.json:
        if ns.check:
            if not Path(ns.json).is_file() or Path(ns.json).read_text() != dumps(doc):
                print(f"{ns.json}: not what the committed raw folders give now; rerun without --check", file=sys.stderr)
                return 1
        else:
            write_text_atomic(Path(ns.json), dumps(doc))
    from sim.validate.core import load_thresholds
    from sim.validate.fresh import FRESH_FILE_NAME, load_fresh

    fresh_path = Path(ns.thresholds).parent / FRESH_FILE_NAME
    fresh = load_fresh(fresh_path)["limits"] if fresh_path.is_file() else None
    text = render_document(json.loads(dumps(doc)), load_thresholds(Path(ns.thresholds)), fresh)
    if ns.markdown:
        new = replace_generated_section(Path(ns.markdown), text)
        if ns.check:
            if not Path(ns.markdown).is_file() or Path(ns.markdown).read_text() != new:
                print(f"{ns.markdown}: the reproducibility section is not up to date; rerun without --check",
                      file=sys.stderr)
                return 1
        else:
            write_text_atomic(Path(ns.markdown), new)
    print(text)
    bad = [c for c in cases if not c.ok]
    failing = [c for c in cals if c.violations]
    print(f"{len(cases)} cases: {len(bad)} over the spread limit; "
          f"{len(failing)} of {len(cals)} calibrations exceed validation thresholds")
    return REPRO_EXIT if bad or failing else 0


def _default_name(raw_dir: Path) -> str:
    parts = raw_dir.resolve().parts
    return parts[-2] if parts[-1] == "raw" and len(parts) > 1 else parts[-1]


if __name__ == "__main__":
    sys.exit(main())
