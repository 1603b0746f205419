"""Communication validation (issue 20): the 2-GPU profile's collective predictions against
measurements on two H200s, split by size (x16 fit sizes vs the sizes between them) and by run
(a repeat run on the same machine that no fit used). CPU only: reads committed raw files."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from sim.calibrate.comm_fit import FIT_SIZES, HeldOutRow, heldout_rows, load_comm

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


def comm_markdown(rows: list[HeldOutRow], summaries: list[CommSummary]) -> str:
    lines = ["## Communication: two H200 (h200-nvl2)", "",
             f"Fit sizes (x16 steps): {', '.join(_fmt(s) for s in FIT_SIZES)} of run {FIT_RUN}; held out: the sizes "
             "between them and every size of the repeat run r2. A call is predicted as the longer of the host's "
             "per-call cost (torch.distributed) and the device time (NCCL-like plan with the fitted plateau).", "",
             "| sizes | split | n | median abs err | max abs err |", "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {s.group} | {s.split} | {s.n} | {s.median_abs:.1%} | {s.max_abs:.1%} |" for s in summaries]
    lines += ["", "| run | collective | size | measured us | predicted us | host-bound | split | error |",
              "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |"]
    lines += [f"| {r.run} | {r.collective} | {_fmt(r.bytes)} | {r.measured_us:.1f} | {r.predicted_us:.1f} | "
              f"{'yes' if r.host_bound else 'no'} | {r.split} | {r.error:+.1%} |" for r in rows]
    return "\n".join(lines) + "\n"


def _fmt(b: float) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:g} {unit}"
    return f"{b:g} B"
