"""Validation against committed H200 measurements: the gates hold, and the check can fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str, Path]:
    """One offline validation run (it simulates every case twice): exit code, JSON, Markdown, band file."""
    d = tmp_path_factory.mktemp("validate")
    rc = main(["validate", "--json", str(d / "v.json"), "--markdown", str(d / "v.md"),
               "--write-bands", str(d / "bands.yaml")])
    return rc, json.loads((d / "v.json").read_text()), (d / "v.md").read_text(), d / "bands.yaml"


def test_validation_meets_its_tripwires(validated: tuple[int, dict[str, Any], str, Path]) -> None:
    rc, doc, _, _ = validated
    assert rc == 0 and not doc["violations"]
    levels = {s["table"] for s in doc["summaries"]}
    assert {"kernel", "kernels", "step", "host"} <= levels
    unseen = [s for s in doc["summaries"] if s["split"] == "unseen" and s["family"] != "all"]
    assert len(unseen) >= 8  # families report their unseen-shape split
    # Step cases run as shipped and with their correction-table points removed.
    steps = {(r["family"], r["split"]) for r in doc["rows"] if r["table"] == "step"}
    assert ("serving_decode/baseline", "unseen") in steps and ("serving_decode/baseline", "calibrated") in steps
    # The eager decode step misses its goal, loudly, without failing validation.
    assert any(g.startswith("step/serving_decode/baseline/unseen: median_abs") for g in doc["gates"]["goals_not_met"])
    assert [u["group"] for u in doc["gates"]["ungated"]] == ["kernel/gemm/calibrated"]
    for key in ("time/leave_one_out", "gain/leave_one_out"):
        c = doc["band_coverage"][key]
        assert c["n"] > 0 and 0.0 <= c["share"] <= 1.0


def test_exact_correction_points_are_calibrated_not_held_out(validated: tuple[int, dict[str, Any], str, Path]) -> None:
    # A GEMM whose shape is in the correction table is "calibrated" whatever its record split; the
    # calibrated GEMMs reproduce their measurement (the lookup), the unseen ones do not.
    by = {(s["table"], s["family"], s["split"]): s for s in validated[1]["summaries"]}
    assert by[("kernel", "gemm", "calibrated")]["median_abs"] < 0.001
    assert by[("kernel", "gemm", "unseen")]["median_abs"] > 0.02


def test_committed_band_file_is_what_validate_writes(validated: tuple[int, dict[str, Any], str, Path]) -> None:
    written = yaml.safe_load(validated[3].read_text())
    committed = yaml.safe_load((Path(__file__).resolve().parent.parent / "validation" / "bands.yaml").read_text())
    assert written == committed  # regenerate with `kernelsim validate --write-bands`


def test_validation_fails_with_a_profile_that_is_wrong(tmp_path: Path) -> None:
    # The datasheet profile (no calibration) must not pass the measured tripwires.
    assert main(["validate", "--profile", "h200-sxm"]) == 3


def test_validation_markdown(validated: tuple[int, dict[str, Any], str, Path]) -> None:
    text = validated[2]
    assert "| family | unseen n |" in text and "Gains over the baseline" in text and "Ranking" in text
    assert "## Band coverage" in text and "## Gates" in text and "ungated: kernel/gemm/calibrated" in text


def test_a_used_record_counts_in_its_fits_raw_group_only() -> None:
    # an l2_cold copy and the copy group's event-timed copy of the same size share a record id
    from types import SimpleNamespace

    from sim.validate.core import _used_by_group

    raw = SimpleNamespace(groups={"copy": SimpleNamespace(file="raw/copy.json"),
                                  "l2_cold": SimpleNamespace(file="raw/l2_cold.json")})
    result = SimpleNamespace(values=[SimpleNamespace(raw="raw/l2_cold.json", used={"abc"}),
                                     SimpleNamespace(raw="", used={"def"})],
                             gemm_correction=[{"id": "ghi"}])
    assert _used_by_group(raw, result) == {("l2_cold", "abc"), ("copy", "def"), ("l2_cold", "def"),
                                           ("copy", "ghi"), ("l2_cold", "ghi")}
