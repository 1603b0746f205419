"""The file-format reference, generated from the schemas: docs/reference.md and JSON Schema for editors.

Everything here is read from the pydantic models (keys, types, defaults, descriptions), the expression
evaluator's functions and a shipped profile's math-op costs, so the reference cannot fall behind the
code; `scripts/gen_docs.py` writes docs/reference.md and a test checks the committed copy. The examples
are the one hand-written part, and a test parses each one with the model it illustrates.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

SCHEMA_KINDS = ("workload", "scenario", "hardware")
MATH_PROFILE = "h200-measured"  # the profile whose math-op costs the reference lists


def root_model(kind: str) -> type[BaseModel]:
    """The pydantic model of one file kind (workload, scenario, hardware)."""
    if kind == "workload":
        from sim.schema.workload import WorkloadFile

        return WorkloadFile
    if kind == "scenario":
        from sim.schema.scenario import ScenarioFile

        return ScenarioFile
    if kind == "hardware":
        from sim.schema.hardware import HardwareProfileFile

        return HardwareProfileFile
    raise ValueError(f"unknown schema kind {kind!r} (expected one of {SCHEMA_KINDS})")


def json_schema(kind: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one file kind, for editors (e.g. YAML language servers)."""
    schema = root_model(kind).model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://kernelsim.dev/schema/{kind}.schema.json",
            "title": f"kernelsim {kind} file", **{k: v for k, v in schema.items() if k != "title"}}


