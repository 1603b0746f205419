"""Communication validation (issue 20): the 2-GPU profile's collective predictions against
measurements on two H200s, split by size (x16 fit sizes vs the sizes between them) and by run
(a repeat run on the same machine that no fit used); the contention benchmark's slowdowns (in
percentage points) and DDP's exposed communication, replayed in the engine
(sim.calibrate.comm_contention), split by load x all-reduce size and by DDP workload. CPU only:
reads committed raw files."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.calibrate.comm_contention import CALIBRATED_DDP
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


# --------------------------------------------------------------------------- contention and DDP (issue 20)
# Runs whose records validate contention and DDP; the first names the workloads the engine's
# contention rule was chosen on (run B: GEMM 8192 and a 1 GiB copy against 256 MiB all-reduces; the
# DDP MLP 4096 -> 16384): a record with that load x all-reduce size, or that DDP workload, is
# "calibrated" in any run (a repeat is the same shape), every other one "unseen".
OVERLAP_RUNS = ("B", "r2", "r3", "w3")
CALIBRATED_CELLS = {("gemm", 8192, 8192, 8192, 256 * MIB), ("copy", 1 << 30, 256 * MIB)}


@dataclass(frozen=True)
class SlowdownRow:
    """A contention cell's slowdown of one stream (load or all-reduce), in percent."""

    run: str
    label: str
    stream: str  # "load" | "all-reduce"
    split: str  # "calibrated" | "unseen"
    measured_pct: float
    predicted_pct: float
    regime: str = "device"  # "device" | "host": the harness's issue loop, not the GPU, sets the pace

    @property
    def error_pp(self) -> float:
        return self.predicted_pct - self.measured_pct


def _cell_key(load: dict[str, Any], ar_bytes: int) -> tuple[Any, ...]:
    if "m" in load:
        return ("gemm", int(load["m"]), int(load["n"]), int(load["k"]), ar_bytes)
    return ("copy", int(load["bytes"]), ar_bytes)


# Two-GPU machines held out by machine (issue 20): contention and DDP grids measured on a machine no
# fit, correction or threshold read before. A cell or workload the engine's rule was chosen on is split
# "..._fitcfg" there (the shape is calibrated, the machine is not), every other one the machine's plain
# held-out split. Machine H keeps the names of the host tables' machine-held-out splits
# (sim.validate.host); a later machine has splits of its own (MACHINE_SPLITS), since its rows would move
# H's groups, whose tripwires came from H alone. A machine's `repeat/comm.json` (the same stages again
# on the same machine, minutes later) is a second run of it, label "<machine>r".
HELDOUT_MACHINE_COMM_DIRS = (Path("validation") / "h200x2" / "machine_H", Path("validation") / "h200x2" / "machine_P")
HELDOUT_MACHINE = "heldout_machine"
HELDOUT_MACHINE_FIT_CONFIG = "heldout_machine_fitcfg"
MACHINE_SPLITS = {"H": (HELDOUT_MACHINE, HELDOUT_MACHINE_FIT_CONFIG),
                  "P": ("heldout_machine_p", "heldout_machine_p_fitcfg")}
REPEAT_SUFFIX = "r"


