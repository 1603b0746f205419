"""Selecting ops by module path in scenarios (fuse / mode `ops_under`), on the captured MLP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.errors import InputError
from sim.run import load_scenario, run_scenario
from sim.transforms import Context, apply_one
from sim.transforms.mode import ModeArgs
from sim.workload import load_workload
from tests.capture.conftest import CAPTURE


def scenario(tmp_path: Path, transforms: list[dict[str, Any]]) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "schema": "kernelsim.scenario/v1", "name": "s", "workload": str(CAPTURE / "mlp.captured.yaml"),
        "hardware": ["h200-sxm"], "distribution": [{"params": {"tokens": 1024}, "weight": 1.0}],
        "variants": [{"name": "v", "transforms": transforms}]}))
    return path


def run(path: Path) -> dict[str, Any]:
    result, _ = run_scenario(load_scenario(path))
    return {v["name"]: v["buckets"][0] for v in result["hardware"][0]["variants"]}


def test_mode_ops_under_compiles_only_that_module() -> None:
    wl = load_workload(CAPTURE / "mlp.captured.yaml")
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    args = ModeArgs(mode="compiled", ops_under="act", drop_host=True)
    out = apply_one(graph, "mode", args, Context(file="s.yaml", path="variants[0]", params={}))
    under = [o for o in out.ops if o.name.startswith("act.")]
    assert under and all(o.mode == "compiled" and o.region == "compiled:act" for o in under)
    assert not any(o.kind == "host" for o in under)  # traced away
    assert all(o.mode == "eager" for o in out.ops if not o.name.startswith("act."))
    assert len(out.ops) == len(graph.ops) - sum(1 for o in graph.ops if o.name.startswith("act.") and o.kind == "host")


@pytest.mark.parametrize(("fuse", "message"), [
    ({"ops_under": "act.drop", "phase": "forward", "name": "f"}, "selects 1 elementwise/reduction op"),
    ({"ops_under": "nothing_here", "name": "f"}, "selects 0"),
    ({"ops": ["act.add", "act.gelu"], "ops_under": "act", "name": "f"}, "not both"),
    ({"name": "f"}, "needs 'ops'"),
    ({"ops": ["act.add", "act.gelu"], "phase": "forward", "name": "f"}, "needs 'ops_under'"),
])
def test_fuse_selector_errors(fuse: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=message):
        run(scenario(tmp_path, [{"fuse": fuse}]))


def test_mode_ops_under_unknown_module(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no op is under this module path"):
        run(scenario(tmp_path, [{"mode": {"mode": "compiled", "ops_under": "nope"}}]))
