"""`kernelsim calibrate --host reference` (issue 16): a calibration keeps a reference profile's whole host
section instead of the host constants of its own VM at the moment, and says what it measured."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.calibrate.fit import calibrate_from_raw
from sim.cli import main
from sim.errors import InputError
from sim.hardware import load_profile
from tests.conftest import ROOT

FRESH = ROOT / "calibration" / "h200" / "wave12_M" / "raw"  # machine M: a fresh calibration's host_costs
BASE = ROOT / "hardware_profiles" / "h200-sxm.yaml"
MEASURED = ROOT / "hardware_profiles" / "h200-measured.yaml"


def _raw(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir(parents=True)
    for group in ("copy", "host_costs"):
        shutil.copy(FRESH / f"{group}.json", raw / f"{group}.json")
    return raw


def _numbers(node: Any, prefix: str = "") -> dict[str, float]:
    """Every number of a profile section by dotted key (measured or not)."""
    out: dict[str, float] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("n", "calls", "tensors"):
                out[f"{prefix}{k}"] = float(v)
            else:
                out.update(_numbers(v, f"{prefix}{k}."))
    return out


def test_reference_host_keeps_the_reference_host_section_and_notes_the_own_values(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    fitted_text, fitted = calibrate_from_raw(raw, BASE, tmp_path / "f.yaml", "f", spreads=False)
    text, result = calibrate_from_raw(raw, BASE, tmp_path / "r.yaml", "r", spreads=False, host="reference",
                                      host_reference=MEASURED)
    doc, fdoc, ref = yaml.safe_load(text), yaml.safe_load(fitted_text), yaml.safe_load(MEASURED.read_text())
    # every host number is the reference's, none of this raw folder's
    assert _numbers(doc["host"]) == _numbers(ref["host"])
    assert not any(f.section.startswith("host") for f in result.values)
    own = fdoc["host"]["eager_op_us_by_kind"]["gemm"]["value"]
    assert own != ref["host"]["eager_op_us_by_kind"]["gemm"]["value"]
    note = doc["host"]["eager_op_us_by_kind"]["gemm"]["note"]
    assert f"this calibration measured {own:g} here" in note and "x the reference's" in note
    # the GPU side is what the raw folder gives, as without the option
    assert {k: v for k, v in doc.items() if k not in ("host", "name", "description")} == \
        {k: v for k, v in fdoc.items() if k not in ("host", "name", "description")}
    # raw paths of the kept entries still name the reference's raw folders, from where this profile is written
    assert (tmp_path / doc["host"]["eager_op_us"]["raw"]).resolve() == (ROOT / "calibration/h200/raw/host_costs.json")
    out = tmp_path / "r.yaml"
    out.write_text(text)
    assert load_profile(str(out)).host_clock_us == pytest.approx(ref["host"]["clock_us"]["value"])


def test_reference_host_needs_a_reference_profile_and_a_known_mode(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="needs a reference profile"):
        calibrate_from_raw(_raw(tmp_path), BASE, tmp_path / "r.yaml", "r", spreads=False, host="reference")
    with pytest.raises(InputError, match="unknown host mode"):
        calibrate_from_raw(_raw(tmp_path / "b"), BASE, tmp_path / "r.yaml", "r", spreads=False, host="mine")


def test_calibrate_command_host_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _raw(tmp_path)
    out = tmp_path / "mine.yaml"
    assert main(["calibrate", "--from-raw", str(raw), "--out", str(out), "--host", "reference"]) == 0
    assert "host constants kept from h200-measured" in capsys.readouterr().out
    assert main(["calibrate", "--from-raw", str(raw), "--out", str(tmp_path / "x.yaml"), "--host", "reference",
                 "--host-reference", "no-such-profile"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err and not (tmp_path / "x.yaml").exists()
