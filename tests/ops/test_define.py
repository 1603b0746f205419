"""sim.ops.define (sim/ops/__init__.py): what it refuses, before any layer is changed."""

from __future__ import annotations

from typing import Literal

import pytest

from sim.ops import OpKind, define, defined
from sim.ops.sortscan import SortScanOp, primitive_cost
from sim.schema.workload import OpBase, op_kinds


class _Toy(OpBase):
    kind: Literal["toy_for_define_test"]


def test_a_kind_that_exists_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="op kind 'sort' is already defined"):
        define(OpKind(spec=SortScanOp, cost=primitive_cost, examples={"sort": "", "scan": "", "unique": ""}))


def test_every_kind_needs_an_example_and_a_shape_rule_needs_a_family() -> None:
    with pytest.raises(ValueError, match="one example per kind"):
        define(OpKind(spec=_Toy, cost=primitive_cost, examples={}))
    with pytest.raises(ValueError, match="shape rule needs the family"):
        define(OpKind(spec=_Toy, cost=primitive_cost, examples={"toy_for_define_test": "{}"},
                      shape_rule=lambda op, prefix, kernel: None))
    assert "toy_for_define_test" not in op_kinds()  # refused before any layer was changed


def test_the_shipped_plugins_are_defined_in_registry_order() -> None:
    assert [ok.kinds for ok in defined()] == [("gemm",), ("elementwise",), ("reduction",), ("attention",), ("copy",),
                                             ("layout",), ("collective",), ("host",), ("sync",), ("sort", "scan", "unique")]


def test_a_host_kind_has_no_cost_function_and_a_kernel_kind_needs_one() -> None:
    from sim.graph import HOST_KINDS, KERNEL_KINDS

    assert {"host", "sync"} <= HOST_KINDS and not {"host", "sync"} & KERNEL_KINDS
    with pytest.raises(ValueError, match="a host kind has no cost function"):
        define(OpKind(spec=_Toy, cost=primitive_cost, examples={"toy_for_define_test": "{}"}, host_kind=True))
    with pytest.raises(ValueError, match="a kernel kind needs a cost function"):
        define(OpKind(spec=_Toy, cost=None, examples={"toy_for_define_test": "{}"}))
    assert "toy_for_define_test" not in op_kinds()


def test_a_place_that_names_no_family_is_refused_before_any_layer_changes() -> None:
    with pytest.raises(ValueError, match="family_after 'nope'"):
        define(OpKind(spec=_Toy, cost=primitive_cost, examples={"toy_for_define_test": "{}"},
                      family=("toy", "toy"), family_after="nope"))
    with pytest.raises(ValueError, match="an activity rule needs the family"):
        define(OpKind(spec=_Toy, cost=primitive_cost, examples={"toy_for_define_test": "{}"},
                      activity_rule=lambda act: None))
    assert "toy_for_define_test" not in op_kinds()


def test_the_registry_order_is_the_schema_order_and_family_after_places_the_trace_rules() -> None:
    from sim.ingest.families import kernel_family, rule_families

    # sim/ops/registry.py's order, then `repeat`
    assert op_kinds() == ("gemm", "elementwise", "reduction", "attention", "copy", "layout", "collective", "host",
                          "sync", "sort", "scan", "unique", "repeat")
    assert rule_families()[-8:] == ("collective", "triton", "attention", "copy", "layout", "gemm", "reduction",
                                     "elementwise")
    assert kernel_family("triton_per_fused_attn_softmax_0") == "triton"  # Triton's own rule first, as before
    assert kernel_family("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>") == "attention"
    assert kernel_family("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "collective"
    assert kernel_family("transpose_copy_kernel") == "copy"  # the copy rule first, as before
    assert kernel_family("nchwToNhwcKernel") == "layout"


def test_a_shape_rule_that_says_unknown_stops_the_search_where_none_lets_an_enclosing_op_answer() -> None:
    from sim.ingest.kineto import CpuOp, GpuActivity
    from sim.ingest.shapes import UNKNOWN, infer_op
    from sim.ops.copy import copy_shapes, memcpy_shapes

    outer = CpuOp(index=0, name="aten::to", ts=0.0, end=3.0, tid=1, input_dims=[[4, 8]], input_types=["float"],
                  concrete=[""], args={})
    inner = CpuOp(index=1, name="aten::copy_", ts=1.0, end=2.0, tid=1, input_dims=None, input_types=None,
                  concrete=None, args={})
    kernel = GpuActivity(index=2, name="copy_kernel", cat="kernel", ts=1.0, end=2.0, stream=7, correlation=1)
    assert copy_shapes(inner, "t", kernel.name) is UNKNOWN  # a copy op, no recorded shapes
    other = CpuOp(index=3, name="aten::mm", ts=0.0, end=1.0, tid=1, input_dims=None, input_types=None, concrete=None,
                  args={})
    assert copy_shapes(other, "t", kernel.name) is None
    # the innermost copy op is the kernel's: its shapes are unknown, the enclosing op's are not used
    assert infer_op("copy", [outer, inner], kernel, "t") is None
    # by itself the enclosing op is read: 4 x 8 fp32 read and written
    inferred = infer_op("copy", [outer], kernel, "t")
    assert inferred is not None and inferred.fields == {"kind": "copy", "bytes": 2 * 4 * 8 * 4, "engine": "sm",
                                                        "direction": "d2d"}
    memcpy = GpuActivity(index=4, name="Memcpy DtoD (Device -> Device)", cat="gpu_memcpy", ts=0.0, end=1.0, stream=7,
                         correlation=2)
    assert memcpy_shapes(memcpy) is UNKNOWN and infer_op("copy", [outer], memcpy, "t") is None  # no bytes recorded
