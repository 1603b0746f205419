"""Host-time validation (sim/validate/host.py) on a host_context folder made of committed data: the
H200 fixture traces and the same configs' unprofiled step times measured in the same session
(validation/h200/decode_step.json, mlp_step.json, transformer_step.json)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from sim.hardware import load_profile
from sim.validate.host import check_host_gains, host_cases, host_gain_lines, host_rows
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "traces"
VAL = ROOT / "validation" / "h200"


def _time(file: str, **match: object) -> float:
    doc = json.loads((VAL / file).read_text())
    rec = next(r for r in doc["records"] if all(r.get(k) == v for k, v in match.items()))
    return float(rec["time_us"])


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("host_context")
    configs = [
        ("decode_b8_nograd", "decode_eager", {"model": "gpt_decode", "phase": "decode", "mode": "eager"},
         _time("decode_step.json", variant="eager", batch=8, kv_len=512)),
        ("decode_b8_graph", "decode_cudagraph", {"model": "gpt_decode", "phase": "decode", "mode": "cuda_graph"},
         _time("decode_step.json", variant="cudagraph", batch=8, kv_len=512)),
        ("mlp_train_t2048", "mlp_eager", {"model": "mlp", "phase": "train", "mode": "eager"},
         _time("mlp_step.json", variant="eager", T=2048)),
        ("mlp_train_t2048_compiled", "mlp_compiled", {"model": "mlp", "phase": "train", "mode": "compiled"},
         _time("mlp_step.json", variant="compiled", T=2048)),
        ("gpt_train_b4_s1024", "transformer_eager", {"model": "gpt", "phase": "train", "mode": "eager"},
         _time("transformer_step.json", variant="eager", batch=4, seq=1024)),
    ]
    recs = []
    for cfg, fixture, info, t in configs:
        shutil.copy(FIX / f"{fixture}.json.gz", d / f"{cfg}.json.gz")
        recs.append({"bench": "step", "config": cfg, **info, "sync_us": t, "b2b_us": t, "trace": f"{cfg}.json.gz"})
    recs.append({"bench": "step", "config": "no_trace", "model": "mlp", "mode": "eager", "phase": "train", "sync_us": 1.0})
    (d / "host_context.json").write_text(json.dumps({"records": recs}))
    return d


def test_cases_are_split_by_model(folder: Path) -> None:
    cases = {c.config: c for c in host_cases(folder)}
    assert set(cases) == {"decode_b8_nograd", "decode_b8_graph", "mlp_train_t2048", "mlp_train_t2048_compiled",
                          "gpt_train_b4_s1024"}  # a record without a trace is no case
    assert cases["gpt_train_b4_s1024"].split == "fit"
    assert {c.split for n, c in cases.items() if n != "gpt_train_b4_s1024"} == {"held-out"}
    assert cases["decode_b8_graph"].kind == "decode_graph" and cases["mlp_train_t2048_compiled"].kind == "train_compiled"


def test_rows_and_gains(folder: Path) -> None:
    rows, gains = host_rows(folder, load_profile("h200-measured"))
    fams = {(r.family, r.label) for r in rows}
    assert ("trace_predict", "decode_b8_nograd") in fams and ("host_model/decode_graph", "decode_b8_graph") in fams
    assert len(rows) == 10 and all(r.predicted_us > 0 for r in rows)
    # the trace's own host timeline predicts the eager steps of the same session within 12 %
    trace = {r.label: r.error for r in rows if r.family == "trace_predict"}
    assert all(abs(trace[k]) <= 0.12 for k in ("decode_b8_nograd", "mlp_train_t2048", "mlp_train_t2048_compiled")), trace
    pairs = {(g.case, g.bucket, g.variant) for g in gains}
    assert ("host/trace", "decode_b8_nograd", "cuda_graph (held-out)") in pairs
    assert ("host/model", "mlp_train_t2048", "compiled (held-out)") in pairs
    graph = next(g for g in gains if g.case == "host/trace" and g.variant.startswith("cuda_graph"))
    assert graph.measured_gain > 0.5 and graph.predicted_gain > 0.5  # the graph removes most of the host-bound step
    assert check_host_gains(gains, {"host_gains": {"trace/cuda_graph": {"median_abs_pp": 0.0}}})
    assert not check_host_gains(gains, {"host_gains": {"trace/cuda_graph": {"median_abs_pp": 100.0}}})
    assert any(line.startswith("host gains trace/cuda_graph: 1 pairs") for line in host_gain_lines(gains))


def test_committed_host_context_runs_split_by_model() -> None:
    """calibration/h200/host_context holds one run per machine (A, B, C); the fit split is the GPT
    configs (eager: the table; compiled: the compiled calls in context) and nothing else, and pairs
    never cross machines."""
    from sim.validate.host import _pairs

    cases = host_cases(ROOT / "calibration" / "h200" / "host_context")
    assert {c.config.split("/")[0] for c in cases} == {"A", "B", "C"}
    fit = [c for c in cases if c.split == "fit"]
    assert fit and all(c.record["model"] == "gpt" and c.record["mode"] in ("eager", "compiled") for c in fit)
    assert {c.record["mode"] for c in fit} == {"eager", "compiled"}
    held = {c.record["model"] for c in cases if c.split == "held-out"}
    assert {"llama", "mlp", "gpt_decode"} <= held
    for eager, var, _ in _pairs(cases):
        assert eager.config.split("/")[0] == var.config.split("/")[0]


def test_gather_ops_read_only_their_rows() -> None:
    """An embedding lookup of one token in an 8192 x 1024 table moves one row, not the table
    (the decode step's index_select was priced at 2.1 ms before)."""
    from sim.replay import replay

    path = ROOT / "calibration" / "h200" / "host_context" / "A" / "traces" / "decode_b1_inference.json.gz"
    res = replay(path, load_profile("h200-measured"), "predict", keep_profiler=True)[0]
    assert res["families"]["elementwise"]["predicted_us"] < 100.0
    assert abs(res["error"]) < 0.05


def test_nll_loss_reads_one_value_per_row() -> None:
    """nll_loss on [128, 8192] log-probabilities reads 128 values, not the whole input (it was
    priced at 2.1 ms a kernel, which made the GPT training step's prediction twice too long)."""
    from sim.replay import replay

    path = ROOT / "calibration" / "h200" / "host_context" / "A" / "traces" / "gpt_train_b1_s128.json.gz"
    _, trace = replay(path, load_profile("h200-measured"), "predict")
    nll = [c.time_s for op, c in zip(trace.graph.ops, trace.costs, strict=True) if c is not None and "nll_loss" in op.name]
    assert len(nll) == 2 and max(nll) < 50e-6


def test_trace_predict_reads_every_traced_step() -> None:
    """One traced step is one sample of a drifting host: trace predict reads all of a trace's
    ProfilerSteps (last first), and a CUDA-graph trace keeps at least its last one."""
    from sim.validate.host import traced_steps

    host = ROOT / "calibration" / "h200" / "host_context" / "B" / "traces"
    steps = traced_steps(host / "mlp_train_t8192.json.gz")
    assert [s.events.step.name for s in steps] == ["ProfilerStep#4", "ProfilerStep#3", "ProfilerStep#2"]
    assert len({round(s.measured_time_us) for s in steps}) == 3  # the steps differ (6.8 / 5.6 / 5.6 ms spans)
    graph = traced_steps(host / "decode_b64_graph.json.gz")
    assert graph and graph[0].events.step.name == "ProfilerStep#4"


def test_heldout_machine_rows_have_their_own_splits(folder: Path, tmp_path: Path) -> None:
    """A machine held out by machine (validation/h200/machine_F) validates under its own splits:
    `heldout_machine` for configs no fit used, `heldout_machine_fitcfg` for the fit's configs; labels
    name the machine, and its gains are grouped like the fitted machines' held-out pairs."""
    from sim.validate.host import (
        HELDOUT_MACHINE,
        HELDOUT_MACHINE_FIT_CONFIG,
        gain_groups,
        heldout_machine_rows,
    )

    shutil.copytree(folder, tmp_path / "validation" / "h200" / "machine_F" / "host_context")
    rows, gains = heldout_machine_rows(tmp_path, load_profile("h200-measured"))
    assert len(rows) == 10 and all(r.label.startswith("F/") for r in rows)
    splits = {r.label: r.split for r in rows}
    assert splits["F/gpt_train_b4_s1024"] == HELDOUT_MACHINE_FIT_CONFIG
    assert splits["F/decode_b8_nograd"] == HELDOUT_MACHINE
    assert "trace/cuda_graph" in gain_groups(gains)
    assert heldout_machine_rows(tmp_path / "nothing", load_profile("h200-measured")) == ([], [])


def test_later_machines_validate_in_splits_of_their_own(folder: Path, tmp_path: Path) -> None:
    """Machines L and M (validation/h200/machine_{L,M}) are read as held-out machines, each under splits of its
    own, own-speed rows included (pooled, they would move the groups whose tripwires came from F and Y)."""
    from sim.validate.host import (
        HELDOUT_MACHINE_DIRS,
        heldout_machine_rows,
        machine_split,
        own_speed_split,
    )

    assert {"validation/h200/machine_L/host_context", "validation/h200/machine_M/host_context",
            "validation/h200/machine_N/host_context", "validation/h200/machine_O/host_context",
            "validation/h200/machine_J/host_context", "validation/h200/machine_I/host_context",
            "validation/h200/machine_AA/host_context",
            "validation/h200/machine_AB/host_context", "validation/h200/machine_AC/host_context",
            "validation/h200/machine_AD/host_context", "validation/h200/machine_AE/host_context"} <= set(HELDOUT_MACHINE_DIRS)
    assert all((ROOT / rel / "host_context.json").is_file() for rel in HELDOUT_MACHINE_DIRS)
    assert machine_split("L", False) == "heldout_machine_l" and machine_split("M", True) == "heldout_machine_m_fitcfg"
    assert own_speed_split("Y", False) == "unseen" and own_speed_split("F", True) == "calibrated"
    assert own_speed_split("L", False) == "heldout_machine_l" and own_speed_split("M", False) == "heldout_machine_m"
    assert machine_split("N", False) == "heldout_machine_n" and own_speed_split("N", True) == "heldout_machine_n_fitcfg"
    assert machine_split("O", False) == "heldout_machine_o" and own_speed_split("O", False) == "heldout_machine_o"
    assert machine_split("J", False) == "heldout_machine_j" and own_speed_split("J", True) == "heldout_machine_j_fitcfg"
    assert machine_split("I", False) == "heldout_machine_i" and own_speed_split("I", False) == "heldout_machine_i"
    assert machine_split("AA", True) == "heldout_machine_aa_fitcfg" and own_speed_split("AA", False) == "heldout_machine_aa"
    assert machine_split("AB", False) == "heldout_machine_ab" and own_speed_split("AB", True) == "heldout_machine_ab_fitcfg"
    assert machine_split("AC", False) == "heldout_machine_ac" and own_speed_split("AC", True) == "heldout_machine_ac_fitcfg"
    assert machine_split("AD", True) == "heldout_machine_ad_fitcfg" and own_speed_split("AD", False) == "heldout_machine_ad"
    assert machine_split("AE", False) == "heldout_machine_ae" and own_speed_split("AE", True) == "heldout_machine_ae_fitcfg"
    shutil.copytree(folder, tmp_path / "validation" / "h200" / "machine_L" / "host_context")
    rows, gains = heldout_machine_rows(tmp_path, load_profile("h200-measured"))
    splits = {r.label: r.split for r in rows}
    assert splits["L/decode_b8_nograd"] == "heldout_machine_l"
    assert splits["L/gpt_train_b4_s1024"] == "heldout_machine_l_fitcfg"
    assert gains and {g.split for g in gains} == {"heldout_machine_l"}


def test_own_speed_gains_price_each_step_of_a_pair_at_its_own_clock(folder: Path, tmp_path: Path) -> None:
    """A held-out machine's pair (eager, compiled) whose steps carry host clocks gets an own-speed gain: each step
    priced at its own clock (own_speed_rows' predictions), so a compiled step timed with the host at half the
    eager one's speed loses gain; a pair with a step lacking a clock gets none. Split: the machine's own."""
    from sim.validate.host import gain_groups, own_speed_gains, own_speed_rows

    hw = load_profile("h200-measured")
    ref = hw.host_clock_us
    assert ref is not None

    def clock(us: float) -> dict[str, dict[str, float]]:
        c = {"empty_us": us, "view_us": us, "add_us": us}
        return {"before": c, "after": c}

    def machine(name: str, compiled_clock: float | None) -> Path:
        root = tmp_path / name
        dest = root / "validation" / "h200" / "machine_N" / "host_context"
        shutil.copytree(folder, dest)
        doc = json.loads((dest / "host_context.json").read_text())
        for rec in doc["records"]:
            if rec["config"] == "mlp_train_t2048":
                rec["host_clock"] = clock(ref)
            elif rec["config"] == "mlp_train_t2048_compiled" and compiled_clock is not None:
                rec["host_clock"] = clock(compiled_clock)
        (dest / "host_context.json").write_text(json.dumps(doc))
        return root

    same, slow = machine("same", ref), machine("slow", 2 * ref)
    gains = {n: own_speed_gains(r, hw) for n, r in (("same", same), ("slow", slow))}
    assert all(len(g) == 1 for g in gains.values())
    g_same, g_slow = gains["same"][0], gains["slow"][0]
    assert (g_same.case, g_same.bucket, g_same.split) == ("host/own_speed", "N/mlp_train_t2048", "heldout_machine_n")
    assert g_same.measured_gain == g_slow.measured_gain  # the measurement is the measurement
    assert g_slow.predicted_gain < g_same.predicted_gain  # the compiled step priced on a host twice as slow
    pred = {r.label: r.predicted_us for r in own_speed_rows(slow, hw)}
    assert g_slow.predicted_gain == pytest.approx(1 - pred["N/mlp_train_t2048_compiled"] / pred["N/mlp_train_t2048"])
    assert list(gain_groups(gains["slow"])) == ["own_speed/compiled"]
    assert own_speed_gains(machine("unclocked", None), hw) == []  # the compiled step has no clock: no pair


def test_host_clock_is_the_geometric_mean_of_its_ops() -> None:
    from sim.validate.host import host_clock_us, own_speed

    assert host_clock_us({"empty_us": 2.0, "view_us": 1.0, "add_us": 4.0}) == pytest.approx(2.0)
    assert host_clock_us({"empty_us": 2.0, "view_us": 1.0}) is None  # an op missing: no clock
    rec = {"host_clock": {"before": {"empty_us": 2.0, "view_us": 1.0, "add_us": 4.0},
                          "after": {"empty_us": 8.0, "view_us": 4.0, "add_us": 16.0}}}
    assert own_speed(rec, 2.0) == pytest.approx(2.0)  # sqrt(2 x 8) / 2
    assert own_speed(rec, 2.0, 0.5) == pytest.approx(2.0 ** 0.5)  # the level-aware relation: (4 / 2) ** 0.5
    assert own_speed({}, 2.0) is None


def test_speed_at_clock_follows_the_profiles_relation() -> None:
    """Linear against host.clock_us while host.clock_level is not applied (the shipped profile); the fitted power
    law once applied; none on a profile with neither."""
    from sim.costmodel.host import speed_at_clock
    from sim.validate.host import reference_clock, reference_exponent

    hw = load_profile("h200-measured")
    assert hw.host_clock_level is None and reference_exponent(hw) == 1.0  # shipped: off
    assert speed_at_clock(2 * hw.host_clock_us, hw) == pytest.approx(2.0)
    on = replace(hw, host_clock_level=(0.75, 8.0))
    assert speed_at_clock(8.0, on) == pytest.approx(1.0) and speed_at_clock(4.0, on) == pytest.approx(0.5 ** 0.75)
    assert reference_clock(on) == 8.0 and reference_exponent(on) == 0.75
    assert speed_at_clock(5.0, load_profile("h200-sxm")) is None


@pytest.mark.slow  # replays machine F's and Y's traces (validate gates the same rows)
def test_own_host_speed_explains_machine_y() -> None:
    """Machine Y (validation/h200/machine_Y, wave 8) measured the llama and mlp inference steps with its
    host at the fast level (its host clock about half the reference) and the decode steps at the slow one.
    --host model at the reference speed prices them alike; at each step's own clock (the reference clock
    from the calibration runs' GPT steps, the profile's host.clock_us, never machine Y's validation steps) the
    errors fall; a profile without that clock prices no step at its own speed."""
    from sim.validate.host import heldout_machine_rows, own_speed_rows, reference_clock

    hw = load_profile("h200-measured")
    ref = reference_clock(hw)
    assert ref is not None and ref == hw.host_clock_us
    own = {r.label: r.error for r in own_speed_rows(ROOT, hw) if r.label.startswith("Y/")}
    at_ref = {r.label: r.error for r in heldout_machine_rows(ROOT, hw)[0]
              if r.label.startswith("Y/") and r.family.startswith("host_model/")}
    assert set(own) == set(at_ref) and len(own) >= 8
    fast = [k for k in own if "llama_infer_b1" in k or "mlp_infer" in k]
    assert fast and all(abs(own[k]) < abs(at_ref[k]) for k in fast)
    assert sorted(abs(e) for e in own.values())[len(own) // 2] < 0.5 * sorted(abs(e) for e in at_ref.values())[len(at_ref) // 2]
    assert own_speed_rows(ROOT, replace(hw, host_clock_us=None)) == []
    slower = {r.label: r.predicted_us for r in own_speed_rows(ROOT, replace(hw, host_clock_us=2 * ref))}
    assert all(slower[r.label] < r.predicted_us for r in own_speed_rows(ROOT, hw))  # a higher reference: faster host
