"""Local-memory traffic per thread of the harness's spilling Triton configs (issue 18).

Triton's `n_spills` is a footprint (the local memory a thread owns, in 4-byte words); what a thread moves
is its local loads and stores. `scripts/spill_traffic.py` compiles every fused bias+GELU+dropout config the
harness measured for sm_90a with the measurements' Triton (3.6.0) and its bundled ptxas, offline, checks that
the compile reproduces the registers and local size the device recorded, and writes ptxas's spill store and
load bytes per thread (`calibration/h200/spill_traffic/`). A record that carries `spill_store_bytes` and
`spill_load_bytes` itself is read as it is; otherwise its (kernel, BLOCK, num_warps, n_regs, n_spills) is
looked up there: a compile that reproduced that exact register count and local size gives its traffic as it
is; one of the same kernel, BLOCK, num_warps and registers whose local size differs (the calibration's
register_sweep.json recorded 1010, 840, 1020 and 210 words where today's compile of the same source and
Triton gives 1094, 1020, 1084 and 212) gives its traffic per spilled word times the record's words (an
estimate); a record the table does not know keeps the footprint rule (stored once, loaded once).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from sim.calibrate.sass_reuse import reload_distances  # noqa: F401  (re-exported)
from sim.resources import shipped

TABLE = "calibration/h200/spill_traffic/triton-3.6.0.json"

Key = tuple[str, int, int, int, int]


def _key(kernel: str, block: int, warps: int, regs: int, spills: int) -> Key:
    return (kernel, int(block), int(warps), int(regs), int(spills))


@lru_cache(maxsize=4)
def load_table(path: str | None = None) -> dict[Key, dict[str, Any]]:
    """(kernel, BLOCK, num_warps, n_regs, n_spills) -> the offline compile's row, for rows that matched a
    device record (the compile's own registers and local size)."""
    p = Path(path) if path else shipped(TABLE)
    if not p.is_file():
        return {}
    out: dict[Key, dict[str, Any]] = {}
    for row in json.loads(p.read_text()).get("records", []):
        if row.get("matches_device") and row.get("n_spills"):
            out[_key(row["kernel"], row["BLOCK"], row["num_warps"], row["n_regs"], row["n_spills"])] = row
    return out


def traffic_bytes_per_thread(rec: dict[str, Any], path: str | None = None) -> int | None:
    """Local-memory bytes one thread of `rec`'s kernel stores and loads (ptxas's spill stores + spill loads),
    or None when neither the record nor the offline compile table gives them (see the module docstring)."""
    if rec.get("spill_store_bytes") is not None and rec.get("spill_load_bytes") is not None:
        return int(rec["spill_store_bytes"]) + int(rec["spill_load_bytes"])
    if not rec.get("n_spills") or rec.get("n_regs") is None or not rec.get("BLOCK") or not rec.get("num_warps"):
        return None
    row = load_table(path).get(_key(str(rec.get("kernel", "")), rec["BLOCK"], rec["num_warps"], rec["n_regs"],
                                    rec["n_spills"]))
    if row is not None:
        return int(row["spill_store_bytes"]) + int(row["spill_load_bytes"])
    same = [r for k, r in load_table(path).items()
            if k[:4] == _key(str(rec.get("kernel", "")), rec["BLOCK"], rec["num_warps"], rec["n_regs"], 0)[:4]]
    if not same:
        return None
    r = same[0]
    return round((int(r["spill_store_bytes"]) + int(r["spill_load_bytes"])) * int(rec["n_spills"]) / int(r["n_spills"]))


def reload_distances_of(rec: dict[str, Any], path: str | None = None) -> tuple[tuple[int, int], ...] | None:
    """The offline compile's reload distances (`ldl_reload_distances`: [distance bytes, load bytes] per thread)
    of `rec`'s exact config (kernel, BLOCK, warps, registers, local size), or None."""
    if not rec.get("n_spills") or rec.get("n_regs") is None or not rec.get("BLOCK") or not rec.get("num_warps"):
        return None
    row = load_table(path).get(_key(str(rec.get("kernel", "")), rec["BLOCK"], rec["num_warps"], rec["n_regs"],
                                    rec["n_spills"]))
    if row is None or row.get("ldl_reload_distances") is None:
        return None
    return tuple((int(d), int(b)) for d, b in row["ldl_reload_distances"])
