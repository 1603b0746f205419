"""Op kinds as single-file plugins: one file holds an op kind's spec model (the workload keys it takes),
its cost function, the trace-family rule that recognises its kernels, the shape inference that turns
a profiled framework op into its workload fields, and its reference example; `define` lists it in
every layer at once. `sim/ops/registry.py` imports each plugin file: one line per op kind.

`define` completes registries that lower layers own and read (dependency inversion, never an upward
import): the workload schema's `ops` union (`sim.schema.workload.add_op_model`), the graph's kernel
kinds (`sim.graph.add_op_kind`), the cost model's registry (`sim.costmodel.register`), the trace
importer's family and shape rules (`sim.ingest.families.add_family_rule`,
`sim.ingest.shapes.add_shape_rule`). The reference (`sim.reference`) reads the examples here.
docs/extending.md walks through adding one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import get_args

from sim.costmodel import CostFn, register
from sim.graph import add_op_kind
from sim.ingest.families import add_family_rule, rule_families
from sim.ingest.shapes import ActivityRule, ShapeRule, add_activity_rule, add_shape_rule
from sim.schema.workload import OpBase, add_op_model


@dataclass(frozen=True)
class OpKind:
    """One plugin: a spec model whose `kind` literals are its op kinds (one model may serve several,
    e.g. sort / scan / unique), and what each layer needs of them. A host kind (`host_kind=True`: host
    time, no kernel) has no cost function here: the host model (sim.costmodel.host) and the engine price
    and run it, and have no plugin hook yet."""

    spec: type[OpBase]
    cost: CostFn | None  # (op, graph, hardware) → KernelCost, for every kind of `spec`; None for a host kind
    examples: Mapping[str, str]  # kind → one workload entry in YAML flow style (the reference shows it)
    family: tuple[str, str] | None = None  # (family, regex on kernel names) for imported traces
    # (framework op, prefix, kernel name) → workload fields, UNKNOWN ("mine, shapes unknown") or None ("not
    # mine"), for kernels of `family`
    shape_rule: ShapeRule | None = None
    activity_rule: ActivityRule | None = None  # (GPU activity) → the same, before any CPU op (a memcpy event)
    # Its family rule goes right after this family's rule (None: before every rule; the first match wins).
    family_after: str | None = None
    host_kind: bool = False
    extra: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(get_args(self.spec.model_fields["kind"].annotation))


_DEFINED: list[OpKind] = []


def define(op_kind: OpKind) -> OpKind:
    """List an op kind in every layer; defining a kind twice is an error (from the first registry that has it)."""
    if set(op_kind.examples) != set(op_kind.kinds):
        raise ValueError(f"op kinds {op_kind.kinds}: one example per kind expected, got {sorted(op_kind.examples)}")
    if op_kind.host_kind and (op_kind.cost is not None or op_kind.family is not None):
        raise ValueError(f"op kinds {op_kind.kinds}: a host kind has no cost function or trace family here "
                         "(the host model prices it)")
    if not op_kind.host_kind and op_kind.cost is None:
        raise ValueError(f"op kinds {op_kind.kinds}: a kernel kind needs a cost function")
    if op_kind.shape_rule is not None and op_kind.family is None:
        raise ValueError(f"op kinds {op_kind.kinds}: a shape rule needs the family whose kernels it infers")
    if op_kind.activity_rule is not None and op_kind.family is None:
        raise ValueError(f"op kinds {op_kind.kinds}: an activity rule needs the family whose kernels it infers")
    if op_kind.family_after is not None and (op_kind.family is None or op_kind.family_after not in rule_families()):
        raise ValueError(f"op kinds {op_kind.kinds}: family_after {op_kind.family_after!r} needs a family rule "
                         f"of its own and names one of {sorted(set(rule_families()))}")
    add_op_model(op_kind.spec)
    for kind in op_kind.kinds:
        add_op_kind(kind, kernel=not op_kind.host_kind)
        if op_kind.cost is not None:
            register(kind)(op_kind.cost)
    if op_kind.family is not None:
        add_family_rule(*op_kind.family, after=op_kind.family_after)
        if op_kind.shape_rule is not None:
            add_shape_rule(op_kind.family[0], op_kind.shape_rule)
        if op_kind.activity_rule is not None:
            add_activity_rule(op_kind.activity_rule)
    _DEFINED.append(op_kind)
    return op_kind


def defined() -> tuple[OpKind, ...]:
    """The op kinds defined as plugins, in definition order."""
    return tuple(_DEFINED)


def examples() -> dict[str, str]:
    """Every plugin kind's reference example, in definition order."""
    return {kind: ok.examples[kind] for ok in _DEFINED for kind in ok.kinds}


from sim.ops import registry  # noqa: E402,F401 - the shipped plugins (after `define` exists: they call it)
