"""Validation against committed H200 measurements: the thresholds hold, and the check can fail."""

from __future__ import annotations

import json
from pathlib import Path

from sim.cli import main


def test_validation_meets_thresholds(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    assert main(["validate", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert not doc["violations"]
    levels = {s["table"] for s in doc["summaries"]}
    assert levels == {"kernel", "kernels", "step", "host"}
    held_out = [s for s in doc["summaries"] if s["split"] == "held-out" and s["family"] != "all"]
    assert len(held_out) >= 8  # every family reports its held-out split


def test_validation_fails_with_a_profile_that_is_wrong(tmp_path: Path) -> None:
    # The datasheet profile (no calibration) must not pass the measured thresholds.
    assert main(["validate", "--profile", "h200-sxm"]) == 3


def test_validation_markdown(tmp_path: Path) -> None:
    md = tmp_path / "v.md"
    assert main(["validate", "--markdown", str(md)]) == 0
    text = md.read_text()
    assert "| family | split |" in text and "Gains over the baseline" in text and "Ranking" in text
