"""Table heldout_w8 (issue 18): the eighth wave's held-out Triton elementwise kernels (pipe_mix). The fused
pair is family `fused`, one-op kernels `elementwise`; every row is held out; the committed data are priced
by the model the register groups fitted (the fused forward and backward within the gates' tripwires)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from sim.hardware import load_profile
from sim.validate.wave2 import WAVE8_PIPE_MIX, wave8_pipe_mix_rows
from tests.conftest import ROOT


def test_pipe_mix_rows_name_their_family_and_are_held_out(tmp_path: Path) -> None:
    recs = [{"bench": "pipe_mix", "kernel": k, "numel": 1 << 24, "hidden": 4096, "BLOCK": 1024, "num_warps": 4,
             "grid": [1 << 14], "n_regs": 48, "n_spills": 0, "time_us": 60.0}
            for k in ("dropout", "gelu", "bgd_fwd", "bgd_bwd", "unknown")]
    path = tmp_path / "pipe_mix.json"
    path.write_text(json.dumps({"meta": {}, "group": "pipe_mix", "records": recs}))
    rows = wave8_pipe_mix_rows(load_profile("h200-measured"), path)
    assert [(r.table, r.family, r.split) for r in rows] == [
        ("heldout_w8", "elementwise", "unseen"), ("heldout_w8", "elementwise", "unseen"),
        ("heldout_w8", "fused", "unseen"), ("heldout_w8", "fused", "unseen")]
    assert all(r.predicted_us > 0 and r.measured_us == 60.0 for r in rows)
    assert wave8_pipe_mix_rows(load_profile("h200-measured"), tmp_path / "absent.json") == []


def test_the_committed_fused_kernels_are_priced_within_a_few_percent() -> None:
    rows = wave8_pipe_mix_rows(load_profile("h200-measured"), ROOT / WAVE8_PIPE_MIX)
    fused = [abs(r.error) for r in rows if r.family == "fused"]
    assert len(fused) == 12
    assert statistics.median(fused) < 0.035 and max(fused) < 0.10
