"""Replay: measured mode reproduces the trace's step time; predict mode prices what it can and
reports the rest as unpriced; real fixtures (when present) stay within 2 %."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.hardware import Hardware
from sim.replay import replay
from tests.ingest.conftest import MALFORMED, REAL_TRACES

REPLAY_KEYS = {"trace", "mode", "hardware", "step", "measured_time_us", "predicted_time_us", "error", "families"}


def test_measured_replay_matches_synthetic_step(synth_gz: Path, h200: Hardware) -> None:
    for step in ("1", "2", "3"):
        res, trace = replay(synth_gz, h200, "measured", step)
        assert set(res) >= REPLAY_KEYS
        assert abs(res["error"]) < 1e-6, res
        for f in res["families"].values():
            assert f["predicted_us"] == pytest.approx(f["measured_us"], rel=1e-6)
        assert len(trace.kernels()) == res["kernels"] == 12


def test_predict_prices_known_shapes_and_counts_the_rest(synth_gz: Path, h200: Hardware) -> None:
    res, _ = replay(synth_gz, h200, "predict")
    fam = res["families"]
    assert res["unpriced"]["kernels"] == 2 and res["unpriced"]["families"] == {"triton": 2}
    assert fam["triton"]["predicted_us"] == pytest.approx(fam["triton"]["measured_us"])  # kept measured
    assert fam["gemm"]["predicted_us"] != pytest.approx(fam["gemm"]["measured_us"])  # priced by the model
    assert res["predicted_time_us"] > 0 and res["mode"] == "predict" and res["hardware"] == "h200-sxm"


def test_predict_on_another_gpu_changes_the_answer(synth_gz: Path, h200: Hardware) -> None:
    from sim.hardware import load_profile

    a, _ = replay(synth_gz, h200, "predict")
    b, _ = replay(synth_gz, load_profile("a100-sxm-80gb"), "predict")
    assert b["families"]["gemm"]["predicted_us"] > a["families"]["gemm"]["predicted_us"]


def test_replay_is_deterministic(synth_gz: Path, h200: Hardware) -> None:
    assert replay(synth_gz, h200, "predict")[0] == replay(synth_gz, h200, "predict")[0]


def test_minimal_fixture_replays(h200: Hardware) -> None:
    res, _ = replay(MALFORMED / "valid_minimal.json", h200, "measured")
    assert res["measured_time_us"] == pytest.approx(52.0) and abs(res["error"]) < 0.02


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name.split(".")[0])
def test_real_traces_replay_within_2_percent(path: Path, h200: Hardware) -> None:
    res, _ = replay(path, h200, "measured")
    assert abs(res["error"]) <= 0.02, (path.name, res["measured_time_us"], res["predicted_time_us"])
    pred, _ = replay(path, h200, "predict")
    assert pred["kernels"] == res["kernels"] and pred["predicted_time_us"] > 0


HELDOUT_TRACES = sorted((Path(__file__).resolve().parents[2] / "validation" / "h200" / "traces_heldout").glob("*.json.gz"))


def _unprofiled_us() -> dict[str, float]:
    """The held-out traces' step times measured without the profiler, in the same session."""
    import json

    raw = Path(__file__).resolve().parents[2] / "calibration" / "h200" / "raw" / "profiler_overhead.json"
    return {r["path"]: r["unprofiled_step_us"] for r in json.loads(raw.read_text())["records"]
            if r.get("bench") == "heldout_trace"}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def test_model_host_error_on_real_h200_traces() -> None:
    """`--host model` with the profile's flat host costs (tight loops by op kind, no table by
    framework op) against every real trace's step time as recorded (the profiler's per-event cost
    added): the fixtures and the held-out traces. Before the host was priced with kernel-less ops
    and the profiler's per-event cost, host-bound eager steps came out 50-67 % short. (The table by
    framework op, fitted on later sessions whose VMs ran the host up to 2x slower, over-prices these
    traces' host: decode_eager +36 %.)"""
    from dataclasses import replace as dc_replace

    from sim.hardware import load_profile

    # tight-loop prices only: no table by framework op, no in-context compiled calls (host.compiled_in_context)
    hw = dc_replace(load_profile("h200-measured"), framework_op_table_s={}, compiled_in_context_s=None)
    errors = {p.name: replay(p, hw, "predict", host="model", keep_profiler=True)[0]["error"] for p in [*REAL_TRACES, *HELDOUT_TRACES]}
    assert len(errors) >= 10
    worst = max(errors, key=lambda k: abs(errors[k]))
    assert abs(errors[worst]) <= 0.25, errors
    assert _median([abs(e) for e in errors.values()]) <= 0.12, errors


def test_trace_host_with_profiler_kept_reproduces_recorded_steps() -> None:
    """With the trace's host timeline kept as recorded, only device time is predicted: the step
    error is the cost model's (the held-out transformer at 2x2048, +12 %, is the attention model's error
    on its cuDNN kernels)."""
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    errors = {p.name: replay(p, hw, "predict", keep_profiler=True)[0]["error"] for p in [*REAL_TRACES, *HELDOUT_TRACES]}
    assert len(errors) >= 10
    assert max(abs(e) for e in errors.values()) <= 0.15, errors
    assert _median([abs(e) for e in errors.values()]) <= 0.03, errors


