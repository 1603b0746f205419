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


def test_the_fit_plan_is_the_spilling_small_grid_configs_and_the_16_warp_part(capsys: pytest.CaptureFixture[str]) -> None:
    """The committed register_small records the shipped fits read are in the fit plan."""
    import dataclasses
    from pathlib import Path

    from sim.calibrate.raw import load_raw
    from sim.calibrate.unit_fit import _footprint_overflows, _register_cases
    from sim.hardware import load_profile

    fit = rs.plan(fit_only=True)
    small = [c for c in fit if c[0] == "small"]
    assert {(b, w) for _, _, b, w in small} == set(rs.FIT_CONFIGS)
    assert len(small) == len(rs.FIT_CONFIGS) * len(rs.SMALL_TOKENS) and set(fit) <= set(rs.plan())
    # the 16-warp part, whole: the knee and instruction fits read it (unit_fit.KNEE_GROUPS); every committed
    # 16-warp record of the training split is in the plan
    assert {c for c in fit if c[0] == "w16"} == {c for c in rs.plan() if c[0] == "w16"}
    hw = load_profile("h200-measured")
    raw = load_raw(Path(__file__).resolve().parents[1] / "calibration" / "h200" / "raw")
    g = raw.groups["register_small"]
    every = _register_cases(dataclasses.replace(raw, groups={"register_small": g}), ("register_small",))  # training split
    read = {(c.record["tokens"], c.record["BLOCK"], c.record["num_warps"]) for c in every
            if c.record.get("n_spills") and _footprint_overflows(c, hw)}
    assert read <= {(t, b, w) for _, t, b, w in fit} and {(b, w) for _, b, w in read} == set(rs.FIT_CONFIGS)
    assert rs.main(["--out", "unused", "--dry-run", "--fit-only"]) == 0
    w16 = {("w16", c.record["tokens"], c.record["BLOCK"], c.record["num_warps"]) for c in every
           if c.record.get("part") == "w16"}
    assert w16 and w16 <= set(fit)
    assert "16 cases (4 small-grid, 12 16-warp)" in capsys.readouterr().out


def test_a_full_calibration_measures_the_fit_plan_in_fit_groups_and_quick_says_why_it_skips_it(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from sim.calibrate.gpu import common, fit_groups
    from sim.calibrate.gpu.calibrate_all import QUICK_SKIPS, steps

    assert not any("register_small" in " ".join(cmd) for cmd in steps("OUT", quick=False))  # no process of its own
    assert any(cmd[2] == "sim.calibrate.gpu.fit_groups" for cmd in steps("OUT", quick=False))
    assert not any("fit_groups" in " ".join(cmd) for cmd in steps("OUT", quick=True))
    assert "register_small" in QUICK_SKIPS
    # fit_groups runs attention, math, then the fit plan with what is left of its budget
    called: list[tuple[str, float, bool]] = []
    fake_torch = types.SimpleNamespace(backends=types.SimpleNamespace(cuda=types.SimpleNamespace(
        matmul=types.SimpleNamespace(allow_tf32=True))))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(common, "warm_gpu", lambda seconds=1.5: 0.0)
    monkeypatch.setattr(common, "collect_meta", lambda extra=None: {"gpu_name": "fake", **(extra or {})})
    monkeypatch.setattr(common, "_nvidia_smi_query", lambda: {})
    from sim.calibrate.gpu import heldout_kernels as H

    monkeypatch.setattr(H, "run_attention", lambda c, shapes=None: called.append(("attention", 0.0, False)))
    monkeypatch.setattr(H, "run_math", lambda c, eager=True: called.append(("math", 0.0, False)))
    monkeypatch.setattr(common, "guarded", lambda rf, where, fn: fn())
    monkeypatch.setattr(rs, "measure", lambda out, budget_s, smoke=False, fit_only=False:
                        called.append(("register_small", budget_s, fit_only)))
    assert fit_groups.main(["--out", str(tmp_path), "--budget-s", "60"]) == 0
    assert [c[0] for c in called] == ["attention", "math", "register_small"]
    assert called[-1][2] is True and 50 < called[-1][1] <= 60
