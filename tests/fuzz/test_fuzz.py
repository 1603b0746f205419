"""The fixed-seed fuzz campaign of the default test run: 2,000 generated inputs, none may end in a
traceback, hang, pass 1 GB, change an input, leave a partial output or an unclear message."""

from __future__ import annotations

import time

import pytest

from tests.fuzz.harness import WALL_S, over_limit, run_in_process
from tests.fuzz.run import campaign, generate
from tests.fuzz.strategies import Case


def test_generation_is_deterministic() -> None:
    a, b = generate(30, 4), generate(30, 4)
    assert [(c.kind, c.argv, c.files, c.direct) for c in a] == [(c.kind, c.argv, c.files, c.direct) for c in b]


def test_fixed_seed_campaign() -> None:
    report = campaign(2000, seed=22, subprocess_every=100, workers=2)
    assert report.cases == 2000
    assert report.subprocess >= 20
    assert report.ok, report.summary()
    assert report.peak_rss < 1 << 30, report.summary()


def test_the_hang_guard_counts_cpu_time_not_the_machines_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy loop is a hang once it has used the CPU limit; a case that waits (as one does on a loaded
    machine, or on a pipe) is not, until the wall backstop."""
    import sim.cli

    def busy(argv: list[str]) -> int:
        while True:
            pass

    def waits(argv: list[str]) -> int:
        time.sleep(0.8)
        return 0

    monkeypatch.setattr(sim.cli, "main", busy)
    t0 = time.perf_counter()
    outcome = run_in_process(Case("cli", ["--version"]), hang_s=0.2)
    assert outcome.failures == ["hang"] and time.perf_counter() - t0 < WALL_S
    monkeypatch.setattr(sim.cli, "main", waits)
    outcome = run_in_process(Case("cli", ["--version"]), hang_s=0.2)
    assert "hang" not in outcome.failures and outcome.seconds >= 0.8
    assert over_limit(cpu=0.3, wall=0.3, hang_s=0.2) and over_limit(cpu=0.0, wall=WALL_S + 1)
