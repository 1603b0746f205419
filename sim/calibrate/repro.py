"""Reproducibility of calibration: fit several raw folders, compare the profiles and their predictions.

`python -m sim.calibrate.repro RAW_DIR RAW_DIR [...]` fits each raw folder over the same base
profile (as `kernelsim calibrate --from-raw` does), then reports
- per fitted parameter: its value in each calibration and the spread across them
  ((max - min) / median);
- per validation case (kernel- and step-level rows of `kernelsim validate`): the spread of the
  predictions across calibrations, against the acceptance limits (3 % on every step case, 5 % on
  every kernel case);
- per calibration: the thresholds `kernelsim validate --profile P` reports as exceeded.
With --markdown FILE the tables replace the generated section of FILE (between the markers).
Exit 0 when every limit holds, 3 when one does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.errors import InputError
from sim.outputs import dumps, write_text_atomic

STEP_LIMIT = 0.03  # predictions of two calibrations on a step case: within 3 % of each other
KERNEL_LIMIT = 0.05  # ... on a kernel case: within 5 %
BEGIN = "<!-- BEGIN generated: python -m sim.calibrate.repro -->"
END = "<!-- END generated: python -m sim.calibrate.repro -->"
REPRO_EXIT = 3


@dataclass
class Calibration:
    name: str
    raw_dir: Path
    profile: Path
    params: dict[str, float]
    predictions: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)


def measured_params(doc: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every measured scalar of a profile document by dotted key (op costs: their non-zero units)."""
    out: dict[str, float] = {}
    for key, node in doc.items():
        path = f"{prefix}{key}"
        if not isinstance(node, dict):
            continue
        if node.get("source") == "measured":
            if "value" in node:
                out[path] = float(node["value"])
            else:
                for unit in ("fp32", "sfu", "int"):
                    if node.get(unit):
                        out[f"{path}.{unit}"] = float(node[unit])
        elif key != "provenance":
            out.update(measured_params(node, f"{path}."))
    return out


def spread(values: list[float]) -> float:
    """(max - min) / median of positive values: the largest relative disagreement."""
    mid = statistics.median(values)
    if mid == 0:
        return 0.0 if max(values) == min(values) else float("inf")
    return (max(values) - min(values)) / abs(mid)


def _validate(profile: Path, base: str, validation_raw: str, cases: str, thresholds: str, out: Path) -> dict[str, Any]:
    """What `kernelsim validate --profile P --json OUT` writes (the same rows and thresholds), also written to `out`."""
    from sim.validate.suite import run_validation, validation_document

    v = run_validation(str(profile), base, Path(validation_raw), Path(cases), Path(thresholds))
    write_text_atomic(out, dumps(validation_document(v)))
    doc: dict[str, Any] = json.loads(out.read_text())  # as the command's file reads back
    return doc


def calibrate_all(raw_dirs: list[Path], names: list[str], base: str, work: Path, validation_raw: str, cases: str,
                  thresholds: str) -> list[Calibration]:
    from sim.calibrate.fit import calibrate_from_raw
    from sim.hardware import resolve_profile

    base_path = resolve_profile(base, Path.cwd(), path="--base")
    cals = []
    for raw_dir, name in zip(raw_dirs, names, strict=True):
        out = work / f"{name}.yaml"
        profile_name = "repro-" + re.sub(r"[^a-z0-9_.-]", "-", name.lower())
        text, _ = calibrate_from_raw(raw_dir, base_path, out, profile_name, spreads=False)
        out.write_text(text)
        cal = Calibration(name, raw_dir, out, measured_params(yaml.safe_load(text)))
        doc = _validate(out, base, validation_raw, cases, thresholds, work / f"{name}.validation.json")
        seen: dict[tuple[str, str, str, str], int] = {}
        for row in doc["rows"]:
            key = (row["table"], row["family"], row["label"], row["split"])
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = (key[0], key[1], f"{key[2]} #{seen[key]}", key[3])
            cal.predictions[key] = float(row["predicted_us"])
        cal.violations = list(doc["violations"])
        cals.append(cal)
    return cals


