"""sim.calibrate.repro: parameter and prediction spreads across calibrations, the generated docs section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.calibrate.repro import (
    BEGIN,
    END,
    Calibration,
    case_spreads,
    exceeded_markdown,
    exceeded_tripwires,
    goals_markdown,
    keep_generated_section,
    main,
    measured_params,
    render_document,
    replace_generated_section,
    report_markdown,
    repro_document,
    spread,
)
from sim.outputs import dumps
from tests.conftest import ROOT


def _cal(name: str, step: float, kernel: float, latency: float) -> Calibration:
    cal = Calibration(name, Path(f"runs/{name}/raw"), Path(f"{name}.yaml"), {"memory.latency_ns": latency})
    cal.predictions = {("step", "mlp/baseline", "mlp tokens=128", "held-out"): step,
                       ("kernel", "copy", "copy 1 MiB", "fit"): kernel}
    return cal


def test_measured_params_flattens_measured_numbers_only() -> None:
    doc = {"memory": {"latency_ns": {"value": 256.0, "source": "measured"},
                      "l2_gbps": {"value": 1e4, "source": "estimate"}},
           "compute": {"op_costs": {"erf": {"fp32": 36.9, "sfu": 0, "source": "measured"}}},
           "corrections": {"t": {"provenance": {"source": "measured"}, "points": []}}}
    assert measured_params(doc) == {"memory.latency_ns": 256.0, "compute.op_costs.erf.fp32": 36.9}


def test_spreads_against_the_limits() -> None:
    assert spread([100.0, 102.0, 104.0]) == pytest.approx(0.04 / 1.02)
    cases = {(c.table, c.label): c for c in case_spreads([_cal("a", 100.0, 10.0, 250.0), _cal("b", 104.0, 10.4, 260.0)])}
    step, kernel = cases[("step", "mlp tokens=128")], cases[("kernel", "copy 1 MiB")]
    assert step.spread == pytest.approx(0.04 / 1.02) and not step.ok  # over 3 %
    assert kernel.spread == pytest.approx(0.04 / 1.02) and kernel.ok  # within 5 %


def test_case_spreads_skip_cases_some_calibrations_cannot_predict() -> None:
    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 100.0, 10.0, 250.0)
    del b.predictions[("kernel", "copy", "copy 1 MiB", "fit")]
    assert [c.table for c in case_spreads([a, b])] == ["step"]


def test_report_and_generated_section(tmp_path: Path) -> None:
    cals = [_cal("a", 100.0, 10.0, 250.0), _cal("b", 110.0, 10.0, 260.0)]
    cals[1].violations = ["step/mlp/held-out: median_abs 0.2 > 0.1"]
    text = report_markdown(cals, case_spreads(cals), "python -m sim.calibrate.repro a b")
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    assert "| memory.latency_ns | 250 | 260 | 3.9% |" in text
    assert "| mlp tokens=128 (held-out) | 100.0 | 110.0 | 9.5% ✗ |" in text
    assert "| b | `runs/b/raw` | 1: step/mlp/held-out" in text
    doc = tmp_path / "validation.md"
    doc.write_text("# validation\n\nold tables\n")
    doc.write_text(replace_generated_section(doc, text))
    assert doc.read_text().startswith("# validation\n\nold tables\n\n" + BEGIN)
    again = replace_generated_section(doc, text.replace("260", "270"))
    assert again.count(BEGIN) == 1 and "270" in again and "old tables" in again
    # `kernelsim validate --markdown` rewrites the file and keeps the section
    kept = keep_generated_section(doc, "# new tables\n")
    assert kept.startswith("# new tables\n") and kept.count(BEGIN) == 1


def test_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert main([str(ROOT / "calibration/h200/raw")]) == 2


@pytest.mark.slow
def test_the_same_raw_folder_twice_reproduces_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "repro.md"
    assert main(["calibration/h200/raw", "calibration/h200/raw", "--names", "a,b", "--markdown", str(out)]) == 0
    assert "| step | " in out.read_text() and "✗" not in out.read_text()


def test_pairs_table_counts_agreement_per_pair() -> None:
    cals = [_cal("a", 100.0, 10.0, 250.0), _cal("b", 101.0, 10.0, 250.0), _cal("c", 110.0, 10.0, 250.0)]
    cals[2].violations = ["x"]
    text = report_markdown(cals, case_spreads(cals), "python -m sim.calibrate.repro a b c")
    assert "| a–b | 1 of 1 | 1 of 1 | 0 / 0 |" in text
    assert "| a–c | 0 of 1 | 1 of 1 | 0 / 1 |" in text
    # two calibrations: no pairs table (the whole report is the one pair)
    assert "Pairs of calibrations" not in report_markdown(cals[:2], case_spreads(cals[:2]), "x")


def test_exceeded_tripwires_are_classified_noise_or_systematic() -> None:
    thresholds = {"gates": {"step/mlp/unseen": {"goal": {"median_abs": 0.05}, "tripwire": {"median_abs": 0.115}},
                            "host/all/unseen": {"tripwire": {"max_abs": 0.2}},
                            "bands/time/x": {"tripwire": {"min_coverage": 0.7}}}}
    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 100.0, 10.0, 250.0)
    # step: shipped 0.10, margin 0.015; a and b differ by 0.08 > margin -> noise
    a.measured = {"step/mlp/unseen": {"median_abs": 0.09}, "host/all/unseen": {"max_abs": 0.3},
                  "bands/time/x": {"coverage": 0.72}}
    b.measured = {"step/mlp/unseen": {"median_abs": 0.17}, "host/all/unseen": {"max_abs": 0.31},
                  "bands/time/x": {"coverage": 0.75}}
    ref = {"step/mlp/unseen": {"median_abs": 0.10}, "host/all/unseen": {"max_abs": 0.15}, "bands/time/x": {"coverage": 0.8}}
    found = {e.gate: e for e in exceeded_tripwires([a, b], ref, thresholds)}
    assert set(found) == {"step/mlp/unseen", "host/all/unseen"}  # the coverage floor holds for both
    assert found["step/mlp/unseen"].kind == "noise" and found["step/mlp/unseen"].side == "GPU"
    assert found["step/mlp/unseen"].goal == 0.05
    assert found["host/all/unseen"].kind == "systematic" and found["host/all/unseen"].side == "host"


def test_the_docs_section_renders_from_the_committed_document() -> None:
    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 110.0, 10.0, 260.0)
    a.measured, b.measured = {"step/mlp/unseen": {"median_abs": 0.09}}, {"step/mlp/unseen": {"median_abs": 0.2}}
    thresholds = {"gates": {"step/mlp/unseen": {"tripwire": {"median_abs": 0.115}}}}
    doc = repro_document([a, b], "python -m sim.calibrate.repro a b", "", "shipped", {"step/mlp/unseen": {"median_abs": 0.1}}, None)
    text = render_document(json.loads(dumps(doc)), thresholds)
    ref = {"step/mlp/unseen": {"median_abs": 0.1}}
    assert text == report_markdown([a, b], case_spreads([a, b]), "python -m sim.calibrate.repro a b", "", None,
                                   exceeded_markdown([a, b], exceeded_tripwires([a, b], ref, thresholds), "shipped")
                                   + goals_markdown([a, b], ref, "shipped", thresholds))
    assert "| step/mlp/unseen: median_abs | 0.115 | — | 0.100 | 0.090 | 0.200 ✗ | GPU | noise |" in text
    # with the fresh limits, a calibration's failures are the fresh limits it exceeds (not the tripwires)
    fresh = render_document(json.loads(dumps(doc)), thresholds, {"step/mlp/unseen": {"median_abs": 0.15}})
    assert "| b | `runs/b/raw` | 1: step/mlp/unseen: median_abs 0.200 (fresh limit <= 0.150) |" in fresh
    assert "| a | `runs/a/raw` | 0 |" in fresh


def test_goals_compare_the_shipped_profile_with_the_calibrations() -> None:
    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 110.0, 10.0, 260.0)
    a.measured, b.measured = {"step/mlp/unseen": {"median_abs": 0.04}}, {"step/mlp/unseen": {"median_abs": 0.2}}
    thresholds = {"gates": {"step/mlp/unseen": {"goal": {"median_abs": 0.05}}}}
    lines = goals_markdown([a, b], {"step/mlp/unseen": {"median_abs": 0.03}}, "shipped", thresholds)
    assert "Goals met: shipped (`shipped`) 1 of 1; a 1, b 0 of 1. ✗: the shipped profile misses the goal too." in lines
    assert "| step/mlp/unseen: median_abs | 0.050 | 0.030 | 0.040–0.200 | 0.120 | 1 of 2 |" in lines


def test_the_committed_docs_section_is_rendered_from_the_committed_calibrations() -> None:
    """docs/validation.md's reproducibility tables come from calibration/h200/runs/repro.json (written by
    `python -m sim.calibrate.repro ... --json`, which `--check` recomputes from the raw folders: slow)."""
    from sim.validate.core import load_thresholds
    from sim.validate.fresh import load_fresh

    doc = json.loads((ROOT / "calibration/h200/runs/repro.json").read_text())
    for c in doc["calibrations"]:  # committed raw folders: runs/NAME/raw, or a wave's folder h200/waveW_NAME/raw
        raw = Path(c["raw_dir"])
        assert raw.name == "raw" and (ROOT / raw).is_dir(), raw
        assert raw.parent.parent.name == "runs" and raw.parent.name == c["name"] or raw.parent.name.endswith("_" + c["name"])
    fresh = load_fresh(ROOT / "validation/fresh_limits.yaml")["limits"]
    section = render_document(doc, load_thresholds(ROOT / "validation/thresholds.yaml"), fresh).rstrip("\n")
    text = (ROOT / "docs/validation.md").read_text()
    assert text[text.index(BEGIN):text.index(END) + len(END)] == section


def test_a_reused_document_gives_back_the_same_document() -> None:
    """--reuse takes calibrations from an earlier --json document: the document written again from them is
    byte for byte the one they came from (so adding a calibration does not change the others' rows)."""
    from sim.calibrate.repro import reused_calibrations

    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 110.0, 10.5, 260.0)
    a.measured, b.violations = {"step/mlp/unseen": {"median_abs": 0.09}}, ["x: y"]
    b.predictions[("step", "mlp/baseline", "mlp tokens=256", "held-out")] = 200.0  # a case only b predicts
    doc = json.loads(dumps(repro_document([a, b], "cmd", "", "shipped", {}, None)))
    back = reused_calibrations(doc)
    assert sorted(back) == [("a", "runs/a/raw"), ("b", "runs/b/raw")]
    again = repro_document([back[("a", "runs/a/raw")], back[("b", "runs/b/raw")]], "cmd", "", "shipped", {}, None)
    assert dumps(again) == dumps(doc)
    with pytest.raises(Exception, match="not a reproducibility document"):
        reused_calibrations({"schema": "other"})


