"""The command line: shipped scenarios run, output is deterministic, bad input exits 2 with a
message that names the file and the key path, and leaves no output file behind."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main
from tests.conftest import ROOT, write_yaml

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
WORKLOADS = sorted((ROOT / "workloads").glob("*.yaml"))
MLP = ROOT / "workloads" / "mlp_bias_gelu_dropout.yaml"
SCN = ROOT / "scenarios" / "bias_gelu_dropout.yaml"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenarios_run(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["run", str(path), "--json", str(out), "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert res["schema"] == "kernelsim.run/v1"
    for hw in res["hardware"]:
        assert hw["variants"][0]["name"] == "baseline"
        for v in hw["variants"]:
            for key in ("name", "weighted_time_us", "gain_vs_baseline", "coverage", "fallback_rate", "buckets"):
                assert key in v
            for b in v["buckets"]:
                assert set(b["breakdown_us"]) >= {"compute", "memory", "launch", "comm", "layout", "idle"}
                assert sum(b["breakdown_us"].values()) == pytest.approx(b["time_us"], rel=1e-6)
                assert b["time_us"] > 0 and b["kernels"] > 0 and b["hbm_bytes"] > 0


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_shipped_workloads_load_and_build(path: Path) -> None:
    from sim.workload import load_workload

    wl = load_workload(path)
    for b in wl.buckets():
        g = wl.build(wl.params_for(b))
        assert g.kernel_count() > 0


def test_json_is_byte_identical_across_runs(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["run", str(SCN), "--json", str(a), "--quiet"]) == 0
    assert main(["run", str(SCN), "--json", str(b), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_perfetto_trace_written(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert main(["run", str(SCN), "--hardware", "h200-sxm", "--trace", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    evs = doc["traceEvents"]
    names = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"host", "stream 0"} <= names
    kernels = [e for e in evs if e["ph"] == "X" and e["args"].get("kind") == "gemm"]
    assert kernels and all(e["dur"] > 0 for e in kernels)
    assert any(e["ph"] == "s" for e in evs) and any(e["ph"] == "f" for e in evs)


def test_profiles_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    assert "h200-sxm" in capsys.readouterr().out


def _mlp() -> dict[str, Any]:
    return yaml.safe_load(MLP.read_text())


def _scn(workload: Path) -> dict[str, Any]:
    doc = yaml.safe_load(SCN.read_text())
    doc["workload"] = str(workload)
    return doc


def _bad_workload(edit) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(_mlp())
    edit(doc)
    return doc


BAD_WORKLOADS = {
    "unknown_key": (lambda d: d["ops"][1].update(colour="red"), "ops[1].colour", "unknown key"),
    "wrong_type": (lambda d: d["ops"][0].update(stream="fast"), "ops[0].stream", "integer"),
    "negative_size": (lambda d: d["tensors"]["x"].update(shape=["-tokens", "hidden"]), "tensors.x.shape[0]", ">= 1"),
    "unknown_op_kind": (lambda d: d["ops"][2].update(kind="convolution"), "ops[2].kind", "unknown op kind"),
    "dependency_cycle": (lambda d: (d["ops"][1].update(after=["gelu"]), d["ops"][2].update(after=["bias"])),
                         "ops[1].after[0]", "dependency cycle"),
    "unknown_tensor": (lambda d: d["ops"][1].update(reads=["h", "bias_vector"]), "ops[1].reads[1]", "unknown tensor"),
    "bad_expression": (lambda d: d["ops"][0].update(m="tokens +* 2"), "ops[0].m", "not a valid expression"),
    "unknown_parameter": (lambda d: d["ops"][0].update(m="tokens * batch"), "ops[0].m", "unknown parameter 'batch'"),
    "missing_key": (lambda d: d["ops"][0].pop("k"), "ops[0].k", "required key is missing"),
    "duplicate_op": (lambda d: d["ops"][2].update(name="bias"), "ops", "used twice"),
    "bucket_unknown_param": (lambda d: d["distribution"]["buckets"][0]["params"].update(seq=3),
                             "distribution.buckets[0].params", "does not declare"),
    "zero_weight": (lambda d: d["distribution"]["buckets"][0].update(weight=0), "distribution.buckets[0].weight", "greater than 0"),
    "non_integer_dim": (lambda d: d["tensors"]["x"].update(shape=["tokens / 3", "hidden"]), "tensors.x.shape[0]", "whole number"),
}


@pytest.mark.parametrize("case", sorted(BAD_WORKLOADS))
def test_bad_workload_exits_2_and_names_key(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit, key, words = BAD_WORKLOADS[case]
    wl = write_yaml(tmp_path / "wl.yaml", _bad_workload(edit))
    scn = write_yaml(tmp_path / "scn.yaml", _scn(wl))
    out = tmp_path / "out.json"
    assert main(["run", str(scn), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(wl) in err and key in err and words in err, err
    assert "Traceback" not in err
    assert not out.exists()


BAD_SCENARIOS = {
    "unknown_hardware": (lambda d: d.update(hardware=["h900-sxm"]), "hardware[0]", "unknown hardware profile"),
    "unknown_transform": (lambda d: d["variants"][0]["transforms"].append({"vectorize": {}}),
                          "variants[0].transforms[5]", "unknown transform"),
    "fuse_unknown_op": (lambda d: d["variants"][0]["transforms"][0]["fuse"].update(ops=["bias", "gelu2"]),
                        "variants[0].transforms[0].fuse.ops[1]", "unknown op"),
    "fuse_gemm": (lambda d: d["variants"][0]["transforms"][0]["fuse"].update(ops=["fc1", "bias"]),
                  "variants[0].transforms[0].fuse.ops", "cannot fuse op 'fc1'"),
    "bad_predicate": (lambda d: d["variants"][4]["transforms"][0]["dispatch"].update(when="tokens %% 2"),
                      "variants[4].transforms[0].dispatch.when", "not a valid expression"),
    "dropped_without_recompute": (lambda d: d["variants"][1]["transforms"][1]["fuse"].pop("recompute"),
                                  "variants[1].transforms", "reads 'mask'"),
    "min_gain_range": (lambda d: d.update(min_gain=3), "min_gain", "less than or equal to 1"),
    "yaml_syntax": (None, "", "invalid YAML"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_bad_scenario_exits_2_and_names_key(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit, key, words = BAD_SCENARIOS[case]
    scn = tmp_path / "scn.yaml"
    if edit is None:
        scn.write_text("schema: kernelsim.scenario/v1\nname: [unclosed\n")
    else:
        doc = _scn(MLP)
        edit(doc)
        write_yaml(scn, doc)
    out = tmp_path / "out.json"
    trace = tmp_path / "trace.json"
    assert main(["run", str(scn), "--json", str(out), "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    assert str(scn) in err and key in err and words in err, err
    assert "Traceback" not in err
    assert not out.exists() and not trace.exists()


def test_bad_cli_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert main(["run", str(SCN), "--hardware", "nope"]) == 2
    assert "unknown hardware profile" in capsys.readouterr().err
    assert main(["run", str(SCN), "--json", str(tmp_path)]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["run", str(SCN), "--trace-bucket", "99", "--trace", str(tmp_path / "t.json")]) == 2
    assert not (tmp_path / "t.json").exists()


def test_sustained_clock_slows_tensor_work_and_needs_a_measurement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"schema": "kernelsim.scenario/v1", "name": "s", "workload": str(MLP), "hardware": ["h200-measured"]}
    burst, sus = tmp_path / "b.yaml", tmp_path / "s.yaml"
    write_yaml(burst, doc)
    write_yaml(sus, {**doc, "clock": "sustained"})
    assert main(["run", str(burst), "--json", str(tmp_path / "b.json"), "--quiet"]) == 0
    assert main(["run", str(sus), "--json", str(tmp_path / "s.json"), "--quiet"]) == 0
    tb = json.loads((tmp_path / "b.json").read_text())["hardware"][0]["variants"][0]["buckets"]
    ts = json.loads((tmp_path / "s.json").read_text())["hardware"][0]["variants"][0]["buckets"]
    big = [(b["time_us"], s["time_us"]) for b, s in zip(tb, ts, strict=True) if b["params"]["tokens"] >= 4096]
    assert all(s > 1.1 * b for b, s in big)  # GEMM-bound steps run at the lower sustained clock
    write_yaml(sus, {**doc, "clock": "sustained", "hardware": ["h200-sxm"]})
    assert main(["run", str(sus)]) == 2
    assert "sustained clock" in capsys.readouterr().err
