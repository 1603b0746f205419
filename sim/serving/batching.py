"""Batching policies: which requests the next engine step runs, and what each request has done so far.

A policy owns its queues (waiting, prefilling, running) and is asked for the next step at
each step boundary; it never prices anything (sim/serving/steps.py does) and never sees time
except to decide whether a static batch has waited long enough.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sim.schema.serving import Batching
from sim.serving.requests import RequestSpec


@dataclass(eq=False)
class Live:
    """A request in the server: how much of its prompt is cached, how many tokens it has made."""

    spec: RequestSpec
    prefilled: int = 0
    generated: int = 0
    padding_tokens: int = 0  # static batching: steps the row sat in the batch after it finished
    first_token_s: float | None = None
    finish_s: float | None = None

    @property
    def context(self) -> int:
        """Tokens in this row's KV cache when it decodes."""
        return self.prefilled + self.generated + self.padding_tokens

    @property
    def done(self) -> bool:
        return self.finish_s is not None


@dataclass(frozen=True)
class Step:
    """One engine step: rows that decode a token, and prompt pieces (request, new tokens) that prefill."""

    decode: tuple[Live, ...] = ()
    prefill: tuple[tuple[Live, int], ...] = ()

    @property
    def kind(self) -> str:
        if self.decode and self.prefill:
            return "mixed"
        return "decode" if self.decode else "prefill"


@dataclass
class Queues:
    waiting: deque[Live] = field(default_factory=deque)
    prefilling: list[Live] = field(default_factory=list)
    running: list[Live] = field(default_factory=list)


class Policy:
    """Base: holds the queues and applies a finished step to its requests."""

    def __init__(self, cfg: Batching, models_prefill: bool) -> None:
        self.cfg = cfg
        self.models_prefill = models_prefill
        self.q = Queues()

    def arrive(self, req: Live) -> None:
        self.q.waiting.append(req)

    def next_step(self, now_s: float) -> Step | None:
        raise NotImplementedError

    def wake_at(self) -> float | None:
        """When the policy wants to be asked again even if nothing arrives (None: only on an arrival)."""
        return None

    def finish_step(self, step: Step, now_s: float) -> list[Live]:
        """Apply `step`, ended at `now_s`; returns the requests that finished."""
        finished: list[Live] = []
        for req, tokens in step.prefill:
            req.prefilled += tokens
            if req.prefilled >= req.spec.prompt_tokens:
                self._emit(req, now_s, finished)
                if req in self.q.prefilling:
                    self.q.prefilling.remove(req)
                if not req.done and req not in self.q.running:
                    self.q.running.append(req)
        for req in step.decode:
            if req.done:
                req.padding_tokens += 1
            else:
                self._emit(req, now_s, finished)
        if finished:
            self.q.running = [r for r in self.q.running if not r.done]
        return finished

    @staticmethod
    def _emit(req: Live, now_s: float, finished: list[Live]) -> None:
        req.generated += 1
        if req.first_token_s is None:
            req.first_token_s = now_s
        if req.generated >= req.spec.output_tokens:
            req.finish_s = now_s
            finished.append(req)


class ContinuousPolicy(Policy):
    """Continuous batching: requests join and leave at every step (max batch, token budget).

    `separate`: a step of whole prompts (admitted in order while they fit the token budget;
    one prompt longer than the budget runs alone) goes before decode whenever a request
    waits and a slot is free. `chunked`: every step decodes every running request and fills
    the rest of the token budget with prompt chunks, oldest request first.
    """

    def next_step(self, now_s: float) -> Step | None:
        q, cfg = self.q, self.cfg
        if not self.models_prefill:
            while q.waiting and len(q.running) < cfg.max_batch:
                req = q.waiting.popleft()
                req.prefilled = req.spec.prompt_tokens
                q.running.append(req)
            return Step(decode=tuple(q.running)) if q.running else None
        if cfg.prefill == "separate":
            admitted: list[Live] = []
            tokens = 0
            while q.waiting and len(q.running) + len(admitted) < cfg.max_batch:
                prompt = q.waiting[0].spec.prompt_tokens
                if admitted and tokens + prompt > cfg.token_budget:
                    break
                admitted.append(q.waiting.popleft())
                tokens += prompt
            if admitted:
                return Step(prefill=tuple((r, r.spec.prompt_tokens) for r in admitted))
            return Step(decode=tuple(q.running)) if q.running else None
        while q.waiting and len(q.running) + len(q.prefilling) < cfg.max_batch:
            q.prefilling.append(q.waiting.popleft())
        budget = cfg.token_budget - len(q.running)
        pieces: list[tuple[Live, int]] = []
        for req in q.prefilling:
            if budget <= 0:
                break
            n = min(req.spec.prompt_tokens - req.prefilled, cfg.chunk_tokens, budget)
            pieces.append((req, n))
            budget -= n
        if not q.running and not pieces:
            return None
        return Step(decode=tuple(q.running), prefill=tuple(pieces))


class StaticPolicy(Policy):
    """Static batching: a batch forms (full, or `max_wait_ms` after its first request arrived), is
    prefilled at once, and decodes until its longest request ends; finished rows stay (padding)."""

    def __init__(self, cfg: Batching, models_prefill: bool) -> None:
        super().__init__(cfg, models_prefill)
        self.batch: list[Live] = []

    def _deadline(self) -> float | None:
        if not self.q.waiting:
            return None
        return self.q.waiting[0].spec.arrival_s + self.cfg.max_wait_ms * 1e-3

    def wake_at(self) -> float | None:
        return None if self.batch else self._deadline()

    def next_step(self, now_s: float) -> Step | None:
        q, cfg = self.q, self.cfg
        if not self.batch:
            deadline = self._deadline()
            if deadline is None or (len(q.waiting) < cfg.max_batch and now_s < deadline - 1e-12):
                return None
            self.batch = [q.waiting.popleft() for _ in range(min(cfg.max_batch, len(q.waiting)))]
            for req in self.batch:
                if not self.models_prefill:
                    req.prefilled = req.spec.prompt_tokens
            q.running = list(self.batch) if not self.models_prefill else []
        if any(r.prefilled < r.spec.prompt_tokens for r in self.batch):
            return Step(prefill=tuple((r, r.spec.prompt_tokens - r.prefilled) for r in self.batch))
        return Step(decode=tuple(self.batch))

    def finish_step(self, step: Step, now_s: float) -> list[Live]:
        finished = super().finish_step(step, now_s)
        if all(r.done for r in self.batch):
            self.batch = []
        return finished


def make_policy(cfg: Batching, models_prefill: bool) -> Policy:
    return StaticPolicy(cfg, models_prefill) if cfg.policy == "static" else ContinuousPolicy(cfg, models_prefill)
