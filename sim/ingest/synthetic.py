"""Synthetic Kineto traces, written event by event (tests, the import benchmark, docs examples).

Each step is a small eager MLP: per layer an addmm (cuBLAS GEMM), a GELU and a dropout
(elementwise), a layer norm (reduction) and a Triton kernel (cuLaunchKernel); a host gap
outside any CPU op; a side stream that waits on an event recorded on the main stream; an
H2D copy at the start and a device sync at the end. Timestamps follow simple rules
(launch latency, per-kernel queue gap, stream order, event waits), so a replay of the
trace with measured durations must reproduce the step time almost exactly.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

LAUNCH_LATENCY_US = 5.0
QUEUE_GAP_US = 1.0
MAIN, SIDE = 7, 13


class _Timeline:
    def __init__(self) -> None:
        self.t = 1_000_000.0  # host clock (us)
        self.corr = 1
        self.ext = 1
        self.stream_free = {MAIN: 0.0, SIDE: 0.0}
        self.events: list[dict[str, Any]] = []
        self.last_end: dict[int, float] = {}

    def cpu(self, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        ev = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": 1, "ts": round(ts, 3),
              "dur": round(dur, 3), "args": {"External id": self.ext, **args}}
        self.ext += 1
        self.events.append(ev)
        return ev

    def launch(self, api: str, kernel: str, dur: float, stream: int = MAIN, *, cat: str = "kernel",
               grid: tuple[int, int, int] = (1024, 1, 1), block: tuple[int, int, int] = (128, 1, 1),
               regs: int = 32, smem: int = 0, nbytes: int | None = None, after: float = 0.0) -> float:
        """A runtime call of 4 us at the host clock and the GPU activity it launches; returns its end."""
        corr = self.corr
        self.corr += 1
        rt_cat = "cuda_driver" if api.startswith("cu") and not api.startswith("cuda") else "cuda_runtime"
        self.events.append({"ph": "X", "cat": rt_cat, "name": api, "pid": 100, "tid": 1, "ts": round(self.t, 3),
                            "dur": 4.0, "args": {"External id": self.ext, "correlation": corr}})
        ready = self.t + LAUNCH_LATENCY_US
        free = self.stream_free[stream]
        start = max(ready, free + QUEUE_GAP_US if free > self.t + 4.0 else ready, after)
        args: dict[str, Any] = {"device": 0, "stream": stream, "correlation": corr, "External id": self.ext}
        if cat == "kernel":
            args.update({"grid": list(grid), "block": list(block), "registers per thread": regs,
                         "shared memory": smem})
        else:
            args["bytes"] = nbytes or 0
        self.events.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": stream, "ts": round(start, 3),
                            "dur": round(dur, 3), "args": args})
        self.events.append({"ph": "s", "id": corr, "pid": 100, "tid": 1, "ts": round(self.t, 3), "cat": "ac2g",
                            "name": "ac2g"})
        self.stream_free[stream] = start + dur
        self.t += 4.0
        return start + dur


def _step(tl: _Timeline, number: int, layers: int, tokens: int, hidden: int) -> None:
    step_start = tl.t
    # H2D copy of the batch, then the layers.
    op_start = tl.t
    tl.t += 3.0
    tl.launch("cudaMemcpyAsync", "Memcpy HtoD (Pinned -> Device)", 20.0, cat="gpu_memcpy",
              nbytes=tokens * hidden * 2)
    tl.cpu("aten::copy_", op_start, tl.t - op_start + 1.0, **{
        "Input Dims": [[tokens, hidden], [tokens, hidden], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]})
    tl.t += 1.0
    last_main_end = 0.0
    for _ in range(layers):
        lin = tl.t
        tl.t += 6.0
        addmm = tl.t
        tl.t += 3.0
        tl.launch("cudaLaunchKernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", 40.0,
                  grid=(64, 4, 1), block=(384, 1, 1), regs=168, smem=213_000)
        tl.cpu("aten::addmm", addmm, tl.t - addmm + 1.0, **{
            "Input Dims": [[4 * hidden], [tokens, hidden], [hidden, 4 * hidden], [], []],
            "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]})
        tl.t += 1.0
        tl.cpu("aten::linear", lin, tl.t - lin + 1.0)
        tl.t += 2.0
        for name, kernel, dur in (
            ("aten::gelu", "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", 12.0),
            ("aten::native_dropout", "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<>", 15.0),
            ("aten::native_layer_norm", "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<>",
             9.0),
        ):
            s = tl.t
            tl.t += 5.0
            last_main_end = tl.launch("cudaLaunchKernel", kernel, dur)
            tl.cpu(name, s, tl.t - s + 1.0, **{"Input Dims": [[tokens, 4 * hidden]],
                                               "Input type": ["c10::BFloat16"]})
            tl.t += 2.0
        s = tl.t
        tl.t += 2.0
        last_main_end = tl.launch("cuLaunchKernel", "triton_poi_fused_add_mul_0", 7.0, grid=(512, 1, 1),
                                  block=(256, 1, 1), regs=24)
        tl.events.append({"ph": "X", "cat": "user_annotation", "name": "triton_poi_fused_add_mul_0", "pid": 100,
                          "tid": 1, "ts": round(s, 3), "dur": round(tl.t - s + 0.5, 3), "args": {}})
        tl.t += 1.0
    # A host gap outside any CPU op (Python), then side-stream work that waits on the main stream.
    tl.t += 30.0
    rec = tl.t
    tl.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 100, "tid": 1,
                      "ts": round(rec, 3), "dur": 2.0, "args": {"correlation": tl.corr}})
    tl.corr += 1
    tl.t += 3.0
    tl.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 100, "tid": 1,
                      "ts": round(tl.t, 3), "dur": 2.0, "args": {"correlation": tl.corr}})
    tl.corr += 1
    tl.t += 3.0
    s = tl.t
    tl.t += 4.0
    tl.launch("cudaLaunchKernel", "void at::native::reduce_kernel<512, 1>", 25.0, stream=SIDE, after=last_main_end)
    tl.cpu("aten::sum", s, tl.t - s + 1.0, **{"Input Dims": [[tokens, 4 * hidden], [], []],
                                              "Input type": ["c10::BFloat16", "Scalar", "Scalar"]})
    tl.t += 2.0
    s = tl.t
    gpu_done = max(tl.stream_free.values())
    end = max(tl.t + 2.0, gpu_done + 3.0)
    tl.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 100, "tid": 1,
                      "ts": round(s, 3), "dur": round(end - s, 3), "args": {"correlation": tl.corr}})
    tl.corr += 1
    tl.t = end + 1.0
    tl.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 100, "tid": 1,
                      "ts": round(step_start, 3), "dur": round(tl.t - step_start, 3), "args": {}})
    tl.t += 5.0


def synthetic_events(steps: int = 2, layers: int = 2, tokens: int = 1024, hidden: int = 1024) -> Iterator[dict[str, Any]]:
    """The events of a synthetic trace, one step at a time (bounded memory for any size)."""
    tl = _Timeline()
    yield {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}}
    for n in range(steps):
        _step(tl, n + 1, layers, tokens, hidden)
        yield from tl.events
        tl.events = []


def write_events(fh: TextIO, events: Iterator[dict[str, Any]]) -> None:
    fh.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}],\n"traceEvents": [\n')
    first = True
    for ev in events:
        if not first:
            fh.write(",\n")
        fh.write(json.dumps(ev))
        first = False
    fh.write('\n], "displayTimeUnit": "ms", "traceName": "synthetic"}\n')


def write_synthetic_trace(path: Path, steps: int = 2, layers: int = 2, **sizes: int) -> Path:
    """Write a synthetic trace (gzip when the name ends in .gz)."""
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            write_events(fh, synthetic_events(steps, layers, **sizes))
    else:
        with path.open("w", encoding="utf-8") as fh:
            write_events(fh, synthetic_events(steps, layers, **sizes))
    return path
