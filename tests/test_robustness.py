"""Regression tests for issue 22's failure classes: each reproducer ends in one `error:` line naming
the file (exit 2), or a clean result; never a traceback, a hang, a huge allocation or a lost file."""

from __future__ import annotations

import copy
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main
from sim.expr import ExprError, evaluate
from tests.conftest import ROOT
from tests.fuzz import base


def _write(tmp: Path, workload: dict[str, Any] | str | None = None, scenario: dict[str, Any] | str | None = None) -> Path:
    wl = base.WORKLOAD if workload is None else workload
    scn = base.SCENARIO if scenario is None else scenario
    (tmp / "workload.yaml").write_text(wl if isinstance(wl, str) else yaml.safe_dump(wl))
    (tmp / "s.yaml").write_text(scn if isinstance(scn, str) else yaml.safe_dump(scn))
    return tmp / "s.yaml"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def _one_error(err: str, *names: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    assert any(n in lines[0] for n in names), lines[0]
    assert len(lines[0]) < 700
    return lines[0]


def _wl_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    wl = copy.deepcopy(base.WORKLOAD)
    node = wl
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return wl


def _trace(tmp: Path, events: list[dict[str, Any]] | None = None, text: str | None = None) -> Path:
    p = tmp / "t.json"
    p.write_text(text if text is not None else base.trace_text(events if events is not None else base.trace_events()))
    return p


def _event(events: list[dict[str, Any]], cat: str) -> dict[str, Any]:
    return next(e for e in reversed(events) if e.get("cat") == cat)  # in the last step, the one imported


# 1. deep nesting ---------------------------------------------------------------------------------
def test_deep_nesting_in_yaml_trace_and_expressions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(base.WORKLOAD) + "a: " + "[" * 1000 + "]" * 1000 + "\n"
    scn = _write(tmp_path, workload=text)
    code, err = _cli(capsys, "run", str(scn), "--quiet")
    assert code == 2 and "nest" in _one_error(err, "workload.yaml")
    t = _trace(tmp_path, text=base.trace_text(base.trace_events())[:-2] + ', {"x": ' + "[" * 1000 + "]" * 1000 + "}]}")
    code, err = _cli(capsys, "replay", str(t), "--hardware", "h200-sxm", "--quiet")
    assert code == 2
    _one_error(err, "t.json")
    for source in ("1 if 0 else " * 5000 + "1", "1**" * 30000 + "1", "(" * 300 + "1" + ")" * 300):
        with pytest.raises(ExprError, match="too long|nested too deeply|not a valid expression"):
            evaluate(source, {})


# 2. integers over 4,300 digits ---------------------------------------------------------------------
def test_huge_integers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(base.WORKLOAD).replace("count: 2", "count: " + "9" * 5000)
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=text)), "--quiet")
    assert code == 2 and "digits" in _one_error(err, "workload.yaml")
    events = base.trace_events()
    raw = base.trace_text(events).replace('"ts": ' + json.dumps(events[1]["ts"]), '"ts": ' + "1" * 5000, 1)
    code, err = _cli(capsys, "import-trace", str(_trace(tmp_path, text=raw)), "-o", str(tmp_path / "w.yaml"))
    assert code == 2
    _one_error(err, "t.json")
    # the error renderer itself must cope with the value of -(2**2**2**2**2)
    scn = _write(tmp_path, workload=_wl_with(("ops", 2, "numel"), "-(2**2**2**2**2)"))
    code, err = _cli(capsys, "run", str(scn), "--quiet")
    assert code == 2 and "ops[2].numel" in _one_error(err, "workload.yaml")


