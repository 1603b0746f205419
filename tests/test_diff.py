"""`kernelsim diff A.json B.json` (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCN = ROOT / "scenarios" / "counter_case_fusion.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("diff")
    a, b = d / "a.json", d / "b.json"
    assert main(["run", str(SCN), "--hardware", "h200-sxm", "--json", str(a), "--quiet"]) == 0
    assert main(["run", str(SCN), "--hardware", "h200-measured", "--json", str(b), "--quiet"]) == 0
    return a, b


def test_diff_pairs_profiles_and_prints_both_times(runs: tuple[Path, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--pair-profiles", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    diff = json.loads(out.read_text())
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    n_buckets = sum(len(v["buckets"]) + 1 for v in da["hardware"][0]["variants"])
    assert len(diff["rows"]) == n_buckets
    for row in diff["rows"]:
        assert row["change"] == pytest.approx(row["b_time_us"] / row["a_time_us"] - 1)
        assert f"{row['a_time_us']:.1f}" in text and f"{row['b_time_us']:.1f}" in text
    weighted = next(r for r in diff["rows"] if r["variant"] == "fused_chain" and r["bucket"] == "weighted")
    assert weighted["b_gain"] == db["hardware"][0]["variants"][1]["gain_vs_baseline"]
    assert "h200-sxm (A) vs h200-measured (B)" in text


def test_diff_of_a_run_with_itself_is_zero(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(a), "--json", str(out)]) == 0
    diff = json.loads(out.read_text())
    assert diff["rows"] and all(r["change"] == 0 for r in diff["rows"])
    assert not diff["only_a"] and not diff["only_b"]


def test_diff_bad_inputs_exit_2(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    assert main(["diff", str(a), str(b)]) == 2  # different profiles, not paired: nothing in common
    assert "no hardware × variant × bucket in common" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "kernelsim.advice/v1"}))
    assert main(["diff", str(a), str(other)]) == 2
    err = capsys.readouterr().err
    assert "kernelsim.advice/v1" in err and "kernelsim.run/v1" in err and "Traceback" not in err
    assert main(["diff", str(a), str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
