"""Golden outputs: the JSON that kernelsim writes for every shipped scenario and trace fixture.

`python -m tests.golden.regen` rewrites tests/golden/*.json from the current code;
`python -m tests.golden.regen --check` compares instead and prints, per file, what changed
as key paths (fields added, removed, changed; list indices folded to [*] with a count), and
exits 1 if anything differs. `--only NAME...` limits either to some cases (substring match),
`--fast` to the cases the default test run checks.

A change to the outputs on purpose (a new field, a model fix) is committed with the
regenerated goldens; the diff printed by --check is what to read before doing so. A
performance change must leave every golden byte-identical.

Each case runs the CLI in this process exactly as a user would (`kernelsim run ... --json`),
so a golden is the file the user gets, byte for byte, with this checkout's absolute path
replaced by `$ROOT`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
REPLAY_PROFILE = "h200-measured"


@dataclass(frozen=True)
class Case:
    name: str  # the golden file is GOLDEN / f"{name}.json" (sweeps: one file per output)
    produce: Callable[[Path], dict[str, str]]  # tmp dir -> {golden file name: text}
    slow: bool = False  # checked only with `pytest -m slow` / `regen --check` (not in the default test run)


def _cli(argv: list[str]) -> None:
    from sim.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    if rc != 0:
        raise RuntimeError(f"kernelsim {' '.join(argv)} exited {rc}: {err.getvalue().strip()}")


def _json_case(name: str, argv: list[str]) -> Callable[[Path], dict[str, str]]:
    def produce(tmp: Path) -> dict[str, str]:
        out = tmp / f"{name}.json"
        _cli([*argv, "--json", str(out), "--quiet"])
        return {f"{name}.json": out.read_text(encoding="utf-8")}
    return produce


def _sweep_case(name: str, scenario: Path) -> Callable[[Path], dict[str, str]]:
    def produce(tmp: Path) -> dict[str, str]:
        from sim.sweep import load_sweep, run_sweep

        out = tmp / name
        run_sweep(load_sweep(scenario), out, workers=1, executor="local", progress=False)
        files = {f"{name}.sweep.json": (out / "sweep.json").read_text(encoding="utf-8"),
                 f"{name}.results.csv": (out / "results.csv").read_text(encoding="utf-8")}
        # A point's key hashes kernelsim's own source (resume invalidation): any code change moves it.
        for p in json.loads(files[f"{name}.sweep.json"])["points"]:
            files = {k: v.replace(p["key"], f"$KEY{p['index']}") for k, v in files.items()}
        return files
    return produce


# Scenarios whose run takes more than a few seconds here (2-core CI) are `slow`.
_SLOW_RUN = {"dp_mlp_8ranks"}
_SLOW_ADVISE = {"bias_gelu_dropout", "dp_mlp_8ranks", "serving_decode", "transformer_block"}
_SLOW_REPLAY: set[str] = set()


def cases() -> list[Case]:
    out: list[Case] = []
    for scn in sorted((ROOT / "scenarios").glob("*.yaml")):
        out.append(Case(f"run_{scn.stem}", _json_case(f"run_{scn.stem}", ["run", str(scn)]), scn.stem in _SLOW_RUN))
    for scn in sorted((ROOT / "scenarios").glob("*.yaml")):
        out.append(Case(f"advise_{scn.stem}", _json_case(f"advise_{scn.stem}", ["advise", str(scn)]),
                        scn.stem in _SLOW_ADVISE))
    for trace in sorted((ROOT / "tests" / "fixtures" / "traces").glob("*.json.gz")):
        stem = trace.name.removesuffix(".json.gz")
        for mode in ("measured", "predict"):
            name = f"replay_{stem}_{mode}"
            out.append(Case(name, _json_case(name, ["replay", str(trace), "--hardware", REPLAY_PROFILE,
                                                    "--mode", mode]), stem in _SLOW_REPLAY))
    serving = ROOT / "scenarios" / "serving_decode.yaml"
    out.append(Case("serve_serving_decode", _json_case(
        "serve_serving_decode", ["serve", str(serving), "--requests", "120", "--rates", "100,400"]), slow=True))
    out.append(Case("sweep_sweep_block_size", _sweep_case("sweep_sweep_block_size",
                                                          ROOT / "scenarios" / "sweep_block_size.yaml"), slow=True))
    return out


def produce(case: Case) -> dict[str, str]:
    """The case's outputs with this checkout's absolute path replaced by `$ROOT` (goldens are portable)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = case.produce(Path(tmp))
    return {name: text.replace(str(ROOT), "$ROOT") for name, text in files.items()}