# 3. inf, NaN and overflow ------------------------------------------------------------------------
@pytest.mark.parametrize("path,value", [
    (("distribution", "buckets", 0, "weight"), float("inf")),
    (("tensors", "x", "shape", 0), "1e309"),
    (("tensors", "x", "shape", 0), "int(1e400)"),
    (("tensors", "x", "shape", 0), "2**1024 + 0.0"),
    (("ops", 0, "m"), "tokens*1e308"),
])
def test_non_finite_values_in_yaml(path: tuple[Any, ...], value: Any, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(path, value))), "--quiet",
                     "--json", str(tmp_path / "o.json"))
    assert code == 2
    _one_error(err, "workload.yaml")
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("raw", ['"correlation": Infinity', '"correlation": NaN', '"dur": ' + "7" * 401])
def test_non_finite_values_in_traces(raw: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = base.trace_events()
    kernel = _event(events, "kernel")
    kernel["args"]["correlation"] = "__X__" if "correlation" in raw else kernel["args"]["correlation"]
    if "dur" in raw:
        kernel["dur"] = "__X__"
    text = base.trace_text(events).replace('"correlation": "__X__"', raw).replace('"dur": "__X__"', raw)
    code, err = _cli(capsys, "replay", str(_trace(tmp_path, text=text)), "--hardware", "h200-sxm", "--quiet")
    assert code == 2
    _one_error(err, "t.json")


# 4. evaluator gaps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("source,message", [
    ("tokens is 1", "comparison 'is' is not allowed"),
    ("tokens in 1", "comparison 'in' is not allowed"),
    ("round_up(tokens, 0)", "multiple must not be 0"),
    ("(-8)**0.5", "no real value"),
    ("9**9**9", "result too large"),
    ("1/0", "division by zero"),
    ("max()", "takes at least 2 arguments"),
])
def test_evaluator_refuses_at_parse_or_with_a_clear_error(source: str, message: str) -> None:
    with pytest.raises(ExprError, match=message):
        evaluate(source, {"tokens": 8})


# 5. numel: 0 -----------------------------------------------------------------------------------------
def test_zero_numel_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(("ops", 2, "numel"), 0))), "--quiet")
    line = _one_error(err, "workload.yaml")
    assert code == 2 and "ops[2]" in line and "numel must be >= 1" in line


