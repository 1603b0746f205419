"""Row reductions: `threads_per_row` / `rows_per_block` in the launch configuration, and `fuse` setting
the fused reduction's `passes` (a one-pass add+LayerNorm as Inductor writes it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.hardware import Hardware
from sim.schema.scenario import TransformSpec
from sim.transforms import Context, apply_all
from sim.workload import load_workload
from tests.conftest import workload_doc, write_yaml

TENSORS = {"x": {"shape": ["rows", 1024], "dtype": "bf16"}, "r": {"shape": ["rows", 1024], "dtype": "bf16"},
           "s": {"shape": ["rows", 1024], "dtype": "bf16"}, "y": {"shape": ["rows", 1024], "dtype": "bf16"}}
ADD = {"name": "add", "kind": "elementwise", "reads": ["x", "r"], "writes": ["s"], "math": {"add": 1}}
NORM = {"name": "norm", "kind": "reduction", "rows": "rows", "cols": 1024, "passes": 2, "reads": ["s"],
        "writes": ["y"], "math": {"add": 3, "mul": 3, "rsqrt": 1}}


def _graph(tmp_path: Path, *ops: dict[str, Any]) -> Any:
    doc = workload_doc(list(ops), TENSORS, params={"rows": 65536})
    wl = load_workload(write_yaml(tmp_path / "w.yaml", doc))
    return wl.build(wl.params_for(wl.buckets()[0]))


def test_warp_per_row_launch(tmp_path: Path, h200: Hardware) -> None:
    block_per_row = _graph(tmp_path, NORM)
    warp_per_row = _graph(tmp_path, {**NORM, "launch": {"block": 128, "threads_per_row": 32, "rows_per_block": 4}})
    only_rows = _graph(tmp_path, {**NORM, "launch": {"threads_per_row": 32, "rows_per_block": 4}})
    (a,), (b,), (c,) = price(block_per_row, h200), price(warp_per_row, h200), price(only_rows, h200)
    assert a is not None and b is not None and c is not None
    assert (a.detail["grid"], a.detail["threads_per_row"], a.detail["rows_per_block"]) == (65536, 128, 1)
    assert (b.detail["grid"], b.detail["threads_per_row"], b.detail["rows_per_block"]) == (16384, 32, 4)
    assert (c.detail["block"], c.detail["grid"]) == (128, 16384)
    assert b.detail["sync_us"] < a.detail["sync_us"]  # log2(32) shuffle steps instead of log2(128)
    assert b.time_s != pytest.approx(a.time_s, rel=1e-3)


@pytest.mark.parametrize(("launch", "key", "problem"), [
    ({"block": 128, "threads_per_row": 32, "rows_per_block": 2}, "rows_per_block", "differs from block"),
    ({"block": 64, "threads_per_row": 128}, "threads_per_row", "exceeds the block"),
])
def test_inconsistent_row_layout_is_an_error(tmp_path: Path, launch: dict[str, int], key: str, problem: str) -> None:
    with pytest.raises(InputError, match=rf"ops\[0\]\.launch\.{key}.*{problem}"):
        _graph(tmp_path, {**NORM, "launch": launch})


def test_row_layout_on_an_elementwise_op_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"ops\[0\]\.launch\.threads_per_row.*reductions only"):
        _graph(tmp_path, {**ADD, "launch": {"threads_per_row": 32}})


def _fuse(graph: Any, **extra: Any) -> Any:
    spec = TransformSpec.model_validate({"fuse": {"ops": ["add", "norm"], "name": "add_norm", **extra}})
    return apply_all(graph, [spec], Context("s.yaml", "variants[0].transforms", {"rows": 65536.0}))


def test_fuse_sets_the_passes_of_the_fused_reduction(tmp_path: Path, h200: Hardware) -> None:
    graph = _graph(tmp_path, ADD, NORM)
    two = _fuse(graph)  # inherits the eager layer norm's two sweeps
    one = _fuse(graph, passes=1)  # Inductor's one-pass kernel keeps the row in registers
    assert two.op("add_norm").attrs["passes"] == 2 and one.op("add_norm").attrs["passes"] == 1
    (c2,), (c1,) = price(two, h200), price(one, h200)
    assert c2 is not None and c1 is not None
    row_bytes = 65536 * 1024 * 2
    # reads x and r (2 tensors) once per pass, writes y once
    assert c2.hbm_bytes == pytest.approx(2 * 2 * row_bytes + row_bytes)
    assert c1.hbm_bytes == pytest.approx(2 * row_bytes + row_bytes)
    assert c1.time_s < c2.time_s


def test_passes_without_a_reduction_is_an_error(tmp_path: Path) -> None:
    graph = _graph(tmp_path, ADD, {**ADD, "name": "add2", "reads": ["s", "r"], "writes": ["y"]})
    spec = TransformSpec.model_validate({"fuse": {"ops": ["add", "add2"], "name": "f", "passes": 1}})
    with pytest.raises(InputError, match=r"fuse\.passes.*needs a reduction"):
        apply_all(graph, [spec], Context("s.yaml", "variants[0].transforms", {"rows": 65536.0}))


def test_a_grid_smaller_than_the_rows_loops_over_them(tmp_path: Path, h200: Hardware) -> None:
    """A persistent kernel (256 blocks for 65536 rows) still moves every row: its time never beats HBM peak."""
    full = _graph(tmp_path, NORM)
    persistent = _graph(tmp_path, {**NORM, "launch": {"block": 128, "grid": 256}})
    (a,), (b,) = price(full, h200), price(persistent, h200)
    assert a is not None and b is not None
    assert b.detail["row_iters"] == 65536 // 256 and b.hbm_bytes == a.hbm_bytes
    assert b.time_s >= b.hbm_bytes / h200.hbm_peak_bps


def test_set_launch_sets_a_reductions_passes(tmp_path: Path) -> None:
    graph = _graph(tmp_path, NORM)
    spec = TransformSpec.model_validate({"set_launch": {"op": "norm", "passes": 1, "launch": {"block": 512,
                                                        "threads_per_row": 256, "rows_per_block": 2}}})
    out = apply_all(graph, [spec], Context("s.yaml", "variants[0].transforms", {"rows": 65536.0}))
    assert out.op("norm").attrs["passes"] == 1 and out.op("norm").launch.rows_per_block == 2
