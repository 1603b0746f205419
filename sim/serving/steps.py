"""Engine steps priced by the step simulator: a batch's shapes → a workload graph → its variant → `run_graph`.

Each decode step is the decode workload at (batch size, cache length bucket); each prefill
step the prefill workload at (prompts, tokens, cached tokens). The serving variant's
scenario variant is applied at that bucket, so dispatch predicates and fallbacks apply step
by step. A CUDA-graph capture set pads a batch up to the nearest captured size (the padded
rows are priced: a real cost) and runs batches above the largest size on the uncaptured path.

Step times are cached per (role, variant, parameters) for the life of one pricer, so a rate
sweep prices each shape once.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sim.costmodel.cache import CostCache
from sim.hardware import Hardware
from sim.run import Scenario, run_graph, variant_graph
from sim.schema.scenario import Variant
from sim.schema.serving import DecodeShape, Prefill, ServingVariant
from sim.trace import Trace

Role = Literal["decode", "prefill"]


@dataclass(frozen=True)
class StepCost:
    time_s: float
    kernel_time_s: float  # GPU busy time: the union of the step's kernel intervals
    path: str


@dataclass(frozen=True)
class DecodePlan:
    """How one decode batch runs: priced batch size, variant, padding."""

    batch: int
    priced_batch: int
    cache_len: int
    variant: str
    captured: bool

    @property
    def padded_rows(self) -> int:
        return self.priced_batch - self.batch


def busy_time_s(trace: Trace) -> float:
    """Time at least one kernel runs (overlapping kernels counted once)."""
    busy, reach = 0.0, 0.0
    for iv in sorted(trace.kernels(), key=lambda iv: iv.start_s):
        start = max(iv.start_s, reach)
        if iv.end_s > start:
            busy += iv.end_s - start
            reach = iv.end_s
    return busy


def round_up(value: float, step: int) -> int:
    return max(step, int(math.ceil(value / step)) * step)


def capture_size(batch: int, sizes: Sequence[int]) -> int | None:
    """The smallest captured size >= batch, or None when the batch is above every captured size."""
    ordered = sorted(sizes)
    i = bisect.bisect_left(ordered, batch)
    return ordered[i] if i < len(ordered) else None


def pooled_length(lengths: Sequence[int], how: str) -> float:
    return float(max(lengths)) if how == "max" else sum(lengths) / len(lengths)


class StepPricer:
    """Prices decode and prefill steps of one serving variant on one hardware profile (cached)."""

    def __init__(self, decode_scn: Scenario, prefill_scn: Scenario | None, hw: Hardware, variant: ServingVariant,
                 decode_shape: DecodeShape, prefill_shape: Prefill | None,
                 cache: dict[tuple[str, str, tuple[tuple[str, float], ...]], StepCost] | None = None) -> None:
        self.decode_scn = decode_scn
        self.prefill_scn = prefill_scn
        self.hw = hw
        self.variant = variant
        self.decode_shape = decode_shape
        self.prefill_shape = prefill_shape
        self._variants: dict[str, tuple[int, Variant] | None] = {"baseline": None}
        for i, v in enumerate(decode_scn.spec.variants):
            self._variants[v.name] = (i, v)
        # Shared between the pricers of one hardware profile: serving variants reuse each other's shapes.
        self._cache = cache if cache is not None else {}
        self._costs = CostCache()  # kernel costs of this pricer's steps
        self.captured_sizes = sorted(variant.capture_batch_sizes) if variant.capture_batch_sizes else None

    # -- plans ---------------------------------------------------------------------------------
    def decode_plan(self, cache_lens: Sequence[int]) -> DecodePlan:
        batch = len(cache_lens)
        cache_len = round_up(pooled_length(cache_lens, self.decode_shape.cache_len), self.decode_shape.cache_len_step)
        if self.captured_sizes is None:
            return DecodePlan(batch, batch, cache_len, self.variant.decode, captured=False)
        padded = capture_size(batch, self.captured_sizes)
        if padded is None:
            return DecodePlan(batch, batch, cache_len, self.variant.uncaptured, captured=False)
        return DecodePlan(batch, padded, cache_len, self.variant.decode, captured=True)

    def decode_cost(self, plan: DecodePlan) -> StepCost:
        ds = self.decode_shape
        return self._cost("decode", plan.variant, {ds.batch_param: plan.priced_batch, ds.cache_len_param: plan.cache_len})

    def padding_cost_s(self, plan: DecodePlan) -> float:
        """What the padded rows cost: the step at the captured size minus the same graph at the real batch."""
        if plan.padded_rows == 0:
            return 0.0
        ds = self.decode_shape
        unpadded = self._cost("decode", plan.variant, {ds.batch_param: plan.batch, ds.cache_len_param: plan.cache_len})
        return self.decode_cost(plan).time_s - unpadded.time_s

    def prefill_params(self, new_tokens: Sequence[int], cached_tokens: Sequence[int]) -> dict[str, int]:
        ps = self.prefill_shape
        if ps is None:
            raise ValueError("this serving scenario models no prefill step")
        params = {ps.batch_param: len(new_tokens), ps.seq_param: round_up(pooled_length(new_tokens, ps.pad_to),
                                                                          ps.seq_step)}
        if ps.past_param is not None:
            past = pooled_length(cached_tokens, ps.pad_to)
            params[ps.past_param] = round_up(past, ps.seq_step) if past > 0 else 0
        return params

    def prefill_cost(self, new_tokens: Sequence[int], cached_tokens: Sequence[int]) -> StepCost:
        return self._cost("prefill", self.variant.prefill, self.prefill_params(new_tokens, cached_tokens))

    # -- pricing -------------------------------------------------------------------------------
    def _cost(self, role: Role, variant: str, values: dict[str, int]) -> StepCost:
        key = (role, variant, tuple(sorted((k, float(v)) for k, v in values.items())))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        scn = self.decode_scn if role == "decode" else self.prefill_scn
        if scn is None:
            raise ValueError("this serving scenario models no prefill step")
        params = dict(scn.workload.spec.parameters)
        params.update(values)
        graph = scn.workload.build(params)
        entry = self._variants[variant]
        path = "baseline"
        if entry is not None:
            graph, path = variant_graph(scn, entry[1], entry[0], graph, params, self.hw, self._costs)
        trace, metrics = run_graph(graph, self.hw, self._costs)
        cost = StepCost(metrics.time_s, busy_time_s(trace), path)
        self._cache[key] = cost
        return cost

    @property
    def shapes_priced(self) -> int:
        return len(self._cache)
