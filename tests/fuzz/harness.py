"""Run fuzz cases and judge them: in a long-lived worker process calling the CLI's main() (most
cases), or each in a fresh `python -m sim` process (a sample), with a time and memory guard.

A case fails when: the command ends in a traceback or exit code other than 0 and 2 (or the
evaluator raises anything but ExprError); it runs over the hang limit; an input file changes;
an exit-2 run leaves an output it named, or any run leaves a temporary file; an exit-0 JSON
output does not parse; an exit-2 message is not exactly one `error:` line naming the file or
flag at fault.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import multiprocessing as mp
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.strategies import Case

HANG_S = 10.0  # CPU seconds a case may use: a busy loop (the hang a parser or evaluator can fall into)
WALL_S = 60.0  # wall seconds a case may take: a case blocked without using the CPU (waiting on a pipe, a lock)
# The CPU limit does not grow with the machine's load; the wall limit is only the backstop for blocked cases.
MEMORY_LIMIT = 1 << 30  # peak RSS a case may reach (bytes)
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    kind: str
    argv: list[str]
    exit: int | None
    seconds: float
    failures: list[str] = field(default_factory=list)  # failure classes
    detail: str = ""
    peak_rss: int = 0  # bytes


class _Hang(BaseException):
    """Raised by SIGALRM in the worker: the case ran over its time."""


def _materialize(case: Case, d: Path) -> None:
    for name, data in case.files.items():
        (d / name).write_bytes(data)
    for name, what in case.special.items():
        p = d / name
        if what == "dir":
            p.mkdir(exist_ok=True)
        elif what == "fifo":
            os.mkfifo(p)
        elif what == "readonly":
            if not p.exists():
                p.write_text("{}\n")
            p.chmod(0o444)
        elif what == "readonly_dir":
            p.mkdir(exist_ok=True)
            p.chmod(0o555)
        elif what.startswith("link:"):
            p.symlink_to(what[5:])


def _snapshot(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _cleanup(d: Path) -> None:
    for p in [d, *d.rglob("*")]:
        with contextlib.suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
    shutil.rmtree(d, ignore_errors=True)


def over_limit(cpu: float, wall: float, hang_s: float = HANG_S) -> bool:
    """A hang: over the CPU limit, or over the wall backstop."""
    return cpu > hang_s or wall > WALL_S


def judge(case: Case, d: Path, before: dict[str, str], code: int | None, out: str, err: str,
          seconds: float, cpu: float) -> list[str]:
    """The failure classes of one finished command-line case (`seconds` wall, `cpu` CPU seconds)."""
    fails = []
    if "Traceback" in err or "Traceback" in out or code not in (0, 2):
        fails.append("traceback")
    if over_limit(cpu, seconds):
        fails.append("hang")
    after = _snapshot(d)
    for name, digest in before.items():
        if after.get(name) != digest:
            fails.append("input_overwritten")
            break
    leftovers = [n for n in after if Path(n).name.startswith(".") and ".tmp" in n]
    if leftovers:
        fails.append("partial_output")
    if code == 2:
        for o in case.outputs:
            if (d / o).exists() and o not in before and not (d / o).is_dir():
                fails.append("partial_output")
                break
        lines = [ln for ln in err.splitlines() if ln.strip()]
        error_lines = [ln for ln in lines if ln.startswith("error:")]
        if len(error_lines) != 1:
            fails.append("message_not_one_line")
        elif not any(b in error_lines[0] for b in case.blame):
            fails.append("message_names_no_file")
        elif len(error_lines[0]) > 1000:
            fails.append("message_too_long")
    elif code == 0:
        for o in case.outputs:
            p = d / o
            if p.is_file() and p.suffix == ".json":
                try:
                    json.loads(p.read_text())
                except ValueError:
                    fails.append("partial_output")
    return fails


def _run_direct(case: Case) -> tuple[list[str], str]:
    from sim.expr import ExprError, evaluate

    assert case.direct is not None
    source, env = case.direct
    try:
        v = evaluate(source, env)
    except ExprError as exc:
        if len(str(exc)) > 1000:
            return ["message_too_long"], str(exc)[:200]
        return [], ""
    except Exception as exc:  # noqa: BLE001 - the finding itself
        return ["traceback"], f"{type(exc).__name__}: {str(exc)[:200]}"
    if not isinstance(v, int | float | bool):
        return ["traceback"], f"result of type {type(v).__name__}"
    return [], ""


def run_in_process(case: Case, hang_s: float = HANG_S) -> Outcome:
    """Run `case` in this process (call main(), catch SystemExit); time guards: SIGPROF after the CPU
    limit (this process's CPU time), SIGALRM after the wall backstop."""
    t0, c0 = time.perf_counter(), time.process_time()
    old = signal.signal(signal.SIGALRM, _raise_hang)
    old_prof = signal.signal(signal.SIGPROF, _raise_hang)
    signal.setitimer(signal.ITIMER_PROF, hang_s + 2.0)
    signal.setitimer(signal.ITIMER_REAL, WALL_S + 2.0)
    try:
        if case.direct is not None:
            fails, detail = _run_direct(case)
            return Outcome(case.kind, [], None, time.perf_counter() - t0, fails, detail)
        from sim.cli import main

        d = Path(tempfile.mkdtemp(prefix="kfz"))
        cwd = os.getcwd()
        try:
            _materialize(case, d)
            before = _snapshot(d)
            out, err = io.StringIO(), io.StringIO()
            os.chdir(d)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    try:
                        code: int | None = main(case.argv)
                    except SystemExit as exc:
                        code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
            finally:
                os.chdir(cwd)
            seconds = time.perf_counter() - t0
            fails = judge(case, d, before, code, out.getvalue(), err.getvalue(), seconds,
                          time.process_time() - c0)
            return Outcome(case.kind, case.argv, code, seconds, fails, case.note + " | " + err.getvalue()[-400:])
        finally:
            _cleanup(d)
    except _Hang:
        return Outcome(case.kind, case.argv, None, time.perf_counter() - t0, ["hang"], f"over the time limit: {case.note}")
    except MemoryError:
        return Outcome(case.kind, case.argv, None, time.perf_counter() - t0, ["memory"], "MemoryError")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old)


