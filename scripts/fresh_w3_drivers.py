"""Which fitted GPU numbers make fresh calibrations miss the heldout_w3 limits (issue 16).

    python scripts/fresh_w3_drivers.py FRESH.yaml [FRESH.yaml ...] [--reference h200-measured]

For each fresh profile (`kernelsim calibrate --from-raw DIR --out FRESH.yaml`, or the profiles
`python -m sim.calibrate.repro ... --profiles-out DIR` keeps):
1. the held-out kernel medians |predicted / measured - 1| of `kernelsim validate`'s tables heldout_w3
   (third wave, machine D, profiled after a *written* 256 MB flush: L2 full of dirty lines) and
   heldout_w4 (fourth wave, the same kinds of shapes after a *read-only* flush: clean and cold), per
   family, as `kernelsim validate` groups them;
2. the same after putting groups of the reference profile's measured GPU entries into the fresh profile
   (swaps: each group alone, then every GPU entry): which fitted numbers carry the difference;
3. the same at gemm.cold_ramp_us = 0.5, 0.95, 1.4, 2.0 us: how much the held-out GEMMs pin the ramp.
Only the two kernel tables are predicted (a few seconds per profile), not the whole validation.

With `--ramp-after US --repro DOC` (DOC: a `python -m sim.calibrate.repro --json` document holding the
profiles' calibrations by file stem), also the fresh limits each profile exceeds with its own ramp and with
gemm.cold_ramp_us = US: the ramp reaches only kernels whose op carries `l2: cold` (measurement cases: the
`kernel` table's and the held-out kernel tables' rows), so those tables are predicted again
(sim.validate.core.kernel_rows, sim.validate.wave2.wave2_rows) and their groups replace the document's
quantities; every other group keeps what the document's validate run measured. The own-ramp recomputation
must give the document's quantities back (checked).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.calibrate.repro import _leaves, _numbers  # noqa: E402
from sim.hardware import Hardware, load_profile, resolve_profile  # noqa: E402
from sim.validate.wave2 import WAVE4_KERNELS, wave3_kernel_rows, wave4_kernel_rows  # noqa: E402

W3 = ROOT / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json"
GROUPS: dict[str, Callable[[tuple[str, ...]], bool]] = {
    "kernel fixed/gap/memcpy": lambda p: p in (("kernel", "fixed_us"), ("kernel", "launch_gap_us"),
                                               ("kernel", "memcpy_clean_fixed_us")),
    "gemm.cold_ramp_us": lambda p: p == ("gemm", "cold_ramp_us"),
    "gemm (correction, efficiency, misaligned)": lambda p: p[0] == "gemm" and p != ("gemm", "cold_ramp_us"),
    "reduce_kernel cold": lambda p: p[0] == "reduce_kernel" and p[-1].endswith("cold"),
    "memory.*": lambda p: p[0] == "memory",
    "every GPU entry": lambda p: p[0] != "host",
}
SHOWN = (("heldout_w3", "all", "unseen"), ("heldout_w3", "gemm", "unseen"), ("heldout_w3", "reduction", "unseen"),
         ("heldout_w3", "copy", "unseen"), ("heldout_w4", "gemm", "unseen"), ("heldout_w4", "gemm", "calibrated"))


def medians(hw: Hardware) -> dict[tuple[str, str, str], float]:
    errs: dict[tuple[str, str, str], list[float]] = {}
    for r in wave3_kernel_rows(hw, W3) + wave4_kernel_rows(hw, ROOT / WAVE4_KERNELS):
        e = abs(r.predicted_us / r.measured_us - 1)
        errs.setdefault((r.table, r.family, r.split), []).append(e)
        errs.setdefault((r.table, "all", r.split), []).append(e)
    return {k: statistics.median(v) for k, v in errs.items()}


def line(label: str, m: dict[tuple[str, str, str], float]) -> str:
    return f"| {label} | " + " | ".join(f"{m[k]:.3f}" if k in m else "—" for k in SHOWN) + " |"


def swapped(doc: dict[str, Any], ref: dict[str, Any], select: Callable[[tuple[str, ...]], bool], tmp: Path,
            n: int) -> Path:
    lf, lr = _leaves(doc), _leaves(ref)
    out = copy.deepcopy(doc)
    for path in sorted(set(lf) & set(lr)):
        if not select(path) or _numbers(lf[path]) == _numbers(lr[path]):
            continue
        node = out
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = copy.deepcopy(lr[path]["points"] if path == ("gemm", "correction") else lr[path])
    p = tmp / f"swap{n}.yaml"
    p.write_text(yaml.safe_dump(out, sort_keys=False))
    return p


def cold_tables(hw: Hardware) -> dict[str, dict[str, float]]:
    """validate's quantities of the groups of the tables that hold `l2: cold` kernels."""
    from sim.validate.core import kernel_rows, measured_quantities, summarize
    from sim.validate.wave2 import wave2_rows

    rows = kernel_rows(ROOT / "calibration" / "h200" / "raw", hw, resolve_profile("h200-sxm", ROOT)) + wave2_rows(hw, ROOT)
    return {g: {k: round(float(x), 6) for k, x in q.items()} for g, q in measured_quantities(summarize(rows)).items()}


