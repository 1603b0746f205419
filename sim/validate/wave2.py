"""Validation rows from the second measurement wave (2026-11-30): kernels at shapes and configs no
older group measured (validation/h200/heldout_kernels/*.json, two machines), and collectives on two
H200s (calibration/h200x2/comm). Rows that a fit used are labelled "calibrated", the rest "unseen"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.calibrate.heldout_cases import heldout_cases
from sim.errors import InputError
from sim.hardware import Hardware, load_profile
from sim.validate.core import Row

MACHINES = ("A", "C")


def _attention_fit_shapes(raw_dir: Path) -> set[tuple[int, int, int]]:
    """(batch, heads, seq) of the attention records the default-backend fit uses."""
    path = raw_dir / "attention_default.json"
    if not path.is_file():
        return set()
    doc = json.loads(path.read_text())
    return {(int(r["batch"]), int(r["heads"]), int(r["seq"])) for r in doc.get("records") or [] if r.get("bench") == "attention"}


def heldout_kernel_rows(hw: Hardware, data_dir: Path, raw_dir: Path) -> list[Row]:
    """Every describable held-out kernel of both machines; the attention shapes the backend fit
    uses are "calibrated" (the math_k records became the raw group math_ops and are not rows here)."""
    fit_shapes = _attention_fit_shapes(raw_dir)
    rows = []
    for machine in MACHINES:
        path = data_dir / f"{machine}.json"
        if not path.is_file():
            continue
        for case in heldout_cases(path):
            if case.measured_us <= 0:
                continue
            rec = case.record
            seen = (rec.get("bench") == "attention"
                    and (int(rec["batch"]), int(rec["heads"]), int(rec["seq"])) in fit_shapes)
            family = case.family.removesuffix("_heldout")
            rows.append(Row("heldout", family, f"{case.label} [{machine}]", "calibrated" if seen else "unseen",
                            case.measured_us, case.predicted_us(hw), group=machine))
    return rows


def comm_validation_rows(comm_dir: Path, profile: str = "h200-nvl2") -> list[Row]:
    """Collectives on two GPUs: device-bound and host-bound calls, fit sizes vs the rest."""
    from sim.validate.comm import comm_rows, heldout_collective_rows, heldout_machine_runs

    if not (comm_dir / "B" / "comm.json").is_file():
        return []
    out = []
    for r in comm_rows(comm_dir, profile):
        family = "collective_host_bound" if r.host_bound else "collective_device_bound"
        split = "calibrated" if r.split == "fit" else "unseen"
        out.append(Row("comm", family, f"{r.collective} {r.bytes} B [{r.run}]", split, r.measured_us,
                       r.predicted_us, group=r.run))
    # machines held out by machine (validation/h200x2/machine_*): their contention cells' all-reduces alone
    for r in heldout_collective_rows(heldout_machine_runs(comm_dir.parent.parent.parent), profile):
        family = "collective_host_bound" if r.host_bound else "collective_device_bound"
        out.append(Row("comm", family, f"{r.collective} {r.bytes} B alone, contention cells [{r.run}]", r.split,
                       r.measured_us, r.predicted_us, group=r.run))
    return out


def wave3_kernel_rows(hw: Hardware, path: Path, machine: str = "D") -> list[Row]:
    """The third wave's held-out kernels (issue 18; sim.calibrate.gpu.wave3_gpu on machine D):
    GEMMs at small M and odd N/K, copies and row/column sums at shapes no fit and no correction
    table uses, profiled with the L2 flushed before each call. Their own table (heldout_w3): a
    third machine and new shapes, gated separately from the second wave's."""
    if not path.is_file():
        return []
    rows = []
    for case in heldout_cases(path):
        if case.measured_us <= 0:
            continue
        rows.append(Row("heldout_w3", case.family.removesuffix("_heldout"), f"{case.label} [{machine}]", "unseen",
                        case.measured_us, case.predicted_us(hw), group=machine))
    return rows


