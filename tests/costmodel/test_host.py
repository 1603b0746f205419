"""sim.costmodel.host by hand: the host prices the engine is given (HostCosts) and the per-op
eager, host-op and compiled-call prices, on the test profile with round host numbers."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

import pytest

from sim.costmodel.cache import CostCache
from sim.costmodel.host import (
    EAGER_DISPATCH_ATTRS,
    HOST_OP_ATTRS,
    OpPrices,
    compiled_call_s,
    eager_dispatch_key,
    eager_dispatch_s,
    host_costs,
    host_op_key,
    host_op_s,
    op_key,
)
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.errors import InputError
from sim.graph import Op
from sim.hardware import Hardware

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_engine import synthetic_graph  # noqa: E402


@pytest.fixture(scope="module")
def hw(testgpu: Hardware) -> Hardware:
    return dataclasses.replace(
        testgpu, launch_s=2e-6, framework_op_table_s={"aten::addmm": (8e-6, 12e-6), "MmBackward0": (15e-6, None)},
        eager_op_by_kind_s={"gemm": 7e-6}, framework_op_s=1e-6, backward_call_s=5e-6, autograd_node_s=4e-6,
        python_function_s=3e-6, module_call_s=0.5e-6, compiled_backward_call_s=30e-6)


def op(kind: str, **attrs: object) -> Op:
    phase = str(attrs.pop("phase", "forward"))
    library = str(attrs.pop("library", "torch"))
    return Op(name="o", kind=kind, phase=phase, library=library, attrs=MappingProxyType(attrs))


def test_host_costs_carry_the_profile_numbers(testgpu: Hardware) -> None:
    # testgpu.yaml: launch 0, launch latency 5 us, sync 5 us, compiled kernel 3 us, graph launch 8 us,
    # graph kernel 1 us, 1024 queued launches per stream
    h = host_costs(testgpu)
    assert (h.profile_name, h.launch_queue_depth) == ("testgpu", 1024)
    assert (h.launch_s, h.launch_latency_s, h.sync_s) == pytest.approx((0.0, 5e-6, 5e-6))
    assert (h.compiled_kernel_s, h.graph_launch_s, h.graph_kernel_s) == pytest.approx((3e-6, 8e-6, 1e-6))
    assert h.eager_dispatch_s(op("elementwise")) == pytest.approx(10e-6)  # the profile's eager_op_us


def test_eager_dispatch(hw: Hardware) -> None:
    assert eager_dispatch_s(op("elementwise"), hw) == pytest.approx(10e-6)  # by default: eager_op_us
    assert eager_dispatch_s(op("gemm"), hw) == pytest.approx(7e-6)  # by kind
    assert eager_dispatch_s(op("gemm", library="triton"), hw) == pytest.approx(3e-6)  # a Triton launcher
    assert eager_dispatch_s(op("elementwise", follow_on=True), hw) == 0.0  # 2nd kernel of one op
    # a framework op in the table: its measured call less the 2 us driver launch (paid separately)
    assert eager_dispatch_s(op("gemm", framework_op="aten::addmm"), hw) == pytest.approx(8e-6 - 2e-6)
    assert eager_dispatch_s(op("gemm", framework_op="aten::addmm", requires_grad=True), hw) == pytest.approx(10e-6)
    # measured only without autograd recording: that figure stands for both
    assert eager_dispatch_s(op("gemm", framework_op="MmBackward0", requires_grad=True), hw) == pytest.approx(13e-6)
    assert op_key("autograd::engine::evaluate_function: MmBackward0") == "MmBackward0"


class _ReadingAttrs(Mapping[str, object]):
    """An op's attrs that note which attributes are read."""

    def __init__(self, attrs: Mapping[str, object]) -> None:
        self.attrs, self.read = attrs, set[str]()

    def __getitem__(self, name: str) -> object:
        self.read.add(name)
        return self.attrs[name]

    def __iter__(self) -> Iterator[str]:
        self.read.add("<every attribute>")
        return iter(self.attrs)

    def __len__(self) -> int:
        return len(self.attrs)


