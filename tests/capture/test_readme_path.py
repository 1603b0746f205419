"""The README's path from a model to a prediction (scripts/gen_docs.py, block capture-path)."""

from __future__ import annotations

import gzip
import os
import shlex
from pathlib import Path

import pytest

from sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "fixtures" / "capture" / "readme_gpt.bundle.json.gz"


def _readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- gen:capture-path -->\n```bash\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def _in(folder: Path, argv: list[str]) -> int:
    old = Path.cwd()
    os.chdir(folder)
    try:
        return main(argv)
    finally:
        os.chdir(old)


def test_readme_path_is_three_lines_and_runs_on_the_committed_recording(tmp_path: Path) -> None:
    lines = _readme_lines()
    assert len(lines) == 3 and lines[1].startswith("kernelsim capture ") and lines[2].startswith("kernelsim run ")
    (tmp_path / "gpt.bundle.json").write_bytes(gzip.decompress(RECORDING.read_bytes()))
    argv = shlex.split(lines[1])[1:]
    argv[1] = "gpt.bundle.json"
    assert _in(tmp_path, argv) == 0
    assert _in(tmp_path, shlex.split(lines[2])[1:]) == 0


@pytest.mark.torch
def test_readme_capture_line_writes_what_the_committed_recording_lowers_to(tmp_path: Path) -> None:
    lines = _readme_lines()
    live, saved = tmp_path / "live", tmp_path / "saved"
    live.mkdir()
    saved.mkdir()
    assert _in(live, shlex.split(lines[1])[1:]) == 0
    (saved / "gpt.bundle.json").write_bytes(gzip.decompress(RECORDING.read_bytes()))
    argv = shlex.split(lines[1])[1:]
    argv[1] = "gpt.bundle.json"
    assert _in(saved, argv) == 0
    assert (live / "gpt.yaml").read_text() == (saved / "gpt.yaml").read_text()
    assert (live / "gpt_run.yaml").read_text() == (saved / "gpt_run.yaml").read_text()