def _raise_hang(signum: int, frame: Any) -> None:
    raise _Hang()


def run_subprocess(case: Case, hang_s: float = HANG_S) -> Outcome:
    """Run `case` as `python -m sim ARGV` in a fresh process; memory capped, peak RSS measured."""
    if case.direct is not None:
        source, env = case.direct
        code_text = ("import sys, json; from sim.expr import evaluate, ExprError\n"
                     "try:\n    evaluate(sys.argv[1], json.loads(sys.argv[2]))\nexcept ExprError:\n    pass\n")
        argv = [sys.executable, "-c", code_text, source.replace("\x00", ""), json.dumps(env)]
    else:
        argv = [sys.executable, "-m", "sim", *[a.replace("\x00", "") for a in case.argv]]
    d = Path(tempfile.mkdtemp(prefix="kfz"))
    try:
        _materialize(case, d)
        before = _snapshot(d)
        env_vars = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
        t0, c0 = time.perf_counter(), _children_cpu()
        proc = subprocess.Popen(argv, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_vars,
                                preexec_fn=_limit_child, start_new_session=True)
        try:
            out_b, err_b = proc.communicate(timeout=WALL_S + 10.0)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome(case.kind, case.argv, None, time.perf_counter() - t0, ["hang"], "killed after the limit")
        seconds, cpu = time.perf_counter() - t0, _children_cpu() - c0
        code = proc.returncode
        peak = _children_peak_rss()
        out, err = out_b.decode(errors="replace"), err_b.decode(errors="replace")
        if case.direct is not None:
            fails = [] if code == 0 else ["traceback"]
            if over_limit(cpu, seconds, hang_s):
                fails.append("hang")
        else:
            fails = judge(case, d, before, code, out, err, seconds, cpu)
        if code is not None and code < 0 or "MemoryError" in err:
            fails.append("memory" if "MemoryError" in err else "killed")
        return Outcome(case.kind, case.argv, code, seconds, fails, case.note + " | " + err[-400:], peak_rss=peak)
    finally:
        _cleanup(d)


def _limit_child() -> None:
    # Address space is virtual memory (libraries map a lot): 3 GB of it keeps a runaway case from
    # taking the machine; the 1 GB criterion is checked on the measured peak RSS.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _children_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


