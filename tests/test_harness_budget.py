"""The device harnesses in scripts/ refuse a --budget-s that is not a positive, finite number of seconds: one
`error:` line on stderr, exit 2, nothing written (no GPU needed: the check comes before any measurement)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["softmax_heldout", "dirty_copy_law", "norm_heldout"])
@pytest.mark.parametrize("budget", ["nan", "inf", "0", "-5"])
def test_a_bad_budget_is_refused_before_anything_is_written(name: str, budget: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    assert _script(name).main(["--out", str(out), "--budget-s", budget]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --budget-s:") and "positive, finite" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("name", ["softmax_heldout", "dirty_copy_law", "norm_heldout"])
def test_a_dry_run_prints_the_plan_and_writes_nothing(name: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    assert _script(name).main(["--out", str(out), "--dry-run", "--budget-s", "120"]) == 0
    assert "budget 120.0 s" in capsys.readouterr().out and not out.exists()
