"""Running sweeps: tidy table, infeasible points, cache and resume after an interruption, executors agree."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

import sim.sweep.executors as executors
from sim.cli import main
from sim.sweep import load_sweep, run_sweep
from tests.conftest import ROOT
from tests.sweep.conftest import tiny_scenario


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_serial_sweep_writes_tidy_rows_and_counts_infeasible(scenario_path: Path, tmp_path: Path) -> None:
    plan = load_sweep(scenario_path)
    out = tmp_path / "out"
    outcome = run_sweep(plan, out, workers=1, progress=False)
    # 2 profiles × bs ∈ {128, 256, 2048}; a 2048-thread block fits on no GPU: infeasible, not fatal.
    assert outcome.summary["counts"] == {"ok": 4, "infeasible": 2, "invalid": 0}
    assert {r["params"]["bs"] for r in outcome.summary["not_run"]} == {2048}
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4 * 3 * 2  # feasible points × (baseline + 2 variants) × buckets
    assert {r["variant"] for r in rows} == {"baseline", "fused", "fused_ept8"}
    assert {r["param.bs"] for r in rows} == {"128", "256"}
    manifest = json.loads((out / "sweep.json").read_text())
    assert [p["status"] for p in manifest["points"]] == ["ok", "ok", "infeasible"] * 2
    assert len(list((out / "points").glob("*.json"))) == 6
    assert outcome.computed == 6 and outcome.cached == 0
    # Error bands (sim.validate.bands): every row carries its regime, shapes and intervals.
    for r in rows:
        assert r["regime"] in ("host-bound", "gpu-bound") and r["shapes"] in ("calibrated", "unseen")
        assert float(r["time_lo_us"]) < float(r["time_hi_us"])
        assert float(r["gain_lo"]) <= float(r["gain_hi"]) and float(r["variant_gain_lo"]) <= float(r["variant_gain_hi"])
    assert all(len(b["gain_interval"]) == 2 for b in outcome.summary["best"])


def test_interrupted_sweep_resumes_to_the_same_result(scenario_path: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    plan = load_sweep(scenario_path)
    reference = tmp_path / "ref"
    run_sweep(plan, reference, workers=1, progress=False)

    out = tmp_path / "out"
    real = executors.run_point
    calls = {"n": 0}

    def dies_after_three(*args: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(executors, "run_point", dies_after_three)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, out, workers=1, progress=False)
    assert len(list((out / "points").glob("*.json"))) == 3
    assert not (out / "results.csv").exists()
    assert not [p for p in out.rglob("*.tmp")]
    monkeypatch.setattr(executors, "run_point", real)

    outcome = run_sweep(plan, out, workers=1, progress=False, resume=True)
    assert (outcome.cached, outcome.computed) == (3, 3)
    assert _files(out) == _files(reference)
    again = run_sweep(plan, out, workers=1, progress=False, resume=True)
    assert (again.cached, again.computed) == (6, 0)


def test_resume_ignores_a_corrupt_point_file(scenario_path: Path, tmp_path: Path) -> None:
    plan = load_sweep(scenario_path)
    out = tmp_path / "out"
    run_sweep(plan, out, workers=1, progress=False)
    (out / "points" / f"{plan.points[0].key}.json").write_text("{not json")
    outcome = run_sweep(plan, out, workers=1, progress=False, resume=True)
    assert (outcome.cached, outcome.computed) == (5, 1)


def test_process_pool_matches_serial(tmp_path: Path) -> None:
    path = tiny_scenario(tmp_path, {"hardware": ["h200-sxm"], "params": {"bs": [128, 256, 512, 1024]}})
    plan = load_sweep(path)
    run_sweep(plan, tmp_path / "serial", workers=1, progress=False)
    run_sweep(plan, tmp_path / "pool", workers=2, progress=False)
    assert _files(tmp_path / "pool") == _files(tmp_path / "serial")


# The dask sweep runs in an interpreter of its own: a LocalCluster leaves threads behind in the process that
# started it (distributed's offload pool), and a later test that forks (sim.calibrate.repro's worker pool) would
# fork a process with threads, which can hang the child — the suite's process stays single-threaded.
_DASK_SWEEP = """
import sys
from pathlib import Path
from sim.sweep import load_sweep, run_sweep
run_sweep(load_sweep(Path(sys.argv[1])), Path(sys.argv[2]), workers=2, executor="dask", progress=False)
"""


def test_dask_local_cluster_matches_local(tmp_path: Path) -> None:
    import subprocess
    import sys

    pytest.importorskip("dask.distributed", reason="dask.distributed not installed (pip install 'kernelsim[distributed]')")
    path = tiny_scenario(tmp_path, {"hardware": ["h200-sxm", "h100-sxm"], "params": {"bs": [128, 2048]}})
    plan = load_sweep(path)
    run_sweep(plan, tmp_path / "local", workers=1, progress=False)
    done = subprocess.run([sys.executable, "-c", _DASK_SWEEP, str(path), str(tmp_path / "dask")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _files(tmp_path / "dask") == _files(tmp_path / "local")


def test_cli_sweep(scenario_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(["sweep", str(scenario_path), "--out", str(out), "--workers", "1", "--quiet",
                 "--report", str(tmp_path / "report")])
    assert code == 0
    assert (out / "results.csv").is_file() and (out / "sweep.json").is_file()
    plots = json.loads((out / "plots" / "plots.json").read_text())["plots"]
    assert {p["kind"] for p in plots} == {"gain_vs_param", "heatmap"}
    page = (tmp_path / "report" / "index.html").read_text()
    assert page.count("data:image/png;base64,") == len(plots)
    assert "tiny_sweep" in page and "infeasible" in page


def test_cli_sweep_bad_input_exits_2(tmp_path: Path) -> None:
    path = tiny_scenario(tmp_path, {"params": {"nope": [1]}})
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert not (tmp_path / "o").exists()
    good = tiny_scenario(tmp_path)
    assert main(["sweep", str(good), "--scheduler", "tcp://x:1", "--quiet", "--out", str(tmp_path / "o")]) == 2