def test_trace_host_predicts_unprofiled_step_better_than_model_host() -> None:
    """Default predict mode (the trace's host less the profiler's cost) against the held-out steps
    measured without the profiler; the model-priced host, without the profiler's cost, is short
    by 26-31 % on the host-bound ones."""
    from dataclasses import replace as dc_replace

    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    unprofiled = _unprofiled_us()
    assert {p.name for p in HELDOUT_TRACES} <= set(unprofiled)
    trace_err, model_err = [], []
    for p in HELDOUT_TRACES:
        res = replay(p, hw, "predict", unprofiled_us=unprofiled[p.name])[0]
        assert res["host_source"] == "trace" and res["profiler_removed_us"] > 0
        # the host these host-bound steps spend, less the profiler's cost, is accounted for
        host_us = res["carried_host_us"] + res["priced_host_us"]
        assert host_us + res["profiler_removed_us"] > 0.5 * res["measured_time_us"]
        trace_err.append(abs(res["unprofiled_error"]))
        m = replay(p, dc_replace(hw, profiler_event_s={}), "predict", host="model", unprofiled_us=unprofiled[p.name])[0]
        model_err.append(abs(m["unprofiled_error"]))
    assert _median(trace_err) <= 0.10, trace_err
    assert _median(trace_err) < _median(model_err), (trace_err, model_err)


def test_trace_host_removes_the_profilers_cost_per_event(h200: Hardware) -> None:
    from dataclasses import replace as dc_replace

    from sim.costmodel.trace_host import HostTimeline, trace_host
    from sim.ingest import import_trace
    from sim.replay import step_graph

    def run(per_event_s: float) -> tuple[HostTimeline, float, float]:
        t = trace_host(graph, step, dc_replace(h200, profiler_event_s={"shapes": per_event_s}, trace_profiler_event_s={}))
        return t, sum(t.carried_s) * 1e6, t.profiler_removed_s * 1e6

    path = next(p for p in REAL_TRACES if p.name.startswith("decode_eager"))
    step = import_trace(path, None)
    graph = step_graph(step, path)
    t0, kept0, removed0 = run(0.0)
    t1, kept1, removed1 = run(1e-6)
    assert removed0 == 0.0 and kept0 == pytest.approx(kept1 + removed1)
    assert sum(t0.priced_s) == 0.0  # an eager trace's host time is all carried from the trace
    events = sum(o.trace_events for o in step.ops if o.doc["kind"] != "sync")
    assert removed1 == pytest.approx(events * 1.0, rel=1e-6)  # no interval was clamped at 1 us per event
    assert sum(o.host_s or 0.0 for o in t0.graph.ops) == pytest.approx(kept0 * 1e-6)
    t2, kept2, removed2 = run(1.0)
    assert all((o.host_s or 0.0) >= 0.0 for o in t2.graph.ops)  # an interval is never shortened below zero
    with_events = sum(float(o.doc.get("host_us", o.doc.get("duration_us", 0.0))) for o in step.ops
                      if o.trace_events > 0 and o.doc["kind"] != "sync")
    assert removed2 == pytest.approx(with_events) and kept2 == pytest.approx(kept0 - with_events)


def test_replay_rejects_unknown_host_source(synth_gz: Path, h200: Hardware) -> None:
    with pytest.raises(ValueError, match="host source"):
        replay(synth_gz, h200, "predict", host="cpu")


def test_predicted_host_counts_framework_ops_and_profiler_events(h200: Hardware) -> None:
    from dataclasses import replace as dc_replace

    from sim.costmodel.trace_host import model_host, profiler_config
    from sim.ingest import import_trace
    from sim.replay import step_graph

    path = next(p for p in REAL_TRACES if p.name.startswith("decode_eager"))
    step = import_trace(path, None)
    assert profiler_config(step) == "shapes"
    assert sum(o.framework_ops for o in step.ops) > 0 and sum(o.autograd_nodes for o in step.ops) == 0
    graph = step_graph(step, path)
    without = dc_replace(h200, profiler_event_s={}, trace_profiler_event_s={})
    with_events = dc_replace(h200, profiler_event_s={"shapes": 2e-6, "plain": 1.0})
    a = model_host(graph, step, without).graph
    b = model_host(graph, step, dc_replace(with_events, trace_profiler_event_s={})).graph
    events = sum(o.host_events for o in step.ops if o.family is not None and o.family != "prior_work")
    extra = sum((y.host_s or 0.0) - (x.host_s or 0.0) for x, y in zip(a.ops, b.ops, strict=True))
    assert extra == pytest.approx(events * 2e-6)
    assert events >= sum(1 for o in step.ops if o.family is not None)  # at least each launch call


