"""The seed's own question on held-out data: which block size of a fused kernel, and by how much.

The held-out Triton bias+GELU+dropout kernels (wave 2: validation/h200/heldout_kernels/{A,C}.json,
BLOCK 1024-16384 x 4/8 warps, forward and backward; wave 4: heldout_w4, BLOCK 1024-16384 x 2/16
warps) were measured at every config of a bucket (machine, kernel, tokens, hidden). No fit uses
them. Per bucket, the micro gain of a config is its kernel-only gain over the bucket's reference
config (the smallest BLOCK at the fewest warps: the kernel as first written), 1 - t / t_ref,
measured and predicted; the error is in percentage points. The ranking check compares every pair of
configs whose measured times differ by more than `RANK_NOISE`: the model must order them the same way.

Bad measurements are left out by a rule on the measurements alone (never on the model's error), and said so
(`excluded_buckets`, printed by validate): a machine's bucket whose configs took, at the median, more than
`SUSPECT_SLOWER` times what the other machines that measured the same configs took (they agreeing with each
other within `WITNESS_AGREE`), with its own samples scattered (median / fastest sample over `SUSPECT_SPREAD`
at the median config). The witnesses are the wave-2 machines and machine F (held out by machine, the same
harness: validation/h200/machine_F/heldout_kernels.json), read here as measurements only.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.calibrate.heldout_cases import heldout_cases
from sim.hardware import Hardware

RANK_NOISE = 0.05  # the acceptance: ranking right wherever configs differ by more than 5 %
# A bucket measured this many times slower than the other machines' same configs (median over its configs)...
SUSPECT_SLOWER = 1.5
# ...with its own samples this scattered (median over its configs of median / fastest sample)...
SUSPECT_SPREAD = 1.3
# ...where the other machines agree with each other (median over configs of slowest / fastest) within this.
WITNESS_AGREE = 1.15


@dataclass(frozen=True)
class ExcludedBucket:
    """One machine's bucket of the fused configs left out as a bad measurement (see the module docstring)."""

    table: str
    bucket: str
    configs: int
    slower: float  # median over its configs of its time / the witnesses' median time
    spread: float  # median over its configs of its median / fastest sample
    witnesses: tuple[str, ...]
    witness_spread: float  # median over configs of the witnesses' slowest / fastest time

    @property
    def reason(self) -> str:
        return (f"measured {self.slower:.2f}x the time machines {', '.join(self.witnesses)} measured for the same "
                f"{self.configs} configs (median; they agree within {100 * (self.witness_spread - 1):.0f} %), its "
                f"samples' median {self.spread:.2f}x their fastest: a bad measurement")


@dataclass(frozen=True)
class ConfigTime:
    """One config of a fused kernel in one bucket: measured and predicted kernel time."""

    table: str
    bucket: str
    config: str
    block: int
    warps: int
    measured_us: float
    predicted_us: float


@dataclass(frozen=True)
class ConfigGain:
    table: str
    bucket: str
    config: str
    reference: str
    measured_gain: float
    predicted_gain: float

    @property
    def error_pp(self) -> float:
        return 100.0 * (self.predicted_gain - self.measured_gain)


@dataclass(frozen=True)
class ConfigRank:
    table: str
    bucket: str
    measured_order: tuple[str, ...]
    predicted_order: tuple[str, ...]
    wrong_pairs: tuple[tuple[str, str], ...]  # (faster measured, slower measured) the model orders the other way
    pairs: int  # pairs measured more than RANK_NOISE apart


def _configs(table: str, machine: str, path: Path, hw: Hardware, keep: Callable[[dict[str, Any]], bool]) -> list[ConfigTime]:
    out = []
    for case in heldout_cases(path):
        rec = case.record
        if case.family != "fused_heldout" or case.measured_us <= 0 or not keep(rec):
            continue
        if rec.get("timing") == "profiled":  # a Triton kernel timed by the profiler (wave 4), as in its table
            case = dataclasses.replace(case, profiled=True)
        bucket = _bucket_name(rec, machine)
        block, warps = int(rec["BLOCK"]), int(rec["num_warps"])
        out.append(ConfigTime(table, bucket, f"B{block}/w{warps}", block, warps, case.measured_us, case.predicted_us(hw)))
    return out


