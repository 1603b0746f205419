"""Every command's terminal output at 80 and 120 columns: no number cut (issue 21).

The fast tests render the golden results (tests/golden/) at a given width and compare the numbers
printed with those printed 250 columns wide: the same numbers, none cut ("…"), no line wider than
the terminal. The slow test runs the real commands in tmux panes of 80 and 120 columns (what a user
sees; skipped where tmux is not installed) and reads the screen back with capture-pane.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
WIDTHS = (80, 120)
WIDE = 250
_GROUP_TITLE = re.compile(r"^\(\d+/\d+\)$")  # "(1/2)": a column group's title, only at narrow widths


def _golden(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def _render_run(width: int) -> str:
    from sim.report.tables import render_run

    return _capture(lambda c: render_run(_golden("run_bias_gelu_dropout.json"), c), width)


def _render_run_buckets(width: int) -> str:
    from sim.report.tables import render_run

    return _capture(lambda c: render_run(_golden("run_dp_mlp_8ranks.json"), c, buckets=True), width)


def _render_advise(width: int) -> str:
    from sim.report.advice import render_advice

    return _capture(lambda c: render_advice(_golden("advise_bias_gelu_dropout.json"), c), width)


def _render_serve(width: int) -> str:
    from sim.serving.report import render_serve

    return _capture(lambda c: render_serve(_golden("serve_serving_decode.json"), c), width)


def _render_sweep(width: int) -> str:
    from sim.sweep.runner import SweepOutcome
    from sim.sweep.tables import render_sweep_summary

    doc = _golden("sweep_sweep_block_size.sweep.json")
    summary = doc["summary"]
    # one point that did not run, with a long reason, so the not-run table is rendered too
    summary = {**summary, "not_run": [{"point": 7, "hardware": "h200-sxm", "params": {"ept": 64}, "status": "infeasible",
                                       "reason": "registers per thread 312 exceed the 255 the GPU allows at 1024 "
                                                 "threads per block"}]}
    plan = SimpleNamespace(scenario=SimpleNamespace(spec=SimpleNamespace(name=doc["scenario"])), points=doc["points"])
    outcome = SweepOutcome(records=doc["points"], rows=[], summary=summary, computed=len(doc["points"]), cached=0,
                           seconds=12.5)
    return _capture(lambda c: render_sweep_summary(plan, outcome, c), width)  # type: ignore[arg-type]


def _render_replay(width: int) -> str:
    from sim.report.replay import render_replay

    return _capture(lambda c: render_replay(_golden("replay_mlp_eager_predict.json"), c), width)


RENDERERS: dict[str, Callable[[int], str]] = {
    "run": _render_run, "run --buckets (comm)": _render_run_buckets, "advise": _render_advise,
    "serve": _render_serve, "sweep": _render_sweep, "replay": _render_replay,
}


def _capture(render: Callable[[Console], None], width: int) -> str:
    buf = io.StringIO()
    render(Console(file=buf, width=width, color_system=None, legacy_windows=False))
    return buf.getvalue()


def number_tokens(text: str) -> set[str]:
    """Every whitespace-separated word holding a digit, less the column groups' "(1/2)" titles."""
    return {w for w in text.split() if any(ch.isdigit() for ch in w) and not _GROUP_TITLE.match(w)}


def assert_fits(text: str, width: int, wide_text: str) -> None:
    assert "…" not in text, f"a cell was cut at {width} columns"
    too_long = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not too_long, f"{len(too_long)} lines wider than {width}: {too_long[0]!r}"
    missing = number_tokens(wide_text) - number_tokens(text)
    assert not missing, f"at {width} columns these numbers are not printed whole: {sorted(missing)[:10]}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", sorted(RENDERERS))
def test_every_number_printed_whole(view: str, width: int) -> None:
    render = RENDERERS[view]
    assert_fits(render(width), width, render(WIDE))


def test_number_check_catches_a_cut_cell() -> None:
    """The check above fails on what rich prints when a table is squeezed (the bug it guards against)."""
    from rich.table import Table

    t = Table()
    for col in ("variant", "time µs", "gain", "band"):
        t.add_column(col)
    t.add_row("compiled_with_a_long_name", "19427.7", "+1.5%", "[-21.3, +51.1]")

    def render(width: int) -> str:
        buf = io.StringIO()
        Console(file=buf, width=width, color_system=None).print(t)
        return buf.getvalue()
    with pytest.raises(AssertionError):
        assert_fits(render(30), 30, render(WIDE))