def json_schema_text(kind: str) -> str:
    return json.dumps(json_schema(kind), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- examples (checked by tests/test_reference.py against the models) ------------------------------

_BUILTIN_EXAMPLES: dict[str, str] = {  # the op kinds (sim.ops) carry their own
    "repeat": "{kind: repeat, name: layer, count: layers, ops: [{name: mm, kind: gemm, m: tokens, n: hidden, "
              "k: hidden, reads: [x], writes: [x]}]}",
}


def transform_examples() -> dict[str, str]:
    """One example per transform, in the scenario schema's order (defined transforms' from sim.transforms)."""
    from sim.schema.scenario import transform_keys
    from sim.transforms import examples

    known = examples()
    return {key: known[key] for key in transform_keys()}


def op_examples() -> dict[str, str]:
    """One example entry per op kind, in the workload schema's order (plugins' examples from sim.ops)."""
    from sim.ops import examples
    from sim.schema.workload import op_kinds

    known = {**_BUILTIN_EXAMPLES, **examples()}
    return {kind: known[kind] for kind in op_kinds()}



#: Meanings of keys whose schema field has no description yet (model name, key) → text. A test checks
#: that every entry names a real key, so a renamed key cannot leave a stale note behind.
KEY_NOTES: dict[tuple[str, str], str] = {
    ("WorkloadFile", "schema"): "file format and version",
    ("WorkloadFile", "name"): "the workload's name in results",
    ("WorkloadFile", "kind"): "a training step or a serving (inference) step",
    ("WorkloadFile", "mode"): "how the framework runs the ops: eager dispatch, a compiled graph, or a CUDA graph replay",
    ("WorkloadFile", "parameters"): "parameter defaults (e.g. tokens, hidden); shapes are expressions of them",
    ("WorkloadFile", "distribution"): "the shape buckets every result is computed on, with weights",
    ("WorkloadFile", "tensors"): "tensors the ops read and write: name → shape and dtype",
    ("WorkloadFile", "ops"): "the step's ops in program order (or `repeat` blocks)",
    ("Distribution", "buckets"): "the bucket mix; weights are normalized",
    ("Distribution", "alternatives"): "other plausible mixes (name → buckets) for `kernelsim advise`'s stability check",
    ("Bucket", "params"): "parameter values of this bucket (others keep their defaults)",
    ("Bucket", "weight"): "relative frequency (> 0)",
    ("Bucket", "name"): "default: `param=value` of the parameters it sets",
    ("TensorDecl", "shape"): "dimensions, each a number or an expression",
    ("TensorDecl", "dtype"): "element type (sets the bytes per element)",
    ("Launch", "block"): "threads per block",
    ("Launch", "grid"): "blocks (default: enough blocks for the elements)",
    ("Launch", "elems_per_thread"): "elements each thread handles (sets registers and bytes in flight)",
    ("Launch", "regs_per_thread"): "registers per thread (default: estimated from elems_per_thread)",
    ("Launch", "spill_bytes_per_thread"): "register spill per thread (default: from registers past 255)",
    ("Launch", "spill_traffic_bytes_per_thread"): "local-memory bytes a thread stores and loads, as ptxas -v prints them (spill stores + spill loads); read when the profile's memory.spill_traffic_from_accesses is on (default: the spill area stored once and loaded once)",
    ("Launch", "smem_per_block"): "shared memory per block, bytes",
    ("OpBase", "name"): "unique op name (letters, digits, `_`, `.`)",
    ("OpBase", "reads"): "tensors read: the op waits for their last writer",
    ("OpBase", "writes"): "tensors written",
    ("OpBase", "stream"): "CUDA stream index; ops on one stream run in order",
    ("OpBase", "phase"): "part of the step (reports group by it)",
    ("OpBase", "region"): "a named region (`mode` transforms and compiled graphs act on regions)",
    ("OpBase", "launch"): "launch configuration (default: the library's)",
    ("OpBase", "library"): "implementation (host cost and efficiency follow it; `swap` changes it)",
    ("GemmOp", "m"): "rows of the output", ("GemmOp", "n"): "columns of the output",
    ("GemmOp", "k"): "the reduction dimension", ("GemmOp", "batch"): "batched GEMMs",
    ("GemmOp", "dtype"): "input type (tensor cores per dtype; fp32 runs on the FP32 pipes)",
    ("GemmOp", "layout"): "operand transposes (cuBLAS convention)",
    ("ElementwiseOp", "numel"): "elements (default: the largest tensor written)",
    ("ReductionOp", "rows"): "rows of the input", ("ReductionOp", "cols"): "columns of the input",
    ("ReductionOp", "passes"): "passes over the input (e.g. 2 for mean then variance)",
    ("ReductionOp", "math"): "named math ops per element ([math ops](#math-ops))",
    ("AttentionOp", "causal"): "causal mask (about half the tiles)",
    ("AttentionOp", "direction"): "forward or backward pass of flash attention",
    ("CopyOp", "bytes"): "bytes copied (default: the tensors read)",
    ("CopyOp", "engine"): "SM copy kernel or the copy engines (which run beside kernels)",
    ("LayoutOp", "transform"): "the conversion the kernel performs",
    ("CollectiveOp", "collective"): "NCCL collective",
    ("HostOp", "duration_us"): "explicit host time", ("HostOp", "framework_ops"): "kernel-less framework ops (views...)",
    ("HostOp", "backward_calls"): "`.backward()` calls", ("HostOp", "autograd_nodes"): "autograd nodes run",
    ("HostOp", "function_calls"): "`torch.autograd.Function` calls", ("HostOp", "module_calls"): "`nn.Module` calls",
    ("HostOp", "ddp_steps"): "DDP steps (the DDP module's own host work)",
    ("HostOp", "ddp_hooks"): "gradients DDP's reducer synchronizes (its hook per gradient)",
    ("RepeatBlock", "count"): "copies (an expression, e.g. `layers`)", ("RepeatBlock", "ops"): "the ops of one copy",
    ("ScenarioFile", "schema"): "file format and version", ("ScenarioFile", "name"): "the scenario's name in results",
    ("ScenarioFile", "workload"): "workload file, relative to this file",
    ("ScenarioFile", "hardware"): "profile names (`kernelsim profiles`) or YAML paths",
    ("ScenarioFile", "distribution"): "replaces the workload's buckets",
    ("ScenarioFile", "min_gain"): "the smallest step gain worth a change (advice)",
    ("ScenarioFile", "variants"): "what-ifs, each a list of transforms of the baseline (the workload as written)",
    ("Variant", "name"): "variant name in results (`baseline` is implicit)",
    ("Variant", "transforms"): "[transforms](#transforms) applied in order",
    ("Variant", "choose"): "instead of `transforms`: let kernelsim pick a path per bucket",
    ("ModeArgs", "mode"): "execution mode for the selected ops", ("ModeArgs", "region"): "a region's ops",
    ("ModeArgs", "ops"): "these ops (neither region nor ops: everything)",
    ("SetLaunchArgs", "op"): "the op (one name)", ("SetLaunchArgs", "launch"): "its new launch configuration",
    ("InsertArgs", "op"): "the new op", ("InsertArgs", "before"): "insert before this op",
    ("InsertArgs", "after"): "insert after this op", ("RemoveArgs", "ops"): "ops to remove",
    ("DispatchArgs", "then"): "transforms of the fast path", ("DispatchArgs", "else"): "transforms of the fallback",
    ("DispatchArgs", "path"): "the fast path's name in results", ("DispatchArgs", "fallback_path"): "the fallback's name",
    ("SpecializeArgs", "op"): "the op to specialize", ("SpecializeArgs", "when"): "predicate over the bucket's parameters",
    ("SpecializeArgs", "launch"): "launch configuration of the specialized kernel",
    ("SpecializeArgs", "library"): "implementation of the specialized kernel",
    ("SpecializeArgs", "path"): "path name in results", ("SwapArgs", "ops"): "these ops",
    ("SwapArgs", "kind"): "every op of this kind", ("SwapArgs", "library"): "a library named in the profile's `libraries`",
    ("FuseArgs", "ops"): "ops to fuse (at least 2), in program order", ("FuseArgs", "name"): "the fused op's name",
    ("FuseArgs", "launch"): "the fused kernel's launch configuration", ("FuseArgs", "library"): "its implementation",
}


# -- rendering -------------------------------------------------------------------------------------

def _anchor(name: str) -> str:
    return name.lower()


def _is_op_union(ann: Any) -> bool:
    args = [a for a in get_args(ann) if isinstance(a, type)]
    return bool(args) and all(issubclass(a, BaseModel) and "kind" in a.model_fields for a in args)


def type_text(ann: Any) -> str:
    """A field type in words: `expr`, `list of ...`, links to nested sections."""
    origin = get_origin(ann)
    args = get_args(ann)
    if ann is type(None):
        return "null"
    if ann in (int, float, str, bool):
        return {int: "integer", float: "number", str: "string", bool: "boolean"}[ann]
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        if set(args) == {int, float, str}:
            return "[expr](#expressions)"
        if set(args) == {int, float}:
            return "number"
        if _is_op_union(ann):
            return "[op](#op-kinds)"
        return " or ".join(type_text(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(type_text(a) for a in args) + "]"
    if origin is dict:
        return f"map of {type_text(args[0])} → {type_text(args[1])}"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"[{ann.__name__}](#{_anchor(ann.__name__)})"
    return str(ann).replace("|", "\\|")


def _default_text(f: FieldInfo) -> str:
    if f.is_required():
        return "**required**"
    if f.default_factory is not None:
        value = f.default_factory()  # type: ignore[call-arg]
    elif f.default is PydanticUndefined:
        return ""
    else:
        value = f.default
    if value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "defaults"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _nested_models(ann: Any) -> Iterator[type[BaseModel]]:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        yield ann
        return
    for a in get_args(ann):
        yield from _nested_models(a)


def _doc(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""
    if doc.startswith("Usage docs:") or "A base class for creating Pydantic models" in doc:
        return ""
    return " ".join(doc.split())


def _fields_table(model: type[BaseModel], skip: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, f in model.model_fields.items():
        if name in skip:
            continue
        key = f.alias or name
        desc = " ".join((f.description or KEY_NOTES.get((model.__name__, key), "")).split()).replace("|", "\\|")
        lines.append(f"| `{key}` | {type_text(f.annotation)} | {_default_text(f)} | {desc} |")
    return lines


def _walk(root: type[BaseModel], stop: set[type[BaseModel]]) -> list[type[BaseModel]]:
    """Models reachable from root, breadth first, not descending into `stop`."""
    order: list[type[BaseModel]] = []
    queue = [root]
    while queue:
        m = queue.pop(0)
        if m in order or m in stop:
            continue
        order.append(m)
        for f in m.model_fields.values():
            queue.extend(n for n in _nested_models(f.annotation) if n not in order and n not in stop)
    return order


def _section(model: type[BaseModel], level: str = "###", skip: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    out = [f"{level} {model.__name__}", ""]
    if _doc(model):
        out += [_doc(model), ""]
    return out + _fields_table(model, skip) + [""]


def _op_models() -> dict[tuple[str, ...], type[BaseModel]]:
    """Op kinds → their model (one model may serve several kinds, e.g. sort / scan / unique)."""
    from sim.schema import workload as w

    models: dict[tuple[str, ...], type[BaseModel]] = {}
    for m in w.op_models():
        models[tuple(get_args(m.model_fields["kind"].annotation))] = m
    return models


def _transform_models() -> dict[str, type[BaseModel]]:
    from sim.schema.scenario import TransformSpec, transform_keys

    out: dict[str, type[BaseModel]] = {}
    for key in transform_keys():
        (model,) = [m for m in _nested_models(TransformSpec.model_fields[key].annotation)]
        out[key] = model
    return out


def _math_ops() -> list[str]:
    from sim.hardware import load_profile

    hw = load_profile(MATH_PROFILE)
    lines = ["| math op | FP32 instr. | SFU instr. | INT instr. |", "| --- | ---: | ---: | ---: |"]
    for name in sorted(hw.op_costs):
        fp32, sfu, integer = hw.op_costs[name]
        lines.append(f"| `{name}` | {fp32:g} | {sfu:g} | {integer:g} |")
    return lines


def _sections(models: list[type[BaseModel]], done: set[type[BaseModel]]) -> list[str]:
    out: list[str] = []
    for m in models:
        if m not in done:
            done.add(m)
            out += _section(m)
    return out


def reference_markdown() -> str:
    """docs/reference.md: every key of the three file kinds, op kinds, math ops, transforms, expressions."""
    from sim.expr import FUNCTIONS
    from sim.schema.scenario import TransformSpec
    from sim.schema.workload import OpBase, RepeatBlock

    ops = _op_models()
    examples = op_examples()
    transforms = _transform_models()
    out = [
        "# File reference",
        "",
        "<!-- Generated by `python scripts/gen_docs.py` from the schemas (sim/reference.py); do not edit. -->",
        "",
        "Three kinds of YAML file, each with a `schema:` version key. Unknown keys are errors. Units are in",
        "the key names (`_us`, `_gbps`, `_bytes`). `kernelsim schema workload|scenario|hardware -o FILE`",
        "writes the JSON Schema of each for editors (e.g. the YAML language server's `# yaml-language-server:",
        "$schema=FILE` comment).",
        "",
        "Contents: [workload](#workload-file) · [op kinds](#op-kinds) · [math ops](#math-ops) ·",
        "[scenario](#scenario-file) · [transforms](#transforms) · [expressions](#expressions) ·",
        "[hardware profile](#hardware-profile-file)",
        "",
        "## Workload file",
        "",
    ]
    wl = root_model("workload")
    op_set = set(ops.values())
    done: set[type[BaseModel]] = set()
    out += _sections(_walk(wl, stop=op_set | {OpBase}), done)
    out += [
        "## Op kinds",
        "",
        "An op is a mapping with a `kind`. Every kind takes the common keys below, then its own.",
        "",
        "### Common keys",
        "",
        *_fields_table(OpBase),
        "",
    ]
    common = set(OpBase.model_fields)
    for kinds, m in ops.items():
        out += ["### " + ", ".join(f"`{k}`" for k in kinds), ""]
        if _doc(m):
            out += [_doc(m), ""]
        out += _fields_table(m, skip=common if m is not RepeatBlock else set()) + ["", "```yaml"]
        out += [f"- {examples[k]}" for k in kinds] + ["```", ""]
    done |= op_set | {OpBase}
    op_models: list[type[BaseModel]] = [OpBase, *ops.values()]  # a list: the order must not depend on hashes
    out += _sections([n for m in op_models for n in _walk(m, stop=set())], done)
    out += [
        "## Math ops",
        "",
        "The names an `elementwise` or `reduction` op's `math:` may use (count per element, an expression), "
        "with their",
        f"instructions per element on each unit in the `{MATH_PROFILE}` profile (`compute.op_costs`; a profile",
        "may define more). A name missing from the profile is an error naming the op.",
        "",
        *_math_ops(),
        "",
        "## Scenario file",
        "",
    ]
    sc = root_model("scenario")
    transform_set = set(transforms.values())
    out += _sections(_walk(sc, stop=transform_set | {TransformSpec}), done)
    out += [
        "## Transforms",
        "",
        "A variant's `transforms:` is a list; each item is a mapping with exactly one key, the transform's name.",
        "Op names are the workload's (inside a `repeat` block: `NAME<i>.op`).",
        "",
    ]
    for key, m in transforms.items():
        out += [f"### `{key}`", ""]
        if _doc(m):
            out += [_doc(m), ""]
        out += _fields_table(m) + ["", "```yaml", f"- {transform_examples()[key]}", "```", ""]
    done |= transform_set | {TransformSpec}
    out += _sections([n for m in transforms.values() for n in _walk(m, stop=set())], done)
    out += [
        "## Expressions",
        "",
        "Sizes, counts and launch settings may be expressions of the parameters (a workload's `parameters`,",
        "a bucket's `params`, a scenario's `parameters`): numbers, names, `+ - * / // % **`, comparisons,",
        "`and`/`or`/`not`, `x if c else y`, and these functions: "
        + ", ".join(f"`{n}`" for n in sorted(FUNCTIONS)) + ".",
        "They are parsed by a safe evaluator (never Python `eval`). `dispatch`'s `when` and `specialize`'s",
        "`when` are predicates over the bucket's parameters.",
        "",
        "## Hardware profile file",
        "",
        "Every number is a mapping with its value and its provenance ([Quantity](#quantity)).",
        "",
    ]
    out += _sections(_walk(root_model("hardware"), stop=set()), done)
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"
