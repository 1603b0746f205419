"""Predict mode's host accounting on hand-made traces: what the trace shows between two
launches (kernel-less ops, annotations, slow runtime calls, compiled regions) is priced from the
profile or kept at its measured time, as docs/traces.md says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.ingest import import_trace

KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _launch(ts: float, corr: int) -> list[dict[str, Any]]:
    """aten::add (ts..ts+10) launching one kernel (cudaLaunchKernel at ts+5) that runs 2 us."""
    return [_x("cpu_op", "aten::add", ts, 10.0), _x("cuda_runtime", "cudaLaunchKernel", ts + 5, 4.0, correlation=corr),
            {"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": 7, "ts": ts + 12, "dur": 2.0,
             "args": {"stream": 7, "correlation": corr, "device": 0}}]


def _import(tmp_path: Path, events: list[dict[str, Any]]) -> Any:
    path = tmp_path / "t.json"
    step = _x("user_annotation", "ProfilerStep#1", 1000.0, 1000.0)
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [step, *events]}))
    return import_trace(path)


def _kernels(step: Any) -> list[Any]:
    return [o for o in step.ops if o.family is not None]


def test_short_kernelless_ops_are_framework_ops_and_long_ones_keep_their_time(tmp_path: Path) -> None:
    events = [*_launch(1010.0, 1),
              _x("cpu_op", "aten::view", 1030.0, 2.0), _x("cpu_op", "aten::t", 1035.0, 3.0),
              _x("cpu_op", "aten::stack", 1040.0, 300.0),  # CPU work: kept
              _x("cpu_op", "autograd::engine::evaluate_function: ViewBackward0", 1345.0, 40.0),  # a node
              *_launch(1400.0, 2)]
    second = _kernels(_import(tmp_path, events))[1]
    assert second.framework_ops == 2 and second.autograd_nodes == 1
    assert second.kept_host_us == 300.0
    # events since the first launch: view, t, the node, aten::add and its launch; stack's own is in its time
    assert second.host_events == 5


def test_annotation_around_launches_is_transparent(tmp_path: Path) -> None:
    """A record_function range around the forward (DDP's DistributedDataParallel.forward) must not
    hide the framework ops inside it."""
    events = [_x("user_annotation", "DistributedDataParallel.forward", 1005.0, 500.0),
              *_launch(1010.0, 1), _x("cpu_op", "aten::view", 1030.0, 2.0), *_launch(1050.0, 2),
              _x("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 1600.0, 150.0),
              *_launch(1800.0, 3)]
    first, second, third = _kernels(_import(tmp_path, events))
    assert second.framework_ops == 1 and second.first_of_cpu_op
    assert third.kept_host_us == 150.0  # an annotation with no launch inside is the user's work


def test_slow_runtime_calls_keep_their_time(tmp_path: Path) -> None:
    events = [*_launch(1010.0, 1), _x("cuda_runtime", "cudaMalloc", 1100.0, 250.0, correlation=9),
              _x("cuda_runtime", "cudaGetDevice", 1360.0, 0.5, correlation=10), *_launch(1400.0, 2)]
    second = _kernels(_import(tmp_path, events))[1]
    assert second.kept_host_us == 250.0


def test_compiled_region_pays_one_call(tmp_path: Path) -> None:
    events = [_x("cpu_op", "Torch-Compiled Region: 0/0", 1005.0, 200.0),
              *_launch(1010.0, 1), *_launch(1030.0, 2)]
    first, second = _kernels(_import(tmp_path, events))
    assert first.compiled_call == "forward" and second.compiled_call == ""
