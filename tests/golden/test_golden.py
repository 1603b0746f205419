"""Every shipped scenario and trace fixture gives the JSON stored in tests/golden, byte for byte.

A failure prints what changed (key paths, old -> new). If the change is intended, regenerate:
`python -m tests.golden.regen` (and read `git diff tests/golden` before committing).
"""

from __future__ import annotations

import pytest

from tests.golden.regen import GOLDEN, Case, cases, describe, produce

CASES = cases()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
                                  for c in CASES])
def test_output_matches_golden(case: Case) -> None:
    for fname, text in produce(case).items():
        path = GOLDEN / fname
        assert path.is_file(), f"no golden {fname}: run `python -m tests.golden.regen`"
        old = path.read_text(encoding="utf-8")
        if old != text:
            pytest.fail(f"{fname} differs from its golden (regenerate with `python -m tests.golden.regen` "
                        "if intended):\n" + "\n".join(describe(fname, old, text)))


def test_describe_names_added_and_changed_fields() -> None:
    old = '{"hardware": [{"variants": [{"time_us": 1.0}, {"time_us": 2.0}]}]}'
    new = '{"hardware": [{"variants": [{"time_us": 1.0, "band_us": 0.1}, {"time_us": 2.5, "band_us": 0.2}]}]}'
    lines = describe("x.json", old, new)
    assert "  + hardware[*].variants[*].band_us (2 places): 0.1" in lines
    assert any(line.startswith("  ~ hardware[0].variants[1].time_us: 2.0 -> 2.5 (+0.25 rel.)") for line in lines)


def test_cases_cover_every_shipped_scenario_and_trace_fixture() -> None:
    names = {c.name for c in CASES}
    root = GOLDEN.parent.parent
    for scn in (root / "scenarios").glob("*.yaml"):
        assert f"run_{scn.stem}" in names
    for trace in (root / "tests" / "fixtures" / "traces").glob("*.json.gz"):
        stem = trace.name.removesuffix(".json.gz")
        assert {f"replay_{stem}_measured", f"replay_{stem}_predict"} <= names
