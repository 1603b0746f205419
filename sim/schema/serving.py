"""Schema of a scenario's `serving:` section: arrivals, request lengths, batching, step shapes, variants, sweep.

Only pydantic here (no simulation imports), so the scenario schema can embed it. Units are
in the key names (`rate_per_s`, `_ms`, `_us`, `_tokens`); docs/serving.md documents every key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bounds that keep a serving simulation's memory and time finite (a typo like 10**8 is refused at
# load): about 2 ms per request and rate on a 2-core VM (Nov 2026), so the default 1000 takes seconds.
MAX_REQUESTS = 1_000_000
MAX_TOKENS = 1 << 20


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Lengths(Strict):
    """A distribution of token counts: exactly one of `fixed`, `uniform`, `lognormal`."""

    fixed: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    uniform: tuple[int, int] | None = Field(default=None, description="[min, max], both included")
    lognormal: LogNormal | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Lengths:
        given = [k for k in ("fixed", "uniform", "lognormal") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'fixed', 'uniform', 'lognormal'")
        if self.uniform is not None and not 1 <= self.uniform[0] <= self.uniform[1]:
            raise ValueError(f"uniform needs 1 <= min <= max, got {list(self.uniform)}")
        return self


class LogNormal(Strict):
    median: float = Field(gt=0)
    sigma: float = Field(ge=0, description="standard deviation of the log")
    min: int = Field(default=1, ge=1, le=MAX_TOKENS)
    max: int = Field(ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _range(self) -> LogNormal:
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


Lengths.model_rebuild()


class Arrival(Strict):
    """Poisson arrivals at `rate_per_s`, or replay of a request log (CSV: arrival_s, prompt_tokens, output_tokens)."""

    process: Literal["poisson", "log"] = "poisson"
    rate_per_s: float | None = Field(default=None, gt=0, description="poisson: mean arrivals per second")
    file: str | None = Field(default=None, description="log: CSV path, relative to the scenario file")

    @model_validator(mode="after")
    def _fields(self) -> Arrival:
        if self.process == "poisson" and self.rate_per_s is None:
            raise ValueError("a poisson arrival process needs 'rate_per_s'")
        if self.process == "log" and self.file is None:
            raise ValueError("a log arrival process needs 'file'")
        return self


class Batching(Strict):
    """How requests form engine steps.

    static: wait for `max_batch` requests (or `max_wait_ms` after the first), prefill them,
    then decode the whole batch until its longest request ends; finished rows stay in the
    batch (padding). continuous: every step admits and retires requests; `prefill` decides how
    prompts enter: `separate` steps (a prefill step of whole prompts within `token_budget`,
    prioritized over decode), or `chunked` (each step decodes every running request and fills
    the rest of `token_budget` with prompt chunks of at most `chunk_tokens`).
    """

    policy: Literal["static", "continuous"] = "continuous"
    max_batch: int = Field(default=64, ge=1, description="most requests decoding at once")
    token_budget: int = Field(default=4096, ge=1, description="most tokens (prompt + decode) in one step")
    prefill: Literal["separate", "chunked"] = "separate"
    chunk_tokens: int = Field(default=512, ge=1, description="chunked: most prompt tokens of one request per step")
    max_wait_ms: float = Field(default=10.0, ge=0, description="static: how long a partial batch waits")


class DecodeShape(Strict):
    """How a batch of decoding requests maps to the decode workload's parameters."""

    batch_param: str = "batch"
    cache_len_param: str = "cache_len"
    cache_len: Literal["max", "mean"] = Field(
        default="max", description="max: the batch's KV caches padded to its longest; mean: varlen attention")
    cache_len_step: int = Field(default=256, ge=1, description="cache lengths round up to a multiple of this")


class Prefill(Strict):
    """The prefill step: a workload over (prompts × tokens, with tokens already cached)."""

    workload: str = Field(description="workload YAML, relative to the scenario file")
    batch_param: str = "batch"
    seq_param: str = "seq"
    past_param: str | None = Field(default="past", description="tokens already in the cache (chunked prefill)")
    seq_step: int = Field(default=64, ge=1, description="prompt lengths round up to a multiple of this")
    pad_to: Literal["max", "mean"] = Field(
        default="max", description="max: prompts padded to the longest in the step; mean: packed (varlen)")


class ServingVariant(Strict):
    """One way to serve: which scenario variant runs decode (and prefill) steps, and CUDA-graph capture."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$")
    description: str = ""
    decode: str = Field(default="baseline", description="a scenario variant name (or baseline) for decode steps")
    prefill: str = Field(default="baseline", description="a scenario variant name (or baseline) for prefill steps")
    capture_batch_sizes: list[int] | None = Field(
        default=None, description="decode batch sizes with a captured graph: a batch pads up to the nearest one; "
        "larger batches run `uncaptured` (default: every size runs `decode` unpadded)")
    uncaptured: str = Field(default="baseline", description="variant for batches above the largest captured size")

    @model_validator(mode="after")
    def _sizes(self) -> ServingVariant:
        if self.capture_batch_sizes is not None:
            sizes = self.capture_batch_sizes
            if not sizes or any(s < 1 for s in sizes) or len(set(sizes)) != len(sizes):
                raise ValueError(f"capture_batch_sizes must be distinct positive sizes, got {sizes}")
        return self


class ServingSweep(Strict):
    rates_per_s: list[float] = Field(min_length=1, max_length=100, description="arrival rates for the latency-throughput curve")
    p99_target_ms: float | None = Field(default=None, gt=0, description="find the highest rate whose p99 meets this")
    target_metric: Literal["e2e", "ttft", "tpot"] = "e2e"
    bisect_steps: int = Field(default=6, ge=0, le=20, description="refinements between the last passing and first "
                              "failing swept rate")


class ServingSpec(Strict):
    """The `serving:` section of a scenario (docs/serving.md)."""

    seed: int = 0
    requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS, description="requests per simulation (poisson)")
    warmup_requests: int = Field(default=0, ge=0, description="first requests left out of the statistics")
    hardware: list[str] | None = Field(default=None, min_length=1, description="default: the scenario's hardware")
    arrival: Arrival
    prompt_tokens: Lengths | None = Field(default=None, description="poisson: prompt lengths")
    output_tokens: Lengths | None = Field(default=None, description="poisson: output lengths (the first token "
                                          "included)")
    batching: Batching = Batching()
    decode: DecodeShape = DecodeShape()
    prefill: Prefill | None = Field(default=None, description="without it prefill is not modeled: the first decode "
                                    "step makes the first token")
    scheduler_overhead_us: float = Field(default=0.0, ge=0, description="host time per engine step outside the graph")
    variants: list[ServingVariant] = Field(min_length=1)
    sweep: ServingSweep | None = None
    report_rate_per_s: float | None = Field(default=None, gt=0, description="rate of the p50/p99 comparison "
                                            "(default: the arrival rate)")

    @model_validator(mode="after")
    def _checks(self) -> ServingSpec:
        names = [v.name for v in self.variants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"serving variant name {dup[0]!r} is used twice")
        if self.arrival.process == "poisson" and (self.prompt_tokens is None or self.output_tokens is None):
            raise ValueError("poisson arrivals need 'prompt_tokens' and 'output_tokens'")
        if self.warmup_requests >= self.requests and self.arrival.process == "poisson":
            raise ValueError(f"warmup_requests ({self.warmup_requests}) must be below requests ({self.requests})")
        return self
