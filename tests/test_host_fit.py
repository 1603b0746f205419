"""The host table by framework op, fitted from real traces (sim/calibrate/host_fit.py), and its use:
replay --host model, workload ops with `framework_op`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sim.calibrate.host_fit import fit_table, trace_op_samples
from sim.costmodel.host import eager_dispatch_s, framework_op_s, host_op_s, op_key
from sim.graph import Op
from sim.hardware import Hardware, load_profile

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "traces"
HELDOUT = ROOT / "validation" / "h200" / "traces_heldout"
PER_EVENT = {"plain": 1.877, "shapes": 2.253, "stack": 1.326}


def _with_table(hw: Hardware, table: dict[str, dict[str, float]]) -> Hardware:
    us = 1e-6
    return replace(hw, framework_op_table_s={
        k: (v["us"] * us if "us" in v else None, v["grad_us"] * us if "grad_us" in v else None)
        for k, v in table.items()})


def test_op_key_strips_the_engine_prefix() -> None:
    assert op_key("autograd::engine::evaluate_function: MmBackward0") == "MmBackward0"
    assert op_key("aten::addmm") == "aten::addmm"


def test_samples_split_grad_from_no_grad() -> None:
    decode = trace_op_samples(FIXTURES / "decode_eager.json.gz", PER_EVENT)
    assert decode["aten::linear"].plain and not decode["aten::linear"].grad  # no_grad decode
    train = trace_op_samples(FIXTURES / "transformer_eager.json.gz", PER_EVENT)
    assert train["aten::linear"].grad and not train["aten::linear"].plain  # a training step's forward
    assert train["AddmmBackward0"].plain  # backward nodes record nothing
    assert "ProfilerStep#2" not in train and not any(k.startswith("Torch-Compiled") for k in train)


def test_profiler_cost_is_taken_off_per_event() -> None:
    a = trace_op_samples(FIXTURES / "decode_eager.json.gz", {"shapes": 0.0})["aten::layer_norm"].plain
    b = trace_op_samples(FIXTURES / "decode_eager.json.gz", {"shapes": 1.0})["aten::layer_norm"].plain
    diffs = [round(x - y, 6) for x, y in zip(a, b, strict=True)]
    assert all(d >= 1.0 and d == int(d) for d in diffs), diffs  # 1 us per event: whole events, the op included


def test_samples_are_brought_to_the_reference_host_speed() -> None:
    """A trace recorded on a host twice as slow as the reference gives half the in-context time per call
    once the profiler's cost (given at the reference speed) is off; the fit reads that speed from the
    trace's clock ops (fit_table's clock_us), and a trace at the reference clock is unchanged."""
    from sim.calibrate.host_fit import _imported_step
    from sim.costmodel.trace_host import trace_host_speed

    path = FIXTURES / "decode_eager.json.gz"
    at_ref = trace_op_samples(path, {"shapes": 1.0})["aten::layer_norm"].plain
    slow = trace_op_samples(path, {"shapes": 1.0}, speed=2.0)["aten::layer_norm"].plain
    zero = trace_op_samples(path, {"shapes": 0.0})["aten::layer_norm"].plain
    for r, s, z in zip(at_ref, slow, zero, strict=True):
        events = z - r  # the profiler's events inside the call (1 us each)
        assert s == pytest.approx(max(0.0, z / 2.0 - events), abs=1e-9)
    step = _imported_step(path)
    own_clock = {"aten::empty": 1.0, "cudaLaunchKernel": 1.0}
    speed = trace_host_speed(step, own_clock)
    assert speed != pytest.approx(1.0)
    scaled = fit_table([path], {"shapes": 1.0}, clock_us=own_clock)
    direct = trace_op_samples(path, {"shapes": 1.0}, speed=speed)["aten::layer_norm"].plain
    import statistics
    assert scaled["aten::layer_norm"]["us"] == round(statistics.median(direct), 2)
    assert fit_table([path], {"shapes": 1.0}) == fit_table([path], {"shapes": 1.0}, clock_us=None)


def test_table_fitted_on_decode_b8_predicts_other_decode_sizes() -> None:
    """Fit on the B=8 decode fixture only; predict the held-out B=1 and B=32 decode steps with
    `--host model` against their steps measured without the profiler. The flat per-kind costs
    (tight loops of one op) are 26-30 % short there."""
    from sim.replay import replay

    hw = load_profile("h200-measured")
    table = fit_table([FIXTURES / "decode_eager.json.gz"], PER_EVENT)
    assert set(table) >= {"aten::linear", "aten::layer_norm", "aten::scaled_dot_product_attention", "aten::add"}
    hwt = _with_table(hw, table)
    raw = json.loads((ROOT / "calibration" / "h200" / "raw" / "profiler_overhead.json").read_text())
    unprofiled = {r["path"]: r["unprofiled_step_us"] for r in raw["records"] if r.get("bench") == "heldout_trace"}
    for p in sorted(HELDOUT.glob("decode_eager_*.json.gz")):
        flat = replay(p, hw, "predict", host="model", unprofiled_us=unprofiled[p.name])[0]["unprofiled_error"]
        fitted = replay(p, hwt, "predict", host="model", unprofiled_us=unprofiled[p.name])[0]["unprofiled_error"]
        assert abs(fitted) <= 0.10 and abs(fitted) < abs(flat), (p.name, flat, fitted)


def test_workload_ops_use_the_table(h200: Hardware) -> None:
    hw = replace(h200, framework_op_table_s={"aten::linear": (20e-6, 45e-6), "aten::view": (3e-6, None)})
    plain = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear"})
    grad = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear", "requires_grad": True})
    unknown = Op(name="g", kind="gemm", attrs={"framework_op": "aten::bmm"})
    assert eager_dispatch_s(plain, hw) == pytest.approx(20e-6 - hw.launch_s)
    assert eager_dispatch_s(grad, hw) == pytest.approx(45e-6 - hw.launch_s)
    assert eager_dispatch_s(unknown, hw) == hw.eager_op_by_kind_s.get("gemm", hw.eager_op_s)
    views = Op(name="v", kind="host", attrs={"framework_op": "aten::view", "framework_ops": 4})
    assert host_op_s(views, hw) == pytest.approx(12e-6)
    assert framework_op_s("aten::view", hw, requires_grad=True) == pytest.approx(3e-6)  # no grad entry: plain


def test_training_workload_marks_forward_framework_ops(tmp_path: Path) -> None:
    from sim.workload import load_workload
    from tests.conftest import write_yaml

    doc = {"schema": "kernelsim.workload/v1", "name": "t", "kind": "training", "parameters": {"n": 1024},
           "distribution": {"buckets": [{"params": {"n": 1024}, "weight": 1}]},
           "tensors": {"x": {"shape": ["n"], "dtype": "bf16"}, "y": {"shape": ["n"], "dtype": "bf16"}},
           "ops": [{"name": "f", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "framework_op": "aten::gelu"},
                   {"name": "b", "kind": "elementwise", "reads": ["y"], "writes": ["x"], "phase": "backward",
                    "framework_op": "GeluBackward0"}]}
    wl = load_workload(write_yaml(tmp_path / "w.yaml", doc))
    g = wl.build(wl.params_for(wl.buckets()[0]))
    assert g.ops[0].attrs["requires_grad"] is True and "requires_grad" not in g.ops[1].attrs
    assert g.ops[1].attrs["framework_op"] == "GeluBackward0"


def test_the_table_is_written_into_the_profile_document_and_loads(tmp_path: Path) -> None:
    from sim.calibrate.host_fit import table_entries, with_table
    from sim.calibrate.profile_yaml import dump_profile, load_profile_doc

    table = fit_table([FIXTURES / "decode_eager.json.gz"], PER_EVENT)
    entries = table_entries(table, "NVIDIA H200 (test)", "2026-11-30", "../x/host_context", "a test fit")
    doc, header = load_profile_doc((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    once = with_table(doc, entries)
    assert with_table(once, entries) == once  # replacing the table again changes nothing
    assert list(once) == list(doc) and list(once["host"]) == list(doc["host"])  # keys keep their places
    assert {k: v for k, v in once["host"].items() if k != "framework_ops"} == \
        {k: v for k, v in doc["host"].items() if k != "framework_ops"}  # nothing else changed
    assert {k: v for k, v in once.items() if k != "host"} == {k: v for k, v in doc.items() if k != "host"}
    path = tmp_path / "p.yaml"
    path.write_text(dump_profile(once, header))
    hw = load_profile(str(path))
    assert hw.framework_op_table_s["aten::linear"][0] == pytest.approx(table["aten::linear"]["us"] * 1e-6)


HOST_CONTEXT = ROOT / "calibration" / "h200" / "host_context"


def test_a_foreach_call_is_priced_per_tensor(h200: Hardware) -> None:
    hw = replace(h200, framework_op_table_s={"aten::_foreach_mul_": (100e-6, None), "aten::add": (10e-6, None)},
                 framework_op_per_tensor_s={"aten::_foreach_mul_": (50, 1.5e-6)})
    assert framework_op_s("aten::_foreach_mul_", hw) == pytest.approx(100e-6)  # list length unknown: as measured
    assert framework_op_s("aten::_foreach_mul_", hw, tensors=50) == pytest.approx(100e-6)
    assert framework_op_s("aten::_foreach_mul_", hw, tensors=10) == pytest.approx(40e-6)
    assert framework_op_s("aten::_foreach_mul_", hw, tensors=250) == pytest.approx(400e-6)
    assert framework_op_s("aten::add", hw, tensors=10) == pytest.approx(10e-6)  # no per-tensor cost: flat
    op = Op(name="o", kind="host", attrs={"framework_op": "aten::_foreach_mul_", "framework_ops": 1, "tensors": 10})
    assert host_op_s(op, hw) == pytest.approx(40e-6)


def test_the_profile_refuses_a_per_tensor_cost_without_its_count() -> None:
    from pydantic import ValidationError

    from sim.schema.hardware import FrameworkOpCost

    with pytest.raises(ValidationError, match="go together"):
        FrameworkOpCost(us=100.0, per_tensor_us=1.0, source="estimate", note="a test")
    with pytest.raises(ValidationError, match="fixed part would be negative"):
        FrameworkOpCost(us=100.0, tensors=50, per_tensor_us=3.0, source="estimate", note="a test")


def test_the_foreach_bench_fit_and_the_tensor_count_of_a_step() -> None:
    from sim.calibrate.host_fit import fit_foreach_bench
    from sim.costmodel.trace_host import foreach_tensors
    from sim.ingest.kineto import read_step

    bench = fit_foreach_bench(HOST_CONTEXT)
    assert bench is not None and bench.n == 12
    assert 150 < bench.fixed_us < 260 and 10 < bench.per_tensor_us < 15  # AdamW foreach, 4-256 tensors, A/B/C
    # the GPT step's lists are not recorded (long lists): its AccumulateGrad nodes count the parameters;
    # the MLP's are, and both counts agree there
    assert foreach_tensors(read_step(HOST_CONTEXT / "A" / "traces" / "gpt_train_b1_s128.json.gz", None)) == 53
    assert foreach_tensors(read_step(HOST_CONTEXT / "A" / "traces" / "mlp_train_t128.json.gz", None)) == 16
    assert foreach_tensors(read_step(HOST_CONTEXT / "A" / "traces" / "gpt_infer_b1_s128.json.gz", None)) is None


def _per_tensor(hw: Hardware) -> Hardware:
    """The shipped profile with its foreach ops priced per tensor as the fit does (fit_table with the
    bench): the GPT fit steps' tensor count (53) and the bench's split of fixed and per-tensor cost."""
    from sim.calibrate.host_fit import fit_foreach_bench

    bench = fit_foreach_bench(HOST_CONTEXT)
    assert bench is not None
    per = {k: (53, bench.per_tensor_us_of(v[0] * 1e6, 53) * 1e-6) for k, v in hw.framework_op_table_s.items()
           if k.startswith("aten::_foreach_") and v[0] is not None}
    return replace(hw, framework_op_per_tensor_s=per)


def test_an_unseen_models_optimizer_is_priced_by_its_tensors() -> None:
    """The table's foreach costs were fitted on the GPT model (53 tensors). The MLP (16 tensors) and the
    Llama model (39), models no fit used, run the same AdamW: their traced foreach calls' in-context host
    time per step (less the profiler's in-context cost per event), against the table's price at their
    tensor count. Priced flat (the GPT's cost per call) the MLP's was 2.2x too much, Llama's 1.2-1.4x."""
    from sim.costmodel.trace_host import FOREACH_PREFIX

    shipped = load_profile("h200-measured")
    flat_hw = replace(shipped, framework_op_per_tensor_s={})
    hw = _per_tensor(flat_hw)
    for k, (n, per) in hw.framework_op_per_tensor_s.items():  # the shipped profile holds this fit
        assert shipped.framework_op_per_tensor_s[k] == (n, pytest.approx(per, rel=1e-3))
    for machine in ("A", "B", "C"):
        for config, tensors, flat_over in (("mlp_train_t128", 16, 1.8), ("llama_train_b1_s128", 39, 1.15)):
            path = HOST_CONTEXT / machine / "traces" / f"{config}.json.gz"
            samples = trace_op_samples(path, {"shapes": hw.trace_profiler_event_s["shapes"] * 1e6})
            foreach = {k: v for k, v in samples.items() if k.startswith(FOREACH_PREFIX)}
            steps = len(foreach["aten::_foreach_sqrt"].plain)
            measured = sum(sum(s.plain) for s in foreach.values()) / steps
            priced = sum(len(s.plain) / steps * (framework_op_s(k, hw, tensors=tensors) or 0.0)
                         for k, s in foreach.items()) * 1e6
            flat = sum(len(s.plain) / steps * (framework_op_s(k, flat_hw, tensors=tensors) or 0.0)
                       for k, s in foreach.items()) * 1e6
            assert abs(priced / measured - 1) < 0.15, (machine, config, measured, priced)
            assert flat / measured > flat_over, (machine, config, measured, flat)


def test_the_fit_writes_per_tensor_costs_into_a_profile(tmp_path: Path) -> None:
    """fit_table with the bench gives a foreach op its tensors and per-tensor cost (the recorded list
    length of the traced MLP step: 16), and the written profile loads with them."""
    from sim.calibrate.host_fit import fit_foreach_bench, table_entries, with_table
    from sim.calibrate.profile_yaml import dump_profile, load_profile_doc

    bench = fit_foreach_bench(HOST_CONTEXT)
    table = fit_table([HOST_CONTEXT / "A" / "traces" / "mlp_train_t128.json.gz"], PER_EVENT, foreach=bench)
    sqrt = table["aten::_foreach_sqrt"]
    assert sqrt["tensors"] == 16 and 0 < sqrt["per_tensor_us"] * 16 < sqrt["us"]
    assert "tensors" not in table["aten::linear"]
    doc, header = load_profile_doc((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    path = tmp_path / "p.yaml"
    path.write_text(dump_profile(with_table(doc, table_entries(table, "NVIDIA H200 (test)", "2026-11-30", "x",
                                                               "a test fit", bench)), header))
    hw = load_profile(str(path))
    assert hw.framework_op_per_tensor_s["aten::_foreach_sqrt"] == (16, pytest.approx(sqrt["per_tensor_us"] * 1e-6))
    assert framework_op_s("aten::_foreach_sqrt", hw, tensors=32) == pytest.approx((sqrt["us"] + 16 * sqrt["per_tensor_us"]) * 1e-6)


def test_a_workload_says_how_many_tensors_its_foreach_op_updates(tmp_path: Path, h200: Hardware) -> None:
    from sim.errors import InputError
    from sim.workload import load_workload
    from tests.conftest import write_yaml

    def doc(tensors: object) -> dict[str, object]:
        return {"schema": "kernelsim.workload/v1", "name": "t", "kind": "training", "parameters": {"layers": 4},
                "distribution": {"buckets": [{"params": {"layers": 4}, "weight": 1}]},
                "ops": [{"name": "adam_mul", "kind": "host", "framework_ops": 1, "phase": "optimizer",
                         "framework_op": "aten::_foreach_mul_", "tensors": tensors}]}

    wl = load_workload(write_yaml(tmp_path / "w.yaml", doc("2 * layers")))
    op = wl.build(wl.params_for(wl.buckets()[0])).ops[0]
    assert op.attrs["tensors"] == 8
    hw = replace(h200, framework_op_table_s={"aten::_foreach_mul_": (100e-6, None)},
                 framework_op_per_tensor_s={"aten::_foreach_mul_": (53, 1.5e-6)})
    assert host_op_s(op, hw) == pytest.approx((100 - 45 * 1.5) * 1e-6)
    with pytest.raises(InputError, match=r"ops\[0\]\.tensors: must be >= 1"):
        load_workload(write_yaml(tmp_path / "b.yaml", doc(0)))


def _bench_folder(tmp_path: Path, records: list[dict[str, object]]) -> Path:
    (tmp_path / "M").mkdir()
    (tmp_path / "M" / "host_context.json").write_text(json.dumps({"records": records}))
    return tmp_path


def test_loss_ops_are_their_bench_cost_plus_cross_entropys_in_context_surcharge(tmp_path: Path) -> None:
    """mse_loss from the loss_op bench: its tight-loop cost plus what cross-entropy costs more in context
    (table) than in the same bench; its backward node: the bench's backward difference to cross-entropy's
    plus the table's cross-entropy nodes. Nothing without the reference in the table."""
    from sim.calibrate.host_fit import fit_loss_ops

    folder = _bench_folder(tmp_path, [
        {"bench": "loss_op", "op": "aten::mse_loss", "fwd_grad_us": 30.0, "fwd_nograd_us": 20.0, "fwd_bwd_us": 150.0},
        {"bench": "loss_op", "op": "aten::cross_entropy_loss", "fwd_grad_us": 25.0, "fwd_nograd_us": 22.0,
         "fwd_bwd_us": 175.0}])
    table = {"aten::cross_entropy_loss": {"grad_us": 115.0}, "NllLossBackward0": {"us": 190.0},
             "LogSoftmaxBackward0": {"us": 70.0}}
    out = fit_loss_ops(folder, table)
    assert out["aten::mse_loss"]["grad_us"] == pytest.approx(30 + 90)
    assert out["aten::mse_loss"]["us"] == pytest.approx(20 + 90)
    assert out["MseLossBackward0"]["us"] == pytest.approx((150 - 30) - (175 - 25) + 260)
    assert fit_loss_ops(folder, {"NllLossBackward0": {"us": 190.0}}) == {}


def test_compiled_training_bench_fit_is_the_autograd_cost_per_call_and_per_input(tmp_path: Path) -> None:
    from sim.calibrate.host_fit import fit_compiled_training

    recs = [{"bench": "compiled_params", "params": p, "fwd_nograd_us": 50.0 + p, "fwd_grad_us": 50.0 + p + 20 + 2 * (p + 1)}
            for p in (1, 8, 32)]
    fit = fit_compiled_training(_bench_folder(tmp_path, recs))
    assert fit is not None and fit.grad_call_us == pytest.approx(20) and fit.grad_input_us == pytest.approx(2)
    one = tmp_path / "one"
    one.mkdir()
    assert fit_compiled_training(_bench_folder(one, recs[:1])) is None  # one design point: no slope


def test_compiled_calls_in_context_come_from_the_gpt_models_compiled_steps() -> None:
    """The fit reads the GPT model's compiled steps only (inference_mode on A/B/C, training on S): every
    region of their traced steps, none of the MLP's (it validates); a training forward costs more than an
    inference forward, and the shipped profile holds this fit."""
    from sim.calibrate.host_fit import COMPILED_TRAIN_DIR, fit_compiled_calls

    hw = load_profile("h200-measured")
    grad_input = hw.compiled_grad_input_s * 1e6
    fit = fit_compiled_calls([HOST_CONTEXT, HOST_CONTEXT.parent / COMPILED_TRAIN_DIR],
                             hw.trace_profiler_event_s["shapes"] * 1e6, grad_input)
    assert fit is not None and (fit.n_call, fit.n_grad, fit.n_backward) == (9, 5, 5)
    assert fit.grad_call_us is not None and fit.grad_call_us > 0
    assert hw.compiled_in_context_s == pytest.approx((fit.call_us * 1e-6, fit.grad_call_us * 1e-6,
                                                       (fit.backward_call_us or 0.0) * 1e-6))
    assert hw.compiled_in_context_s[0] > hw.compiled_call_s  # a real step's call costs more than a tight loop's


def test_a_compiled_training_forward_pays_autograds_call_per_input_tensor() -> None:
    """--host model prices a compiled forward called with autograd (AOTAutograd's CompiledFunction, 17 tensors
    in the MLP step) at the in-context call plus the autograd call and the per-input cost; without
    host.compiled_in_context, at the tight-loop prices."""
    from sim.costmodel.trace_host import model_host
    from sim.ingest import import_trace
    from sim.replay import step_graph

    hw = load_profile("h200-measured")
    path = HOST_CONTEXT / "A" / "traces" / "mlp_train_t128_compiled.json.gz"
    step = import_trace(path)
    assert [o.compiled_inputs for o in step.ops if o.compiled_call] == [17, 0]
    assert all(o.compiled_inputs == 0 for o in import_trace(HOST_CONTEXT / "A" / "traces" /
                                                           "gpt_infer_b1_s128_compiled.json.gz").ops)
    graph = step_graph(step, path)
    bare = replace(hw, compiled_in_context_s=None)
    fwd = next(i for i, o in enumerate(step.ops) if o.compiled_call == "forward")
    bwd = next(i for i, o in enumerate(step.ops) if o.compiled_call == "backward")
    with_ctx = model_host(graph, step, hw, keep_profiler=False).graph.ops
    without = model_host(graph, step, bare, keep_profiler=False).graph.ops
    call, grad_call, backward_call = hw.compiled_in_context_s or (0.0, 0.0, 0.0)
    assert with_ctx[fwd].host_s - without[fwd].host_s == pytest.approx(
        call + grad_call - hw.compiled_call_s - hw.compiled_grad_call_s)
    assert without[fwd].host_s > model_host(graph, step, replace(bare, compiled_grad_call_s=0.0, compiled_grad_input_s=0.0),
                                            keep_profiler=False).graph.ops[fwd].host_s
    assert with_ctx[bwd].host_s - without[bwd].host_s == pytest.approx(backward_call - hw.compiled_backward_call_s)


def test_a_workloads_compiled_forward_with_grad_pays_the_autograd_call(h200: Hardware) -> None:
    from sim.costmodel.host import compiled_call_s

    hw = replace(h200, compiled_call_s=70e-6, compiled_grad_call_s=25e-6, compiled_grad_input_s=1e-6,
                 compiled_backward_call_s=300e-6, compiled_backward_input_s=2e-6)
    op = Op(name="c", kind="elementwise", phase="forward", attrs={"requires_grad": True, "tensors": 17})
    assert compiled_call_s(op, hw) == pytest.approx(112e-6)
    assert compiled_call_s(op.with_(attrs={}), hw) == pytest.approx(70e-6)
    assert compiled_call_s(op.with_(attrs={"requires_grad": True}), hw) == pytest.approx(70e-6)  # no count: as before
    assert compiled_call_s(op.with_(phase="backward", attrs={"tensors": 17}), hw) == pytest.approx(334e-6)
    assert compiled_call_s(op.with_(phase="backward", attrs={}), hw) == pytest.approx(300e-6)


def test_host_clock_fit_is_the_median_with_a_bootstrap_interval() -> None:
    from sim.calibrate.host_fit import fit_host_clock

    assert fit_host_clock({}) is None
    fit = fit_host_clock({"Y": [5.0, 6.0, 7.0], "K": [6.5, 8.0]})
    assert fit is not None and fit.value == pytest.approx(6.5) and fit.n == 5
    assert fit.per_run == {"K": (7.25, 2), "Y": (6.0, 3)}
    assert fit.spread is not None and fit.spread[0] <= fit.value <= fit.spread[1]
    assert 5.0 <= fit.spread[0] and fit.spread[1] <= 8.0 and fit.spread[0] < fit.spread[1]
    assert fit_host_clock({"Y": [5.0, 6.0, 7.0], "K": [6.5, 8.0]}) == fit  # seeded: the same interval every run
    assert fit_host_clock({"Y": [6.0, 6.2]}).spread is None  # type: ignore[union-attr]  # too few for an interval


@pytest.mark.slow  # reads the calibration runs' GPT traces
def test_the_profiles_host_clock_is_the_fit_over_the_committed_calibration_runs() -> None:
    """host.clock_us comes from the calibration runs' own clocked GPT steps (calibration/h200/runs/*/host_cold),
    never from a held-out machine's validation steps; a run added there without a refit fails here."""
    from sim.calibrate.host_fit import fit_host_clock, host_clock_samples

    hw = load_profile("h200-measured")
    samples = host_clock_samples(ROOT / "calibration" / "h200" / "runs", hw.trace_clock_us)
    assert samples and all(len(v) >= 3 for v in samples.values())
    fit = fit_host_clock(samples)
    assert fit is not None and hw.host_clock_us == pytest.approx(fit.value)
    assert load_profile("h200-sxm").host_clock_us is None  # a profile without clocked host steps has none


def test_clock_level_fit_recovers_a_known_power_law() -> None:
    """host.clock_level: speed = (clock / reference) ** exponent, a line in logs over steps at both host levels;
    seeded bootstrap intervals around the values; no fit from one level's clock alone or a falling relation."""
    from sim.calibrate.host_fit import fit_clock_level

    def speed(c: float) -> float:
        return (c / 7.5) ** 0.8

    samples = {"Y": [(3.5, speed(3.5) * 1.02), (6.2, speed(6.2) * 0.98), (3.4, speed(3.4))],
               "K": [(6.4, speed(6.4) * 1.01), (3.6, speed(3.6) * 0.99), (6.0, speed(6.0))]}
    fit = fit_clock_level(samples)
    assert fit is not None and fit.n == 6 and fit.per_run == {"K": 3, "Y": 3}
    assert fit.exponent == pytest.approx(0.8, abs=0.05) and fit.reference_us == pytest.approx(7.5, rel=0.05)
    assert fit.exponent_spread is not None and fit.exponent_spread[0] <= fit.exponent <= fit.exponent_spread[1]
    assert fit.reference_spread is not None and fit.reference_spread[0] <= fit.reference_us <= fit.reference_spread[1]
    assert fit_clock_level(samples) == fit  # seeded
    exact = fit_clock_level({"Y": [(c, speed(c)) for c in (3.4, 3.6, 6.1, 6.5)]})
    assert exact is not None and exact.exponent == pytest.approx(0.8, abs=1e-3) and exact.reference_us == pytest.approx(7.5, abs=1e-3)
    assert fit_clock_level({"Y": [(6.0, 0.9), (6.0, 1.0), (6.0, 0.95)]}) is None  # one clock: nothing to fit
    assert fit_clock_level({"Y": [(3.5, 1.0), (6.0, 0.8), (6.2, 0.7)]}) is None  # speed falling with the clock
    assert fit_clock_level({"Y": [(3.5, 0.5), (6.0, 0.9)]}) is None  # too few


@pytest.mark.slow  # reads the calibration runs' traces
def test_the_profiles_clock_level_is_fitted_on_calibration_runs_at_both_levels() -> None:
    """host.clock_level comes from the calibration runs' clocked eager forward steps (never a held-out machine's
    validation steps), with steps at both host levels; the shipped profile carries it off (apply: false)."""
    from sim.calibrate.host_fit import clock_level_samples, fit_clock_level
    from sim.schema.hardware import HardwareProfileFile
    from sim.schema.loader import load_yaml_model

    hw = load_profile("h200-measured")
    samples = clock_level_samples(ROOT / "calibration" / "h200", hw.trace_clock_us)
    clocks = sorted(c for ps in samples.values() for c, _ in ps)
    assert len(samples) >= 5 and clocks[0] < 4.0 and clocks[-1] > 6.0  # both levels
    fit = fit_clock_level(samples)
    doc = load_yaml_model(ROOT / "hardware_profiles" / "h200-measured.yaml", HardwareProfileFile)
    lvl = doc.host.clock_level
    assert fit is not None and lvl is not None and not lvl.apply and hw.host_clock_level is None
    assert lvl.exponent == pytest.approx(fit.exponent) and lvl.reference_us == pytest.approx(fit.reference_us)
    assert lvl.spread is not None and lvl.spread[0] <= lvl.exponent <= lvl.spread[1] and lvl.n == fit.n


def test_in_context_ratio_is_the_median_over_ops_the_table_and_the_tight_loop_share() -> None:
    """host.missing_framework_ops.ratio: per op the table and the tight loop both measure, in-context `us` over the
    tight loop's median over runs; the median over those ops, with a seeded bootstrap interval; ops only one side
    has (a grad-only entry, a bench op with no table entry) do not count."""
    from sim.calibrate.host_fit import fit_in_context_ratio

    table = {"aten::view": {"us": 6.0}, "aten::add": {"us": 20.0}, "aten::gelu": {"us": 30.0},
             "aten::linear": {"grad_us": 70.0}, "aten::embedding": {"us": 40.0}}
    tight = {"view": [1.0, 2.0, 3.0], "add_broadcast": [10.0], "gelu": [7.0, 8.0], "addmm_linear": [15.0], "mm": [12.0]}
    fit = fit_in_context_ratio(table, tight)
    assert fit is not None and set(fit.per_op) == {"aten::view", "aten::add", "aten::gelu"}
    assert fit.per_op["aten::view"] == (6.0, 2.0) and fit.per_op["aten::gelu"] == (30.0, 7.5)
    assert fit.value == pytest.approx(3.0)  # median of 3.0, 2.0, 4.0
    assert fit.spread is not None and fit.spread[0] <= fit.value <= fit.spread[1]
    assert fit_in_context_ratio(table, tight) == fit  # seeded
    assert fit_in_context_ratio({"aten::mm": {"us": 5.0}}, tight) is None


def test_the_profiles_in_context_ratio_comes_from_its_table_and_tight_loop() -> None:
    """The shipped ratio is the fit over the shipped table and calibration/h200/raw/host_costs.json (a refit that
    moves either without rewriting the profile fails here and in test_calibrate_fit); it is off in the shipped
    profile, which prices every framework op the table lacks at its tight-loop cost."""
    import yaml

    from sim.calibrate.host_fit import PRICE_MISSING_IN_CONTEXT, fit_in_context_ratio

    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())["host"]
    tight: dict[str, list[float]] = {}
    for r in json.loads((ROOT / "calibration" / "h200" / "raw" / "host_costs.json").read_text())["records"]:
        if r["bench"] == "eager_op":
            tight.setdefault(r["op"], []).append(float(r["host_us_per_op"]))
    fit = fit_in_context_ratio(doc["framework_ops"], tight)
    entry = doc["missing_framework_ops"]
    assert fit is not None and entry["ratio"] == pytest.approx(fit.value) and entry["n"] == len(fit.per_op) >= 5
    assert entry["spread"][0] <= entry["ratio"] <= entry["spread"][1] and entry["source"] == "measured"
    assert entry["apply"] is PRICE_MISSING_IN_CONTEXT is False
    assert load_profile("h200-measured").missing_framework_op_scale == 1.0
    assert load_profile("h200-sxm").missing_framework_op_scale == 1.0  # no such section: the tight loop


def test_missing_framework_ops_are_priced_in_context_where_the_profile_applies_the_ratio(h200: Hardware) -> None:
    """A workload op naming a framework op the table lacks costs its kind's tight-loop price (launch included) times
    the ratio, a kernel-less one framework_op_us times it; ops the table has, and unnamed ones, are unchanged."""
    base = replace(h200, framework_op_table_s={"aten::linear": (20e-6, 45e-6)})
    on = replace(base, missing_framework_op_scale=4.0)
    copy = Op(name="c", kind="copy", attrs={"framework_op": "aten::index_copy_"})
    unnamed = Op(name="c", kind="copy", attrs={})
    known = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear"})
    tight = base.eager_op_by_kind_s.get("copy", base.eager_op_s)
    assert eager_dispatch_s(copy, base) == tight
    assert eager_dispatch_s(copy, on) == pytest.approx(4.0 * (tight + on.launch_s) - on.launch_s)
    assert eager_dispatch_s(unnamed, on) == tight and eager_dispatch_s(known, on) == eager_dispatch_s(known, base)
    slices = Op(name="s", kind="host", attrs={"framework_op": "aten::slice", "framework_ops": 8})
    assert host_op_s(slices, base) == pytest.approx(8 * base.framework_op_s)
    assert host_op_s(slices, on) == pytest.approx(32 * base.framework_op_s)
    backward_node = Op(name="n", kind="host", attrs={"framework_op": "SliceBackward0", "framework_ops": 1})
    assert host_op_s(backward_node, on) == pytest.approx(base.framework_op_s)  # not an ATen op: the flat cost


def test_a_replayed_decode_steps_missing_ops_are_priced_in_context() -> None:
    """--host model on the decode fixture: with the ratio applied, the step's priced host time grows by the
    index_copy_ / slice / unsqueeze calls the table lacks, each at (ratio - 1) x its tight-loop price, and by
    nothing else (the decode trace's Python gaps are already folded into its table-priced ops)."""
    from sim.costmodel.trace_host import model_host
    from sim.ingest import import_trace
    from sim.replay import step_graph

    hw = load_profile("h200-measured")
    path = FIXTURES / "decode_eager.json.gz"
    step = import_trace(path, None)
    graph = step_graph(step, path)
    off = model_host(graph, step, hw, False, 1.0)
    on = model_host(graph, step, replace(hw, missing_framework_op_scale=4.0), False, 1.0)
    launching = sum(1 for o in step.ops if o.family is not None and o.first_of_launching_op and o.top_op == "aten::index_copy_")
    kernelless = sum(1 for o in step.ops if o.family is not None for n in o.kernelless_ops if n in ("aten::slice", "aten::unsqueeze"))
    assert launching >= 2 and kernelless >= 2
    copy = hw.eager_op_by_kind_s.get("copy", hw.eager_op_s) + hw.launch_s
    expected = 3.0 * (launching * copy + kernelless * hw.framework_op_s)
    assert sum(on.priced_s) - sum(off.priced_s) == pytest.approx(expected, rel=1e-6)
    assert sum(on.carried_s) == pytest.approx(sum(off.carried_s))


@pytest.mark.slow  # reads the fit traces
def test_the_profiles_compiled_kernel_cost_is_the_fit_of_the_committed_traces() -> None:
    """host.compiled_in_context.kernel_us comes from the fit model's compiled no-grad forwards (GPT, the
    host_context machines A-C): in context a launch there costs more than the tight loop's empty Triton launch."""
    from sim.calibrate.host_fit import fit_compiled_kernel

    hw = load_profile("h200-measured")
    ctx = ROOT / "calibration" / "h200"
    fit = fit_compiled_kernel([ctx / "host_context", ctx / "host_compiled_train"], hw.trace_profiler_event_s["shapes"] * 1e6,
                              hw.trace_kernel_record_s["shapes"] * 1e6, hw.trace_clock_us)
    from sim.schema.hardware import HardwareProfileFile
    from sim.schema.loader import load_yaml_model

    assert fit is not None and fit[2] == 3  # one GPT compiled forward config per machine
    doc = load_yaml_model(ROOT / "hardware_profiles" / "h200-measured.yaml", HardwareProfileFile)
    entry = doc.host.compiled_in_context.kernel_us if doc.host.compiled_in_context else None
    assert entry is not None and entry.value == pytest.approx(fit[0]) and entry.n == fit[1]
    assert not entry.apply and hw.compiled_kernel_in_context_s is None  # off in the shipped profile
    assert fit[0] > 2 * hw.triton_launch_s * 1e6


def test_a_framework_op_the_table_lacks_has_a_class_by_name() -> None:
    """Views (metadata-only ATen ops), ops a torch.nn layer calls as its forward, and the rest (functional)."""
    from sim.costmodel.host import framework_op_class

    assert [framework_op_class(n) for n in ("aten::slice", "aten::chunk", "aten::unsqueeze", "aten::view")] == ["view"] * 4
    assert framework_op_class("aten::rms_norm") == "module" and framework_op_class("aten::linear") == "module"
    assert [framework_op_class(n) for n in ("aten::mul", "aten::cat", "aten::silu", "aten::index_copy_")] == ["functional"] * 4


def test_missing_ops_are_priced_by_class_where_the_profile_applies_it(h200: Hardware) -> None:
    """An applied class prices a workload op naming a framework op the table lacks at its in-context cost (launch
    included), before the ratio; ops the table has, ops with autograd recording and classes not applied are unchanged."""
    from sim.costmodel.host import missing_class_s

    base = replace(h200, framework_op_table_s={"aten::linear": (20e-6, 45e-6)})
    on = replace(base, missing_op_class_s={"view": 11e-6, "functional": 25e-6}, missing_framework_op_scale=4.0)
    mul = Op(name="m", kind="elementwise", attrs={"framework_op": "aten::mul"})
    assert eager_dispatch_s(mul, on) == pytest.approx(25e-6 - on.launch_s)
    grad_mul = Op(name="m", kind="elementwise", attrs={"framework_op": "aten::mul", "requires_grad": True})
    tight = base.eager_op_by_kind_s.get("elementwise", base.eager_op_s)
    assert eager_dispatch_s(grad_mul, on) == pytest.approx(4.0 * (tight + on.launch_s) - on.launch_s)  # the ratio
    rms = Op(name="r", kind="reduction", attrs={"framework_op": "aten::rms_norm"})
    assert missing_class_s("aten::rms_norm", on) is None  # module class not applied
    assert eager_dispatch_s(rms, replace(on, missing_framework_op_scale=1.0)) == base.eager_op_by_kind_s.get(
        "reduction", base.eager_op_s)
    known = Op(name="g", kind="gemm", attrs={"framework_op": "aten::linear"})
    assert eager_dispatch_s(known, on) == eager_dispatch_s(known, base)
    slices = Op(name="s", kind="host", attrs={"framework_op": "aten::slice", "framework_ops": 8})
    assert host_op_s(slices, on) == pytest.approx(8 * 11e-6)
    assert missing_class_s("aten::mul", base) is None  # the shipped default: no class applied


def test_a_replayed_decode_steps_missing_ops_are_priced_by_class() -> None:
    """--host model on the decode fixture with the classes applied: each index_copy_ call costs the functional price
    once (launch included) and each kernel-less slice / unsqueeze the view price, the Python gap before them folded
    in; nothing carried changes."""
    from sim.costmodel.trace_host import model_host
    from sim.ingest import import_trace
    from sim.replay import step_graph

    hw = load_profile("h200-measured")
    path = FIXTURES / "decode_eager.json.gz"
    step = import_trace(path, None)
    graph = step_graph(step, path)
    off = model_host(graph, step, hw, False, 1.0)
    big = model_host(graph, step, replace(hw, missing_op_class_s={"view": 50e-6, "functional": 80e-6}), False, 1.0)
    small = model_host(graph, step, replace(hw, missing_op_class_s={"view": 1e-6, "functional": 2e-6}), False, 1.0)
    calls = sum(1 for o in step.ops if o.family is not None and o.first_of_cpu_op and o.top_op == "aten::index_copy_")
    views = sum(1 for o in step.ops if o.family is not None for n in o.kernelless_ops if n in ("aten::slice", "aten::unsqueeze"))
    assert calls >= 2 and views >= 2
    assert sum(big.priced_s) - sum(small.priced_s) == pytest.approx(calls * 78e-6 + views * 49e-6, rel=1e-6)
    assert sum(big.priced_s) > sum(off.priced_s) > sum(small.priced_s)
    assert sum(big.carried_s) == pytest.approx(sum(small.carried_s))


def test_missing_class_fit_is_the_median_of_op_medians_per_class() -> None:
    """Per class the median over its ops of each op's median over calls (pooled over runs); a seeded bootstrap
    interval over runs; none without samples."""
    from sim.calibrate.host_fit import fit_missing_classes

    samples = {"r1": {"aten::slice": [10.0, 12.0], "aten::mul": [20.0, 30.0], "aten::rms_norm": [60.0]},
               "r2": {"aten::slice": [11.0], "aten::chunk": [14.0], "aten::neg": [24.0], "aten::cat": [40.0]}}
    fit = fit_missing_classes(samples, read=5, skipped=1)
    assert fit is not None and set(fit.classes) == {"view", "module", "functional"}
    view, module, functional = (fit.classes[c] for c in ("view", "module", "functional"))
    assert view[0] == pytest.approx((11.0 + 14.0) / 2) and view[2] == 4  # slice 11, chunk 14
    assert module[0] == 60.0 and functional[0] == pytest.approx(25.0)  # mul 25, neg 24, cat 40
    assert functional[1] is not None and functional[1][0] <= 25.0 <= functional[1][1]
    assert fit_missing_classes(samples, 5, 1) == fit and (fit.traces, fit.skipped) == (5, 1)
    assert fit_missing_classes({}) is None


@pytest.mark.slow  # reads the calibration runs' decode and inference traces
def test_the_profiles_missing_op_classes_are_the_fit_of_the_calibration_runs() -> None:
    """host.missing_framework_op_classes comes from the calibration runs' eager decode / inference traces (never a
    validated folder); every class is off in the shipped profile, and in context each costs more than the tight
    loop's flat framework_op_us."""
    from sim.calibrate.host_fit import (
        APPLY_MISSING_CLASSES,
        fit_missing_classes,
        missing_class_samples,
    )
    from sim.schema.hardware import HardwareProfileFile
    from sim.schema.loader import load_yaml_model

    hw = load_profile("h200-measured")
    doc = load_yaml_model(ROOT / "hardware_profiles" / "h200-measured.yaml", HardwareProfileFile)
    per_event = {k: v * 1e6 for k, v in hw.profiler_event_s.items()}
    samples, read, skipped = missing_class_samples(ROOT / "calibration" / "h200", set(doc.host.framework_ops),
                                                   per_event, hw.trace_clock_us)
    fit = fit_missing_classes(samples, read, skipped)
    assert fit is not None and set(fit.classes) == {"view", "module", "functional"} and len(fit.runs) >= 5
    assert all(run.startswith(("wave", "V", "X", "Y")) for run in fit.runs)
    entries = doc.host.missing_framework_op_classes
    assert set(entries) == set(fit.classes) and not APPLY_MISSING_CLASSES and hw.missing_op_class_s == {}
    for cls, (value, spread, calls, _) in fit.classes.items():
        assert entries[cls].value == pytest.approx(value) and entries[cls].n == calls and not entries[cls].apply
        assert spread is not None and spread[0] <= value <= spread[1]
        assert value > hw.framework_op_s * 1e6


def test_trace_records_from_imported_steps_equal_a_fresh_read() -> None:
    """The missing-class fit reads each calibration trace's records from the steps the clock-level fit imported
    (sim.validate.host.traced_steps) instead of reading the file again: the records are the same, op for op."""
    from sim.calibrate import host_fit
    from sim.validate.host import traced_steps

    runs = ROOT / "calibration" / "h200" / "runs" / "Y" / "host_cold" / "traces"
    for name in ("decode_b1_inference.json.gz", "gpt_train_b1_s128.json.gz"):
        path = runs / name
        if not path.is_file():
            continue
        key = str(path.resolve())
        host_fit._RECORDS.pop(key, None)
        fresh = host_fit._trace_records(path)
        host_fit._RECORDS.pop(key, None)
        steps = traced_steps(path)
        assert len(steps) == len(steps[0].events.steps) >= 2
        assert host_fit._trace_records(path, steps) == fresh and fresh
        host_fit._RECORDS.pop(key, None)
        # imported steps that are not every step of the trace: read from the file
        assert host_fit._trace_records(path, steps[:1]) == fresh
        host_fit._RECORDS.pop(key, None)


def test_table_level_fit_is_the_median_over_shared_ops_of_calibration_over_table() -> None:
    """Per op the table prices without autograd recording: its median over the calibration calls (pooled over runs)
    over the table's price; ops called fewer than MIN_LEVEL_CALLS times and ops the table lacks are left out; the
    factor is the median over ops, with a seeded bootstrap interval over runs; none without a shared op."""
    from sim.calibrate.host_fit import fit_table_level

    table = {"aten::linear": 40.0, "aten::view": 8.0, "aten::add": 20.0, "aten::gelu": 20.0}
    samples = {"r1": {"aten::linear": [50.0, 52.0], "aten::view": [10.0], "aten::mul": [99.0, 99.0, 99.0],
                      "aten::gelu": [30.0]},
               "r2": {"aten::linear": [48.0], "aten::view": [9.0, 11.0], "aten::add": [22.0, 24.0, 26.0]}}
    fit = fit_table_level(samples, table)
    assert fit is not None and set(fit.ops) == {"aten::linear", "aten::view", "aten::add"}  # gelu: 1 call
    assert fit.ops["aten::linear"] == (pytest.approx(50.0 / 40.0), 3) and fit.ops["aten::view"][0] == pytest.approx(1.25)
    assert fit.ops["aten::add"][0] == pytest.approx(1.2) and fit.value == pytest.approx(1.25)
    assert fit.calls == 9 and fit.runs == ("r1", "r2") and set(fit.by_class) == {"module", "view", "functional"}
    assert fit.spread is not None and fit.spread[0] <= fit.value <= fit.spread[1]
    assert fit_table_level(samples, table) == fit
    assert fit_table_level(samples, {"aten::softmax": 5.0}) is None
    # per trace level = 1.3 x speed ** 0.25: the slope comes back
    traces = [(f"r{k % 3}", s, {"aten::linear": [40.0 * 1.3 * s ** 0.25] * 3, "aten::view": [8.0 * 1.3 * s ** 0.25] * 3})
              for k, s in enumerate((0.5, 0.6, 0.7, 0.8, 0.9, 1.0))]
    sloped = fit_table_level(samples, table, traces=traces)
    assert sloped is not None and sloped.speed_slope is not None and fit.speed_slope is None
    assert sloped.speed_slope[0] == pytest.approx(0.25, abs=1e-3) and sloped.speed_slope[2] == 6
    # ... and the level at speed 1 (host.framework_op_speed_level's value), inside its bootstrap interval
    assert sloped.speed_l0 is not None and fit.speed_l0 is None
    assert sloped.speed_l0[0] == pytest.approx(1.3, abs=1e-3)
    assert sloped.speed_l0[1] is not None and sloped.speed_l0[1][0] <= sloped.speed_l0[0] <= sloped.speed_l0[1][1]


def test_the_speed_level_prices_the_table_at_a_given_host_speed_only(tmp_path: Path) -> None:
    """host.framework_op_speed_level (apply true): at a given host speed s the table's prices without autograd
    recording (and a foreach op's per-tensor share) are times L0 * s ** exponent in place of framework_op_level,
    never `grad_us`; without it, or off (the shipped default), the profile is unchanged; replay at the reference speed
    (no speed given) keeps the table, a given speed prices it."""
    import yaml

    from sim.costmodel.host import at_host_speed
    from sim.replay import replay

    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    level = doc["host"]["framework_op_speed_level"]
    assert level["apply"] is False and level["value"] > 1.0 and level["exponent"] > 0
    base = load_profile("h200-measured")
    assert base.framework_op_speed_level is None and at_host_speed(base, 1.7) is base
    level["apply"] = True
    doc["host"]["framework_op_level"]["apply"] = True  # replaced, not compounded
    path = tmp_path / "on.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    on = load_profile(str(path))
    assert on.framework_op_speed_level == (level["value"], level["exponent"])
    for speed in (0.6, 1.0, 1.7):
        at = at_host_speed(on, speed)
        factor = level["value"] * speed ** level["exponent"]
        plain, grad = base.framework_op_table_s["aten::linear"]
        assert at.framework_op_table_s["aten::linear"] == (pytest.approx(plain * factor), grad)
        for name, (n, per_tensor) in base.framework_op_per_tensor_s.items():
            assert at.framework_op_per_tensor_s[name] == (n, pytest.approx(per_tensor * factor))
    doc["host"]["framework_op_level"]["apply"] = False
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    on = load_profile(str(path))
    trace = ROOT / "calibration" / "h200" / "host_context" / "A" / "traces" / "decode_b8_inference.json.gz"
    ref = replay(trace, base, "predict", host="model")[0]["priced_host_us"]
    assert replay(trace, on, "predict", host="model")[0]["priced_host_us"] == pytest.approx(ref)
    at_one = replay(trace, on, "predict", host="model", host_speed=1.0)[0]["priced_host_us"]
    at_two = replay(trace, on, "predict", host="model", host_speed=2.0)[0]["priced_host_us"]
    assert at_one > ref and at_two > 2 * at_one  # the table's share grows faster than the speed


def test_the_table_level_multiplies_prices_without_autograd_where_applied(tmp_path: Path) -> None:
    """host.framework_op_level (apply true) multiplies the table's `us` prices and a foreach op's per-tensor share,
    never its `grad_us`; off (the shipped default) the table is as fitted."""
    import yaml

    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    level = doc["host"]["framework_op_level"]
    assert level["apply"] is False and level["value"] > 1.0
    base = load_profile("h200-measured")
    assert base.framework_op_level == 1.0
    level["apply"] = True
    path = tmp_path / "on.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    on = load_profile(str(path))
    assert on.framework_op_level == level["value"]
    plain, grad = base.framework_op_table_s["aten::linear"]
    assert on.framework_op_table_s["aten::linear"] == (pytest.approx(plain * level["value"]), grad)
    for name, (n, per_tensor) in base.framework_op_per_tensor_s.items():
        assert on.framework_op_per_tensor_s[name] == (n, pytest.approx(per_tensor * level["value"]))
    linear = Op(name="l", kind="gemm", attrs={"framework_op": "aten::linear"})
    assert eager_dispatch_s(linear, on) == pytest.approx(plain * level["value"] - on.launch_s)
    grad_linear = Op(name="l", kind="gemm", attrs={"framework_op": "aten::linear", "requires_grad": True})
    assert eager_dispatch_s(grad_linear, on) == eager_dispatch_s(grad_linear, base)
