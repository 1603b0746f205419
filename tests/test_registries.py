"""Op kinds and transforms are listed in one place per layer and the lists agree. Op kinds: the schema's union (op_kinds() is
derived from it), the graph's kernel / host split, the cost model's registry, the reference
examples. Transforms: the scenario schema's TransformSpec fields (transform_keys() is derived from
them), the transforms registry, the reference examples. Adding one that misses a list fails here."""

from __future__ import annotations

from sim.costmodel import registered_kinds
from sim.graph import HOST_KINDS, KERNEL_KINDS
from sim.reference import op_examples, transform_examples
from sim.schema.scenario import transform_keys
from sim.schema.workload import op_kinds
from sim.transforms import registered_transforms

BLOCK_KINDS = {"repeat"}  # structure, not an op


def test_schema_kinds_are_the_graph_kinds() -> None:
    schema = set(op_kinds()) - BLOCK_KINDS
    assert schema == KERNEL_KINDS | HOST_KINDS, f"schema only: {schema - KERNEL_KINDS - HOST_KINDS}; " \
        f"graph only: {(KERNEL_KINDS | HOST_KINDS) - schema}"
    assert not KERNEL_KINDS & HOST_KINDS


def test_every_kernel_kind_has_a_cost_function_and_nothing_else_does() -> None:
    assert set(registered_kinds()) == KERNEL_KINDS, f"no cost function: {KERNEL_KINDS - set(registered_kinds())}; " \
        f"not a kernel kind: {set(registered_kinds()) - KERNEL_KINDS}"


def test_every_kind_has_a_reference_example() -> None:
    assert list(op_examples()) == list(op_kinds())  # the reference lists kinds in the schema's order


def test_every_transform_key_is_implemented_and_documented() -> None:
    assert set(registered_transforms()) == set(transform_keys()), \
        f"no function: {set(transform_keys()) - set(registered_transforms())}; " \
        f"not in the schema: {set(registered_transforms()) - set(transform_keys())}"
    assert list(transform_examples()) == list(transform_keys())


def test_every_plugin_file_is_imported_by_the_registry_once() -> None:
    """sim/ops/: one file per plugin, one line per file in registry.py (docs/extending.md)."""
    import re
    from pathlib import Path

    ops = Path(__file__).resolve().parents[1] / "sim" / "ops"
    files = sorted(p.stem for p in ops.glob("*.py") if p.stem not in ("__init__", "registry"))
    lines = re.findall(r"^from sim\.ops import (\w+)  # noqa: F401", (ops / "registry.py").read_text(), flags=re.M)
    assert sorted(lines) == files


def test_plugin_kinds_are_listed_in_every_layer() -> None:
    from sim.ops import defined

    for op_kind in defined():
        for kind in op_kind.kinds:
            if op_kind.host_kind:  # the host model prices it: no cost function, not a kernel
                assert kind in op_kinds() and kind in HOST_KINDS and kind not in registered_kinds(), kind
            else:
                assert kind in op_kinds() and kind in KERNEL_KINDS and kind in registered_kinds(), kind
            assert op_examples()[kind] == op_kind.examples[kind]


def test_no_layer_lists_an_op_kind_or_a_transform_of_its_own() -> None:
    """Every op kind comes from sim/ops and every transform from sim/transforms: the lower layers start empty."""
    from sim.ops import defined

    assert [k for ok in defined() for k in ok.kinds] == [k for k in op_kinds() if k not in BLOCK_KINDS]
    from sim.transforms import examples

    assert list(examples()) == list(transform_keys())


def test_a_model_with_op_fields_declared_after_the_kinds_accepts_every_kind() -> None:
    """The scenario's `insert` (sim/transforms/edit.py) is defined after sim.ops: it still takes each kind."""
    from sim.ops import defined
    from sim.transforms.edit import InsertArgs

    for kind in ("gemm", "sort", "sync", "attention"):
        model = next(ok.spec for ok in defined() if kind in ok.kinds)
        fields = {"sort": {"numel": 8}, "gemm": {"m": 1, "n": 1, "k": 1}, "sync": {},
                  "attention": {"batch": 1, "heads": 1, "seq_q": 1, "seq_kv": 1, "head_dim": 8}}[kind]
        args = InsertArgs.model_validate({"op": {"name": "x", "kind": kind, **fields}, "before": "y"})
        assert type(args.op) is model
