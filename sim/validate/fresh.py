"""Limits for freshly calibrated profiles: the `fresh` class of gates (validation/fresh_limits.yaml).

Which limits `kernelsim validate --profile P` applies (docs/validation.md, "Which limits apply to which
profile"; the header of validation/thresholds.yaml):
- P is the shipped profile (the thresholds file's `tripwire_profile`, byte for byte): goals are reported
  and the tripwires fail, as before. The tripwires sit at that profile's own figures plus a margin, and
  part of those figures are in-sample for it (it was fitted on the calibrated-split records).
- any other P (a fresh calibration from `kernelsim calibrate`): the goals are reported the same way (a
  goal is the same number for every profile); the shipped profile's tripwires are NOT applied (they are
  listed for information); the fresh limits below fail (exit 3).

Fresh limits guard the calibration pipeline, not a profile: per gated metric, the worst value over the
committed fresh calibrations (calibration/h200/runs/repro.json, the calibrations fitted from their own
raw folders), plus the tripwires' margin (x 1.1 + 0.005 for error shares, x 1.1 + 0.2 pp for gains in
percentage points, the worst count for counts, minus 0.05 for coverage floors). They are never raised:
`python -m sim.validate.fresh --write` keeps the lower of an existing limit and the derived one (the
higher, for a floor), so a fit change that makes the committed calibrations worse trips them.

The committed calibrations need not all hold them: the limits were set from the first five (A–E), and a
calibration committed later is a test of them, kept in the document with whatever it exceeds (this
command prints those lines and exits 3; docs/validation.md lists them per calibration).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.errors import InputError

FRESH_SCHEMA = "kernelsim.fresh_limits/v1"
FRESH_FILE_NAME = "fresh_limits.yaml"  # next to the thresholds file
COUNT_METRICS = ("sign_wrong", "wrong_buckets")
MARGIN_TEXT = ("worst x 1.1 + 0.005 (error shares), worst x 1.1 + 0.2 (pp), the worst count (counts), "
               "worst - 0.05 (coverage floors)")


def _is_floor(metric: str) -> bool:
    return metric.startswith("min_")


def limit_from_worst(metric: str, worst: float) -> float:
    """The fresh limit on `metric` given the worst committed calibration's value (rounded outwards to 3 decimals)."""
    if _is_floor(metric):
        return math.floor(max(0.0, worst - 0.05) * 1000 + 1e-9) / 1000
    if metric in COUNT_METRICS:
        return float(math.ceil(worst - 1e-9))
    raw = worst * 1.1 + (0.2 if metric.endswith("_pp") else 0.005)
    return math.ceil(raw * 1000 - 1e-9) / 1000