def test_backward_nodes_are_counted() -> None:
    from sim.ingest import import_trace

    path = next(p for p in REAL_TRACES if p.name.startswith("transformer_eager"))
    step = import_trace(path, None)
    assert sum(o.autograd_nodes for o in step.ops) > 0  # ViewBackward0 etc. launch nothing
    assert any(o.top_is_autograd_node for o in step.ops)


def test_run_and_predict_differ_only_by_the_host_timeline(tmp_path: Path) -> None:
    """`kernelsim run` on an imported workload keeps the trace's host times; `replay --mode predict`
    keeps them less the profiler's cost (or prices them from the profile with --host model). Predict mode reports the step with the trace's host times, and
    that is exactly what `run` gives: no other difference."""
    from sim.hardware import load_profile
    from sim.ingest import import_trace, workload_yaml
    from sim.run import load_scenario, run_scenario

    path = next(p for p in REAL_TRACES if p.name.startswith("mlp_eager"))
    hw = load_profile("h200-measured")
    pred, _ = replay(path, hw, "predict")
    (tmp_path / "w.yaml").write_text(workload_yaml(import_trace(path), path))
    (tmp_path / "s.yaml").write_text("schema: kernelsim.scenario/v1\nname: t\nworkload: w.yaml\nhardware: [h200-measured]\n")
    run, _ = run_scenario(load_scenario(tmp_path / "s.yaml"))
    run_us = run["hardware"][0]["variants"][0]["buckets"][0]["time_us"]
    host = pred["host"]
    assert host["step_with_trace_host_us"] == pytest.approx(run_us, abs=1e-3)
    assert host["trace_host_us"] != pytest.approx(host["predicted_host_us"], rel=0.05)
    assert pred["predicted_time_us"] != pytest.approx(run_us, rel=1e-3)  # the difference is real, and explained


@pytest.mark.parametrize("mode", ["measured", "predict"])
def test_replay_says_what_it_carried_over(synth_gz: Path, h200: Hardware, mode: str) -> None:
    res, _ = replay(synth_gz, h200, mode)
    for key in ("carried_host_us", "carried_kernel_us", "priced_host_us", "priced_kernel_us"):
        assert res[key] >= 0.0
    if mode == "measured":  # every kernel duration comes from the trace
        assert res["priced_kernel_us"] == 0.0 and res["carried_kernel_us"] > 0.0
    else:  # known shapes are priced by the model
        assert res["priced_kernel_us"] > 0.0
        assert res["carried_kernel_us"] < res["priced_kernel_us"] + res["carried_kernel_us"]


def test_graph_launch_call_is_priced_by_the_profile() -> None:
    """Under the profiler a cudaGraphLaunch of the 52-kernel decode graph takes 76-80 us; the trace
    host mode charges the profile's graph_launch_us for it instead."""
    from sim.hardware import load_profile
    from sim.ingest import import_trace

    hw = load_profile("h200-measured")
    path = next(p for p in REAL_TRACES if p.name.startswith("decode_cudagraph"))
    step = import_trace(path, None)
    first = next(o for o in step.ops if o.family is not None and o.doc["host_us"] > 0)
    assert first.launch_api == "cudaGraphLaunch" and first.call_us > 50.0
    kept = replay(path, hw, "predict", keep_profiler=True)[0]
    res = replay(path, hw, "predict")[0]
    assert res["profiler_removed_us"] >= first.call_us - hw.graph_launch_s * 1e6
    assert res["predicted_time_us"] < kept["predicted_time_us"] - 40.0


@pytest.mark.parametrize("prefix", ["decode_eager", "decode_cudagraph", "mlp_compiled"])
def test_one_account_of_carried_and_priced_host_time(prefix: str) -> None:
    """measured mode carries all the trace's host time; trace-host predict carries it less the profiler's
    cost and prices only a CUDA-graph launch call (at graph_launch_us); model-host predict prices all but
    the long kernel-less work and the user's Python gaps."""
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    path = next(p for p in REAL_TRACES if p.name.startswith(prefix))
    meas = replay(path, hw, "measured")[0]
    recorded = meas["carried_host_us"]
    assert meas["priced_host_us"] == 0.0 and recorded > 0.0
    pred = replay(path, hw, "predict")[0]
    from sim.ingest import import_trace

    graph_calls = sum(1 for o in import_trace(path).ops if o.launch_api == "cudaGraphLaunch" and o.call_us > 0)
    assert pred["priced_host_us"] == pytest.approx(graph_calls * hw.graph_launch_s * 1e6, abs=1e-3)
    assert pred["carried_host_us"] + pred["profiler_removed_us"] <= recorded + 1e-3
    model = replay(path, hw, "predict", host="model")[0]
    assert model["priced_host_us"] > 0.0 and model["carried_host_us"] < recorded
    # the kernels' host time between launches is the model's (plus carried long kernel-less work)
    assert model["priced_host_us"] <= model["host"]["predicted_host_us"] + 1e-3
