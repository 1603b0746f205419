"""The four rules for a GEMM beside SM holders that release part-way (sim.calibrate.gemm_release_fit),
on hand-computed cases, and the command on a hand-made raw file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from sim.calibrate.gemm_release_fit import main, release_cells, slowdown


def test_rules_on_a_two_round_gemm_released_after_its_time_alone() -> None:
    # 256 units on 132 SMs: 132 CTAs, 2 units each (tau = 95 us of T = 190); 24 SMs held until 200 us
    assert slowdown("static", 190.0, 256, 132, 24, 200.0) == pytest.approx(2.0)  # left-out CTAs start at T
    # dynamic: 108 CTAs do 108 + 108 units by 190 us, the 40 left in one more round: 285 us
    assert slowdown("dynamic", 190.0, 256, 132, 24, 200.0) == pytest.approx(285 / 190)
    # share: 108/132 of the speed until 200 us (163.6 us of work), then 26.4 us more
    assert slowdown("share", 190.0, 256, 132, 24, 200.0) == pytest.approx((200 + 190 - 200 * 108 / 132) / 190)
    # rounds: 1.5 x slower (3 rounds for 2) until 200 us: 133.3 us of work done, 56.7 us left
    assert slowdown("rounds", 190.0, 256, 132, 24, 200.0) == pytest.approx((200 + 190 - 200 / 1.5) / 190)


def test_rules_agree_on_no_overlap_and_differ_on_an_early_release() -> None:
    for rule in ("share", "rounds", "static", "dynamic"):
        assert slowdown(rule, 100.0, 512, 132, 24, 0.0) == 1.0
        assert slowdown(rule, 100.0, 512, 132, 0, 50.0) == 1.0
    # 512 units (4 per CTA, tau 25 us), released at 10 us: static pays the 10 us; dynamic: the 24 late CTAs
    # run 10 us out of phase (units end at 35, 60, 85 us) and take the last 8 units at 85 us: also 110 us
    assert slowdown("static", 100.0, 512, 132, 24, 10.0) == pytest.approx(1.1)
    assert slowdown("dynamic", 100.0, 512, 132, 24, 10.0) == pytest.approx(1.1)
    # ... but with 480 units the resident CTAs finish the queue alone: 108 x 4 + 24 x 2 = 480 by 100 us
    assert slowdown("dynamic", 100.0, 480, 132, 24, 10.0) == pytest.approx(1.0)
    assert slowdown("static", 100.0, 480, 132, 24, 10.0) == pytest.approx(1.1)
    # held throughout: dynamic = ceil(512 / 108) rounds of 25 us
    assert slowdown("dynamic", 100.0, 512, 132, 24, math.inf) == pytest.approx(5 * 25 / 100)
    # fewer units than SMs left free: nothing is left out
    assert slowdown("static", 100.0, 100, 132, 24, 50.0) == 1.0
    with pytest.raises(ValueError, match="unknown rule 'x'"):
        slowdown("x", 1.0, 1, 1, 1, 1.0)


def _doc() -> dict[str, Any]:
    cells = [{"spin_kernels": 24, "release_fraction": 0.5, "hold_us": 50.0, "gemm_us": 160.0,
              "release_after_start_us": 52.0, "samples_us": [160.0]},
             {"spin_kernels": 24, "release_fraction": "hold", "hold_us": 500.0, "gemm_us": 125.0,
              "release_after_start_us": 400.0, "samples_us": [125.0]}]
    return {"records": [{"bench": "gemm_release", "m": 4096, "n": 4096, "k": 2048, "alone_us": 100.0, "cells": cells}]}


def test_cells_read_release_and_hold(tmp_path: Path, capsys: Any) -> None:
    cells = release_cells(_doc())
    assert [(c.fraction, c.release_us, c.measured) for c in cells] == [(0.5, 52.0, 1.6), (None, math.inf, 1.25)]
    raw = tmp_path / "gemm_release.json"
    raw.write_text(json.dumps(_doc()))
    assert main([str(raw)]) == 0
    out = capsys.readouterr().out
    assert "rms log error: share" in out and "released cells only" in out
    raw.write_text("{}")
    assert main([str(raw)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_unit_loss_slope_reads_the_loss_per_unit_time() -> None:
    from sim.calibrate.gemm_release_fit import ReleaseCell, unit_loss_slopes
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    # 4096x4096x2048: 512 units, 4 a CTA; a loss of 1.5 units (x1.375) held throughout, half of it at 0.5 T
    cells = [ReleaseCell(4096, 4096, 2048, 24, None, 100.0, math.inf, 1.375),
             ReleaseCell(4096, 4096, 2048, 24, 0.5, 100.0, 50.0, 1.1875)]
    assert unit_loss_slopes(cells, hw) == {(4096, 4096, 2048, 24): pytest.approx(1.5)}


def test_loss_rule_and_its_fit_recover_the_loss_that_made_the_cells() -> None:
    from sim.calibrate.gemm_release_fit import ReleaseCell, fit_release_loss
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    # 512 units (4 a CTA): a loss of L units x min(release / T, 1), L = 1.2 on one shape and 1.8 on the
    # other two: the median of the three slopes is 1.8
    cells = []
    for (m, n, k), loss in (((4096, 4096, 2048), 1.2), ((8192, 4096, 2048), 1.8), ((4096, 2048, 4096), 1.8)):
        units = 512 if m == 4096 and n == 4096 else 1024 if m == 8192 else 256
        own = math.ceil(units / 132)
        for frac in (0.25, 0.5, 1.0, None):
            x = 1.0 if frac is None else frac
            cells.append(ReleaseCell(m, n, k, 24, frac, 100.0, math.inf if frac is None else 100.0 * frac,
                                     1.0 + loss * x / own))
    fit = fit_release_loss(cells, hw)
    assert fit is not None and fit.value == pytest.approx(1.8) and fit.n == 12
    assert fit.spread[0] <= 1.8 <= fit.spread[1] and fit.spread[0] >= 1.2 - 1e-9
    # the rule with L = 1.2 reproduces the first shape's cells
    for c in cells[:4]:
        assert slowdown("loss", c.alone_us, 512, 132, 24, c.release_us, 1.2) == pytest.approx(c.measured)
    assert fit_release_loss([], hw) is None
