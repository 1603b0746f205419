"""Would the full calibration's fits move if it measured fewer records? (issue 16: the trim of wave 11)

    python scripts/calib_trim_check.py RAW_DIR [RAW_DIR ...] [--variants a,b] [--json FILE]

For each committed raw folder, fits it as `kernelsim calibrate --from-raw` does, then fits copies of it
with the records a trimmed plan would not measure removed (each variant below), and compares every
measured number of the two profiles: its value and its interval (`spread`). Prints one line per
number that moves, and a summary per variant and folder. Only reads the raw folders.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

Rec = dict[str, Any]


def _drop_group(group: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        (d / f"{group}.json").unlink(missing_ok=True)
    return edit


def _filter(group: str, keep: Callable[[Rec], bool]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        p = d / f"{group}.json"
        if not p.is_file():
            return
        doc = json.loads(p.read_text())
        doc["records"] = [r for r in doc["records"] if keep(r)]
        p.write_text(json.dumps(doc))
    return edit


def _both(*edits: Callable[[Path], None]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        for e in edits:
            e(d)
    return edit


VARIANTS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "no_streams": ("micro's streams group not measured", _drop_group("streams")),
    "sweep_no_w2": ("register sweep without num_warps=2", _filter("register_sweep", lambda r: r.get("num_warps") != 2)),
    "sweep_no_t2048": ("register sweep without tokens=2048",
                       _filter("register_sweep", lambda r: r.get("tokens") != 2048)),
    "host_2runs": ("host_costs: rounds 1-2 of 3", _filter("host_costs", lambda r: int(r.get("run", 1)) <= 2)),
}
VARIANTS["sustained_no_copy"] = ("sustained: the GEMM load only",
                                 _filter("sustained", lambda r: str(r.get("load", "")).startswith("gemm_4096")))
VARIANTS["plan"] = ("the wave-11 plan: no streams, register sweep without num_warps=2, sustained GEMM only",
                    _both(VARIANTS["no_streams"][1], VARIANTS["sweep_no_w2"][1], VARIANTS["sustained_no_copy"][1]))


def measured(doc: Any, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """key -> (value, spread) of every measured number of a profile document."""
    out: dict[str, tuple[Any, Any]] = {}
    if not isinstance(doc, dict):
        return out
    for k, v in doc.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v.get("source") == "measured":
            if "value" in v:
                out[path] = (v["value"], v.get("spread"))
            else:
                for unit in ("fp32", "sfu", "int"):
                    if unit in v:
                        out[f"{path}.{unit}"] = (v[unit], v.get("spread"))
            for sub, node in v.items():  # tables (points) under a measured entry
                if sub in ("points",):
                    out[f"{path}.{sub}"] = (node, None)
        elif isinstance(v, dict) and k != "provenance":
            out.update(measured(v, f"{path}."))
    return out


def fit(raw: Path, out: Path) -> dict[str, tuple[Any, Any]]:
    r = subprocess.run([sys.executable, "-m", "sim", "calibrate", "--from-raw", str(raw), "--out", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"error: fit of {raw} failed: {r.stderr.strip().splitlines()[-1:]}")
    return measured(yaml.safe_load(out.read_text()))


def rel(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return 0.0 if a == b else abs(b - a) / max(abs(a), 1e-12)
    return None if a == b else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", nargs="+")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json", help="write the comparison here")
    ns = ap.parse_args(argv)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="trimcheck-") as tmp:
        for raw in map(Path, ns.raw):
            name = raw.parent.name if raw.name == "raw" else raw.name
            base = fit(raw, Path(tmp) / f"{name.lower()}-full.yaml")
            report[name] = {}
            for v in ns.variants.split(","):
                d = Path(tmp) / f"{name}_{v}" / "raw"  # beside the raw folder's siblings (../host_context)
                shutil.copytree(raw, d)
                for sibling in raw.resolve().parent.iterdir():
                    if sibling.name != raw.name:
                        (d.parent / sibling.name).symlink_to(sibling)
                VARIANTS[v][1](d)
                got = fit(d, Path(tmp) / f"{name.lower()}-{v.replace('_', '-')}.yaml")
                moved = []
                for key in sorted(set(base) | set(got)):
                    a, b = base.get(key), got.get(key)
                    if a is None or b is None:
                        moved.append({"key": key, "full": a, "trimmed": b, "what": "missing"})
                        continue
                    dv, ds = rel(a[0], b[0]), a[1] != b[1]
                    if dv or ds:
                        moved.append({"key": key, "full": a, "trimmed": b, "rel_value_change": dv})
                changes = [m["rel_value_change"] for m in moved if isinstance(m.get("rel_value_change"), float)]
                report[name][v] = {"numbers": len(base), "moved": moved,
                                   "value_changed": sum(1 for c in changes if c),
                                   "max_rel_value_change": max(changes, default=0.0),
                                   "spread_changed": sum(1 for m in moved if "rel_value_change" in m
                                                         and m["full"][1] != m["trimmed"][1]),
                                   "missing": [m["key"] for m in moved if m.get("what") == "missing"]}
                s = report[name][v]
                print(f"{name} {v}: {s['numbers']} measured numbers; values changed {s['value_changed']} "
                      f"(max {s['max_rel_value_change']:.3%}); intervals changed {s['spread_changed']}; "
                      f"missing {s['missing']}", flush=True)
                for m in moved:
                    print(f"    {m['key']}: {m['full']} -> {m['trimmed']}", flush=True)
    if ns.json:
        Path(ns.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