# 6. trace field types --------------------------------------------------------------------------------
@pytest.mark.parametrize("mutate", [
    lambda evs: _event(evs, "cpu_op").__setitem__("args", "not an object"),
    lambda evs: _event(evs, "kernel").__setitem__("args", [1, 2]),
    lambda evs: _event(evs, "cpu_op")["args"].__setitem__("Input Dims", 5),
    lambda evs: _event(evs, "kernel")["args"].__setitem__("stream", -1),
    lambda evs: _event(evs, "kernel").__setitem__("ts", "NaN"),
])
def test_trace_field_types(mutate: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = base.trace_events()
    mutate(events)
    code, err = _cli(capsys, "import-trace", str(_trace(tmp_path, events)), "-o", str(tmp_path / "w.yaml"))
    assert code == 2 and "traceEvents[" in _one_error(err, "t.json")


def test_cuda_sync_stream_of_the_wrong_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = base.trace_events()
    kernel = _event(events, "kernel")
    sync = {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": kernel["pid"], "tid": kernel["tid"],
            "ts": kernel["ts"], "dur": 1.0, "args": {"correlation": kernel["args"]["correlation"], "stream": "x"}}
    code, err = _cli(capsys, "import-trace", str(_trace(tmp_path, events + [sync])), "-o", str(tmp_path / "w.yaml"))
    assert code in (0, 2)
    if code == 2:
        _one_error(err, "t.json")
    sync["args"]["stream"] = None
    code, _ = _cli(capsys, "import-trace", str(_trace(tmp_path, events + [sync])), "-o", str(tmp_path / "w2.yaml"))
    assert code in (0, 2)


# 7. transforms: [{fuse: null}] ---------------------------------------------------------------------
def test_null_transform(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = copy.deepcopy(base.SCENARIO)
    scn["variants"][0]["transforms"] = [{"fuse": None}]
    code, err = _cli(capsys, "run", str(_write(tmp_path, scenario=scn)), "--quiet")
    assert code == 2 and "variants[0].transforms[0]" in _one_error(err, "s.yaml")


# 8. output errors --------------------------------------------------------------------------------------
def test_read_only_folder_and_overlong_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _write(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for argv in (["--json", str(ro / "o.json")], ["--plots", str(ro)], ["--trace", str(ro / "t.json")]):
            code, err = _cli(capsys, "run", str(scn), "--quiet", *argv)
            assert code == 2 and "read-only" in _one_error(err, "ro")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)
    long = "n" * 300
    code, err = _cli(capsys, "run", str(scn), "--quiet", "--json", str(tmp_path / f"{long}.json"))
    assert code == 2 and "longer than 255 bytes" in _one_error(err, "--json")
    trace = _trace(tmp_path)
    code, err = _cli(capsys, "import-trace", str(trace), "-o", str(tmp_path / "new" / long / "w.yaml"))
    assert code == 2 and not (tmp_path / "new").exists()  # no empty folder left behind


def test_failing_write_is_one_error_line(tmp_path: Path) -> None:
    """A write that fails midway (file-size limit, as on a full disk): exit 2, one line, no file."""
    _write(tmp_path)
    script = textwrap.dedent("""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
        from sim.cli import main
        sys.exit(main(["run", "s.yaml", "--quiet", "--json", "o.json"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    _one_error(proc.stderr, "o.json")
    assert not (tmp_path / "o.json").exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


# 9. corrupt sweep cache -------------------------------------------------------------------------------
def test_corrupt_sweep_cache_is_refused_and_recomputed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = copy.deepcopy(base.SCENARIO)
    scn["variants"] = scn["variants"][:1]
    scn["sweep"] = {"params": {"tokens": [128, 256, 512]}}
    path = _write(tmp_path, scenario=scn)
    out = tmp_path / "sw"
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--no-plots", "--quiet"]) == 0
    want = (out / "results.csv").read_text()
    points = sorted((out / "points").glob("*.json"))
    rec = json.loads(points[0].read_text())
    rec["result"] = None
    points[0].write_text(json.dumps(rec))
    rec = json.loads(points[1].read_text())
    rec["result"]["hardware"][0]["variants"][0]["buckets"][0]["time_us"] = 1.0  # tampered
    points[1].write_text(json.dumps(rec))
    capsys.readouterr()
    assert main(["sweep", str(path), "--workers", "1", "--out", str(out), "--no-plots", "--quiet", "--resume"]) == 0
    err = capsys.readouterr().err
    assert "2 cached point record(s) refused" in err
    assert (out / "results.csv").read_text() == want
    points[2].unlink()
    points[2].mkdir()  # a folder in place of a point file
    code, err = _cli(capsys, "sweep", str(path), "--workers", "1", "--out", str(out), "--no-plots", "--quiet", "--resume")
    assert code == 2
    _one_error(err, points[2].name)


# 10. hangs and memory ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path,value", [
    (("ops", 2, "numel"), "9**9**9"),
    (("ops", 2, "numel"), "tokens**tokens**tokens"),
    (("ops", 3, "count"), "10**8"),
])
def test_no_hang_or_huge_allocation(path: tuple[Any, ...], value: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(path, value))), "--quiet")
    assert code == 2 and time.perf_counter() - t0 < 10
    _one_error(err, "workload.yaml")


def test_alias_bomb_and_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
    t0 = time.perf_counter()
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=bomb + yaml.safe_dump(base.WORKLOAD))), "--quiet")
    assert code == 2 and time.perf_counter() - t0 < 10
    assert "alias" in _one_error(err, "workload.yaml")
    code, err = _cli(capsys, "run", "/dev/zero", "--quiet")
    assert code == 2 and "not a regular file" in _one_error(err, "/dev/zero")
    os.mkfifo(tmp_path / "fifo.yaml")
    code, err = _cli(capsys, "run", str(tmp_path / "fifo.yaml"), "--quiet")
    assert code == 2
    _one_error(err, "fifo.yaml")


# 11. destroyed inputs -------------------------------------------------------------------------------------
def test_outputs_never_replace_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _write(tmp_path)
    trace = _trace(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    wl = str(tmp_path / "workload.yaml")
    for argv in (["run", str(scn), "--quiet", "--json", str(scn)],
                 ["run", str(scn), "--quiet", "--json", wl],
                 ["run", str(scn), "--quiet", "--trace", os.path.relpath(wl)],
                 ["advise", str(scn), "--quiet", "--json", str(scn)],
                 ["serve", str(scn), "--quiet", "--json", str(scn)],
                 ["replay", str(trace), "--hardware", "h200-sxm", "--quiet", "--json", str(trace)],
                 ["replay", str(trace), "--hardware", "h200-sxm", "--quiet", "--trace", str(trace)],
                 ["import-trace", str(trace), "-o", str(trace)]):
        code, err = _cli(capsys, *argv)
        assert code == 2, argv
        assert "input" in _one_error(err, "s.yaml", "workload.yaml", "t.json")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    ro = tmp_path / "ro.json"
    ro.write_text("keep\n")
    ro.chmod(0o444)
    code, err = _cli(capsys, "run", str(scn), "--quiet", "--json", str(ro))
    assert code == 2 and "read-only" in _one_error(err, "ro.json") and ro.read_text() == "keep\n"


# 12. contract ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["run", "S", "--json", ""], ["run", "S", "--trace", ""], ["run", "S", "--plots", ""],
    ["run", "S", "--report", ""], ["sweep", "S", "--out", ""], ["import-trace", "T", "-o", ""],
])
def test_empty_output_paths_are_refused(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn, trace = _write(tmp_path), _trace(tmp_path)
    argv = [str(scn) if a == "S" else str(trace) if a == "T" else a for a in argv]
    code, err = _cli(capsys, *argv, *(["--quiet"] if argv[0] != "import-trace" else []))
    assert code == 2 and "empty path" in _one_error(err, argv[-1] if argv[-1] else argv[-2], "--", "-o")


def test_pricing_errors_are_located_and_messages_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(("ops", 0, "m"), 0))), "--quiet")
    assert code == 2 and "ops[0]" in _one_error(err, "workload.yaml") and "GEMM dimensions" in err
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(("ops", 1, "math"), {"nosuch": 1}))),
                     "--quiet")
    assert code == 2 and "ops[1]" in _one_error(err, "workload.yaml")
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=_wl_with(("ops", 0, "m"), "x" * 200_000))),
                     "--quiet")
    assert code == 2 and len(_one_error(err, "workload.yaml")) < 700


def test_bare_command_prints_usage_and_an_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(capsys)
    assert code == 2 and "usage:" in err
    _one_error(err, "command")


def test_json_and_trace_are_written_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _write(tmp_path)
    ro = tmp_path / "t.json"
    ro.write_text("{}\n")
    ro.chmod(0o444)
    code, err = _cli(capsys, "run", str(scn), "--quiet", "--json", str(tmp_path / "o.json"), "--trace", str(ro))
    assert code == 2 and not (tmp_path / "o.json").exists()
    _one_error(err, "t.json")


def test_json_and_trace_killed_midway_leave_both_or_neither(tmp_path: Path) -> None:
    scn = _write(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for delay in (0.9, 1.2, 1.5, 1.8, 2.4):
        for f in ("o.json", "t.json"):
            (tmp_path / f).unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "sim", "run", str(scn), "--quiet", "--json", "o.json",
                                 "--trace", "t.json"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        assert (tmp_path / "o.json").exists() == (tmp_path / "t.json").exists()
        assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


@pytest.mark.parametrize("when", ["starting", "running"])
def test_pool_workers_die_with_the_sweep_process(when: str, tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import multiprocessing, os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from sim.sweep.worker import die_with_parent
        if __name__ == "__main__":
            pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent,
                                       initargs=(os.getpid(),))
            futs = [pool.submit(time.sleep, 600) for _ in range(2)]
            time.sleep(0.5)
            print(" ".join(str(p) for p in pool._processes), flush=True)
            time.sleep(120)
    """)
    (tmp_path / "pool.py").write_text(script)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "pool.py")], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    if when == "running":  # wait until both ran the initializer (its watch thread is a second thread)
        deadline = time.time() + 60
        while time.time() < deadline and not all(_threads(p) > 1 for p in pids):
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    # a worker that outlived its parent would sleep 600 s; a worker killed while still importing needs that import
    # to finish before its initializer sees the parent gone (6.6-7.8 s wall on a loaded 2-core VM), hence 45 s
    deadline = time.time() + 45
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    survivors = [p for p in pids if _alive(p)]
    for p in survivors:
        os.kill(p, signal.SIGKILL)
    assert not survivors


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_gzip_trace_truncated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = gzip.compress(base.trace_text(base.trace_events()).encode(), mtime=0)
    (tmp_path / "t.json.gz").write_bytes(data[: len(data) // 2])
    code, err = _cli(capsys, "import-trace", str(tmp_path / "t.json.gz"), "-o", str(tmp_path / "w.yaml"))
    assert code == 2
    _one_error(err, "t.json.gz")


def test_one_path_named_for_two_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _write(tmp_path)
    out = str(tmp_path / "x.json")
    code, err = _cli(capsys, "run", str(scn), "--quiet", "--json", out, "--trace", out)
    assert code == 2 and "named twice" in _one_error(err, "x.json") and not Path(out).exists()


def test_sweep_where_no_point_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = copy.deepcopy(base.SCENARIO)
    scn["sweep"] = {"params": {"tokens": [0, -1]}}
    path = _write(tmp_path, scenario=scn)
    code, err = _cli(capsys, "sweep", str(path), "--workers", "1", "--out", str(tmp_path / "sw"), "--no-plots", "--quiet")
    assert code == 2 and "no point of the sweep ran" in _one_error(err, "s.yaml")


def test_weights_that_overflow_their_sum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = copy.deepcopy(base.WORKLOAD)
    for b in wl["distribution"]["buckets"]:
        b["weight"] = 1e308
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=wl)), "--quiet", "--json", str(tmp_path / "o.json"))
    assert code == 2 and "distribution.buckets" in _one_error(err, "workload.yaml")