def test_piped_output_is_100_columns(tmp_path: Path) -> None:
    """Into a pipe, with no $COLUMNS: 100 columns, not a made-up 200."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-m", "sim", "advise", "scenarios/bias_gelu_dropout.yaml", "--hardware",
                          "h200-measured"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    widths = [len(line.rstrip()) for line in out.stdout.splitlines()]
    assert max(widths) <= 100 and max(widths) >= 90
    assert "…" not in out.stdout


# -- in a real terminal (tmux) -----------------------------------------------------------------------

COMMANDS: dict[str, str] = {
    "run": "kernelsim run scenarios/bias_gelu_dropout.yaml",
    "advise": "kernelsim advise scenarios/bias_gelu_dropout.yaml",
    "serve": "kernelsim serve scenarios/serving_decode.yaml",
    "sweep": "kernelsim sweep scenarios/sweep_block_size.yaml --workers 2 --out {tmp}/sweep",
    "validate": "kernelsim validate",
    "replay": "kernelsim replay tests/fixtures/traces/mlp_eager.json.gz --hardware h200-measured --mode predict",
}


def tmux_screen(command: str, width: int, cwd: Path, timeout_s: float = 400) -> tuple[str, int]:
    """Run `command` in a detached tmux pane `width` columns wide; (everything the pane showed, exit code)."""
    sock = Path(tempfile.mkdtemp(prefix="kernelsim-tmux-")) / "socket"  # a server of its own, removed after
    tmux = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    script = f"cd {cwd} && {command}; echo KS_EXIT=$?; exec sleep {int(timeout_s) + 60}"
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "50", "-s", "t", "sh", "-c", script],
                   env=env, check=True)
    try:
        subprocess.run([*tmux, "set-option", "-t", "t", "history-limit", "20000"], check=True)
        deadline = time.monotonic() + timeout_s
        screen = ""
        while time.monotonic() < deadline:
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "t", "-S", "-", "-E", "-"],
                                    capture_output=True, text=True, check=True).stdout
            m = re.search(r"KS_EXIT=(\d+)", screen)
            if m:
                return screen[:m.start()], int(m.group(1))
            time.sleep(1.0)
        raise AssertionError(f"{command!r} did not finish in {timeout_s} s; screen:\n{screen[-2000:]}")
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
        shutil.rmtree(sock.parent, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_real_terminal_shows_no_cut_number(name: str, width: int, tmp_path: Path) -> None:
    screen, code = tmux_screen(COMMANDS[name].format(tmp=tmp_path), width, ROOT)
    assert code in (0, 3), f"exit {code}:\n{screen[-3000:]}"  # validate exits 3 when a tripwire is exceeded
    assert "…" not in screen, f"{name} at {width} columns cut a cell:\n{screen}"
    assert "Traceback" not in screen
    lines = [line for line in screen.splitlines() if line.strip()]
    assert len(lines) > 5 and max(len(line.rstrip()) for line in lines) <= width


def test_sweep_summary_never_calls_a_losing_variant_best() -> None:
    from sim.report.tables import pct

    best = _golden("sweep_sweep_block_size.sweep.json")["summary"]["best"]
    assert any(b["gain"] < 0 for b in best)  # the shipped sweep has a profile where no variant wins
    lines = [" ".join(line.split()) for line in _render_sweep(WIDE).splitlines()]
    assert not any("best" in line for line in lines)
    for b in best:
        (row,) = [line for line in lines if line.startswith(f"{b['hardware']} {b['variant']} ")]
        assert pct(b["gain"]) in row
        assert row.endswith("loses everywhere" if b["gain"] <= 0 else "wins"), row


@pytest.mark.parametrize("argv", [
    ["run", "scenarios/counter_case_fusion.yaml", "--hardware", "h200-sxm", "--quiet"],
    ["run", "scenarios/counter_case_fusion.yaml", "--hardware", "h200-sxm", "--quiet", "--plots", "{tmp}/p",
     "--report", "{tmp}/r", "--kineto", "{tmp}/k"],
    ["replay", "tests/fixtures/traces/mlp_eager.json.gz", "--hardware", "h200-measured"],
    ["import-trace", "tests/fixtures/traces/mlp_eager.json.gz", "-o", "{tmp}/w.yaml"],
    ["serve", "scenarios/serving_decode.yaml", "--rates", "20", "--requests", "60", "--quiet", "--plots", "{tmp}/s"],
])
def test_long_steps_show_a_spinner(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step that can take seconds (simulating, drawing plots, reading a trace) runs under a spinner
    (sim.report.progress.busy; on a terminal only). sweep has its progress bar, validate and calibrate
    the same spinner (sim/commands_calibrate.py)."""
    import contextlib

    import sim.report.progress as progress
    from sim.cli import main

    shown: list[str] = []

    def busy(text: str) -> contextlib.AbstractContextManager[None]:
        shown.append(text)
        return contextlib.nullcontext()

    monkeypatch.setattr(progress, "busy", busy)
    monkeypatch.chdir(ROOT)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([a.format(tmp=tmp_path) for a in argv]) == 0
    expected = 1 + sum(1 for flag in ("--plots", "--kineto") if flag in argv)
    assert len(shown) == expected, shown


def test_serve_prints_tpot_to_hundredths_of_a_ms() -> None:
    """TPOT is under a millisecond: 0.1 ms steps would hide a 10 % difference."""
    text = _render_serve(WIDE)
    for hw in _golden("serve_serving_decode.json")["hardware"]:
        for v in hw["variants"]:
            for p in v["points"]:
                assert f"{p['tpot_ms']['p50']:.2f} / {p['tpot_ms']['p99']:.2f}" in text
