"""Error messages keep their text (no markup swallowed) and point to options that exist (issue 21)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from sim.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _options(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[command]  # type: ignore[attr-defined]
    return {s for a in parser._actions for s in a.option_strings}


def test_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as when the extra is missing
    code = main(["sweep", str(ROOT / "scenarios" / "sweep_block_size.yaml"), "--executor", "dask",
                 "--out", str(tmp_path / "out"), "--quiet", "--no-plots"])
    err = capsys.readouterr().err
    assert code == 2
    assert "pip install 'kernelsim[distributed]'" in err


def test_error_text_with_brackets_is_printed_literally(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "[red]no_such[/red].yaml"
    assert main(["run", str(missing)]) == 2
    assert "[red]no_such[/red].yaml" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "command"), [
    (["calibrate", "--out", "PROFILE.yaml"], "calibrate"),
    (["validate", "--measure"], "validate"),
])
def test_gpu_messages_point_to_options_that_exist(argv: list[str], command: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("torch", "triton")
                        else real(name, *a))
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install 'kernelsim[gpu]'" in err
    # every option the message suggests exists on the command it names (or on this command)
    for cmd, opts in re.findall(r"kernelsim (\w+)((?: --?[\w-]+(?: [A-Z]+)?)*)", err):
        for opt in re.findall(r"--[\w-]+", opts):
            assert opt in _options(cmd), (cmd, opt, err)
    flags = set(re.findall(r"--[\w-]+", err))
    known = set().union(*(_options(c) for c in ("calibrate", "validate")))
    assert flags <= known, flags - known
    if command == "validate":
        assert "--from-raw" not in err


def test_missing_torch_for_capture_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import fails as when the extra is missing
    code = main(["capture", "sim.capture.examples:mlp", "--param", "batch=8", "-o", str(tmp_path / "w.yaml")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "pip install 'kernelsim[torch]'" in err
