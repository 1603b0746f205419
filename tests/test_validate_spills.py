"""sim.validate.spills on the committed data: every spilling held-out config gets a regime from the
model's own footprint, the backward kernels at 64 elements per thread are the l1_edge regime, each rule is
priced with its own refitted constants, and the shipped profile is the accesses rule as calibration fits it."""

from __future__ import annotations

import pytest

from sim.hardware import load_profile
from sim.validate.spills import (
    REGIMES,
    RULES,
    regime,
    regime_rows,
    regime_table,
    rule_profiles,
    shipped_rule,
    spill_sources,
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


def test_each_rule_is_refitted_and_the_shipped_profile_is_the_accesses_rule_refitted(rows) -> None:  # type: ignore[no-untyped-def]
    hw = load_profile("h200-measured")
    profiles = rule_profiles(hw, ROOT)
    assert set(profiles) == set(RULES) and shipped_rule(hw) == "accesses"
    assert (profiles["l1_partial"].spill_l1_partial, profiles["l1_partial"].spill_traffic_from_accesses) == (True, False)
    assert (profiles["footprint"].spill_l1_partial, profiles["footprint"].spill_traffic_from_accesses) == (False, False)
    # the shipped constants are what calibration fits under the shipped rule (no hand-set number)
    acc = profiles["accesses"]
    for attr in ("spill_bps", "spill_offchip_bps", "spill_inflight_bytes_per_thread", "spill_offchip_traffic_ratio"):
        assert getattr(acc, attr) == pytest.approx(getattr(hw, attr), rel=1e-9), attr
    # the footprint rule refitted is the profile shipped before (issue 18's ninth pass)
    assert profiles["footprint"].spill_offchip_bps == pytest.approx(1586e9)
    assert profiles["footprint"].spill_inflight_bytes_per_thread == pytest.approx(24.8)
    row = next(r for r in rows if r.source == "A" and r.regime == "offchip")
    case = next(c for c in spill_sources(ROOT)["A"] if c.label == row.labels[0])
    assert row.errors["accesses"][0] == pytest.approx(case.predicted_us(hw) / case.measured_us - 1)
    assert {r.regime for r in rows} <= set(REGIMES)
    assert {r.source for r in rows} >= {"A", "C", "F", "w4", "calibration"}


def test_counting_accesses_prices_the_offchip_regime_better_on_every_held_out_machine(rows) -> None:  # type: ignore[no-untyped-def]
    import statistics

    for r in rows:
        if r.regime == "offchip" and r.source in ("A", "C", "F", "w4"):
            med = {rule: statistics.median(abs(e) for e in r.errors[rule]) for rule in RULES}
            assert med["accesses"] < med["footprint"] - 0.05, (r.source, med)


def test_regime_table_has_a_line_per_row(rows) -> None:  # type: ignore[no-untyped-def]
    table = regime_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    assert table[2].startswith(f"| {rows[0].source} | {rows[0].regime} | {len(rows[0].labels)} | ")
    assert "accesses (shipped)" in regime_table(rows, "accesses").splitlines()[0]
