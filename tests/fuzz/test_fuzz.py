"""The fixed-seed fuzz campaign of the default test run: 2,000 generated inputs, none may end in a
traceback, hang, pass 1 GB, change an input, leave a partial output or an unclear message."""

from __future__ import annotations

from tests.fuzz.run import campaign, generate


def test_generation_is_deterministic() -> None:
    a, b = generate(30, 4), generate(30, 4)
    assert [(c.kind, c.argv, c.files, c.direct) for c in a] == [(c.kind, c.argv, c.files, c.direct) for c in b]


def test_fixed_seed_campaign() -> None:
    report = campaign(2000, seed=22, subprocess_every=100, workers=2)
    assert report.cases == 2000
    assert report.subprocess >= 20
    assert report.ok, report.summary()
    assert report.peak_rss < 1 << 30, report.summary()