def test_main_with_every_calibration_reused_fits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sim.calibrate.repro as repro

    a, b = _cal("a", 100.0, 10.0, 250.0), _cal("b", 110.0, 10.5, 260.0)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(dumps(repro_document([a], "cmd", "", "h200-measured", {"g": {"median_abs": 0.1}}, None)))
    second.write_text(dumps(repro_document([b], "cmd", "", "h200-measured", {}, None)))

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("fitted or validated again")
    monkeypatch.setattr(repro, "_validate", no_fit)
    monkeypatch.setattr("sim.calibrate.fit.calibrate_from_raw", no_fit)
    out = tmp_path / "out.json"
    rc = main(["runs/a/raw", "runs/b/raw", "--names", "a,b", "--reuse", str(first), "--reuse", str(second),
               "--json", str(out), "--thresholds", str(ROOT / "validation/thresholds.yaml")])
    assert rc in (0, 3)
    doc = json.loads(out.read_text())
    assert [c["name"] for c in doc["calibrations"]] == ["a", "b"] and doc["reference"]["measured"] == {"g": {"median_abs": 0.1}}
    assert doc["command"] == "python -m sim.calibrate.repro runs/a/raw runs/b/raw --names a,b"


def _fake_one(raw_dir: Path, name: str, *args: object) -> Calibration:
    """calibrate_one's stand-in (module level: it runs in the pool's processes)."""
    import os

    cal = Calibration(name, raw_dir, Path(), {"p": float(len(name))})
    cal.predictions[("step", "f", name, "unseen")] = 100.0 + len(str(raw_dir))
    cal.violations = [f"pid {os.getpid()}", f"nice {os.nice(0)}"] if name == "pid" else []
    return cal


