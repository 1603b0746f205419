"""Issue 23's compact graph and trace forms give what the plain forms gave: dependencies from two int
arrays, op key paths made on first use, a blocked launch's interval named when read."""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType

from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.graph import Graph, Op, OpPaths, Tensor
from sim.hardware import load_profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_engine import synthetic_graph  # noqa: E402


def _reference_dependencies(graph: Graph) -> tuple[tuple[int, ...], ...]:
    """The tuple-per-op computation Graph.dependencies used before the int arrays."""
    last_writer: dict[str, int] = {}
    index = {o.name: i for i, o in enumerate(graph.ops)}
    deps = []
    for i, o in enumerate(graph.ops):
        found = [last_writer[t] for t in o.reads if t in last_writer]
        found.extend(index[a] for a in o.after if a in index and index[a] < i)
        deps.append(tuple(sorted(set(found))) if len(found) > 1 else tuple(found))
        for t in o.writes:
            last_writer[t] = i
    return tuple(deps)


def test_dependencies_from_the_columns_equal_the_tuple_computation() -> None:
    t = {n: Tensor(n, (4,), "bf16") for n in "abc"}
    ops = (Op("w1", "elementwise", reads=("a",), writes=("b",)),
           Op("w2", "elementwise", reads=("b", "a"), writes=("c",), stream=1),
           Op("w3", "elementwise", reads=("c", "b", "c"), writes=("a",), after=("w1", "w2", "later", "nope")),
           Op("later", "elementwise", reads=("a",), writes=("b",), after=("w3",)))
    g = Graph("g", "training", MappingProxyType({}), MappingProxyType(t), ops)
    assert g.dependencies() == _reference_dependencies(g) == ((), (0,), (0, 1), (2,))
    starts, flat = g.dependency_columns()
    assert list(starts) == [0, 0, 1, 3, 4] and list(flat) == [0, 0, 1, 2]
    big = synthetic_graph(2000)
    assert big.dependencies() == _reference_dependencies(big)


def test_op_paths_are_the_dict_of_the_pairs() -> None:
    ops = [Op("a", "elementwise"), Op("b", "elementwise"), Op("a", "elementwise")]
    paths = OpPaths(ops, ["ops[0]", "ops[1]", "ops[2]"])
    assert dict(paths) == {"a": "ops[2]", "b": "ops[1]"}  # the later op wins, as in a dict of the pairs
    assert paths.get("b") == "ops[1]" and paths.get("zz") is None and len(paths) == 2
    assert paths == MappingProxyType({"a": "ops[2]", "b": "ops[1]"}) == {"a": "ops[2]", "b": "ops[1]"}
    assert paths != {"a": "ops[0]", "b": "ops[1]"} and paths == OpPaths(ops[1:], ["ops[1]", "ops[2]"])
    assert paths != OpPaths(ops[:2], ["ops[0]", "ops[1]"])
    assert repr(paths) == repr(MappingProxyType({"a": "ops[2]", "b": "ops[1]"}))
    g = synthetic_graph(30)
    assert g.op_paths["layer2.fc1"] == "ops[0].ops[5]" and len(g.op_paths) == 30


def test_blocked_intervals_are_named_after_their_op() -> None:
    g = synthetic_graph(3000)  # past the launch queue's depth: the host blocks
    hw = load_profile("h200-sxm")
    trace = simulate(g, price(g, hw), host_costs(hw))
    blocked = [iv for iv in trace.intervals if iv.cat == "blocked"]
    assert len(blocked) > 100
    assert all(iv.name == f"blocked: {g.ops[iv.op].name}" for iv in blocked)
    assert all(r[3] == f"blocked: {g.ops[r[5]].name}" for r in trace.host_records() if r[4] == "blocked")
    assert all(not r[3].startswith("blocked") for r in trace.host_records() if r[4] != "blocked")