def _runs(comm_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for run in OVERLAP_RUNS:
        path = comm_dir / run / "comm.json"
        if path.is_file():
            out.append((run, json.loads(path.read_text())))
    return out


def heldout_machine_runs(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """(run, comm.json document) of every held-out two-GPU machine under `root` that has data: the
    machine's letter, then its repeat run (the letter + REPEAT_SUFFIX) where one is committed."""
    out = []
    for rel in HELDOUT_MACHINE_COMM_DIRS:
        machine = rel.name.removeprefix("machine_")
        for run, path in ((machine, root / rel / "comm.json"),
                          (machine + REPEAT_SUFFIX, root / rel / "repeat" / "comm.json")):
            if path.is_file():
                out.append((run, json.loads(path.read_text())))
    return out


def machine_of(run: str) -> str:
    """The held-out machine a run of heldout_machine_runs was measured on."""
    return run.removesuffix(REPEAT_SUFFIX) if run.removesuffix(REPEAT_SUFFIX) in MACHINE_SPLITS else run


def _split(seen: bool, machine: str | None) -> str:
    """A row's split: calibrated / unseen on the calibration runs (machine None), else the held-out
    machine's own pair."""
    if machine is not None:
        plain, fitcfg = MACHINE_SPLITS.get(machine, (f"{HELDOUT_MACHINE}_{machine.lower()}",
                                                     f"{HELDOUT_MACHINE}_{machine.lower()}_fitcfg"))
        return fitcfg if seen else plain
    return "calibrated" if seen else "unseen"


def heldout_splits() -> tuple[str, ...]:
    """Every held-out machine's split names (its fit-config split first), in MACHINE_SPLITS order."""
    return tuple(name for plain, fitcfg in MACHINE_SPLITS.values() for name in (fitcfg, plain))


def heldout_collective_rows(runs: list[tuple[str, dict[str, Any]]], profile: str = "h200-nvl2") -> list[HeldOutRow]:
    """A held-out machine's all-reduces alone: every two-rank contention cell first times back-to-back
    all-reduces of its size on one stream, alone (what the collective sweep times); per run and size,
    the median per-call time over the cells, against the profile's per-call price (comm_fit.predict_call_us:
    the host's per-call cost or the device time, whichever is longer). Split: the machine's fit-config
    split at a size the collective fit used (comm_fit.FIT_SIZES), its plain held-out split otherwise."""
    from sim.calibrate.comm_fit import FIT_SIZES, predict_call_us
    from sim.hardware import load_profile

    hw = load_profile(profile)
    rows = []
    for run, doc in runs:
        per_call: dict[int, list[float]] = {}
        for rec in doc.get("records") or []:
            if rec.get("bench") not in ("contention", "contention_grid") or "skipped" in rec:
                continue
            if int(rec.get("world_size", 0)) != 2 or not rec.get("allreduce_calls") or not rec.get("comm_alone_us"):
                continue
            per_call.setdefault(int(rec["allreduce_bytes"]), []).append(
                float(rec["comm_alone_us"]) / int(rec["allreduce_calls"]))
        for size, times in sorted(per_call.items()):
            pred, host_bound = predict_call_us("all_reduce", size, 2, hw)
            rows.append(HeldOutRow(run, "all_reduce", 2, size, statistics.median(times), pred,
                                   _split(size in FIT_SIZES, machine_of(run)), host_bound))
    return rows


def _load_spread(rec: dict[str, Any]) -> float:
    """The relative spread (population standard deviation / mean) of a cell's load windows alone,
    0 where the record keeps no samples."""
    samples = (rec.get("samples") or {}).get("load_alone_us") or []
    values = [float(x) for x in samples]
    if len(values) < 2:
        return 0.0
    return statistics.pstdev(values) / statistics.mean(values)


def contention_rows(comm_dir: Path, profile: str = "h200-nvl2", split: str | None = None,
                    runs: list[tuple[str, dict[str, Any]]] | None = None) -> list[SlowdownRow]:
    """Every two-rank contention cell with the load on both ranks (of one split, if given), measured
    vs the engine replaying the harness's program (load kernels anchored at their measured time alone).
    With `runs` (a held-out machine's documents), those records instead of the runs under `comm_dir`,
    split by machine (HELDOUT_MACHINE / HELDOUT_MACHINE_FIT_CONFIG)."""
    from sim.calibrate.comm_contention import cell_load, simulate_cell
    from sim.hardware import load_profile

    hw = load_profile(profile)
    host_us = (hw.fabric.collective_host_s("all_reduce") or 0.0) * 1e6
    rows = []
    for run, doc in (runs if runs is not None else _runs(comm_dir)):
        for rec in doc.get("records") or []:
            if rec.get("bench") not in ("contention", "contention_grid") or "skipped" in rec:
                continue
            if int(rec.get("world_size", 0)) != 2 or len(rec.get("load_ranks") or [0, 1]) != 2:
                continue
            load = cell_load(rec)
            if load is None or not rec.get("load_calls"):
                continue
            ar_bytes = int(rec["allreduce_bytes"])
            cell_split = _split(_cell_key(load, ar_bytes) in CALIBRATED_CELLS, machine_of(run) if runs is not None else None)
            if split is not None and cell_split != split:
                continue

            label = f"{rec['load']} x all-reduce {ar_bytes // MIB} MiB [{run}]"
            # one host thread issues both streams' calls: where a call alone takes less than two
            # torch.distributed calls' host time, the issue loop sets the pace of the concurrent window
            shortest_us = min(float(rec["load_alone_us"]) / int(rec["load_calls"]),
                              float(rec["comm_alone_us"]) / int(rec["allreduce_calls"]))
            regime = "host" if shortest_us < 2 * host_us else "device"
            # device-bound: both streams' calls take their measured time alone (the contention is
            # tested, not the GEMM, copy or collective model); host-bound: the all-reduce alone is the
            # issue loop's pace, so it keeps its modeled device time
            ar_call_us = float(rec["comm_alone_us"]) / int(rec["allreduce_calls"]) if regime == "device" else None
            # device-bound: averaged over the load call's measured spread (the windows alone), since
            # the order in which the two streams' calls end decides the sharing (simulate_cell)
            spread = _load_spread(rec) if regime == "device" else 0.0
            pred = simulate_cell(hw, load, ar_bytes, int(rec["load_calls"]), int(rec["allreduce_calls"]),
                                 float(rec["load_alone_us"]) / int(rec["load_calls"]), ar_call_us, spread)
            rows.append(SlowdownRow(run, label, "load", cell_split, 100 * (float(rec["load_slowdown"]) - 1),
                                    100 * (pred.load_slowdown - 1), regime))
            rows.append(SlowdownRow(run, label, "all-reduce", cell_split, 100 * (float(rec["comm_slowdown"]) - 1),
                                    100 * (pred.comm_slowdown - 1), regime))
    return rows


@dataclass(frozen=True)
class DdpRow:
    run: str
    label: str
    split: str
    measured_us: float
    predicted_us: float


def ddp_rows(comm_dir: Path, profile: str = "h200-nvl2",
             runs: list[tuple[str, dict[str, Any]]] | None = None) -> list[DdpRow]:
    """Exposed communication of every two-rank DDP record (step - the same step under no_sync),
    measured vs predicted; with `runs`, a held-out machine's records, split by machine."""
    from sim.calibrate.comm_contention import ddp_exposed_us
    from sim.hardware import load_profile

    hw = load_profile(profile)
    rows = []
    for run, doc in (runs if runs is not None else _runs(comm_dir)):
        for rec in doc.get("records") or []:
            if rec.get("bench") not in ("ddp_step", "ddp_variant") or "skipped" in rec:
                continue
            if int(rec.get("world_size", 0)) != 2 or rec.get("exposed_comm_us") is None:
                continue
            H, F, L = int(rec["hidden"]), int(rec["ffn"]), int(rec.get("layers", 1))
            cap, view = float(rec["bucket_cap_mb"]), bool(rec.get("gradient_as_bucket_view", False))
            with_comm, without = ddp_exposed_us(hw, H, F, L, cap, int(rec["tokens"]), gradient_as_bucket_view=view)
            split = _split((H, F, L, cap, view) in CALIBRATED_DDP, machine_of(run) if runs is not None else None)
            label = (f"DDP MLP {H}->{F} x{L}, bucket {cap:g} MB{', grad views' if view else ''}, "
                     f"{rec['tokens']} tokens [{run}]")
            rows.append(DdpRow(run, label, split, float(rec["exposed_comm_us"]), with_comm - without))
    return rows


def contention_quantities(rows: list[SlowdownRow]) -> dict[str, dict[str, float]]:
    """Gateable groups `comm_contention/<regime>/<split>`: median and largest |error| in percentage
    points (regime: device-bound cells, or cells whose issue loop is host-bound)."""
    out = {}
    for regime in ("device", "host"):
        for split in ("calibrated", "unseen", *heldout_splits()):
            errs = [abs(r.error_pp) for r in rows if r.split == split and r.regime == regime]
            if errs:
                out[f"comm_contention/{regime}_bound/{split}"] = {
                    "median_abs_pp": statistics.median(errs), "max_abs_pp": max(errs), "n": float(len(errs))}
    return out


def contention_lines(rows: list[SlowdownRow]) -> list[str]:
    """One line per cell: measured and predicted slowdowns of both streams."""
    lines = []
    for i in range(0, len(rows) - 1, 2):
        ld, ar = rows[i], rows[i + 1]
        lines.append(f"contention {ld.label} ({ld.split}, {ld.regime}-bound): load {ld.measured_pct:+.1f} % measured, "
                     f"{ld.predicted_pct:+.1f} % predicted; all-reduce {ar.measured_pct:+.1f} % measured, "
                     f"{ar.predicted_pct:+.1f} % predicted")
    return lines


def repeat_spread(collectives: list[HeldOutRow], ddp: list[DdpRow],
                  slowdowns: list[SlowdownRow]) -> dict[str, tuple[int, float, float]]:
    """Within-machine spread, the noise floor under any gate on a held-out machine: every record a
    held-out machine's repeat run (REPEAT_SUFFIX) measured again, against the machine's first run.
    (n, median, max) per quantity: all-reduce alone and DDP exposed |repeat / first - 1|, contention
    slowdowns |repeat - first| in pp per regime (measured values only: no prediction enters)."""
    def pairs(rows: list[Any], key: Any, value: Any) -> list[tuple[float, float]]:
        first = {(r.run, key(r)): value(r) for r in rows if not r.run.endswith(REPEAT_SUFFIX)}
        return [(first[(machine_of(r.run), key(r))], value(r)) for r in rows
                if r.run.endswith(REPEAT_SUFFIX) and (machine_of(r.run), key(r)) in first]

    def stats(values: list[float]) -> tuple[int, float, float]:
        return len(values), statistics.median(values), max(values)

    out = {}
    coll = pairs(collectives, lambda r: (r.collective, r.bytes), lambda r: r.measured_us)
    if coll:
        out["all-reduce alone (relative)"] = stats([abs(b / a - 1) for a, b in coll])
    dd = pairs(ddp, lambda r: r.label.rsplit(" [", 1)[0], lambda r: r.measured_us)
    if dd:
        out["DDP exposed (relative)"] = stats([abs(b / a - 1) for a, b in dd])
    for regime in ("device", "host"):
        cells = pairs([r for r in slowdowns if r.regime == regime], lambda r: (r.label.rsplit(" [", 1)[0], r.stream),
                      lambda r: r.measured_pct)
        if cells:
            out[f"contention {regime}-bound (pp)"] = stats([abs(b - a) for a, b in cells])
    return out