class _Reading:
    """An op that notes which of its fields are read (and, through _ReadingAttrs, which attributes)."""

    def __init__(self, op: Op) -> None:
        self.op, self.read = op, set[str]()
        self.attrs = _ReadingAttrs(op.attrs)

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(self.op, name)


def test_eager_dispatch_reads_only_what_its_key_holds(hw: Hardware) -> None:
    """The engine prices one eager dispatch per eager_dispatch_key (kind, library and the attributes
    EAGER_DISPATCH_ATTRS names): a price that read another field of the op, or another attribute,
    would be shared wrongly, so this fails first."""
    key_fields = {"attrs", "kind", "library"}
    Reading = _Reading
    ops = [op("elementwise"), op("gemm"), op("gemm", library="triton"), op("elementwise", follow_on=True),
           op("gemm", framework_op="aten::addmm", requires_grad=True, tensors=3), op("collective", collective="all_reduce"),
           op("gemm", framework_op="not_in_the_table", phase="backward"), op("elementwise", framework_op="aten::mul")]
    for o in ops:
        reading = Reading(o)
        eager_dispatch_s(reading, hw)  # type: ignore[arg-type]
        assert reading.read <= key_fields, (o, reading.read - key_fields)
        assert reading.attrs.read <= set(EAGER_DISPATCH_ATTRS), (o, reading.attrs.read - set(EAGER_DISPATCH_ATTRS))
    assert eager_dispatch_key(ops[0]) == ("elementwise", "torch", (None,) * 5, (type(None),) * 5)


def test_eager_dispatch_prices_go_by_content_not_by_object() -> None:
    """OpPrices outlives the ops it prices: each op gets its own content's price even where
    a freed attrs object's id is taken by the next op's (the memo keyed by id(op.attrs) alone that it
    replaced gave the first op's price again there); equal contents in other objects are priced once;
    values that compare equal across types (1, 1.0, True) are not shared; unhashable values are priced."""
    calls: list[object] = []

    def price(o: Op) -> float:
        calls.append(o.attrs.get("framework_op"))
        return float(len(str(o.attrs.get("framework_op"))))

    memo = OpPrices(price)
    for i in range(300):  # each op and its attrs freed before the next is made: CPython reuses the ids
        o = op("elementwise", framework_op="x" * i)
        assert memo(o) == float(i)
        del o
    assert len(calls) == 300
    calls.clear()
    for _ in range(3):  # the same contents in new objects: no new price
        assert memo(op("elementwise", framework_op="x" * 7)) == 7.0
    assert memo(op("gemm", framework_op="x" * 7)) == 7.0  # another kind: its own price
    assert calls == ["x" * 7]
    assert [memo(op("elementwise", framework_op=v)) for v in (1, 1.0, True)] == [1.0, 3.0, 4.0]
    assert memo(op("elementwise", framework_op=["unhashable"])) == memo(op("elementwise", framework_op=["unhashable"]))
    assert calls[-2:] == [["unhashable"], ["unhashable"]]


def test_host_op_adds_its_parts(hw: Hardware) -> None:
    # 40 us + 3 framework ops x 1 + 1 backward call x 5 + 2 autograd nodes x 4 + 1 function x 3 + 4 modules x 0.5
    o = op("host", duration_us=40, framework_ops=3, backward_calls=1, autograd_nodes=2, function_calls=1,
           module_calls=4)
    assert host_op_s(o, hw) == pytest.approx(61e-6)
    # framework ops named in the table cost the table's call each
    assert host_op_s(op("host", framework_ops=2, framework_op="aten::addmm"), hw) == pytest.approx(16e-6)