def derive(measured_by_cal: Mapping[str, Mapping[str, Mapping[str, float]]],
           thresholds: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Fresh limits on every metric a tripwire gates, from the calibrations' validate quantities."""
    out: dict[str, dict[str, float]] = {}
    for group, gate in sorted((thresholds.get("gates") or {}).items()):
        trip = gate.get("tripwire") if isinstance(gate, dict) else None
        if not isinstance(trip, dict):
            continue
        for metric in trip:
            qty = metric[4:] if _is_floor(metric) else metric
            vals = [float(m[group][qty]) for m in measured_by_cal.values() if qty in (m.get(group) or {})]
            if vals:
                worst = min(vals) if _is_floor(metric) else max(vals)
                out.setdefault(group, {})[metric] = limit_from_worst(metric, worst)
    return out


def never_raised(old: Mapping[str, Mapping[str, float]], new: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """`new`, except where an `old` limit is tighter: a fresh limit only moves down (a floor only up)."""
    out = {g: dict(m) for g, m in new.items()}
    for group, metrics in old.items():
        for metric, value in metrics.items():
            if group in out and metric in out[group]:
                pick = max if _is_floor(metric) else min
                out[group][metric] = pick(out[group][metric], float(value))
    return out


def exceeded(measured: Mapping[str, Mapping[str, float]], limits: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Lines for every fresh limit `measured` does not hold (validate's wording)."""
    lines = []
    for group in sorted(limits):
        if group not in measured:
            continue
        for metric, limit in limits[group].items():
            qty = metric[4:] if _is_floor(metric) else metric
            if qty not in measured[group]:
                continue
            value = float(measured[group][qty])
            holds = value >= limit if _is_floor(metric) else value <= limit
            if not holds:
                rel = ">=" if _is_floor(metric) else "<="
                lines.append(f"{group}: {qty} {value:.3f} (fresh limit {rel} {float(limit):.3f})")
    return lines


def load_fresh(path: Path) -> dict[str, Any]:
    from sim.schema.loader import read_yaml

    doc = read_yaml(path) if path.is_file() else None
    if not isinstance(doc, dict) or doc.get("schema") != FRESH_SCHEMA:
        raise InputError("not a fresh-limits file (a profile other than the shipped one is gated by it)",
                         file=str(path), path="schema",
                         value=doc.get("schema") if isinstance(doc, dict) else "missing file",
                         expected=FRESH_SCHEMA)
    limits = doc.get("limits")
    if not isinstance(limits, dict) or not all(isinstance(v, dict) for v in limits.values()):
        raise InputError("missing limits", file=str(path), path="limits", expected="a mapping of group → {metric: limit}")
    for group, metrics in limits.items():
        for metric, value in metrics.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise InputError("a limit must be a number", file=str(path), path=f"limits.{group}.{metric}", value=value)
    return doc


def render(limits: Mapping[str, Mapping[str, float]], source: str, names: list[str], command: str) -> str:
    """The file's text (deterministic; one line per group)."""
    head = [
        "# Fresh-calibration limits: the gates `kernelsim validate --profile P` applies to a profile P other than",
        "# the shipped one (thresholds.yaml's tripwire_profile). Generated by `python -m sim.validate.fresh --write`",
        "# from the committed fresh calibrations; do not edit by hand. Policy: sim/validate/fresh.py and",
        "# docs/validation.md. A limit here is a tripwire for the calibration pipeline (fit code, harness),",
        "# at the worst committed calibration plus a margin; it is never raised (the writer keeps the lower",
        "# of the old and the derived limit). It does not say a fresh profile is as good as the shipped one:",
        "# the goals in thresholds.yaml are the yardstick for both, and docs/validation.md compares them.",
    ]
    body = [f"schema: {FRESH_SCHEMA}",
            f"derived_from: {json.dumps({'document': source, 'calibrations': names, 'command': command})}",
            f"margin: {json.dumps(MARGIN_TEXT)}", "limits:"]
    for group in sorted(limits):
        cells = ", ".join(f"{m}: {float(v):g}" for m, v in limits[group].items())
        body.append(f"  {json.dumps(group)}: {{{cells}}}")
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.validate.fresh", description=__doc__.splitlines()[0])
    ap.add_argument("--repro", default="calibration/h200/runs/repro.json",
                    help="the reproducibility document (python -m sim.calibrate.repro --json) to derive from")
    ap.add_argument("--thresholds", default="validation/thresholds.yaml", help="versioned thresholds file")
    ap.add_argument("--write", action="store_true", help="write the limits next to the thresholds file")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file is not what --write writes")
    ns = ap.parse_args(argv)
    from sim.validate.core import load_thresholds

    try:
        thresholds = load_thresholds(Path(ns.thresholds))
        repro = json.loads(Path(ns.repro).read_text())
        cals = {c["name"]: c["measured"] for c in repro["calibrations"]}
        target = Path(ns.thresholds).parent / FRESH_FILE_NAME
        old = load_fresh(target)["limits"] if target.is_file() else {}
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {ns.repro}: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    limits = never_raised(old, derive(cals, thresholds))
    source = os.path.relpath(Path(ns.repro).resolve(), Path(ns.thresholds).resolve().parent.parent)
    text = render(limits, Path(source).as_posix(), sorted(cals), repro.get("command", ""))
    over = {name: exceeded(m, limits) for name, m in cals.items()}
    for name, lines in over.items():
        for line in lines:
            print(f"{name}: {line}")
    if ns.check:
        if not target.is_file() or target.read_text() != text:
            print(f"{target}: not what the committed calibrations give; run python -m sim.validate.fresh --write",
                  file=sys.stderr)
            return 1
    elif ns.write:
        target.write_text(text)  # not write_text_atomic: the old file was read as an input on purpose
        print(f"wrote {target}: {sum(len(m) for m in limits.values())} limits on {len(limits)} groups")
    else:
        sys.stdout.write(text)
    return 3 if any(over.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
