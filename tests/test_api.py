"""The public Python API (sim.api, re-exported at `sim`): str or Path in, typed results out (issue 21)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import sim
from sim import api
from sim.cli import main
from sim.errors import InputError
from tests.sweep.conftest import tiny_scenario

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "scenarios" / "counter_case_fusion.yaml"


@pytest.fixture(scope="module")
def counter() -> sim.RunResult:
    return sim.run(str(COUNTER), hardware=["h200-measured"])


def test_run_accepts_str_and_path_and_equals_the_cli_json(counter: sim.RunResult, tmp_path: Path) -> None:
    assert main(["run", str(COUNTER), "--hardware", "h200-measured", "--json", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    cli = json.loads((tmp_path / "r.json").read_text())
    assert json.loads(json.dumps(counter.to_dict())) == cli
    from_path = sim.run(COUNTER, hardware=["h200-measured"])
    assert from_path.to_dict() == counter.to_dict()
    loaded = sim.load_scenario(str(COUNTER))
    assert sim.run(loaded, keep_traces=True).traces  # a loaded scenario runs as is


def test_typed_results_match_the_document(counter: sim.RunResult) -> None:
    doc = counter.to_dict()
    hw = doc["hardware"][0]
    assert counter.profile().name == hw["name"] == "h200-measured"
    for v in hw["variants"]:
        typed = counter.variant(v["name"])
        assert typed.weighted_time_us == v["weighted_time_us"]
        assert typed.coverage == v["coverage"]
        assert typed.kernel_only_gain == v["micro"]["gain"]
        assert [b.time_us for b in typed.buckets] == [b["time_us"] for b in v["buckets"]]
    fused = counter.variant("fused_chain")
    assert fused.bucket("tokens=4096").gain_vs_baseline == fused.buckets[2].gain_vs_baseline
    with pytest.raises(KeyError, match="fused_chain"):
        counter.variant("nope")


def test_records_one_row_per_hardware_variant_bucket(counter: sim.RunResult) -> None:
    rows = counter.to_records()
    n = sum(len(v.buckets) for h in counter.hardware for v in h.variants)
    assert len(rows) == n
    assert {"hardware", "variant", "bucket", "tokens", "time_us", "compute_us", "path"} <= set(rows[0])
    assert len(counter.summary_records()) == len(counter.hardware[0].variants)


def test_to_dataframe_with_pandas(counter: sim.RunResult) -> None:
    pd = pytest.importorskip("pandas")
    df = counter.to_dataframe()
    assert isinstance(df, pd.DataFrame) and len(df) == len(counter.to_records())


def test_to_dataframe_without_pandas_says_what_to_install(counter: sim.RunResult,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        counter.to_dataframe()


def test_root_names_stay_functions_after_the_cli_is_loaded() -> None:
    import sim.cli  # noqa: F401 - loads the subpackages

    assert sim.run is api.run and sim.load_scenario is api.load_scenario


def test_bad_input_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no_such.yaml"):
        sim.run(str(tmp_path / "no_such.yaml"))


def test_sweep_advise_replay(tmp_path: Path) -> None:
    res = api.sweep(str(tiny_scenario(tmp_path)), tmp_path / "out", workers=1)
    assert sum(res.summary["counts"].values()) == 6  # 2 profiles × 3 block sizes
    assert res.summary["counts"]["ok"] >= 1
    assert res.to_records() and {"hardware", "variant"} <= set(res.to_records()[0])
    advice = api.advise(str(COUNTER), hardware=["h200-sxm"])
    assert set(advice.recommendations) == {"h200-sxm"}
    row = advice.to_records()[0]
    assert len(advice.to_records()) == len(advice.to_dict()["hardware"][0]["variants"])
    assert row["hardware"] == "h200-sxm" and row["name"] == "fused_chain"
    assert row["decision"] == advice.to_dict()["hardware"][0]["variants"][0]["decision"]
    assert row["step_gain"] == advice.to_dict()["hardware"][0]["variants"][0]["figures"]["step_gain"]
    rp = api.replay(str(ROOT / "tests" / "fixtures" / "traces" / "mlp_compiled.json.gz"), "h200-measured")
    assert rp.measured_time_us is not None and rp.predicted_time_us == pytest.approx(rp.measured_time_us, rel=1e-6)
