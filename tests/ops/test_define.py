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
                      shape_rule=lambda op, prefix: None))
    assert "toy_for_define_test" not in op_kinds()  # refused before any layer was changed


def test_the_shipped_plugins_are_defined_in_registry_order() -> None:
    assert [ok.kinds for ok in defined()] == [("sort", "scan", "unique")]
