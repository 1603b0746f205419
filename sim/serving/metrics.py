"""Serving metrics from a finished run: per-request latencies, percentiles, throughput, GPU busy share.

TTFT: arrival to the end of the step that made the first token. TPOT: (finish − first
token) / (output tokens − 1), for requests with more than one token. E2E: arrival to finish.
Percentiles use numpy's linear interpolation; warm-up requests are left out of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.serving.loop import ServingRun

QUANTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}


def summary_ms(values_s: list[float]) -> dict[str, float | None]:
    if not values_s:
        return {"mean": None, **dict.fromkeys(QUANTILES)}
    arr = np.asarray(values_s) * 1e3
    out: dict[str, float | None] = {"mean": float(arr.mean())}
    for name, q in QUANTILES.items():
        out[name] = float(np.percentile(arr, q))
    return out


def run_metrics(run: ServingRun, offered_rate_per_s: float | None, warmup: int = 0) -> dict[str, Any]:
    """The JSON-ready metrics of one run (latencies in ms, rates per second)."""
    measured = [r for r in run.requests if r.spec.index >= warmup]
    ttft = [r.first_token_s - r.spec.arrival_s for r in measured if r.first_token_s is not None]
    tpot = [(r.finish_s - r.first_token_s) / (r.spec.output_tokens - 1) for r in measured
            if r.finish_s is not None and r.first_token_s is not None and r.spec.output_tokens > 1]
    e2e = [r.finish_s - r.spec.arrival_s for r in measured if r.finish_s is not None]
    start = min(r.spec.arrival_s for r in run.requests)
    span = run.end_s - start
    busy_s = sum(s.time_s for s in run.steps)
    kernel_s = sum(s.kernel_time_s for s in run.steps)
    decode_steps = [s for s in run.steps if s.batch > 0]
    out_tokens = sum(r.spec.output_tokens for r in run.requests)
    rows = sum(s.batch for s in decode_steps)
    padded = sum(s.priced_batch - s.batch for s in decode_steps)
    kinds = {k: sum(1 for s in run.steps if s.kind == k) for k in ("decode", "prefill", "mixed")}
    return {
        "offered_rate_per_s": offered_rate_per_s,
        "requests": len(run.requests),
        "measured_requests": len(measured),
        "achieved_rate_per_s": len(run.requests) / span if span > 0 else None,
        "throughput_tokens_per_s": out_tokens / span if span > 0 else None,
        "ttft_ms": summary_ms(ttft),
        "tpot_ms": summary_ms(tpot),
        "e2e_ms": summary_ms(e2e),
        "makespan_s": span,
        "server_busy_share": busy_s / span if span > 0 else None,
        "gpu_busy_share": kernel_s / span if span > 0 else None,
        "steps": {**kinds, "total": len(run.steps)},
        "mean_decode_batch": rows / len(decode_steps) if decode_steps else None,
        "padded_row_share": padded / (rows + padded) if rows + padded else 0.0,
        "padding_time_share": sum(s.padding_s for s in run.steps) / busy_s if busy_s > 0 else 0.0,
        "uncaptured_decode_step_share": (sum(1 for s in decode_steps if not s.captured) / len(decode_steps)
                                         if decode_steps else 0.0),
    }
