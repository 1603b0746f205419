"""Grid expansion: order, keys, axes validation, and what one point's scenario looks like."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.errors import InputError
from sim.sweep import load_sweep, point_scenario
from tests.sweep.conftest import tiny_scenario


def test_grid_is_hardware_outermost_then_params_in_file_order(tmp_path: Path) -> None:
    path = tiny_scenario(tmp_path, {"hardware": ["h200-sxm", "h100-sxm"], "params": {"bs": [128, 256], "n": [1024, 2048, 4096]}})
    plan = load_sweep(path)
    assert len(plan.points) == 2 * 2 * 3
    assert [p.index for p in plan.points] == list(range(12))
    assert [(p.hardware, dict(p.params)["bs"], dict(p.params)["n"]) for p in plan.points[:4]] == [
        ("h200-sxm", 128, 1024), ("h200-sxm", 128, 2048), ("h200-sxm", 128, 4096), ("h200-sxm", 256, 1024)]
    assert plan.points[6].hardware == "h100-sxm"
    assert len({p.key for p in plan.points}) == 12
    assert plan.axes == {"hardware": ["h200-sxm", "h100-sxm"], "bs": [128, 256], "n": [1024, 2048, 4096]}
    assert plan.variants == ("fused", "fused_ept8")


def test_keys_are_stable_and_depend_on_inputs(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    a = load_sweep(tiny_scenario(tmp_path / "a"))
    b = load_sweep(tiny_scenario(tmp_path / "b"))
    assert [p.key for p in a.points] == [p.key for p in b.points]
    c = load_sweep(tiny_scenario(tmp_path / "c", min_gain=0.05))
    assert not {p.key for p in a.points} & {p.key for p in c.points}


def test_no_sweep_section_means_one_point_per_profile(tmp_path: Path) -> None:
    plan = load_sweep(tiny_scenario(tmp_path, sweep={}))
    assert [(p.hardware, p.params) for p in plan.points] == [("h200-sxm", ())]


def test_variant_subset(tmp_path: Path) -> None:
    plan = load_sweep(tiny_scenario(tmp_path, {"variants": ["fused_ept8"]}))
    scn = point_scenario(plan.scenario, plan.hardware["h200-sxm"], {}, plan.variants)
    assert [v.name for v in scn.spec.variants] == ["fused_ept8"]


def test_swept_value_replaces_the_parameter_everywhere(tmp_path: Path) -> None:
    plan = load_sweep(tiny_scenario(tmp_path, {"params": {"n": [512]}}))
    scn = point_scenario(plan.scenario, plan.hardware["h200-sxm"], {"n": 512}, plan.variants)
    assert [b.params["n"] for b in scn.buckets] == [512, 512]
    assert scn.workload.spec.parameters["n"] == 512
    assert scn.hardware == (plan.hardware["h200-sxm"],)


@pytest.mark.parametrize(("sweep", "path"), [
    ({"params": {"nope": [1, 2]}}, "sweep.params.nope"),
    ({"variants": ["missing"]}, "sweep.variants[0]"),
    ({"hardware": ["no-such-gpu"]}, "sweep.hardware[0]"),
])
def test_bad_axes_name_the_key(tmp_path: Path, sweep: dict[str, object], path: str) -> None:
    with pytest.raises(InputError) as err:
        load_sweep(tiny_scenario(tmp_path, sweep))
    assert path in str(err.value)


def test_empty_or_repeated_axis_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no values"):
        load_sweep(tiny_scenario(tmp_path, {"params": {"bs": []}}))
    with pytest.raises(InputError, match="repeats a value"):
        load_sweep(tiny_scenario(tmp_path, {"params": {"bs": [128, 128]}}))