WAVE4_KERNELS = Path("validation") / "h200" / "wave4" / "heldout_l2" / "heldout_l2.json"
# The same harness and shapes on machine AE (wave 20, held out by machine): table heldout_w4_ae
MACHINE_AE_KERNELS = Path("validation") / "h200" / "machine_AE" / "heldout_l2" / "heldout_l2.json"
# Every run of the wave-4 harness, each in a table of its own: (table, machine, path under the root)
WAVE4_TABLES = (("heldout_w4", "w4", WAVE4_KERNELS), ("heldout_w4_ae", "AE", MACHINE_AE_KERNELS))


def wave4_kernel_rows(hw: Hardware, path: Path, machine: str = "w4", table: str = "heldout_w4",
                      state: str = "clean") -> list[Row]:
    """The fourth wave's kernels (issue 18; sim.calibrate.gpu.heldout_l2): the third wave's held-out
    GEMMs, copies and sums and new held-out shapes, profiled after an L2 flush that only *reads* (a
    clean cold L2, what a step's weights see). Table heldout_w4: records of set w3/new "unseen", set cal
    (the shapes a cold-L2 parameter is fitted on) "calibrated". The same harness on another machine goes
    in a table of its own (`table`: heldout_w4_ae for machine AE). `state` dirty: the same shapes after
    the flush that *writes* (the write-back of the dirty lines each kernel evicts, fitted on the
    calibration's GEMMs: docs/gemm_small_m.md), in tables <table>_dirty; the warm records (no flush)
    are not rows."""
    import dataclasses

    if not path.is_file():
        return []
    rows = []
    for case in heldout_cases(path):
        rec = case.record
        if rec.get("l2_state") != state or case.measured_us <= 0 or rec.get("uneven_calls"):
            continue
        if rec.get("timing") == "profiled":  # a Triton kernel timed by the profiler, not by events
            case = dataclasses.replace(case, profiled=True)
        split = "calibrated" if rec.get("set") == "cal" else "unseen"
        rows.append(Row(table, case.family.removesuffix("_heldout"), f"{case.label} [{machine}]", split,
                        case.measured_us, case.predicted_us(hw), group=machine))
    return rows


def ddp_validation_rows(comm_dir: Path, profile: str = "h200-nvl2") -> list[Row]:
    """DDP's exposed communication on two GPUs (table comm_ddp; the workload the engine's rule was
    chosen on is "calibrated", other models and bucket caps "unseen")."""
    from sim.validate.comm import ddp_rows, heldout_machine_runs

    rows = ddp_rows(comm_dir, profile)
    # machines held out by machine (validation/h200x2/machine_*), beside calibration/ under the root
    machines = heldout_machine_runs(comm_dir.parent.parent.parent)
    if machines:
        rows += ddp_rows(comm_dir, profile, runs=machines)
    return [Row("comm_ddp", "exposed", r.label, r.split, r.measured_us, r.predicted_us, group=r.run) for r in rows]


WAVE8_PIPE_MIX = Path("validation") / "h200" / "wave8" / "pipe_mix" / "pipe_mix.json"
# pipe_mix kernel -> the calibration group's kernel of the same code (sim.calibrate.cases.ELEMENTWISE_MATH)
PIPE_MIX_KERNELS = {"dropout": "dropout", "gelu": "gelu", "bgd_fwd": "bias_gelu_dropout_fwd",
                    "bgd_bwd": "bias_gelu_dropout_bwd"}


def wave8_pipe_mix_rows(hw: Hardware, path: Path, machine: str = "Y") -> list[Row]:
    """The eighth wave's held-out Triton elementwise kernels (issue 18; sim.calibrate.gpu.pipe_mix): dropout,
    GELU and the fused bias+GELU+dropout forward and backward at 1..32 elements per thread, 4096 x 12288
    (a shape no fit uses), timed as the register sweep. Table heldout_w8, families `fused` (the fused pair)
    and `elementwise` (one-op kernels); every row "unseen"."""
    from sim.calibrate.cases import _elementwise

    if not path.is_file():
        return []
    rows = []
    for rec in json.loads(path.read_text()).get("records") or []:
        kernel = PIPE_MIX_KERNELS.get(str(rec.get("kernel")))
        if kernel is None or not rec.get("time_us"):
            continue
        case = _elementwise({**rec, "kernel": kernel, "impl": "triton"}, "pipe_mix")
        if case is None:
            continue
        family = "fused" if kernel.startswith("bias_gelu_dropout") else "elementwise"
        rows.append(Row("heldout_w8", family, f"{rec['kernel']} triton n={rec['numel']} B={rec['BLOCK']} "
                        f"w={rec['num_warps']} [{machine}]", "unseen", case.measured_us, case.predicted_us(hw),
                        group=machine))
    return rows