def limits_after(profiles: list[str], ramp_us: float, repro: Path) -> int:
    import json

    from sim.validate.fresh import FRESH_FILE_NAME, exceeded, load_fresh

    doc = json.loads(repro.read_text())
    cals = {c["name"]: c for c in doc["calibrations"]}
    fresh = load_fresh(ROOT / "validation" / FRESH_FILE_NAME)["limits"]
    print(f"| calibration | own gemm.cold_ramp_us | fresh limits exceeded (own) | with {ramp_us:g} us | "
          "what changes |\n| --- | ---: | ---: | ---: | --- |")
    for prof in profiles:
        hw = load_profile(prof)
        cal = cals[Path(prof).stem]
        own = cold_tables(hw)
        for g, q in own.items():  # the recomputation gives the document's quantities back
            for k, x in q.items():
                assert abs(cal["measured"][g][k] - x) <= 1e-6, (prof, g, k, cal["measured"][g][k], x)
        after = {**cal["measured"], **cold_tables(dataclasses.replace(hw, gemm_cold_ramp_s=ramp_us * 1e-6))}
        before_lines, after_lines = exceeded(cal["measured"], fresh), exceeded(after, fresh)
        changed = sorted(set(before_lines) ^ set(after_lines))
        print(f"| {cal['name']} | {hw.gemm_cold_ramp_s * 1e6 if hw.gemm_cold_ramp_s else 0:g} | {len(before_lines)} | "
              f"{len(after_lines)} | " + ("; ".join(("− " if x in before_lines else "+ ") + x for x in changed) or "—") + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", metavar="FRESH.yaml")
    ap.add_argument("--reference", default="h200-measured", help="profile whose entries are swapped in")
    ap.add_argument("--ramp-after", type=float, metavar="US", help="fresh limits exceeded with this gemm.cold_ramp_us")
    ap.add_argument("--repro", metavar="DOC", help="the repro document with the profiles' validate quantities")
    ns = ap.parse_args(argv)
    if ns.ramp_after is not None:
        return limits_after(ns.profiles, ns.ramp_after, Path(ns.repro))
    ref_path = resolve_profile(ns.reference, ROOT)
    ref = yaml.safe_load(ref_path.read_text())
    head = "| profile / change | " + " | ".join("/".join(k) for k in SHOWN) + " |"
    print(head + "\n" + "|" + " --- |" * (len(SHOWN) + 1))
    print(line(f"{ns.reference} (reference)", medians(load_profile(str(ref_path)))))
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for prof in ns.profiles:
            doc = yaml.safe_load(Path(prof).read_text())
            hw = load_profile(prof)
            name = Path(prof).stem
            print(line(f"**{name}** (own gemm.cold_ramp_us {hw.gemm_cold_ramp_s * 1e6 if hw.gemm_cold_ramp_s else 0:g})",
                       medians(hw)))
            for label, select in GROUPS.items():
                n += 1
                print(line(f"{name}, {ns.reference}'s {label}", medians(load_profile(str(swapped(doc, ref, select,
                                                                                              Path(tmp), n))))))
            for ramp in (0.5, 0.95, 1.4, 2.0):
                print(line(f"{name}, gemm.cold_ramp_us {ramp}", medians(dataclasses.replace(hw, gemm_cold_ramp_s=ramp * 1e-6))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
