"""Requests: Poisson arrivals with sampled lengths, or a replayed request log (CSV).

Arrivals at different rates share their random numbers (common random numbers): the
unit-rate exponential gaps and the lengths are drawn once from the seed, and a rate only
scales the gaps. Rate sweeps and variant comparisons then differ by the rate or variant
alone, not by a different draw.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.errors import InputError
from sim.schema.serving import Lengths

LOG_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


@dataclass(frozen=True)
class RequestSpec:
    """One request as it arrives: when, how long its prompt is, how many tokens it wants (first included)."""

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int


def sample_lengths(dist: Lengths, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` token counts from `dist` (whole numbers, at least 1)."""
    if dist.fixed is not None:
        return np.full(n, dist.fixed, dtype=np.int64)
    if dist.uniform is not None:
        lo, hi = dist.uniform
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    ln = dist.lognormal
    if ln is None:  # the schema guarantees one form; this keeps mypy and readers honest
        raise InputError("a length distribution needs one of fixed, uniform, lognormal")
    raw = np.exp(np.log(ln.median) + ln.sigma * rng.standard_normal(n))
    return np.clip(np.rint(raw), ln.min, ln.max).astype(np.int64)


def poisson_requests(n: int, rate_per_s: float, prompt: Lengths, output: Lengths, seed: int) -> list[RequestSpec]:
    """`n` requests arriving as a Poisson process at `rate_per_s`, the first at time 0."""
    if rate_per_s <= 0:
        raise InputError(f"arrival rate must be > 0, got {rate_per_s}")
    gaps_seq, prompt_seq, output_seq = np.random.SeedSequence(seed).spawn(3)
    unit_gaps = np.random.default_rng(gaps_seq).exponential(1.0, size=n)
    unit_gaps[0] = 0.0
    arrivals = np.cumsum(unit_gaps) / rate_per_s
    prompts = sample_lengths(prompt, n, np.random.default_rng(prompt_seq))
    outputs = sample_lengths(output, n, np.random.default_rng(output_seq))
    return [RequestSpec(i, float(arrivals[i]), int(prompts[i]), int(outputs[i])) for i in range(n)]


def read_request_log(path: Path) -> list[RequestSpec]:
    """Read a request log: CSV with a header naming `arrival_s,prompt_tokens,output_tokens` (other columns ignored).

    Rows may come in any order; they are sorted by arrival. Errors name the file, the line
    and the column.
    """
    file = str(path)
    from sim.limits import MAX_YAML_BYTES
    from sim.schema.loader import read_input_text

    text = read_input_text(path, max_bytes=MAX_YAML_BYTES, what="request log (CSV)")
    reader = csv.DictReader(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in LOG_COLUMNS if c not in header]
    if missing:
        raise InputError(f"request log lacks column '{missing[0]}'", file=file, path="header", value=",".join(header),
                         expected="a header with " + ",".join(LOG_COLUMNS))
    rows: list[tuple[float, int, int]] = []
    for row in reader:
        line = reader.line_num
        clean = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        try:
            arrival = float(clean["arrival_s"])
        except ValueError:
            raise InputError("not a number", file=file, path=f"line {line}.arrival_s", value=clean["arrival_s"],
                             expected="seconds, >= 0") from None
        if not np.isfinite(arrival) or arrival < 0:
            raise InputError("arrival must be finite and >= 0", file=file, path=f"line {line}.arrival_s", value=arrival)
        counts = []
        for col in ("prompt_tokens", "output_tokens"):
            raw = clean[col]
            try:
                v = int(raw)
            except ValueError:
                raise InputError("not a whole number", file=file, path=f"line {line}.{col}", value=raw,
                                 expected="a token count >= 1") from None
            if v < 1:
                raise InputError("must be >= 1", file=file, path=f"line {line}.{col}", value=v)
            counts.append(v)
        rows.append((arrival, counts[0], counts[1]))
    if not rows:
        raise InputError("request log has no requests", file=file)
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    return [RequestSpec(i, a - t0, p, o) for i, (a, p, o) in enumerate(rows)]


def log_rate_per_s(requests: list[RequestSpec]) -> float | None:
    """The log's mean arrival rate ((n − 1) / span), or None when it has one request or no span."""
    span = requests[-1].arrival_s - requests[0].arrival_s
    return (len(requests) - 1) / span if span > 0 else None


def rescale(requests: list[RequestSpec], rate_per_s: float) -> list[RequestSpec]:
    """The log replayed at another mean rate: arrival gaps scaled, lengths and order kept."""
    native = log_rate_per_s(requests)
    if native is None:
        raise InputError("cannot replay a request log at another rate: all its requests arrive at once",
                         value=rate_per_s)
    k = native / rate_per_s
    return [RequestSpec(r.index, r.arrival_s * k, r.prompt_tokens, r.output_tokens) for r in requests]