# -- worker processes: each runs cases (in-process, or spawning a fresh process); the parent is the watchdog --
def _worker(conn: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    vm = _vm_bytes()
    with contextlib.suppress(ValueError, OSError):  # a runaway case gets a MemoryError, not the machine
        resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), vm + (3 << 30)))
    while True:
        job = conn.recv()
        if job is None:
            return
        case, fresh_process = job
        if fresh_process:
            outcome = run_subprocess(case)
        else:
            outcome = run_in_process(case)
            outcome.peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        conn.send(outcome)


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class _Slot:
    def __init__(self, ctx: Any) -> None:
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.job: tuple[Case, bool] | None = None
        self.started = 0.0

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.proc.join(1.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class Pool:
    """`workers` forked processes running cases; a worker that hangs, dies or passes the memory limit
    is replaced, so every case's peak is measured in a worker that started small."""

    def __init__(self, workers: int = 1) -> None:
        self.ctx = mp.get_context("fork")
        self.workers = max(1, workers)
        self.slots: list[_Slot] = []
        self.peak_rss = 0

    def run_all(self, jobs: list[tuple[Case, bool]]) -> list[tuple[Outcome, bool]]:
        """Run the jobs (case, in a fresh process?) and return their outcomes in completion order."""
        from multiprocessing.connection import wait

        while len(self.slots) < self.workers:
            self.slots.append(_Slot(self.ctx))
        queue = list(reversed(jobs))
        done: list[tuple[Outcome, bool]] = []
        while queue or any(s.job is not None for s in self.slots):
            for i, s in enumerate(self.slots):
                if s.job is None and queue:
                    if not s.proc.is_alive():
                        s = self.slots[i] = _Slot(self.ctx)
                    s.job, s.started = queue.pop(), time.perf_counter()
                    s.conn.send(s.job)
            busy = [s for s in self.slots if s.job is not None]
            ready = wait([s.conn for s in busy], timeout=1.0)
            now = time.perf_counter()
            for i, s in enumerate(self.slots):
                if s.job is None:
                    continue
                case, fresh = s.job
                if s.conn in ready:
                    try:
                        outcome: Outcome = s.conn.recv()
                    except EOFError:
                        outcome = Outcome(case.kind, case.argv, None, now - s.started, ["killed"],
                                          f"worker died: {case.note}")
                        s.stop()
                        self.slots[i] = _Slot(self.ctx)
                        done.append((outcome, fresh))
                        continue
                    s.job = None
                    self.peak_rss = max(self.peak_rss, outcome.peak_rss)
                    if outcome.peak_rss > MEMORY_LIMIT:
                        outcome.failures.append("memory")
                        s.stop()
                        self.slots[i] = _Slot(self.ctx)
                    done.append((outcome, fresh))
                elif now - s.started > WALL_S + 30.0:  # the in-case alarm did not fire: a hang in C code
                    done.append((Outcome(case.kind, case.argv, None, now - s.started, ["hang"],
                                         f"no answer; killed: {case.note}"), fresh))
                    s.stop()
                    self.slots[i] = _Slot(self.ctx)
        return done

    def close(self) -> None:
        for s in self.slots:
            s.stop()
        self.slots = []


@dataclass
class Report:
    cases: int = 0
    in_process: int = 0
    subprocess: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    exits: Counter[str] = field(default_factory=Counter)
    peak_rss: int = 0
    slowest: float = 0.0
    seconds: float = 0.0
    examples: dict[str, list[Outcome]] = field(default_factory=dict)

    def add(self, o: Outcome, sub: bool) -> None:
        self.cases += 1
        if sub:
            self.subprocess += 1
        else:
            self.in_process += 1
        self.by_kind[o.kind] += 1
        self.exits[str(o.exit)] += 1
        self.slowest = max(self.slowest, o.seconds)
        self.peak_rss = max(self.peak_rss, o.peak_rss)
        for f in set(o.failures):
            self.failures[f] += 1
            ex = self.examples.setdefault(f, [])
            if len(ex) < 5:
                ex.append(o)

    def summary(self) -> str:
        lines = [
            f"cases: {self.cases} ({self.in_process} in-process, {self.subprocess} in fresh processes) "
            f"in {self.seconds:.0f} s",
            "by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items())),
            "exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.exits.items())),
            f"tracebacks: {self.failures['traceback']}",
            f"hangs over {HANG_S:.0f} CPU s or {WALL_S:.0f} s: {self.failures['hang']}",
            f"peak memory (RSS): {self.peak_rss / 2**20:.0f} MiB (limit {MEMORY_LIMIT / 2**20:.0f} MiB); "
            f"over it: {self.failures['memory']}",
            f"inputs overwritten: {self.failures['input_overwritten']}",
            f"partial outputs: {self.failures['partial_output']}",
            f"exit-2 messages not one error line: {self.failures['message_not_one_line']}; "
            f"naming no file/flag: {self.failures['message_names_no_file']}; "
            f"too long: {self.failures['message_too_long']}",
            f"killed by a signal: {self.failures['killed']}",
            f"slowest case: {self.slowest:.2f} s",
        ]
        for f, exs in sorted(self.examples.items()):
            for o in exs[:3]:
                lines.append(f"  [{f}] {o.kind} {[a[:60] for a in o.argv]} exit={o.exit}: {o.detail.strip()[-300:]!r}")
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        return not self.failures