# PyTorch's softmax forward at row lengths, counts and dtypes no fit uses (issue 18; scripts/softmax_heldout.py):
# table heldout_softmax, every record unseen, both L2 states (clean, warm)
SOFTMAX_HELDOUT = Path("validation") / "h200" / "softmax_heldout" / "softmax_heldout.json"


def _profiled_heldout_rows(hw: Hardware, path: Path, table: str, machine: str,
                           family: Callable[[Any], str]) -> list[Row]:
    """Rows of one profiled held-out file (every record unseen, each in each L2 state it was profiled in: the
    state is in the label): `family(case)` names each row's family."""
    if not path.is_file():
        return []
    rows = []
    for case in heldout_cases(path):
        rec = case.record
        if case.measured_us <= 0 or rec.get("uneven_calls"):
            continue
        dtype = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}.get(str(rec.get("dtype")), str(rec.get("dtype")))
        rows.append(Row(table, family(case),
                        f"{rec['op']} {dtype} {rec['rows']}x{rec['cols']} {rec.get('l2_state', 'warm')} [{machine}]",
                        "unseen", case.measured_us, case.predicted_us(hw), group=machine))
    return rows


def softmax_heldout_rows(hw: Hardware, path: Path, machine: str = "sm") -> list[Row]:
    """Rows of table heldout_softmax: each softmax forward in each L2 state it was profiled in (the model prices
    both alike: sim.costmodel.reduction._torch_softmax_cost has no L2 state)."""
    return _profiled_heldout_rows(hw, path, "heldout_softmax", machine, lambda c: c.family.removesuffix("_heldout"))


# PyTorch's layer norm and RMS norm forwards at row counts, lengths and dtypes no fit uses (issue 18;
# scripts/norm_heldout.py): table heldout_norm, every record unseen, both L2 states (clean, warm)
NORM_HELDOUT = Path("validation") / "h200" / "norm_heldout" / "norm_heldout.json"


def norm_heldout_rows(hw: Hardware, path: Path, machine: str = "sn") -> list[Row]:
    """Rows of table heldout_norm: each layer norm / RMS norm forward in each L2 state it was profiled in (clean:
    the op is `l2: cold`). Families: layer_norm (ATen's vectorized kernel, impl torch_layer_norm), rms_norm (the
    same kernel with its rms flag, impl torch_rms_norm) and layer_norm_fallback (rows that are not whole vectors:
    ATen's two kernels, priced by their law where the profile has layer_norm_kernel's fb_* keys, else as the op's
    two-pass row-wise description)."""
    from sim.costmodel.reduction import torch_layer_norm_config

    def family(case: Any) -> str:
        rec = case.record
        if rec["op"] == "rms_norm_fwd":
            return "rms_norm"
        vectorized = not hw.layer_norm_kernel or torch_layer_norm_config(hw, int(rec["cols"])) is not None
        return "layer_norm" if vectorized else "layer_norm_fallback"

    return _profiled_heldout_rows(hw, path, "heldout_norm", machine, family)


# PyTorch's layer norm and RMS norm backwards at row counts and widths no fit uses (issue 18; sim.calibrate.gpu.heldout_l2
# part norm_bwd_new): table heldout_norm_bwd, every record unseen, both L2 states (clean, warm)
NORM_BWD_HELDOUT = Path("validation") / "h200" / "norm_bwd_heldout" / "norm_bwd_heldout.json"


def norm_bwd_heldout_rows(hw: Hardware, path: Path, machine: str = "nb") -> list[Row]:
    """Rows of table heldout_norm_bwd: each layer norm / RMS norm backward (its grad-input kernel and its gamma(/beta)
    sums, one row per record) in each L2 state it was profiled in. Families layer_norm_bwd and rms_norm_bwd."""
    return _profiled_heldout_rows(hw, path, "heldout_norm_bwd", machine, lambda c: str(c.record["op"]))


