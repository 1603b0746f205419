"""`kernelsim import-trace` and `kernelsim replay`: outputs, a scenario over an imported trace,
and malformed traces → exit 2, a message naming the event, no traceback, no output file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main
from tests.conftest import write_yaml
from tests.ingest.conftest import MALFORMED
from tests.ingest.test_import import MALFORMED_CASES


def test_import_then_run_a_scenario_on_it(synth_gz: Path, tmp_path: Path) -> None:
    wl = tmp_path / "imported.yaml"
    assert main(["import-trace", str(synth_gz), "-o", str(wl), "--step", "2"]) == 0
    scn = write_yaml(tmp_path / "scn.yaml", {
        "schema": "kernelsim.scenario/v1", "name": "trace_whatif", "workload": "imported.yaml",
        "hardware": ["h200-sxm"],
        "variants": [{"name": "cuda_graph", "description": "replay the step as one CUDA graph",
                      "transforms": [{"mode": {"mode": "cuda_graph"}}]}],
    })
    out = tmp_path / "run.json"
    assert main(["run", str(scn), "--json", str(out), "--quiet"]) == 0
    res = json.loads(out.read_text())
    base, graph = res["hardware"][0]["variants"]
    assert base["buckets"][0]["kernels"] == 12
    assert graph["weighted_time_us"] > 0


def test_replay_json_and_perfetto(synth_gz: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, tr = tmp_path / "r.json", tmp_path / "t.json"
    assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", "--json", str(out),
                 "--trace", str(tr)]) == 0
    assert "unpriced (shapes unknown, kept at measured time): 2 kernels" in capsys.readouterr().out
    res = json.loads(out.read_text())
    assert res["schema"] == "kernelsim.replay/v1" and res["step"] == "ProfilerStep#3"
    for f in res["families"].values():
        assert set(f) >= {"kernels", "measured_us", "predicted_us"}
    events = json.loads(tr.read_text())["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X" and e["args"].get("family")]
    assert len(kernels) == 12 and all("limiter" in e["args"] and "trace_name" in e["args"] for e in kernels)
    assert sum(1 for e in events if e["ph"] == "s") == sum(1 for e in events if e["ph"] == "f") > 0


@pytest.mark.parametrize(("name", "message"), MALFORMED_CASES, ids=[c[0] for c in MALFORMED_CASES])
@pytest.mark.parametrize("command", ["import-trace", "replay"])
def test_malformed_trace_exits_2_without_output(name: str, message: str, command: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.file"
    args = [command, str(MALFORMED / name)]
    args += ["-o", str(out)] if command == "import-trace" else ["--hardware", "h200-sxm", "--json", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and name in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_bad_step_and_bad_mode_exit_2(synth_gz: Path, tmp_path: Path) -> None:
    assert main(["import-trace", str(synth_gz), "-o", str(tmp_path / "w.yaml"), "--step", "42"]) == 2
    assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "guess"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_replay_host_sources_and_unprofiled_time(synth_gz: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    results = {}
    for host in ("trace", "model"):
        out = tmp_path / f"{host}.json"
        assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", "--host", host,
                     "--unprofiled-us", "500", "--json", str(out), "--quiet"]) == 0
        results[host] = json.loads(out.read_text())
    for host, res in results.items():
        assert res["host_source"] == host and res["unprofiled_time_us"] == 500.0
        assert res["unprofiled_error"] == pytest.approx((res["predicted_time_us"] - 500.0) / 500.0)
        # what came from the trace and what the model priced (one accounting, sim.replay.summarize)
        assert res["carried_kernel_us"] >= 0.0 and res["priced_kernel_us"] > 0.0 and res["priced_host_us"] >= 0.0
    assert results["model"]["profiler_removed_us"] == 0.0
    capsys.readouterr()
    assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", "--unprofiled-us", "0"]) == 2
    err = capsys.readouterr().err
    assert "error: --unprofiled-us" in err and "Traceback" not in err


def test_replay_host_speed(synth_gz: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = {}
    for speed in ("1", "2", "trace"):
        out = tmp_path / f"s{speed}.json"
        assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", "--host", "model",
                     "--host-speed", speed, "--json", str(out), "--quiet"]) == 0
        res[speed] = json.loads(out.read_text())
    assert "host_speed" not in res["1"] and res["2"]["host_speed"] == 2.0
    assert res["2"]["priced_host_us"] == pytest.approx(2 * res["1"]["priced_host_us"])
    assert res["2"]["carried_host_us"] == res["1"]["carried_host_us"]
    capsys.readouterr()
    for bad in (["--host-speed", "0"], ["--host-speed", "fast"], ["--host", "trace", "--host-speed", "2"]):
        assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", *bad]) == 2
        err = capsys.readouterr().err
        assert "error: --host-speed" in err and "Traceback" not in err


def test_replay_host_clock(synth_gz: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--host-clock US: the host speed of a host whose clock reads US, by the profile's relation (h200-measured:
    host.clock_level where applied, else US / host.clock_us); errors are one line, exit 2."""
    from sim.costmodel.host import speed_at_clock
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    clock = 2 * hw.host_clock_us
    out = tmp_path / "clock.json"
    assert main(["replay", str(synth_gz), "--hardware", "h200-measured", "--mode", "predict", "--host", "model",
                 "--host-clock", str(clock), "--json", str(out), "--quiet"]) == 0
    speed = speed_at_clock(clock, hw)
    assert speed is not None and json.loads(out.read_text())["host_speed"] == pytest.approx(speed, abs=1e-4)
    capsys.readouterr()
    for bad in (["--host", "model", "--host-clock", "0"], ["--host-clock", "5"],
                ["--host", "model", "--host-clock", "5", "--host-speed", "2"]):
        assert main(["replay", str(synth_gz), "--hardware", "h200-measured", "--mode", "predict", *bad]) == 2
        err = capsys.readouterr().err
        assert "error: --host-clock" in err and "Traceback" not in err
    # a profile without a reference clock (the datasheet profile) cannot turn a clock into a speed
    assert main(["replay", str(synth_gz), "--hardware", "h200-sxm", "--mode", "predict", "--host", "model",
                 "--host-clock", "5"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "host.clock_us" in err and "Traceback" not in err
