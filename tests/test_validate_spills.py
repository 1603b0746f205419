"""sim.validate.spills on the committed data: every spilling held-out config gets a regime from the
model's own footprint, the backward kernels at 64 elements per thread are the l1_edge regime, and the
switch-off column is the shipped price."""

from __future__ import annotations

import dataclasses

import pytest

from sim.hardware import load_profile
from sim.validate.spills import (
    REGIMES,
    regime,
    regime_rows,
    regime_table,
    spill_sources,
    switch_profiles,
)
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def rows():  # type: ignore[no-untyped-def]
    return regime_rows(load_profile("h200-measured"), ROOT)


def test_the_l1_edge_regime_is_the_backward_kernels_at_64_elements_per_thread() -> None:
    hw = load_profile("h200-measured")
    cases = spill_sources(ROOT)["C"]
    edge = [c for c in cases if regime(c, hw) == "l1_edge"]
    assert edge and all(c.record["kernel"].endswith("_bwd") for c in edge)
    assert {int(c.record["BLOCK"]) // (32 * int(c.record["num_warps"])) for c in edge} == {64}
    # the same configs' forward kernels fit in L1 with their loads in flight
    fwd = [c for c in cases if c.record["kernel"].endswith("_fwd") and int(c.record["n_regs"]) == 255]
    assert fwd and {regime(c, hw) for c in fwd} == {"l1"}


def test_the_switch_off_column_is_the_shipped_price_and_the_on_profile_is_refitted(rows) -> None:  # type: ignore[no-untyped-def]
    hw = load_profile("h200-measured")
    off, on = switch_profiles(hw, ROOT)
    assert off == dataclasses.replace(hw, spill_l1_partial=False) and hw.spill_l1_partial is False
    assert on.spill_l1_partial is True
    row = next(r for r in rows if r.source == "A" and r.regime == "offchip")
    case = next(c for c in spill_sources(ROOT)["A"] if c.label == row.labels[0])
    assert row.error_off[0] == pytest.approx(case.predicted_us(hw) / case.measured_us - 1)
    assert {r.regime for r in rows} <= set(REGIMES)
    assert {r.source for r in rows} >= {"A", "C", "F", "w4", "calibration"}


def test_regime_table_has_a_line_per_row(rows) -> None:  # type: ignore[no-untyped-def]
    table = regime_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    assert table[2].startswith(f"| {rows[0].source} | {rows[0].regime} | {len(rows[0].labels)} | ")