def test_control_characters_in_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(base.WORKLOAD).replace("name: fz", "name: f\x00z")
    code, err = _cli(capsys, "run", str(_write(tmp_path, workload=text)), "--quiet")
    assert code == 2 and "invalid YAML" in _one_error(err, "workload.yaml")
    (tmp_path / "hw.yaml").write_text("schema: kernelsim.hardware/v1\x07\n")
    code, err = _cli(capsys, "advise", str(_write(tmp_path)), "--hardware", str(tmp_path / "hw.yaml"), "--quiet")
    assert code == 2
    _one_error(err, "hw.yaml")


def test_validate_and_calibrate_check_their_outputs_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """validate's --json/--markdown/--write-bands and calibrate's --out are refused before the (minutes of)
    work when they name an input, the same path twice or a read-only file; nothing is written."""
    thresholds = ROOT / "validation/thresholds.yaml"
    raw = ROOT / "calibration/h200/raw"
    before = thresholds.read_bytes()
    out = tmp_path / "x.json"
    ro = tmp_path / "ro.md"
    ro.write_text("keep\n")
    ro.chmod(0o444)
    def no_work(*_: Any) -> None:
        raise AssertionError("the work ran before the output paths were checked")

    monkeypatch.setattr("sim.validate.suite.run_validation", no_work)
    monkeypatch.setattr("sim.calibrate.fit.calibrate_from_raw", no_work)
    monkeypatch.setattr("sim.calibrate.fit.fit_from_raw", no_work)  # what `calibrate --from-raw` runs
    for argv, names, problem in (
            (["validate", "--json", str(thresholds)], ["thresholds.yaml"], "input"),
            (["validate", "--markdown", str(ROOT / "validation/h200/cases.yaml")], ["cases.yaml"], "input"),
            (["validate", "--json", str(out), "--markdown", str(out)], ["x.json"], "named twice"),
            (["validate", "--markdown", str(ro)], ["ro.md"], "read-only"),
            (["calibrate", "--from-raw", str(raw), "--out", str(raw / "copy.json")], ["copy.json"], "input"),
            (["calibrate", "--from-raw", str(raw), "--out", str(tmp_path)], [tmp_path.name], "folder")):
        code, err = _cli(capsys, *argv)
        assert code == 2, argv
        assert problem in _one_error(err, *names), argv
    assert thresholds.read_bytes() == before and not out.exists() and ro.read_text() == "keep\n"


