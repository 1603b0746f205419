"""The harness's budgeted, guarded measurements (sim.calibrate.gpu.common.BudgetedAttempts), on CPU:
the one context that register_small, heldout_l2/l2_cold and heldout_kernels share."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from sim.calibrate.gpu import common, heldout_kernels, heldout_l2, register_small


@pytest.fixture()
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A stand-in for torch.cuda (guarded synchronizes and empties the cache after a failure)."""
    calls: list[str] = []
    cuda = types.SimpleNamespace(synchronize=lambda: calls.append("synchronize"),
                                 empty_cache=lambda: calls.append("empty_cache"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(common, "_nvidia_smi_query", lambda: {})
    return calls


def _attempts(tmp_path: Path, budget_s: float) -> common.BudgetedAttempts:
    return common.BudgetedAttempts(common.ResultFile(str(tmp_path / "g.json"), "g", {"gpu_name": "fake"}), budget_s)


def test_a_measurement_runs_and_a_failure_is_recorded_and_the_run_goes_on(tmp_path: Path,
                                                                          fake_torch: list[str]) -> None:
    att = _attempts(tmp_path, 60.0)
    assert att.attempt("ok", lambda: 7) == 7

    def boom() -> Any:
        raise RuntimeError("out of memory")

    assert att.attempt("bad case", boom) is None
    assert fake_torch == ["synchronize", "empty_cache"]
    doc = json.loads((tmp_path / "g.json").read_text())
    assert [e["where"] for e in doc["errors"]] == ["bad case"] and "out of memory" in doc["errors"][0]["error"]
    assert "truncated" not in doc


def test_after_the_deadline_nothing_starts_and_the_file_says_truncated(tmp_path: Path, fake_torch: list[str]) -> None:
    att = _attempts(tmp_path, 60.0)
    att.deadline = 0.0  # the budget is spent
    ran: list[int] = []
    assert att.attempt("late", lambda: ran.append(1)) is None
    assert ran == [] and att.out_of_time()
    att.rf.close("truncated")
    assert json.loads((tmp_path / "g.json").read_text())["truncated"] is True


def test_the_harness_contexts_share_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "collect_meta", lambda extra=None: {"gpu_name": "fake", **(extra or {})})
    ctxs = [register_small.Ctx(str(tmp_path), False, 10.0), heldout_l2.L2Ctx(str(tmp_path), False, 10.0),
            heldout_kernels.Ctx(str(tmp_path), False, 10.0)]
    for ctx in ctxs:
        assert isinstance(ctx, common.BudgetedAttempts) and 0 < ctx.deadline - ctx.rf.t0 <= 10.0 + 1.0
    assert {Path(c.rf.path).name for c in ctxs} == {"register_small.json", "heldout_l2.json", "heldout_kernels.json"}
