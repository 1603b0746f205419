"""Communication validation (issue 20): the 2-GPU profile's collective predictions against
measurements on two H200s, split by size (x16 fit sizes vs the sizes between them) and by run
(a repeat run on the same machine that no fit used). CPU only: reads committed raw files."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from sim.calibrate.comm_fit import HeldOutRow, heldout_rows, load_comm

MIB = 1 << 20
FIT_RUN = "B"
RUNS = ("B", "r2")


@dataclass(frozen=True)
class CommSummary:
    group: str  # ">= 1 MiB" or "< 1 MiB"
    split: str
    n: int
    median_abs: float
    max_abs: float


def comm_rows(comm_dir: Path, profile: str = "h200-nvl2") -> list[HeldOutRow]:
    """Predicted vs measured per-call time of every 2-rank collective of the committed runs."""
    from sim.hardware import load_profile

    hw = load_profile(profile)
    runs = {run: load_comm(comm_dir / run / "comm.json") for run in RUNS if (comm_dir / run / "comm.json").is_file()}
    return heldout_rows(runs, hw, FIT_RUN)


def summarize_comm(rows: list[HeldOutRow]) -> list[CommSummary]:
    """Median and largest |error| per size group (>= 1 MiB, < 1 MiB) and split (fit, held out)."""
    out = []
    for group, pick in ((">= 1 MiB", lambda r: r.bytes >= MIB), ("< 1 MiB", lambda r: r.bytes < MIB)):
        for split in ("fit", "held-out"):
            sel = [abs(r.error) for r in rows if pick(r) and ((r.split == "fit") == (split == "fit"))]
            if sel:
                out.append(CommSummary(group, split, len(sel), statistics.median(sel), max(sel)))
    return out
