"""Validate's host groups only, for the host switches of issue 15 (host12): price the calibration runs' host steps,
the held-out machines' steps at the reference speed and at their own speeds, with the shipped profile and with
variants that switch host sections on, and check every host group against validation/thresholds.yaml's TRIPWIRES
(a variant profile is not the tripwire profile, so `kernelsim validate` would gate it by the fresh limits instead).

    python scripts/host_level_check.py [--on framework_op_speed_level,missing_framework_op_classes,clock_level ...]
        [--set framework_op_speed_level.value=1] [--json OUT.json]

Each --on is one combination (comma-separated sections of `host`, each switched to apply: true; missing classes: all
of them); prints per combination the tripwires crossed and, per held-out machine and row kind, median / max |error|
(own speed and reference speed) and the compile / CUDA-graph gain errors (median |pp|)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def variant(on: list[str], sets: list[str], out: Path) -> Path:
    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    for sec in on:
        if sec == "missing_framework_op_classes":
            for c in doc["host"][sec].values():
                c["apply"] = True
        else:  # a section of host, or one of its entries (compiled_in_context.kernel_us)
            node = doc["host"]
            for part in sec.split("."):
                node = node[part]
            node["apply"] = True
    for s in sets:
        path, value = s.split("=", 1)
        sec, key = path.split(".", 1)
        doc["host"][sec][key] = float(value)
    doc["name"] = "h200-measured-" + ("-".join(on) or "off").replace("_", "-").replace(".", "-")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def host_measured(hw: Any, own_only: bool = False) -> tuple[dict[str, dict[str, float]], list[Any], list[Any]]:
    import dataclasses

    from sim.validate.core import measured_quantities, summarize
    from sim.validate.host import (
        gain_groups,
        heldout_machine_rows,
        host_rows,
        own_speed_gains,
        own_speed_rows,
    )

    raw = ROOT / "calibration" / "h200" / "raw"
    if own_only:  # the groups a switch applied only at a given host speed can move (reference rows cannot)
        rows, mgains = own_speed_rows(ROOT, hw), own_speed_gains(ROOT, hw)
        measured = measured_quantities(summarize(rows))
        for msplit in sorted({g.split for g in mgains}):
            for key, grp in gain_groups([g for g in mgains if g.split == msplit]).items():
                measured[f"host_gains/{key}/{msplit}"] = {
                    "median_abs_pp": statistics.median(abs(g.error_pp) for g in grp), "n": float(len(grp))}
        return measured, rows, mgains
    hrows, hgains = host_rows(raw.parent / "host_context", hw)
    rows = [dataclasses.replace(r, split="calibrated" if r.split == "fit" else "unseen") for r in hrows]
    mrows, mgains = heldout_machine_rows(ROOT, hw)
    orows = own_speed_rows(ROOT, hw)
    mgains += own_speed_gains(ROOT, hw)
    rows += mrows + orows
    measured = measured_quantities(summarize(rows))
    for key, grp in gain_groups(hgains).items():
        measured[f"host_gains/{key}"] = {"median_abs_pp": statistics.median(abs(g.error_pp) for g in grp),
                                         "n": float(len(grp))}
    for msplit in sorted({g.split for g in mgains}):
        for key, grp in gain_groups([g for g in mgains if g.split == msplit]).items():
            measured[f"host_gains/{key}/{msplit}"] = {"median_abs_pp": statistics.median(abs(g.error_pp) for g in grp),
                                                      "n": float(len(grp))}
    return measured, rows, mgains


def tripwires(measured: dict[str, dict[str, float]]) -> list[str]:
    from sim.validate.core import check, load_thresholds

    th = load_thresholds(ROOT / "validation" / "thresholds.yaml")
    return check(measured, th, "thresholds").tripwires_exceeded


def per_machine(rows: list[Any], gains: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in rows:
        if "/" not in r.label or r.table != "host":
            continue
        machine = r.label.split("/", 1)[0]
        if len(machine) > 3:
            continue
        path = "own" if r.family.startswith("host_model_own_speed") else r.family.split("/")[0]
        kind = r.family.split("/", 1)[1] if "/" in r.family else r.family
        out.setdefault(machine, {}).setdefault(f"{path}:{kind}", []).append(abs(r.error) * 100)
    for g in gains:
        machine = g.case.split("/", 1)[0]
        path = "own" if g.regime == "host/own_speed" else g.regime
        out.setdefault(machine, {}).setdefault(f"gain {path}:{g.variant.split(' ')[0]}", []).append(abs(g.error_pp))
    return {m: {k: (round(statistics.median(v), 1), round(max(v), 1), len(v)) for k, v in sorted(d.items())}
            for m, d in sorted(out.items())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--on", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--json")
    ap.add_argument("--skip-off", action="store_true", help="do not price the shipped profile first")
    ap.add_argument("--own-only", action="store_true",
                    help="own-speed rows and gains only (what a switch applied at a given host speed moves)")
    args = ap.parse_args()
    from sim.hardware import load_profile

    result: dict[str, Any] = {}
    base_measured = None
    with tempfile.TemporaryDirectory() as tmp:
        for combo in ([] if args.skip_off else [""]) + args.on:
            on = [s for s in combo.split(",") if s]
            path = variant(on, args.set if on else [], Path(tmp) / f"v{len(result)}.yaml")
            hw = load_profile(str(path), ROOT, path="--profile")
            measured, rows, gains = host_measured(hw, args.own_only)
            crossed = tripwires(measured)
            if base_measured is None:
                base_measured = measured
            moved = {g: {k: (round(base_measured[g][k], 4), round(v, 4)) for k, v in q.items() if k != "n"}
                     for g, q in measured.items() if g in base_measured and q != base_measured[g]}
            result[combo or "off"] = {"tripwires_crossed": crossed, "per_machine": per_machine(rows, gains),
                                      "groups_moved": moved}
            print(f"== {combo or 'off'}: {len(crossed)} tripwires crossed", flush=True)
            for c in crossed:
                print("  ", c)
            if args.json:  # after each combination: a partial run keeps what it priced
                Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
