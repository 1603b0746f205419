"""Spilling Triton configs on held-out data, by spill regime, under three spill rules (issue 18). Read by
scripts/spill_l1_check.py and docs/spills.md's generated table.

Every fused bias+GELU+dropout record that spills (Triton n_spills > 0) of the held-out machines A, C
(validation/h200/heldout_kernels), F (validation/h200/machine_F, held out by machine) and wave 4 (clean L2),
and of the calibration's register groups (the shipped raw folder and machine M's, calibration/h200/wave12_M),
priced under each rule with the profile's spill constants refitted on the shipped raw folder under that rule
(sim.calibrate.unit_fit.fit_spills), as a calibration with it would fit them:

- `footprint`: every spill area (4 × n_spills bytes per thread) stored once and loaded once, at L1's rate
  while the resident threads' areas fit in L1, else off chip (both switches off: the rule shipped until
  issue 18's tenth pass);
- `l1_partial`: `memory.spill_l1_partial` on (a footprint past L1 sends a miss share off chip);
- `accesses`: `memory.spill_traffic_from_accesses` on: the compiled kernel's local loads + stores per thread
  (ptxas -v, compiled offline: calibration/h200/spill_traffic, sim.calibrate.spill_traffic).

Regimes, from the model's own footprint:

- `l1`: spills whose footprint (every resident thread's spill area) fits in L1, also with the input lines
  of the threads' loads in flight added;
- `l1_edge`: spills that fit alone but not with the loads in flight (the backward kernels at 64 elements
  per thread, 238-242 spilled words);
- `offchip`: spills past L1 on their own (the allocator's 32-register configs of 128+ elements per thread).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.calibrate.cases import Case
from sim.calibrate.heldout_cases import heldout_cases
from sim.calibrate.raw import load_raw
from sim.hardware import Hardware

REGIMES = ("l1", "l1_edge", "offchip")


RULES = ("footprint", "l1_partial", "accesses")


@dataclass(frozen=True)
class RegimeRow:
    """One source's configs of one spill regime: relative errors (predicted / measured - 1) per rule."""

    source: str
    regime: str
    labels: tuple[str, ...]
    measured_us: tuple[float, ...]
    errors: dict[str, tuple[float, ...]]


def regime(case: Case, hw: Hardware) -> str:
    """The spill regime of one spilling config (see the module docstring)."""
    plain = dataclasses.replace(hw, spill_l1_partial=False, spill_traffic_from_accesses=False)
    if case.predict(plain)[0].detail["spill_offchip"]:
        return "offchip"
    on = case.predict(dataclasses.replace(plain, spill_l1_partial=True))[0].detail
    return "l1_edge" if on["spill_offchip"] else "l1"


def _heldout(path: Path, keep: Any = None) -> list[Case]:
    out: list[Case] = []
    if not path.is_file():
        return out
    for case in heldout_cases(path):
        rec = case.record
        if case.family != "fused_heldout" or case.measured_us <= 0 or not rec.get("n_spills"):
            continue
        if keep is not None and not keep(rec):
            continue
        if rec.get("timing") == "profiled":  # a Triton kernel timed by the profiler (wave 4)
            case = dataclasses.replace(case, profiled=True)
        out.append(case)
    return out


def spill_sources(root: Path) -> dict[str, list[Case]]:
    """The spilling configs of each held-out machine and calibration folder (see the module docstring)."""
    from sim.calibrate.unit_fit import _register_cases
    from sim.validate.wave2 import WAVE4_KERNELS

    heldout = root / "validation" / "h200"
    out = {
        "A": _heldout(heldout / "heldout_kernels" / "A.json"),
        "C": _heldout(heldout / "heldout_kernels" / "C.json"),
        "F": _heldout(heldout / "machine_F" / "heldout_kernels.json"),
        "w4": _heldout(root / WAVE4_KERNELS, lambda r: r.get("l2_state") == "clean" and not r.get("uneven_calls")),
    }
    for name, raw_dir in (("calibration", root / "calibration" / "h200" / "raw"),
                          ("calibration M", root / "calibration" / "h200" / "wave12_M" / "raw")):
        if raw_dir.is_dir():
            out[name] = [c for c in _register_cases(load_raw(raw_dir)) if c.record.get("n_spills") and c.measured_us > 0]
    return {k: v for k, v in out.items() if v}


def refit_spills(hw: Hardware, raw_dir: Path) -> Hardware:
    """The profile with its spill constants fitted again on `raw_dir` under its own switches."""
    from sim.calibrate.unit_fit import fit_spills

    scale = {"spill_gbps": ("spill_bps", 1e9), "spill_offchip_gbps": ("spill_offchip_bps", 1e9),
             "spill_inflight_bytes_per_thread": ("spill_inflight_bytes_per_thread", 1.0),
             "spill_offchip_traffic_ratio": ("spill_offchip_traffic_ratio", 1.0)}
    for v in fit_spills(load_raw(raw_dir), hw):
        attr, mult = scale[v.key]
        hw = dataclasses.replace(hw, **{attr: float(v.value) * mult})  # type: ignore[arg-type]
    return hw


def shipped_rule(hw: Hardware) -> str:
    """The rule the profile prices spills by."""
    if hw.spill_traffic_from_accesses:
        return "accesses"
    return "l1_partial" if hw.spill_l1_partial else "footprint"


def rule_profiles(hw: Hardware, root: Path) -> dict[str, Hardware]:
    """Each rule's profile, its spill constants refitted on the shipped raw folder under it (see RULES)."""
    raw = root / "calibration" / "h200" / "raw"
    plain = dataclasses.replace(hw, spill_l1_partial=False, spill_traffic_from_accesses=False,
                                spill_offchip_traffic_ratio=None)
    return {"footprint": refit_spills(plain, raw),
            "l1_partial": refit_spills(dataclasses.replace(plain, spill_l1_partial=True), raw),
            "accesses": refit_spills(dataclasses.replace(plain, spill_traffic_from_accesses=True), raw)}


def regime_rows(hw: Hardware, root: Path) -> list[RegimeRow]:
    """Every source's spilling configs by regime, priced under each rule (see rule_profiles)."""
    profiles = rule_profiles(hw, root)
    out = []
    for source, cases in spill_sources(root).items():
        by: dict[str, list[Case]] = {}
        for c in cases:
            by.setdefault(regime(c, hw), []).append(c)
        for name in REGIMES:
            cs = by.get(name, [])
            if cs:
                out.append(RegimeRow(source, name, tuple(c.label for c in cs), tuple(c.measured_us for c in cs),
                                     {rule: tuple(c.predicted_us(p) / c.measured_us - 1 for c in cs)
                                      for rule, p in profiles.items()}))
    return out


def _cell(errors: tuple[float, ...]) -> str:
    return (f"{100 * statistics.median(abs(e) for e in errors):.1f} % "
            f"({100 * min(errors):+.1f} … {100 * max(errors):+.1f} %)")


def regime_table(rows: list[RegimeRow], shipped: str | None = None) -> str:
    """Markdown: per source and regime, the configs, median |error| and signed range under each rule."""
    head = " | ".join(f"{rule}{' (shipped)' if rule == shipped else ''}: median \\|error\\| (range)" for rule in RULES)
    lines = [f"| source | regime | configs | {head} |", "| --- | --- | ---: |" + " --- |" * len(RULES)]
    for r in rows:
        cells = " | ".join(_cell(r.errors[rule]) for rule in RULES)
        lines.append(f"| {r.source} | {r.regime} | {len(r.labels)} | {cells} |")
    return "\n".join(lines) + "\n"