def test_host_op_reads_only_what_its_key_holds(hw: Hardware) -> None:
    """HostCosts prices one host op per host_op_key (kind, library and the attributes HOST_OP_ATTRS
    names): a price that read another attribute would be shared wrongly, so this fails first. The op's
    name is read only to say what an error is about (errors are never kept)."""
    key_fields = {"attrs", "kind", "library"}
    ddp = dataclasses.replace(hw, ddp_forward_s=6e-6, ddp_hook_s=2e-6)
    ops = [op("host"), op("host", duration_us=40, framework_ops=3, backward_calls=1, autograd_nodes=2,
                          function_calls=1, module_calls=4, other=5),
           op("host", framework_ops=2, framework_op="aten::addmm", requires_grad=True, tensors=3),
           op("host", framework_ops=1, framework_op="not_in_the_table"), op("host", ddp_steps=1, ddp_hooks=2)]
    for o in ops:
        reading = _Reading(o)
        host_op_s(reading, ddp)  # type: ignore[arg-type]
        assert reading.read <= key_fields, (o, reading.read - key_fields)
        assert reading.attrs.read <= set(HOST_OP_ATTRS), (o, reading.attrs.read - set(HOST_OP_ATTRS))
    assert host_op_key(ops[0]) == ("host", "torch", (None,) * 11, (type(None),) * 11)


def test_host_costs_memoize_host_ops_by_content_and_raise_each_time(hw: Hardware) -> None:
    """HostCosts.host_op_s is host_op_s through a memo by content: equal declarations in new objects
    priced once, other values (or types) their own price; a price that fails fails for every op
    (its own name in the message), never kept."""
    hc = host_costs(hw)
    for _ in range(3):
        o = op("host", duration_us=40, framework_ops=3)
        assert hc.host_op_s(o) == host_op_s(o, hw)
    assert len(hc.host_op_prices.by_content) == 1
    for o in (op("host", duration_us=41, framework_ops=3), op("host", duration_us=40.0, framework_ops=3)):
        assert hc.host_op_s(o) == host_op_s(o, hw)
    assert len(hc.host_op_prices.by_content) == 3
    for name in ("first", "second"):
        with pytest.raises(InputError, match=name):
            hc.host_op_s(dataclasses.replace(op("host", ddp_steps=1), name=name))


def test_compiled_call_backward_costs_more(hw: Hardware) -> None:
    assert compiled_call_s(op("elementwise"), hw) == pytest.approx(20e-6)
    assert compiled_call_s(op("elementwise", phase="backward"), hw) == pytest.approx(30e-6)


def test_a_profiles_host_costs_share_their_dispatch_memo(hw: Hardware, testgpu: Hardware) -> None:
    """CostCache keeps one HostCosts per profile, so its dispatch memo serves every simulation on that
    profile; another profile, or a HostCosts made by replace(), starts its own memo."""
    cache = CostCache()
    mine, other = cache.host_costs(hw), cache.host_costs(testgpu)
    assert cache.host_costs(hw) is mine and other is not mine
    g = op("gemm")
    assert mine.dispatch_prices(g) == eager_dispatch_s(g, hw) == 7e-6
    assert other.dispatch_prices(g) == eager_dispatch_s(g, testgpu) != 7e-6
    changed = dataclasses.replace(mine, hardware=testgpu)
    assert changed.dispatch_prices is not mine.dispatch_prices
    assert changed.dispatch_prices(g) == eager_dispatch_s(g, testgpu)


def test_simulations_sharing_host_costs_give_the_same_traces(h200: Hardware) -> None:
    """Graphs of equal declarations in other objects (two builds) simulated with one HostCosts (its
    memo by content hits across them) give the traces fresh HostCosts give."""
    shared = host_costs(h200)
    for kernels in (200, 300, 200):
        g = synthetic_graph(kernels)
        costs = price(g, h200)
        a, b = simulate(g, costs, shared), simulate(g, costs, host_costs(h200))
        assert [repr(iv) for iv in a.intervals] == [repr(iv) for iv in b.intervals]
    assert shared.dispatch_prices.by_content
