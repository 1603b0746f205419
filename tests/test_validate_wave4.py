"""Table heldout_w4 (issue 18): the fourth wave's kernels profiled after a read-only L2 flush. Only the
clean state is gated; set cal rows are "calibrated", the rest "unseen"; dirty/warm rows and calls whose
kernels did not split evenly are left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.hardware import load_profile
from sim.validate.wave2 import wave4_kernel_rows


def _gemm(state: str, set_: str, m: int, us: float, **extra: object) -> dict[str, object]:
    return {"bench": "gemm", "set": set_, "l2_state": state, "m": m, "n": 4096, "k": 4096, "dtype": "bfloat16",
            "layout": "nn", "kernels": [{"name": "nvjet_sm90_tst_64x8", "duration_us": us}], **extra}


def test_wave4_rows_take_one_l2_state_per_table(tmp_path: Path) -> None:
    recs = [_gemm("clean", "w3", 8, 11.7), _gemm("dirty", "w3", 8, 15.3), _gemm("warm", "w3", 8, 8.1),
            _gemm("clean", "cal", 16, 12.2), _gemm("clean", "new", 24, 12.5, uneven_calls=True),
            {"bench": "sum", "set": "new", "l2_state": "clean", "dim": 1, "rows": 32, "cols": 3072,
             "dtype": "bfloat16", "kernels": [{"name": "reduce_kernel", "duration_us": 7.0}]}]
    path = tmp_path / "heldout_l2.json"
    path.write_text(json.dumps({"meta": {}, "group": "heldout_l2", "records": recs}))
    hw = load_profile("h200-measured")
    rows = wave4_kernel_rows(hw, path)
    assert [(r.table, r.family, r.split, r.measured_us) for r in rows] == [
        ("heldout_w4", "gemm", "unseen", 11.7), ("heldout_w4", "gemm", "calibrated", 12.2),
        ("heldout_w4", "reduction", "unseen", 7.0)]
    assert all(r.predicted_us > 0 for r in rows)
    # the records after the flush that writes, in their own table, priced with the write-back on top
    dirty = wave4_kernel_rows(hw, path, table="heldout_w4_dirty", state="dirty")
    assert [(r.table, r.family, r.split, r.measured_us) for r in dirty] == [("heldout_w4_dirty", "gemm", "unseen", 15.3)]
    assert dirty[0].predicted_us > rows[0].predicted_us  # same shape: the dirty lines' write-back
    assert wave4_kernel_rows(hw, tmp_path / "absent.json") == []


def test_copies_profiled_after_a_read_only_flush_are_priced_through_a_clean_l2(tmp_path: Path) -> None:
    # the clean record gets l2: cold (the memcpy's own fixed cost); dirty adds l2_dirty (the write-back of the dirty
    # lines it evicts); warm keeps the default price
    from sim.calibrate.cases import profiled_copy

    def rec(state: str) -> dict[str, object]:
        return {"bench": "copy", "set": "new", "l2_state": state, "impl": "torch_copy_", "numel": 102400,
                "bytes": 409600, "dtype": "bfloat16", "tensor_bytes": 204800,
                "kernels": [{"name": "Memcpy DtoD (Device -> Device)", "duration_us": 1.44}]}

    hw = load_profile("h200-measured")
    assert hw.memcpy_clean_fixed_s is not None
    clean, dirty, warm = profiled_copy(rec("clean")), profiled_copy(rec("dirty")), profiled_copy(rec("warm"))
    assert clean is not None and dirty is not None and warm is not None
    assert dict(clean.graph.ops[0].attrs) == {"l2": "cold"} and dict(dirty.graph.ops[0].attrs) == {"l2": "cold", "l2_dirty": True}
    assert "l2" not in warm.graph.ops[0].attrs
    assert hw.l2_dirty_writeback_bps is not None
    writeback = 409600 / hw.l2_dirty_writeback_bps  # the bytes it reads and writes, far below the L2's capacity
    assert dirty.predicted_us(hw) - clean.predicted_us(hw) == pytest.approx(writeback * 1e6, rel=1e-9)
    gap = hw.kernel_fixed_s - hw.memcpy_clean_fixed_s
    assert warm.predicted_us(hw) - clean.predicted_us(hw) == pytest.approx(gap * 1e6, rel=1e-9)