# -- readable differences -----------------------------------------------------------------------
def _walk(old: Any, new: Any, path: str, out: list[tuple[str, str, Any, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            sub = f"{path}.{k}" if path else str(k)
            if k not in new:
                out.append(("removed", sub, old[k], None))
            else:
                _walk(old[k], new[k], sub, out)
        for k in new:
            if k not in old:
                out.append(("added", f"{path}.{k}" if path else str(k), None, new[k]))
        return
    if isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            sub = f"{path}[{i}]"
            if i >= len(new):
                out.append(("removed", sub, old[i], None))
            elif i >= len(old):
                out.append(("added", sub, None, new[i]))
            else:
                _walk(old[i], new[i], sub, out)
        return
    if type(old) is not type(new) or old != new:
        out.append(("changed", path, old, new))


def _short(v: Any, width: int = 60) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= width else s[: width - 3] + "..."


def _folded(path: str) -> str:
    import re

    return re.sub(r"\[\d+\]", "[*]", path)


def describe(name: str, old: str, new: str, limit: int = 12) -> list[str]:
    """Human-readable differences between two versions of one golden file."""
    if name.endswith(".json"):
        try:
            a, b = json.loads(old), json.loads(new)
        except ValueError:
            a = b = None
        if a is not None:
            diffs: list[tuple[str, str, Any, Any]] = []
            _walk(a, b, "", diffs)
            if not diffs:
                return ["  same values, different bytes (formatting or key order)"]
            groups: dict[tuple[str, str], list[tuple[str, Any, Any]]] = {}
            for what, path, x, y in diffs:
                groups.setdefault((what, _folded(path)), []).append((path, x, y))
            lines = []
            for (what, folded), items in groups.items():
                path, x, y = items[0]
                where = f"{folded} ({len(items)} places)" if len(items) > 1 else path
                if what == "added":
                    lines.append(f"  + {where}: {_short(y)}")
                elif what == "removed":
                    lines.append(f"  - {where}: {_short(x)}")
                else:
                    rel = ""
                    if isinstance(x, float | int) and isinstance(y, float | int) and not isinstance(x, bool) and x:
                        rel = f" ({(y - x) / abs(x):+.3g} rel.)"
                    lines.append(f"  ~ {where}: {_short(x, 30)} -> {_short(y, 30)}{rel}"
                                 + (" (first shown)" if len(items) > 1 else ""))
            more = len(lines) - limit
            return lines[:limit] + ([f"  ... {more} more kinds of difference"] if more > 0 else [])
    import difflib

    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "golden", "now", n=0, lineterm=""))
    more = len(diff) - 2 * limit
    return ["  " + d for d in diff[: 2 * limit]] + ([f"  ... {more} more diff lines"] if more > 0 else [])


def check(selected: list[Case]) -> int:
    """Compare the current outputs with the goldens; print what differs; the number of differing files."""
    bad = 0
    for case in selected:
        for fname, text in produce(case).items():
            path = GOLDEN / fname
            if not path.is_file():
                print(f"{fname}: no golden (run `python -m tests.golden.regen` to write it)")
                bad += 1
                continue
            old = path.read_text(encoding="utf-8")
            if old != text:
                bad += 1
                print(f"{fname}: differs")
                print("\n".join(describe(fname, old, text)))
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="compare with the goldens instead of writing them")
    ap.add_argument("--fast", action="store_true", help="only the cases the default test run checks")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only cases whose name contains one of these")
    args = ap.parse_args(argv)
    selected = [c for c in cases() if not (args.fast and c.slow)
                and (not args.only or any(s in c.name for s in args.only))]
    if args.check:
        bad = check(selected)
        print(f"{len(selected)} cases checked: " + (f"{bad} golden files differ" if bad else "all identical"))
        return 1 if bad else 0
    for case in selected:
        for fname, text in produce(case).items():
            path = GOLDEN / fname
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                continue
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
