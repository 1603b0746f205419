"""The serving loop (simpy): requests arrive, the policy forms a step, the step takes its simulated time.

One GPU runs one engine step at a time. An arrival process hands requests to the policy; the
server process asks the policy for a step at each boundary, prices it (sim/serving/steps.py:
each part's graph simulated by the step engine), holds the GPU for that time and applies it.
When there is nothing to run it sleeps until an arrival, or until a static batch's wait ends.
Everything the run owns lives in this call: a sweep runs many in one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import simpy

from sim.serving.batching import Live, Policy, Step
from sim.serving.requests import RequestSpec
from sim.serving.steps import StepPricer


class StepRecord(NamedTuple):
    start_s: float
    time_s: float
    kind: str  # decode | prefill | mixed
    batch: int  # decode rows (0 for a prefill-only step)
    priced_batch: int  # after padding up to a captured size
    cache_len: int  # the decode bucket's cache length
    prefill_tokens: int
    variant: str  # scenario variant of the decode part ("" for prefill-only)
    captured: bool
    padding_s: float  # what the padded rows cost
    kernel_time_s: float  # GPU busy time of the step


@dataclass(frozen=True)
class ServingRun:
    requests: tuple[Live, ...]
    steps: tuple[StepRecord, ...]
    end_s: float


def price_step(step: Step, pricer: StepPricer, overhead_s: float, start_s: float) -> StepRecord:
    """The step's time: scheduler overhead + its decode part + its prefill part (each one simulated graph).

    NB: a mixed (chunked-prefill) step is priced as two graphs back to back; a real server runs
    one forward over all tokens, so this counts the weight reads and launches twice.
    """
    time_s, kernel_s, padding_s = overhead_s, 0.0, 0.0
    batch = priced = cache_len = 0
    variant, captured = "", False
    if step.decode:
        plan = pricer.decode_plan([r.context for r in step.decode])
        cost = pricer.decode_cost(plan)
        time_s += cost.time_s
        kernel_s += cost.kernel_time_s
        padding_s = pricer.padding_cost_s(plan)
        batch, priced, cache_len, variant, captured = plan.batch, plan.priced_batch, plan.cache_len, plan.variant, plan.captured
    prefill_tokens = 0
    if step.prefill:
        new = [n for _, n in step.prefill]
        cost = pricer.prefill_cost(new, [r.prefilled for r, _ in step.prefill])
        time_s += cost.time_s
        kernel_s += cost.kernel_time_s
        prefill_tokens = sum(new)
    return StepRecord(start_s, time_s, step.kind, batch, priced, cache_len, prefill_tokens, variant, captured,
                      padding_s, kernel_s)


def simulate_serving(requests: Sequence[RequestSpec], policy: Policy, pricer: StepPricer,
                     overhead_s: float = 0.0) -> ServingRun:
    """Serve `requests` (sorted by arrival) with `policy`; every request runs to completion."""
    env = simpy.Environment()
    live = [Live(spec) for spec in requests]
    steps: list[StepRecord] = []
    wake: list[simpy.Event | None] = [None]
    remaining = [len(live)]

    def arrivals() -> simpy.events.ProcessGenerator:
        for req in live:
            delay = req.spec.arrival_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            policy.arrive(req)
            ev = wake[0]
            if ev is not None and not ev.triggered:
                ev.succeed()

    def server() -> simpy.events.ProcessGenerator:
        while remaining[0] > 0:
            step = policy.next_step(env.now)
            if step is None:
                ev = env.event()
                wake[0] = ev
                deadline = policy.wake_at()
                if deadline is not None and deadline > env.now:
                    yield ev | env.timeout(deadline - env.now)
                else:
                    yield ev
                wake[0] = None
                continue
            record = price_step(step, pricer, overhead_s, env.now)
            yield env.timeout(record.time_s)
            steps.append(record)
            remaining[0] -= len(policy.finish_step(step, env.now))

    env.process(arrivals())
    done = env.process(server())
    env.run(until=done)
    return ServingRun(requests=tuple(live), steps=tuple(steps), end_s=float(env.now))