def _bucket_name(rec: dict[str, Any], machine: str) -> str:
    phase = str(rec.get("kernel", "")).rsplit("_", 1)[-1]
    return f"{phase} tokens={rec['tokens']} hidden={rec['hidden']} [{machine}]"


def _witness_records(root: Path) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """machine -> (bucket without machine, config) -> record, for the wave-2 machines and machine F."""
    import json

    from sim.validate.wave2 import MACHINES

    files = {m: root / "validation" / "h200" / "heldout_kernels" / f"{m}.json" for m in MACHINES}
    files["F"] = root / "validation" / "h200" / "machine_F" / "heldout_kernels.json"
    out: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for m, path in files.items():
        if not path.is_file():
            continue
        recs = out.setdefault(m, {})
        for r in json.loads(path.read_text()).get("records") or []:
            if r.get("bench") == "fused_bgd" and float(r.get("time_us") or 0) > 0 and float(r.get("min_us") or 0) > 0:
                recs[(_bucket_name(r, "").rsplit(" [", 1)[0], f"B{r['BLOCK']}/w{r['num_warps']}")] = r
    return out


def excluded_buckets(root: Path) -> list[ExcludedBucket]:
    """The wave-2 buckets left out as bad measurements (see the module docstring)."""
    from sim.validate.wave2 import MACHINES

    recs = _witness_records(root)
    out = []
    for m in MACHINES:
        mine = recs.get(m, {})
        for bucket in sorted({b for b, _ in mine}):
            ratios, spreads, agree, witnesses = [], [], [], set()
            for (b, cfg), r in mine.items():
                if b != bucket:
                    continue
                spreads.append(float(r["time_us"]) / float(r["min_us"]))
                other = {o: float(recs[o][(b, cfg)]["time_us"]) for o in recs if o != m and (b, cfg) in recs[o]}
                if other:
                    ratios.append(float(r["time_us"]) / statistics.median(other.values()))
                    agree.append(max(other.values()) / min(other.values()))
                    witnesses |= set(other)
            if len(ratios) < 3:
                continue
            slower, spread, wagree = statistics.median(ratios), statistics.median(spreads), statistics.median(agree)
            if slower > SUSPECT_SLOWER and spread > SUSPECT_SPREAD and wagree <= WITNESS_AGREE:
                out.append(ExcludedBucket("heldout", f"{bucket} [{m}]", len(ratios), round(slower, 3),
                                          round(spread, 3), tuple(sorted(witnesses)), round(wagree, 3)))
    return out


def fused_config_times(hw: Hardware, root: Path, exclude: bool = True) -> list[ConfigTime]:
    """Every held-out fused config with its bucket (wave 2 machines A and C, wave 4 and machine AE clean L2);
    with `exclude`, less the buckets `excluded_buckets` leaves out."""
    from sim.validate.wave2 import MACHINES, WAVE4_TABLES

    out: list[ConfigTime] = []
    bad = {e.bucket for e in excluded_buckets(root)} if exclude else set()
    for machine in MACHINES:
        path = root / "validation" / "h200" / "heldout_kernels" / f"{machine}.json"
        if path.is_file():
            out += [t for t in _configs("heldout", machine, path, hw, lambda rec: True) if t.bucket not in bad]
    for table, machine, rel in WAVE4_TABLES:
        if (root / rel).is_file():
            out += _configs(table, machine, root / rel, hw, lambda rec: rec.get("l2_state") == "clean"
                            and not rec.get("uneven_calls"))
    return out


