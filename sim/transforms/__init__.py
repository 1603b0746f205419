"""Transforms: pure graph → graph passes that describe a variant (fuse, mode, dispatch, edits).

Each transform is one file: its function, registered under its scenario key by `define`, which
also takes its argument model (the scenario schema accepts `{key: args}`) and its reference
example; adding one is a new file plus its line in the import below (docs/extending.md). A transform raises InputError located at its key path in the
scenario file when it cannot apply (unknown op, impossible fusion).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from sim.errors import InputError
from sim.graph import Graph

TransformFn = Callable[[Graph, Any, "Context"], Graph]
_REGISTRY: dict[str, TransformFn] = {}


@dataclass
class Context:
    """Where a transform sits in the scenario file, and what it learned (the dispatch path)."""

    file: str
    path: str
    params: dict[str, float]
    paths_taken: list[str] = field(default_factory=list)

    def error(self, problem: str, key: str = "", value: object = None, expected: str | None = None) -> InputError:
        return InputError(problem, file=self.file, path=f"{self.path}{key}", value=value, expected=expected)

    def at(self, suffix: str) -> Context:
        return Context(self.file, f"{self.path}{suffix}", self.params, self.paths_taken)


def register(key: str) -> Callable[[TransformFn], TransformFn]:
    def deco(fn: TransformFn) -> TransformFn:
        if key in _REGISTRY:
            raise ValueError(f"transform {key!r} is already registered")
        _REGISTRY[key] = fn
        return fn

    return deco


def registered_transforms() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


_EXAMPLES: dict[str, str] = {}


def define(key: str, args: type[BaseModel], example: str) -> Callable[[TransformFn], TransformFn]:
    """A transform in one file: its function (decorated), its argument model (accepted in a scenario's
    `transforms` list as `{key: args}`, sim.schema.scenario.add_transform) and its reference example."""

    def deco(fn: TransformFn) -> TransformFn:
        from sim.schema.scenario import add_transform

        add_transform(key, args)
        _EXAMPLES[key] = example
        return register(key)(fn)

    return deco


def examples() -> dict[str, str]:
    """The reference examples of transforms defined with `define`, in definition order."""
    return dict(_EXAMPLES)


def under(op_name: str, module: str) -> bool:
    """Whether an op is under a module path: its name is MODULE or starts with 'MODULE.'."""
    return op_name == module or op_name.startswith(module + ".")


def apply_one(graph: Graph, kind: str, args: BaseModel, ctx: Context) -> Graph:
    fn = _REGISTRY.get(kind)
    if fn is None:
        raise ctx.error(f"transform '{kind}' is not implemented")
    return fn(graph, args, ctx)


def apply_all(graph: Graph, specs: list[Any], ctx: Context) -> Graph:
    """Apply transform specs (sim.schema.scenario.TransformSpec) in order, then check dataflow."""
    for i, spec in enumerate(specs):
        kind, args = spec.kind_and_args()
        graph = apply_one(graph, kind, args, ctx.at(f"[{i}].{kind}"))
    return graph


def check_dataflow(original: Graph, graph: Graph, ctx: Context) -> None:
    """An op that read a tensor produced earlier in the original graph still finds a producer.

    Fused ops answer for the ops they replace; a tensor dropped by a fusion must be
    recomputed by its readers (fused too, reading the dropped tensor's inputs instead).
    """
    had_producer: set[tuple[str, str]] = set()
    written: set[str] = set()
    for op in original.ops:
        had_producer.update((op.name, t) for t in op.reads if t in written)
        written.update(op.writes)
    written = set()
    for op in graph.ops:
        for t in op.reads:
            if t in written:
                continue
            if any((n, t) in had_producer for n in (op.replaces or (op.name,))):
                raise ctx.error(
                    f"op '{op.name}' reads '{t}', which no earlier op writes after the transforms"
                    " (dropped by a fusion without a reader that recomputes it?)",
                    expected="every dropped tensor's readers to be fused or to read its inputs instead",
                )
        written.update(op.writes)


# The transforms, one line each, in the order the scenario schema and the reference list them.
from sim.transforms import fuse  # noqa: E402,F401,I001
from sim.transforms import mode  # noqa: E402,F401,I001
from sim.transforms import edit  # noqa: E402,F401,I001
from sim.transforms import dispatch  # noqa: E402,F401,I001
from sim.transforms import specialize  # noqa: E402,F401,I001
from sim.transforms import swap  # noqa: E402,F401,I001
from sim.transforms import relayout  # noqa: E402,F401,I001