# PyTorch's softmax backward at row counts, lengths and dtypes no fit uses (issue 18; sim.calibrate.gpu.heldout_l2 part
# softmax_bwd_new): table heldout_softmax_bwd, every record unseen, both L2 states (clean, warm)
SOFTMAX_BWD_HELDOUT = Path("validation") / "h200" / "softmax_bwd_heldout" / "softmax_bwd_heldout.json"


def softmax_bwd_heldout_rows(hw: Hardware, path: Path, machine: str = "sb") -> list[Row]:
    """Rows of table heldout_softmax_bwd, each record in each L2 state it was profiled in: family softmax_bwd, the
    whole aten._softmax_backward_data call (ATen's elementwise grad * output, then its backward kernel: impl
    torch_softmax_bwd), and family softmax_bwd_kernel, the backward kernel alone against its own profiled time (the
    law sim.costmodel.reduction._torch_softmax_bwd_cost prices; the product is an elementwise op priced from HBM
    whatever the L2 state)."""
    from sim.calibrate.cases import softmax_bwd_kernel_case

    rows = _profiled_heldout_rows(hw, path, "heldout_softmax_bwd", machine, lambda c: "softmax_bwd")
    if not path.is_file():
        return rows
    for rec in json.loads(path.read_text()).get("records") or []:
        if rec.get("op") != "softmax_bwd" or rec.get("uneven_calls"):
            continue
        case = softmax_bwd_kernel_case(rec, "softmax_bwd_kernel")
        if case is None or case.measured_us <= 0:
            continue
        dtype = {"bfloat16": "bf16", "float32": "fp32"}.get(str(rec.get("dtype")), str(rec.get("dtype")))
        rows.append(Row("heldout_softmax_bwd", "softmax_bwd_kernel",
                        f"softmax_bwd kernel {dtype} {rec['rows']}x{rec['cols']} {rec.get('l2_state', 'warm')} "
                        f"[{machine}]", "unseen", case.measured_us, case.predicted_us(hw), group=machine))
    return rows


def wave2_rows(hw: Hardware, root: Path) -> list[Row]:
    data = root / "validation" / "h200" / "heldout_kernels"
    raw = root / "calibration" / "h200" / "raw"
    rows = heldout_kernel_rows(hw, data, raw) if data.is_dir() else []
    rows += wave3_kernel_rows(hw, root / "validation" / "h200" / "wave3" / "gpu" / "wave3_gpu.json")
    for table, machine, path in WAVE4_TABLES:
        rows += wave4_kernel_rows(hw, root / path, machine=machine, table=table)
        rows += wave4_kernel_rows(hw, root / path, machine=machine, table=f"{table}_dirty", state="dirty")
    rows += wave8_pipe_mix_rows(hw, root / WAVE8_PIPE_MIX)
    rows += softmax_heldout_rows(hw, root / SOFTMAX_HELDOUT)
    rows += norm_heldout_rows(hw, root / NORM_HELDOUT)
    rows += norm_bwd_heldout_rows(hw, root / NORM_BWD_HELDOUT)
    rows += softmax_bwd_heldout_rows(hw, root / SOFTMAX_BWD_HELDOUT)
    try:
        load_profile("h200-nvl2")
    except InputError:  # an installed copy without the 2-GPU profile validates the rest
        return rows
    comm_dir = root / "calibration" / "h200x2" / "comm"
    return rows + comm_validation_rows(comm_dir) + ddp_validation_rows(comm_dir)


def contention_validation(root: Path) -> list[Any]:
    """The contention cells' slowdown rows (sim.validate.comm.SlowdownRow); none without the data or
    the 2-GPU profile."""
    from sim.validate.comm import contention_rows, heldout_machine_runs

    comm_dir = root / "calibration" / "h200x2" / "comm"
    if not (comm_dir / "B" / "comm.json").is_file():
        return []
    try:
        load_profile("h200-nvl2")
    except InputError:
        return []
    rows = list(contention_rows(comm_dir))
    machines = heldout_machine_runs(root)
    if machines:
        rows += contention_rows(comm_dir, runs=machines)
    return rows
