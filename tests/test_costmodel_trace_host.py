"""The profiler's cost in a traced step (sim/costmodel/trace_host.py): per event at the trace's own host
speed, torch.compile's kernel records, and the fit of host.trace_profiler from committed data."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from sim.costmodel.trace_host import profiler_cost, trace_host_speed
from sim.hardware import load_profile
from sim.ingest import import_trace
from tests.conftest import ROOT

CONTEXT = ROOT / "calibration" / "h200" / "host_context"


def _trace(machine: str, config: str) -> Path:
    return CONTEXT / machine / "traces" / f"{config}.json.gz"


def test_trace_speed_is_relative_to_the_reference_clock() -> None:
    step = import_trace(_trace("A", "decode_b8_inference"))
    own = {"aten::empty": statistics.median(o.end - o.ts for o in step.events.cpu_ops if o.name == "aten::empty")}
    assert trace_host_speed(step, own) == pytest.approx(1.0)
    assert trace_host_speed(step, {"aten::empty": own["aten::empty"] / 2}) == pytest.approx(2.0)
    assert trace_host_speed(step, {}) == 1.0
    assert trace_host_speed(step, {"aten::no_such_op": 1.0}) == 1.0  # nothing to time the trace with


def test_slower_host_same_work_slower_profiler() -> None:
    """decode at batch 8 under inference_mode and no_grad is the same work; on machine A the no_grad
    step was measured 55 % slower without the profiler (2106 vs 1357 us: the VM's host ran slower then).
    The trace clock sees it, and the profiler's cost per event follows."""
    hw = load_profile("h200-measured")
    fast = profiler_cost(import_trace(_trace("A", "decode_b8_inference")), hw)
    slow = profiler_cost(import_trace(_trace("A", "decode_b8_nograd")), hw)
    assert slow.host_speed > 1.3 * fast.host_speed
    assert slow.per_event_s / fast.per_event_s == pytest.approx(slow.host_speed / fast.host_speed)
    assert fast.per_event_s == pytest.approx(hw.trace_profiler_event_s["shapes"] * fast.host_speed)


def test_profile_without_in_context_cost_keeps_the_constant() -> None:
    hw = load_profile("h200-measured")
    step = import_trace(_trace("A", "decode_b8_inference"))
    plain = profiler_cost(step, replace(hw, trace_profiler_event_s={}))
    assert plain.per_event_s == hw.profiler_event_s["shapes"] and plain.per_kernel_record_s == 0.0
    assert plain.host_speed == 1.0


def test_compiled_steps_count_kernel_records() -> None:
    compiled = import_trace(_trace("B", "gpt_infer_b1_s128_compiled"))
    eager = import_trace(_trace("B", "gpt_infer_b1_s128"))
    assert sum(o.kernel_records for o in eager.ops) == 0
    records = sum(o.kernel_records for o in compiled.ops)
    triton = sum(1 for o in compiled.events.cpu_ops if o.name.startswith("triton_"))
    assert records == triton > 0  # one per Triton kernel the compiled graph launched


def test_profile_trace_profiler_is_the_fit_of_committed_data() -> None:
    """h200-measured's host.trace_profiler is what the calibration (sim.calibrate.host_fit.trace_profiler_values)
    fits from calibration/h200/host_context (GPT steps only: the other models validate)."""
    from sim.calibrate.host_fit import fit_trace_profiler

    fit = fit_trace_profiler(CONTEXT)
    assert fit is not None and fit.config == "shapes"
    assert all(c.split("/")[1].startswith("gpt_") for c in fit.configs)
    hw = load_profile("h200-measured")
    assert hw.trace_profiler_event_s["shapes"] == pytest.approx(fit.event_us * 1e-6)
    assert fit.kernel_record_us is not None
    assert hw.trace_kernel_record_s["shapes"] == pytest.approx(fit.kernel_record_us * 1e-6)
    assert hw.trace_clock_us == pytest.approx(fit.clock_us)
    # a Python-side record with the kernel's arguments costs several dispatcher events
    assert fit.kernel_record_us > 3 * fit.event_us


def test_compiled_graphs_extern_ops_pay_their_dispatch() -> None:
    """A compiled graph's wrapper calls cuBLAS GEMMs and SDPA as framework ops (aten::addmm, the cuDNN
    attention op): each pays its dispatch besides the wrapper's line, not a Triton launch. Before, the
    GPT forward compiled at 1x128 was priced 55 % short on --host model. (The tight-loop prices: a profile
    without host.compiled_in_context.kernel_us applied.)"""
    from sim.costmodel.trace_host import model_host
    from sim.replay import step_graph

    hw = replace(load_profile("h200-measured"), compiled_kernel_in_context_s=None)
    path = _trace("B", "gpt_infer_b1_s128_compiled")
    step = import_trace(path)
    externs = {o.extern_op for o in step.ops if o.extern_op}
    assert {"aten::addmm", "aten::_scaled_dot_product_cudnn_attention"} <= externs
    firsts = [i for i, o in enumerate(step.ops) if o.extern_op and o.first_of_extern and not o.compiled_call]
    assert len(firsts) == 16 + 4 + 1  # four blocks x (qkv, proj, fc1, fc2) addmm, four SDPA calls, the head's mm
    timeline = model_host(step_graph(step, path), step, hw, keep_profiler=False)
    for i in firsts:
        assert timeline.graph.ops[i].host_s > hw.compiled_kernel_s + hw.eager_op_s  # dispatch + the wrapper's line
    triton = [i for i, o in enumerate(step.ops) if o.launch_api == "cuLaunchKernel" and not o.extern_op
              and not o.compiled_call]
    assert triton and all(timeline.graph.ops[i].host_s == pytest.approx(hw.triton_launch_s) for i in triton)


def test_a_compiled_no_grad_forwards_kernels_cost_their_in_context_price() -> None:
    """With host.compiled_in_context.kernel_us applied (off in the shipped profile: a copy with it on), every kernel a
    compiled forward without autograd recording launches (Triton or extern, its memsets too) costs that in-context
    price, the region's first one the call on top; a compiled training step's regions keep the tight-loop prices;
    the GPT forward's priced host grows by (kernel_us - the tight-loop prices) over its launches."""
    from sim.costmodel.trace_host import model_host
    from sim.replay import step_graph
    from sim.schema.hardware import HardwareProfileFile
    from sim.schema.loader import load_yaml_model

    shipped = load_profile("h200-measured")
    doc = load_yaml_model(ROOT / "hardware_profiles" / "h200-measured.yaml", HardwareProfileFile)
    entry = doc.host.compiled_in_context.kernel_us if doc.host.compiled_in_context else None
    assert entry is not None and not entry.apply and shipped.compiled_kernel_in_context_s is None  # shipped: off
    k = entry.value * 1e-6
    hw = replace(shipped, compiled_kernel_in_context_s=k)
    assert hw.triton_launch_s < k < 4 * hw.triton_launch_s
    path = _trace("B", "gpt_infer_b1_s128_compiled")
    step = import_trace(path)
    graph = step_graph(step, path)
    on = model_host(graph, step, hw, keep_profiler=False)
    off = model_host(graph, step, replace(hw, compiled_kernel_in_context_s=None), keep_profiler=False)
    region = [i for i, o in enumerate(step.ops) if graph.ops[i].is_kernel and not o.compiled_call
              and (o.extern_op or o.launch_api == "cuLaunchKernel")]
    assert len(region) >= 34
    assert all(on.graph.ops[i].host_s == pytest.approx(k) for i in region)  # Triton and extern alike
    triton = [i for i in region if not step.ops[i].extern_op]
    assert triton and all(off.graph.ops[i].host_s == pytest.approx(hw.triton_launch_s) for i in triton)
    assert sum(on.priced_s) > sum(off.priced_s) + 0.2e-3  # the GPT forward: ~0.5 ms more at the reference speed
    train = _trace("B", "mlp_train_t128_compiled")
    tstep = import_trace(train)
    tgraph = step_graph(tstep, train)
    assert (model_host(tgraph, tstep, hw, keep_profiler=False).priced_s
            == model_host(tgraph, tstep, replace(hw, compiled_kernel_in_context_s=None), keep_profiler=False).priced_s)


def test_host_speed_scales_what_the_model_priced_only() -> None:
    """--host model's host speed multiplies every cost the profile priced; the times carried from the
    trace (long Python gaps, slow runtime calls) are the trace's own and stay."""
    from sim.costmodel.trace_host import model_host
    from sim.replay import step_graph

    hw = load_profile("h200-measured")
    path = _trace("A", "decode_b8_inference")
    step = import_trace(path)
    graph = step_graph(step, path)
    ref = model_host(graph, step, hw, keep_profiler=False)
    slow = model_host(graph, step, hw, keep_profiler=False, host_speed=1.5)
    assert sum(ref.priced_s) > 0 and sum(slow.priced_s) == pytest.approx(1.5 * sum(ref.priced_s))
    assert slow.carried_s == ref.carried_s and slow.host_speed == 1.5


def test_the_decode_bands_are_the_host_speed() -> None:
    """Machine A measured the same decode step at two host speeds (1357-1369 us for the inference_mode
    steps at B = 1 and 8, 2106-2280 us for no_grad B = 8 and inference_mode B = 64: docs/host.md). At the
    profile's reference host speed --host model predicts all four alike (the host table has one price per
    op), so its signed errors spread over the two bands; at each trace's own host speed (its clock ops,
    traced right after the step was timed) they fall together."""
    import json

    from sim.replay import replay

    hw = load_profile("h200-measured")
    doc = json.loads((CONTEXT / "A" / "host_context.json").read_text())
    measured = {r["config"]: r["sync_us"] for r in doc["records"] if r.get("bench") == "step"}
    errors: dict[str, list[float]] = {"ref": [], "trace": []}
    for config in ("decode_b1_inference", "decode_b8_inference", "decode_b8_nograd", "decode_b64_inference"):
        step = import_trace(_trace("A", config))
        for label, speed in (("ref", 1.0), ("trace", "trace")):
            res = replay(_trace("A", config), hw, "predict", host="model", idle_start=True, imported=step,
                         host_speed=speed)[0]
            errors[label].append(res["predicted_time_us"] / measured[config] - 1)
    spread = {k: max(v) - min(v) for k, v in errors.items()}
    assert spread["ref"] > 0.4  # the two bands
    assert spread["trace"] < spread["ref"] / 4