@pytest.mark.parametrize("mutate", [
    lambda d: d["base"]["events"][1].pop("outputs"),
    lambda d: d["base"]["events"][1]["args"][0].update(storage="x"),
    lambda d: d["base"]["events"][2].update(phase=-1),
    lambda d: d["base"]["storages"].__setitem__(2, -1),
    lambda d: d["base"]["events"][1]["args"][1].update(shape=[2**45, 2**45]),
    lambda d: d.pop("check_params"),
    lambda d: d["base"]["events"][1].update(args=[1, 2]),  # an mm with scalars: the lowering rule cannot apply
])
def test_a_bad_capture_recording_is_one_error_line(mutate: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((ROOT / "tests/fixtures/capture/mlp.bundle.json").read_text())
    mutate(doc)
    rec = tmp_path / "r.json"
    rec.write_text(json.dumps(doc))
    code, err = _cli(capsys, "capture", str(rec), "-o", str(tmp_path / "w.yaml"))
    assert code == 2 and _one_error(err, "r.json") and not (tmp_path / "w.yaml").exists()


def test_a_capture_recording_past_jsons_integer_limit_is_one_error_line(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "r.json"
    rec.write_text('{"schema": ' + "9" * 5000 + "}")  # json refuses integers past 4300 digits (a ValueError)
    code, err = _cli(capsys, "capture", str(rec), "-o", str(tmp_path / "w.yaml"))
    assert code == 2 and "4300 digits" in _one_error(err, "r.json") and not (tmp_path / "w.yaml").exists()


def test_a_raw_calibration_folder_with_a_fifo_or_a_huge_integer_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    os.mkfifo(raw / "x.json")  # reading it would block until a writer appears
    code, err = _cli(capsys, "calibrate", "--from-raw", str(raw), "--out", str(tmp_path / "p.yaml"))
    assert code == 2 and "regular file" in _one_error(err, "x.json")
    (raw / "x.json").unlink()
    (raw / "g.json").write_text('{"group": "g", "records": [' + "9" * 5000 + "]}")
    code, err = _cli(capsys, "calibrate", "--from-raw", str(raw), "--out", str(tmp_path / "p.yaml"))
    assert code == 2 and _one_error(err, "g.json") and not (tmp_path / "p.yaml").exists()
