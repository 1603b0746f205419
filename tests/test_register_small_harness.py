"""The register_small harness (issue 18) on CPU: its plan and its command line, without a GPU."""

from __future__ import annotations

import pytest

from sim.calibrate.gpu import register_small as rs


def test_the_plan_measures_small_grids_first_then_16_warp_blocks_at_the_calibration_hidden_size() -> None:
    cases = rs.plan()
    parts = [c[0] for c in cases]
    assert parts == sorted(parts, key=lambda p: p != "small")  # every small-grid case before any 16-warp one
    for part, tokens, block, warps in cases:
        assert 1 <= block / (32 * warps) <= 128  # a thread holds 1..128 elements, as the register sweep
        grid = tokens * rs.HIDDEN // block
        if part == "small":
            assert tokens in rs.SMALL_TOKENS and grid <= 2048  # at most 16 blocks per SM on 132 SMs
        else:
            assert warps == 16 and tokens in rs.W16_TOKENS
    # the grids reach one block on fewer SMs than the GPU has (8 tokens x 16384 / BLOCK 16384 = 8)
    assert min(t * rs.HIDDEN // b for _, t, b, _ in cases) == 8
    assert len(rs.plan(smoke=True)) == 2


def test_dry_run_prints_the_plan_and_a_bad_budget_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert rs.main(["--out", "unused", "--dry-run"]) == 0
    assert "64 cases (52 small-grid, 12 16-warp)" in capsys.readouterr().out
    assert rs.main(["--out", "unused", "--budget-s", "0"]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["error: --budget-s: 0.0 (expected a positive number of seconds)"]


def test_a_full_calibration_measures_register_small_and_quick_says_why_it_skips_it() -> None:
    from sim.calibrate.gpu.calibrate_all import QUICK_SKIPS, steps

    full = [" ".join(cmd[2:]) for cmd in steps("OUT", quick=False)]
    assert "sim.calibrate.gpu.register_small --out OUT --budget-s 45" in full
    assert not any("register_small" in " ".join(cmd) for cmd in steps("OUT", quick=True))
    assert "register_small" in QUICK_SKIPS