@dataclass
class CaseSpread:
    table: str
    family: str
    label: str
    split: str
    predictions: list[float]
    spread: float
    limit: float

    @property
    def ok(self) -> bool:
        return self.spread <= self.limit


def case_spreads(cals: list[Calibration]) -> list[CaseSpread]:
    """Cases predicted by every calibration (a profile without a sustained clock skips some)."""
    keys = [k for k in cals[0].predictions if all(k in c.predictions for c in cals[1:])]
    out = []
    for key in keys:
        preds = [c.predictions[key] for c in cals]
        limit = STEP_LIMIT if key[0] == "step" else KERNEL_LIMIT
        out.append(CaseSpread(*key, preds, spread(preds), limit))
    return out


def report_markdown(cals: list[Calibration], cases: list[CaseSpread], command: str, note: str = "") -> str:
    names = [c.name for c in cals]
    lines = [BEGIN, "", "## Reproducibility of calibration", "",
             f"Generated by `{command}`: each raw folder fitted over the same base profile, then every "
             "validation case predicted with each profile. Spread = (max − min) / median across the "
             f"calibrations; limits: {STEP_LIMIT:.0%} per step case, {KERNEL_LIMIT:.0%} per kernel case."
             + (f" {note}" if note else ""), "",
             "| calibration | raw folder | thresholds exceeded by `kernelsim validate --profile` |",
             "| --- | --- | --- |"]
    for cal in cals:
        lines.append(f"| {cal.name} | `{cal.raw_dir}` | {len(cal.violations)}"
                     + (": " + "; ".join(cal.violations) if cal.violations else "") + " |")
    lines += ["", "### Prediction spread per level", "",
              "| level | cases | within limit | median spread | max spread | limit |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for table in sorted({c.table for c in cases}):
        rows = [c for c in cases if c.table == table]
        lines.append(f"| {table} | {len(rows)} | {sum(r.ok for r in rows)} | "
                     f"{statistics.median(r.spread for r in rows):.1%} | {max(r.spread for r in rows):.1%} | "
                     f"{rows[0].limit:.0%} |")
    worst = sorted((c for c in cases if not c.ok), key=lambda c: -c.spread)
    steps = [c for c in cases if c.table == "step"]
    lines += ["", "### Step cases", "", "| case | " + " | ".join(names) + " | spread |",
              "| --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for case in steps:
        lines.append(f"| {case.label} ({case.split}) | " + " | ".join(f"{p:.1f}" for p in case.predictions)
                     + f" | {case.spread:.1%}{'' if case.ok else ' ✗'} |")
    lines += ["", "### Kernel-level families", "", "| level | family | cases | over the limit | max spread |",
              "| --- | --- | ---: | ---: | ---: |"]
    for table, family in sorted({(c.table, c.family) for c in cases if c.table != "step"}):
        rows = [c for c in cases if (c.table, c.family) == (table, family)]
        lines.append(f"| {table} | {family} | {len(rows)} | {sum(not r.ok for r in rows)} | "
                     f"{max(r.spread for r in rows):.1%} |")
    kernel_bad = [c for c in worst if c.table != "step"]
    lines += ["", f"### Kernel cases over the limit ({len(kernel_bad)}; the 25 widest)", "",
              "| level | family | case | split | " + " | ".join(names) + " | spread |",
              "| --- | --- | --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for case in kernel_bad[:25]:
        lines.append(f"| {case.table} | {case.family} | {case.label} | {case.split} | "
                     + " | ".join(f"{p:.2f}" for p in case.predictions) + f" | {case.spread:.1%} |")
    params = sorted(set.intersection(*(set(cal.params) for cal in cals)))
    only_some = sorted(set.union(*(set(cal.params) for cal in cals)) - set(params))
    lines += ["", "### Fitted parameters", "", "| parameter | " + " | ".join(names) + " | spread |",
              "| --- | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for p in params:
        vals = [cal.params[p] for cal in cals]
        lines.append(f"| {p} | " + " | ".join(f"{v:g}" for v in vals) + f" | {spread(vals):.1%} |")
    if only_some:
        lines += ["", "Measured in some calibrations only (the others lack the raw group and keep the base "
                  "profile's number): " + ", ".join(f"`{p}`" for p in only_some) + "."]
    lines += ["", END, ""]
    return "\n".join(lines)


def keep_generated_section(path: Path, text: str) -> str:
    """`text` with the generated reproducibility section of the file at `path` (if any) kept at its end."""
    try:
        old = path.read_text()
    except OSError:
        return text
    if BEGIN in old and END in old:
        section = old[old.index(BEGIN):old.index(END) + len(END)]
        return text.rstrip("\n") + "\n\n" + section + "\n"
    return text


def replace_generated_section(path: Path, section: str) -> str:
    old = path.read_text() if path.is_file() else ""
    if BEGIN in old and END in old:
        return old[:old.index(BEGIN)] + section.rstrip("\n") + "\n" + old[old.index(END) + len(END):].lstrip("\n")
    return (old.rstrip("\n") + "\n\n" if old else "") + section


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.calibrate.repro", description=__doc__.splitlines()[0])
    ap.add_argument("raw", nargs="+", metavar="RAW_DIR", help="raw calibration folders (two or more)")
    ap.add_argument("--names", help="comma-separated names of the calibrations (default: the folders' parents)")
    ap.add_argument("--base", default="h200-sxm", help="base profile the fits start from (default: h200-sxm)")
    ap.add_argument("--validation-raw", default="calibration/h200/raw", help="kernel-level measurements to predict")
    ap.add_argument("--cases", default="validation/h200/cases.yaml", help="step-level cases file")
    ap.add_argument("--thresholds", default="validation/thresholds.yaml", help="versioned thresholds file")
    ap.add_argument("--profiles-out", metavar="DIR", help="keep the fitted profiles in DIR")
    ap.add_argument("--markdown", metavar="FILE", help="write the tables into FILE's generated section")
    ap.add_argument("--note", default="", help="a sentence for the report (what the calibrations are)")
    ns = ap.parse_args(argv)
    try:
        raw_dirs = [Path(r) for r in ns.raw]
        if len(raw_dirs) < 2:
            raise InputError("a reproducibility report needs two or more raw folders", value=ns.raw)
        names = ns.names.split(",") if ns.names else [_default_name(p) for p in raw_dirs]
        if len(names) != len(raw_dirs) or len(set(names)) != len(names):
            raise InputError("--names must give one distinct name per raw folder", value=ns.names)
        with tempfile.TemporaryDirectory(prefix="kernelsim-repro-") as tmp:
            work = Path(ns.profiles_out) if ns.profiles_out else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            cals = calibrate_all(raw_dirs, names, ns.base, work, ns.validation_raw, ns.cases, ns.thresholds)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cases = case_spreads(cals)
    command = "python -m sim.calibrate.repro " + " ".join(ns.raw) + (f" --names {ns.names}" if ns.names else "")
    text = report_markdown(cals, cases, command, ns.note)
    if ns.markdown:
        write_text_atomic(Path(ns.markdown), replace_generated_section(Path(ns.markdown), text))
    print(text)
    bad = [c for c in cases if not c.ok]
    failing = [c for c in cals if c.violations]
    print(f"{len(cases)} cases: {len(bad)} over the spread limit; "
          f"{len(failing)} of {len(cals)} calibrations exceed validation thresholds")
    return REPRO_EXIT if bad or failing else 0


def _default_name(raw_dir: Path) -> str:
    parts = raw_dir.resolve().parts
    return parts[-2] if parts[-1] == "raw" and len(parts) > 1 else parts[-1]


if __name__ == "__main__":
    sys.exit(main())