def config_gains(times: list[ConfigTime], noise: float = RANK_NOISE) -> tuple[list[ConfigGain], list[ConfigRank]]:
    """Micro gains over each bucket's reference config, and the ranking of its configs."""
    buckets: dict[tuple[str, str], list[ConfigTime]] = {}
    for t in times:
        buckets.setdefault((t.table, t.bucket), []).append(t)
    gains, ranks = [], []
    for (table, bucket), cfgs in buckets.items():
        ref = min(cfgs, key=lambda c: (c.block, c.warps))
        for c in cfgs:
            if c is not ref:
                gains.append(ConfigGain(table, bucket, c.config, ref.config, 1 - c.measured_us / ref.measured_us,
                                        1 - c.predicted_us / ref.predicted_us))
        wrong, pairs = [], 0
        for i, a in enumerate(cfgs):
            for b in cfgs[i + 1:]:
                fast, slow = (a, b) if a.measured_us <= b.measured_us else (b, a)
                if slow.measured_us <= fast.measured_us * (1 + noise):
                    continue
                pairs += 1
                if fast.predicted_us > slow.predicted_us:
                    wrong.append((fast.config, slow.config))
        ranks.append(ConfigRank(table, bucket, tuple(c.config for c in sorted(cfgs, key=lambda c: c.measured_us)),
                                tuple(c.config for c in sorted(cfgs, key=lambda c: c.predicted_us)), tuple(wrong), pairs))
    return gains, ranks


def config_quantities(gains: list[ConfigGain], ranks: list[ConfigRank]) -> dict[str, dict[str, float]]:
    """Gated quantities per table: `fused_configs/<table>/unseen` (every config is held out)."""
    out: dict[str, dict[str, float]] = {}
    for table in sorted({g.table for g in gains}):
        errs = [abs(g.error_pp) for g in gains if g.table == table]
        rk = [r for r in ranks if r.table == table]
        out[f"fused_configs/{table}/unseen"] = {
            "median_abs_pp": statistics.median(errs), "max_abs_pp": max(errs), "n": float(len(errs)),
            "wrong_pairs": float(sum(len(r.wrong_pairs) for r in rk)), "pairs": float(sum(r.pairs for r in rk)),
            "wrong_buckets": float(sum(1 for r in rk if r.wrong_pairs)), "buckets": float(len(rk))}
    return out


def config_lines(gains: list[ConfigGain], ranks: list[ConfigRank],
                 excluded: list[ExcludedBucket] | None = None) -> list[str]:
    """One summary line per table, and one per bucket left out (the validate command prints them)."""
    lines = [f"fused block-size configs ({e.table}): bucket {e.bucket} left out: {e.reason}" for e in excluded or []]
    for key, q in config_quantities(gains, ranks).items():
        table = key.split("/")[1]
        lines.append(f"fused block-size configs ({table}, held out): {int(q['n'])} config×bucket micro gains, median "
                     f"|error| {q['median_abs_pp']:.1f} pp (max {q['max_abs_pp']:.1f}); ranking wrong in "
                     f"{int(q['wrong_pairs'])} of {int(q['pairs'])} pairs measured more than {RANK_NOISE:.0%} apart "
                     f"({int(q['wrong_buckets'])} of {int(q['buckets'])} buckets)")
    return lines


def config_markdown(gains: list[ConfigGain], ranks: list[ConfigRank]) -> str:
    lines = ["## Fused kernels: block-size configs (held out)", "",
             "Micro gain = 1 − config time / reference config time (the bucket's smallest BLOCK at the fewest warps), "
             "kernel only. Error in percentage points. Ranking: pairs of configs measured more than "
             f"{RANK_NOISE:.0%} apart that the model orders the other way.", "",
             "| table | bucket | config | reference | measured gain | predicted gain | error (pp) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for g in gains:
        lines.append(f"| {g.table} | {g.bucket} | {g.config} | {g.reference} | {g.measured_gain:+.1%} | "
                     f"{g.predicted_gain:+.1%} | {g.error_pp:+.1f} |")
    lines += ["", "| table | bucket | measured order (fastest first) | predicted order | wrong pairs |",
              "| --- | --- | --- | --- | --- |"]
    for r in ranks:
        wrong = ", ".join(f"{a} < {b}" for a, b in r.wrong_pairs) or "none"
        lines.append(f"| {r.table} | {r.bucket} | {', '.join(r.measured_order)} | {', '.join(r.predicted_order)} | "
                     f"{wrong} |")
    return "\n".join(lines) + "\n"