def _fake_reference(*args: object) -> dict[str, dict[str, float]]:
    return {"g": {"median_abs": 0.1}}


def _single_threaded() -> None:
    """The pool forks this process: a thread left by an earlier test (a dask LocalCluster's offload pool did) could
    hold a lock the children then wait on for good — the suite hung once in CI at these tests."""
    import threading

    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    assert not others, f"threads alive before forking the pool: {others}"


def test_jobs_run_the_calibrations_in_processes_and_give_the_same_result(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import os

    import sim.calibrate.repro as repro

    _single_threaded()
    monkeypatch.setattr(repro, "calibrate_one", _fake_one)
    monkeypatch.setattr(repro, "_reference_measured", _fake_reference)
    dirs, names = [Path("runs/a/raw"), Path("runs/bb/raw"), Path("x/raw")], ["a", "bb", "pid"]
    one, ref1 = repro.calibrate_all(dirs, names, "h200-sxm", tmp_path, "", "", "", jobs=1, reference="r")
    three, ref3 = repro.calibrate_all(dirs, names, "h200-sxm", tmp_path, "", "", "", jobs=3, reference="r")
    assert [c.name for c in three] == names and ref1 == ref3 == _fake_reference()
    assert [(c.params, c.predictions) for c in one] == [(c.params, c.predictions) for c in three]
    nice = os.nice(0)
    assert one[2].violations == [f"pid {os.getpid()}", f"nice {nice}"] and three[2].violations != one[2].violations
    # --first 1: the calibrations after the first run at a lower priority, with the same result
    low, _ = repro.calibrate_all(dirs, names, "h200-sxm", tmp_path, "", "", "", jobs=3, reference="r", first=1)
    assert [(c.params, c.predictions) for c in low] == [(c.params, c.predictions) for c in one]
    assert low[2].violations[1] == f"nice {min(19, nice + repro.LOW_PRIORITY_NICE)}" != three[2].violations[1]
    assert main(["runs/a/raw", "runs/b/raw", "--jobs", "0"]) == 2
    assert main(["runs/a/raw", "runs/b/raw", "--jobs", "2", "--first", "-1"]) == 2
    assert capsys.readouterr().err.count("error:") == 2


def test_partial_results_are_written_as_they_finish_and_reused_into_the_same_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--partial-dir writes each finished calibration and the reference validation as a document of its own;
    --reuse of those gives the document of the whole run, fitting nothing again."""
    import sim.calibrate.repro as repro

    monkeypatch.setattr(repro, "calibrate_one", _fake_one)
    monkeypatch.setattr(repro, "_reference_measured", _fake_reference)
    _single_threaded()
    thresholds = str(ROOT / "validation/thresholds.yaml")
    args = ["runs/a/raw", "runs/bb/raw", "x/raw", "--names", "a,bb,c", "--thresholds", thresholds]
    for jobs in ("1", "3"):
        whole, part = tmp_path / f"whole{jobs}.json", tmp_path / f"part{jobs}"
        assert main([*args, "--jobs", jobs, "--json", str(whole), "--partial-dir", str(part)]) in (0, 3)
        assert sorted(p.name for p in part.iterdir()) == ["a.json", "bb.json", "c.json", "reference.json"]
        ref_doc = json.loads((part / "reference.json").read_text())
        assert ref_doc["calibrations"] == [] and ref_doc["reference"]["measured"] == _fake_reference()

        def no_fit(*a: object, **k: object) -> None:
            raise AssertionError("fitted or validated again")
        with monkeypatch.context() as m:
            m.setattr(repro, "calibrate_one", no_fit)
            m.setattr(repro, "_reference_measured", no_fit)
            merged = tmp_path / f"merged{jobs}.json"
            reuse = [x for f in ("reference", "c", "bb", "a") for x in ("--reuse", str(part / f"{f}.json"))]
            assert main([*args, *reuse, "--json", str(merged)]) in (0, 3)
        assert merged.read_text() == whole.read_text()


# A repro run whose calibrations never end: each worker records its pid, then writes its profile and is caught
# in the middle of it (the temporary file exists, the rename has not happened) until a signal stops it.
_STUCK_RUN = '''
import os, signal, sys, time
from pathlib import Path
import sim.calibrate.repro as repro
import sim.outputs as outputs

def stuck_rename(temps):
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # the signal reaches the worker while the file is unfinished
    Path(str(temps[0][1]) + ".ready").write_text(str(os.getpid()))
    time.sleep(120)

def stuck_one(raw_dir, name, base, work, *args):
    outputs._rename_all = stuck_rename
    outputs.write_text_atomic(work / f"{name}.yaml", "profile: " + name)
    raise AssertionError("not stopped")

repro.calibrate_one = stuck_one
repro._reference_measured = lambda *args: {"g": {"median_abs": 0.1}}
sys.exit(repro.main(sys.argv[1:]))
'''


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_parent_stops_the_workers_and_leaves_nothing_half_written(tmp_path: Path, signum: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "stuck_run.py"
    script.write_text(_STUCK_RUN)
    work, out = tmp_path / "profiles", tmp_path / "repro.json"
    proc = subprocess.Popen([sys.executable, str(script), "runs/a/raw", "runs/b/raw", "--names", "a,b", "--jobs", "2",
                             "--profiles-out", str(work), "--json", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = [work / "a.yaml.ready", work / "b.yaml.ready"]
        deadline = time.monotonic() + 60
        while not all(p.is_file() and p.read_text() for p in ready):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        workers = [int(p.read_text()) for p in ready]
        assert len(list(work.glob(".*.tmp"))) == 2  # both profiles half-written when the signal comes
        proc.send_signal(getattr(signal, signum))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + getattr(signal, signum)
    assert err.count("\n") == 1 and err.startswith(f"interrupted by {signum}:") and "Traceback" not in err
    for pid in workers:  # terminated and joined by the parent before it exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not out.exists()
    assert sorted(p.name for p in work.iterdir()) == ["a.yaml.ready", "b.yaml.ready"]  # no temporary file, no profile
