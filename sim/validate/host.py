"""Validation of host time in real models (issue 15): steps of models measured on the GPU without
the profiler (calibration/<gpu>/host_context/host_context.json, sim.calibrate.gpu.host_context)
against kernelsim's prediction from the same configs' Kineto traces.

Per config with a trace, two predictions of the step as it runs from an idle GPU (the reference is
`sync_us`: every step starts from an idle GPU and ends with a synchronize):
- `trace_predict`: `replay --mode predict` (the trace's own host timeline less the profiler's cost,
  device time from the cost model);
- `host_model/<kind>`: `replay --mode predict --host model` (host from the profile's table by
  framework op and its per-kind costs; device time from the cost model).
Rows are split `fit` (configs sim.calibrate.host_fit may use: FIT_MODELS, HOST_MODEL_FIT_MODES) and `held-out`.
Gains: CUDA graph over eager (decode, same batch) and torch.compile over eager (same model, size
and phase), measured vs predicted, in percentage points, on both prediction paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.calibrate.host_fit import FIT_MODELS, HOST_MODEL_FIT_MODES, TRACE_FIT_MODES
from sim.hardware import Hardware
from sim.validate.core import Row
from sim.validate.steps import GainRow

HOST_TABLE = "host"
REFERENCE = "sync_us"
# Machines held out by machine: the same steps and traces recorded on an H200 VM that no fit,
# correction or threshold before validation v10 saw (validation/h200/machine_<X>/host_context).
# Their rows get their own splits: a config no fit used ("unseen" on the fitted machines) is
# HELDOUT_MACHINE; a config the fits used on the other machines is HELDOUT_MACHINE_FIT_CONFIG.
HELDOUT_MACHINE_DIRS = ("validation/h200/machine_F/host_context", "validation/h200/machine_Y/host_context",
                        "validation/h200/machine_L/host_context", "validation/h200/machine_M/host_context",
                        "validation/h200/machine_N/host_context", "validation/h200/machine_O/host_context",
                        "validation/h200/machine_J/host_context", "validation/h200/machine_I/host_context",
                        "validation/h200/machine_AA/host_context", "validation/h200/machine_AB/host_context",
                        "validation/h200/machine_AC/host_context", "validation/h200/machine_AD/host_context",
                        "validation/h200/machine_AE/host_context")
HELDOUT_MACHINE = "heldout_machine"
HELDOUT_MACHINE_FIT_CONFIG = "heldout_machine_fitcfg"
# Machines held out after the groups above had their tripwires get groups of their own (their rows would
# move machine F's): the split names the machine. Machine Y (wave 8, issue 15): compiled inference pairs of
# models no fit reads (llama, mlp) and decode steps, every record with a host clock. Machines L (wave 11) and M
# (wave 12, issue 15), N (wave 12, an hour after M), O (wave 13), J (wave 14; device id P, renamed: P names the
# 2-GPU machine of validation/h200x2), I (wave 15), AA (wave 16; the single letters are all taken), AB (wave 17), AC (wave 18), AD (wave 19) and AE (wave 20): the same
# configs as Y, each on a fresh H200 right after its calibration.
MACHINE_SPLITS = {"Y": "heldout_machine_y", "L": "heldout_machine_l", "M": "heldout_machine_m",
                  "N": "heldout_machine_n", "O": "heldout_machine_o", "J": "heldout_machine_j",
                  "I": "heldout_machine_i", "AA": "heldout_machine_aa",
                  "AB": "heldout_machine_ab", "AC": "heldout_machine_ac",
                  "AD": "heldout_machine_ad", "AE": "heldout_machine_ae"}
# The machines whose own-speed rows (own_speed_rows) pool into `unseen` / `calibrated`, the groups whose
# tripwires came from them; a later machine's own-speed rows take its machine split (they would move those).
OWN_SPEED_POOLED = frozenset({"F", "Y"})


def machine_split(machine: str, fit_config: bool) -> str:
    """The split of a held-out machine's row: HELDOUT_MACHINE(_FIT_CONFIG), or the machine's own."""
    own = MACHINE_SPLITS.get(machine)
    if own is not None:
        return f"{own}_fitcfg" if fit_config else own
    return HELDOUT_MACHINE_FIT_CONFIG if fit_config else HELDOUT_MACHINE


@dataclass(frozen=True)
class HostCase:
    config: str
    kind: str  # decode_eager, decode_graph, train_eager, train_compiled, infer_eager, infer_compiled
    split: str  # for the host model (host.framework_ops was fitted on the "fit" ones)
    measured_us: float
    record: dict[str, Any]
    trace: Path
    trace_split: str = "held-out"  # for trace predict (host.trace_profiler was fitted on the "fit" ones)


def case_kind(rec: dict[str, Any]) -> str:
    mode = str(rec.get("mode", "eager"))
    phase = str(rec.get("phase", ""))
    if phase == "decode":
        return "decode_graph" if mode == "cuda_graph" else "decode_eager"
    base = "train" if phase == "train" else "infer"
    return f"{base}_{'compiled' if mode == 'compiled' else 'eager'}"


def machine_folders(folder: Path) -> list[tuple[str, Path]]:
    """(label, folder) of every host_context.json run: `folder` itself, or one subfolder per machine."""
    if (folder / "host_context.json").is_file():
        return [("", folder)]
    if not folder.is_dir():
        return []
    return [(sub.name, sub) for sub in sorted(folder.iterdir()) if (sub / "host_context.json").is_file()]


def trace_path(folder: Path, name: str) -> Path | None:
    for p in (folder / "traces" / name, folder / name):
        if p.is_file():
            return p
    return None


def host_cases(folder: Path) -> list[HostCase]:
    out = []
    for machine, sub in machine_folders(folder):
        doc = json.loads((sub / "host_context.json").read_text())
        for rec in doc.get("records", []):
            if rec.get("bench") != "step" or not rec.get("trace") or not rec.get(REFERENCE):
                continue
            trace = trace_path(sub, str(rec["trace"]))
            if trace is None:
                continue
            split = "fit" if rec.get("model") in FIT_MODELS and rec.get("mode") in HOST_MODEL_FIT_MODES else "held-out"
            trace_split = "fit" if rec.get("model") in FIT_MODELS and rec.get("mode") in TRACE_FIT_MODES else "held-out"
            label = f"{machine}/{rec['config']}" if machine else str(rec["config"])
            out.append(HostCase(label, case_kind(rec), split, float(rec[REFERENCE]), rec, trace, trace_split))
    return out


MAX_TRACED_STEPS = 8  # traced steps a trace predict median reads, counting back from the last


def traced_steps(path: Path) -> list[Any]:
    """Every traced step of `path` the importer reads, last first (`ProfilerStep#N` markers; a
    CUDA-graph trace's earlier steps, whose graph launch the importer cannot link, are left out)."""
    from sim.errors import InputError
    from sim.ingest.build import build_step
    from sim.ingest.kineto import read_steps

    key = str(path.resolve())
    if key not in _IMPORTED:
        steps = []
        # one first pass over the file for every step (the trace is read once per step after it)
        for k, ev in enumerate(read_steps(path, [str(-k) for k in range(1, MAX_TRACED_STEPS + 1)]), start=1):
            try:
                if isinstance(ev, InputError):
                    raise ev
                steps.append(build_step(ev))
            except InputError as e:
                if "no such step" in str(e) or "no ProfilerStep# markers" in str(e):
                    break
                if k == 1:
                    raise
        _IMPORTED[key] = steps
    return _IMPORTED[key]


def predict(case: HostCase, hw: Hardware) -> dict[str, float]:
    """Predicted step time (us) of one case on both paths. The reference `sync_us` is a median over
    many unprofiled steps, and one traced step is one sample of a host whose speed varies from step
    to step (the three traced steps of one trace differ in span by up to ~25 %, docs/host.md): trace
    predict is the median of the predictions of every traced step. `--host model` prices the host
    itself and replays the last step only."""
    import statistics

    from sim.replay import replay

    steps = traced_steps(case.trace)
    trace = statistics.median(float(replay(case.trace, hw, "predict", idle_start=True, imported=s)[0]["predicted_time_us"])
                              for s in steps)
    model = replay(case.trace, hw, "predict", host="model", idle_start=True, imported=steps[0])[0]["predicted_time_us"]
    return {"trace": float(trace), "model": float(model)}


_CACHE: dict[tuple[str, str, str], tuple[list[Row], list[GainRow]]] = {}
_IMPORTED: dict[str, list[Any]] = {}  # trace path -> its imported steps, last first (independent of the profile)


def _pairs(cases: list[HostCase]) -> list[tuple[HostCase, HostCase, str]]:
    """(eager, variant, label): a CUDA graph against the eager decode of the same batch (no_grad,
    else inference_mode), a compiled step against the eager one of the same model, size and phase."""
    out = []
    by_config = {c.config: c for c in cases}  # labels keep the machine: pairs never cross machines
    for c in cases:
        if c.kind == "decode_graph":
            stem = c.config.removesuffix("_graph")
            eager = by_config.get(f"{stem}_nograd") or by_config.get(f"{stem}_inference")
            if eager is not None:
                out.append((eager, c, "cuda_graph"))
        elif c.kind.endswith("_compiled"):
            eager = by_config.get(c.config.removesuffix("_compiled"))
            if eager is not None:
                out.append((eager, c, "compiled"))
    return out


def host_rows(folder: Path, hw: Hardware) -> tuple[list[Row], list[GainRow]]:
    """Rows and gains of every case under `folder` (cached per profile and folder within a process:
    replaying some 60 traces twice takes a minute)."""
    key = (hw.name, hw.source_file, str(folder.resolve()))
    if key not in _CACHE:
        _CACHE[key] = _host_rows(folder, hw)
    rows, gains = _CACHE[key]
    return list(rows), list(gains)


def _host_rows(folder: Path, hw: Hardware) -> tuple[list[Row], list[GainRow]]:
    cases = host_cases(folder)
    preds = {c.config: predict(c, hw) for c in cases}
    rows: list[Row] = []
    for c in cases:
        p = preds[c.config]
        rows.append(Row(HOST_TABLE, "trace_predict", c.config, c.trace_split, c.measured_us, p["trace"]))
        rows.append(Row(HOST_TABLE, f"host_model/{c.kind}", c.config, c.split, c.measured_us, p["model"]))
    gains: list[GainRow] = []
    for eager, var, label in _pairs(cases):
        measured = 1.0 - var.measured_us / eager.measured_us
        for path in ("trace", "model"):
            predicted = 1.0 - preds[var.config][path] / preds[eager.config][path]
            split = var.trace_split if path == "trace" else var.split
            gains.append(GainRow(f"host/{path}", eager.config, f"{label} ({split})", measured, predicted))
    return rows, gains


def heldout_machine_rows(root: Path, hw: Hardware) -> tuple[list[Row], list[GainRow]]:
    """Rows and gains of the machines held out by machine (HELDOUT_MACHINE_DIRS under `root`), labelled
    `<machine>/<config>` and split by `machine_split` (gains too: their `split` is the machine's); gains
    keep their variant (`compiled (held-out)`), so `gain_groups` picks the held-out-config pairs."""
    import dataclasses

    rows: list[Row] = []
    gains: list[GainRow] = []
    for rel in HELDOUT_MACHINE_DIRS:
        folder = root / rel
        if not folder.is_dir():
            continue
        machine = folder.parent.name.removeprefix("machine_")
        r, g = host_rows(folder, hw)
        rows += [dataclasses.replace(x, label=f"{machine}/{x.label}", split=machine_split(machine, x.split != "held-out"))
                 for x in r]
        gains += [dataclasses.replace(x, bucket=f"{machine}/{x.bucket}", split=machine_split(machine, False)) for x in g]
    return rows, gains


# --host model at the measured step's own host speed (issue 15): records since wave 8 carry a host clock
# (sim.calibrate.gpu.host_context.host_clock: us per call of a fixed tight loop, just before and just after
# the step's timing). The clock at the profile's reference host speed is the profile's `host.clock_us`, fitted
# by the calibration (sim.calibrate.host_fit.fit_host_clock) from calibration-split steps only. A step's own
# speed is its clock (geometric mean of before and after) over that reference; where the profile applies the
# level-aware relation (host.clock_level, sim.calibrate.host_fit.fit_clock_level), that ratio to its exponent.
HOST_CLOCK_KEYS = ("empty_us", "view_us", "add_us")
OWN_SPEED = "host_model_own_speed"


def host_clock_us(clock: dict[str, Any]) -> float | None:
    """Geometric mean of the host clock's ops (us per call), None without all of them."""
    import math

    vals = [float(clock[k]) for k in HOST_CLOCK_KEYS if isinstance(clock, dict) and k in clock]
    if len(vals) != len(HOST_CLOCK_KEYS) or min(vals) <= 0:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def reference_clock(hw: Hardware) -> float | None:
    """The host clock (us per op) at the profile's reference host speed: host.clock_level's reference where the
    profile applies that relation, else `host.clock_us`; None when the profile has neither (then no step is
    priced at its own speed)."""
    return hw.host_clock_level[1] if hw.host_clock_level is not None else hw.host_clock_us


def reference_exponent(hw: Hardware) -> float:
    """How the host speed follows the clock: host.clock_level's exponent where applied, else 1 (linear)."""
    return hw.host_clock_level[0] if hw.host_clock_level is not None else 1.0


def own_speed_split(machine: str, fit_config: bool) -> str:
    """The split of a held-out machine's own-speed row: `calibrated` / `unseen` for the machines those groups
    were gated on (OWN_SPEED_POOLED), the machine's own split (machine_split) for any later one."""
    if machine in OWN_SPEED_POOLED:
        return "calibrated" if fit_config else "unseen"
    return machine_split(machine, fit_config)


def own_speed(record: dict[str, Any], reference_us: float, exponent: float = 1.0) -> float | None:
    """The step's host speed against the reference, from its clock before and after its timing (their
    geometric mean c): (c / reference_us) ** exponent (sim.costmodel.host.speed_at_clock)."""
    clock = record.get("host_clock") or {}
    before, after = host_clock_us(clock.get("before", {})), host_clock_us(clock.get("after", {}))
    if before is None or after is None:
        return None
    return float(((before * after) ** 0.5 / reference_us) ** exponent)


def own_speed_rows(root: Path, hw: Hardware) -> list[Row]:
    """`host_model_own_speed/<kind>` rows: --host model at each clocked step's own host speed, on the
    held-out machines' steps (HELDOUT_MACHINE_DIRS) that carry a host clock, against the profile's host.clock_us
    (none without it). Split by own_speed_split: `unseen` (the configs no fit used) or `calibrated` on the
    pooled machines, the machine's own split on a later one."""
    return list(_own_speed(root, hw)[0])


def own_speed_gains(root: Path, hw: Hardware) -> list[GainRow]:
    """Gains (`host/own_speed`: compiled over eager, CUDA graph over eager) of the held-out machines' pairs whose
    two steps both carry a host clock, each step priced at its OWN measured host speed (own_speed_rows' predictions):
    a pair's steps may run at different host levels (machine N's llama 1x128 eager at a clock of ~2.8 us, its
    compiled step at ~6.1 us), which the reference-speed gains (heldout_machine_rows) cannot follow. Split: the
    machine's own (machine_split; `heldout_machine` for F and any unnamed one), the variant keeps the config's
    split (`compiled (held-out)`), as heldout_machine_rows' gains."""
    return list(_own_speed(root, hw)[1])


def _own_speed(root: Path, hw: Hardware) -> tuple[list[Row], list[GainRow]]:
    from sim.replay import replay

    ref, exponent = reference_clock(hw), reference_exponent(hw)
    key = (hw.name, hw.source_file, f"{OWN_SPEED}:{ref}:{exponent}:{root.resolve()}")
    if key in _CACHE:
        return _CACHE[key]
    rows: list[Row] = []
    gains: list[GainRow] = []
    for rel in HELDOUT_MACHINE_DIRS if ref is not None else ():
        folder = root / rel
        machine = folder.parent.name.removeprefix("machine_")
        priced: list[HostCase] = []
        preds: dict[str, float] = {}
        for c in host_cases(folder):
            speed = own_speed(c.record, ref, exponent) if ref is not None else None
            if speed is None:
                continue
            pred = replay(c.trace, hw, "predict", host="model", idle_start=True, imported=traced_steps(c.trace)[0],
                          host_speed=speed)[0]["predicted_time_us"]
            preds[c.config] = float(pred)
            priced.append(c)
            rows.append(Row(HOST_TABLE, f"{OWN_SPEED}/{c.kind}", f"{machine}/{c.config}",
                            own_speed_split(machine, c.split == "fit"), c.measured_us, float(pred)))
        for eager, var, label in _pairs(priced):
            gains.append(GainRow("host/own_speed", f"{machine}/{eager.config}", f"{label} ({var.split})",
                                 1.0 - var.measured_us / eager.measured_us, 1.0 - preds[var.config] / preds[eager.config],
                                 split=machine_split(machine, False)))
    _CACHE[key] = (rows, gains)
    return rows, gains


def _median(xs: list[float]) -> float:
    import statistics

    return statistics.median(xs) if xs else 0.0


def gain_groups(gains: list[GainRow]) -> dict[str, list[GainRow]]:
    """Held-out gains by prediction path and variant: `trace/cuda_graph`, `model/compiled`, ..."""
    out: dict[str, list[GainRow]] = {}
    for g in gains:
        if not g.variant.endswith("(held-out)"):
            continue
        key = f"{g.case.split('/', 1)[1]}/{g.variant.split(' ', 1)[0]}"
        out.setdefault(key, []).append(g)
    return out


def check_host_gains(gains: list[GainRow], thresholds: dict[str, Any]) -> list[str]:
    """Violations of `host_gains[<path>/<variant>].median_abs_pp` (held-out pairs)."""
    limits = thresholds.get("host_gains") or {}
    problems = []
    for key, rows in sorted(gain_groups(gains).items()):
        limit = (limits.get(key) or {}).get("median_abs_pp")
        med = _median([abs(g.error_pp) for g in rows])
        if limit is not None and med > float(limit):
            problems.append(f"host gains {key}: median |error| {med:.1f} pp > {float(limit):.1f} pp")
    return problems


def host_gain_lines(gains: list[GainRow]) -> list[str]:
    lines = []
    for key, rows in sorted(gain_groups(gains).items()):
        detail = ", ".join(f"{g.bucket} {g.measured_gain * 100:+.1f}% vs {g.predicted_gain * 100:+.1f}%" for g in rows)
        lines.append(f"host gains {key}: {len(rows)} pairs, median |error| "
                     f"{_median([abs(g.error_pp) for g in rows]):.1f} pp ({detail})")
    return lines
