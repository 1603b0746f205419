"""The graph IR: tensors, kernels/ops with shapes evaluated, launch configs, streams and dependencies.

A Graph is immutable; transforms return new graphs. Every size here is a plain number
(expressions were evaluated for one shape bucket by sim.workload).
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {
        "fp64": 8, "int64": 8, "fp32": 4, "tf32": 4, "int32": 4, "bf16": 2, "fp16": 2,
        "fp8": 1, "int8": 1, "uint8": 1, "bool": 1,
    }
)

# Kernel kinds run on the GPU, host kinds on the host thread only: listed by `add_op_kind` when sim.ops
# defines the op kinds (sim/ops/).
KERNEL_KINDS: set[str] = set()
HOST_KINDS: set[str] = set()


def add_op_kind(kind: str, *, kernel: bool) -> None:
    """List a new op kind as a kernel kind (or a host kind); listing a kind twice is an error."""
    if kind in KERNEL_KINDS or kind in HOST_KINDS:
        raise ValueError(f"op kind {kind!r} is already listed")
    (KERNEL_KINDS if kernel else HOST_KINDS).add(kind)


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> float:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class LaunchConfig:
    """Launch configuration; None means 'estimate it' (the cost model says how)."""

    block: int | None = None
    grid: int | None = None
    elems_per_thread: int | None = None
    regs_per_thread: int | None = None
    spill_bytes_per_thread: int | None = None
    # local-memory bytes a thread stores and loads (ptxas -v: spill stores + spill loads); None: its spill
    # area stored once and loaded once (2 × spill_bytes_per_thread)
    spill_traffic_bytes_per_thread: int | None = None
    # per local load of one thread, in program order of the compiled code: (bytes the thread touched since it
    # last accessed that word, the load's bytes), merged by distance; read under memory.spill_l1_reuse
    spill_reload_distances: tuple[tuple[int, int], ...] | None = None
    smem_per_block: int | None = None
    # Row-wise reductions: threads that share one row, and rows one block covers (block = both multiplied).
    threads_per_row: int | None = None
    rows_per_block: int | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """One host op; a kernel op launches exactly one kernel."""

    name: str
    kind: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    stream: int = 0
    after: tuple[str, ...] = ()
    phase: str = "forward"
    region: str | None = None
    mode: str = "eager"
    library: str = "torch"
    launch: LaunchConfig | None = None
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    path: str = "default"
    replaces: tuple[str, ...] = ()
    host_s: float | None = None  # measured host time of this op (replaces the mode's host cost)

    @property
    def is_kernel(self) -> bool:
        return self.kind in KERNEL_KINDS

    def renamed(self, name: str, after: tuple[str, ...], reads: tuple[str, ...], writes: tuple[str, ...]) -> Op:
        """This op under other names (its own, `after`, tensors), sharing every other field (a repeat
        block's iteration): a plain slot copy, several times cheaper than dataclasses.replace."""
        new = _new_object(Op)
        # Each slot's own descriptor sets it (a frozen dataclass's __setattr__ refuses); map() and a
        # zero-length deque run the kept slots' sets in C.
        _consume(map(_call, _OP_KEPT_SETTERS, _repeat(new), _op_kept_values(self)), 0)
        _set_name(new, name)
        _set_after(new, after)
        _set_reads(new, reads)
        _set_writes(new, writes)
        return new

    def with_(self, **changes: Any) -> Op:
        if "attrs" in changes and not isinstance(changes["attrs"], MappingProxyType):
            changes["attrs"] = MappingProxyType(dict(changes["attrs"]))
        return replace(self, **changes)


_OP_SLOTS = tuple(f.name for f in fields(Op))
_OP_KEPT_SLOTS = tuple(s for s in _OP_SLOTS if s not in ("name", "after", "reads", "writes"))  # Op.renamed
_op_kept_values = operator.attrgetter(*_OP_KEPT_SLOTS)  # one C call for every kept field
_new_object = object.__new__
_OP_KEPT_SETTERS = tuple(vars(Op)[slot].__set__ for slot in _OP_KEPT_SLOTS)
_set_name, _set_after, _set_reads, _set_writes = (vars(Op)[slot].__set__ for slot in ("name", "after", "reads", "writes"))
_call = operator.call
_consume = deque
_repeat = itertools.repeat


class OpPaths(Mapping[str, str]):
    """Op name -> key path in the workload file, made on first use (an error message) from the ops
    in program order and their paths: the same mapping as a dict of the pairs (where a name repeats,
    the later op's path). Until then a graph holds one tuple of shared path strings, 8 bytes an op,
    instead of a dict of every op's name (about 40 bytes an op)."""

    __slots__ = ("_ops", "_paths", "_map")

    def __init__(self, ops: Sequence[Op], paths: Sequence[str]) -> None:
        if len(ops) != len(paths):
            raise ValueError(f"{len(ops)} ops but {len(paths)} paths")
        self._ops: Sequence[Op] = ops
        self._paths: Sequence[str] = paths
        self._map: Mapping[str, str] | None = None

    def _built(self) -> Mapping[str, str]:
        m = self._map
        if m is None:
            m = self._map = MappingProxyType({o.name: p for o, p in zip(self._ops, self._paths, strict=True)})
            self._ops = self._paths = ()
        return m

    def __getitem__(self, name: str) -> str:
        return self._built()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return repr(self._built())

    def __eq__(self, other: object) -> bool:
        # The built mappings compared in C (Mapping's own __eq__ would copy both into dicts each time); a
        # graph and the graphs transforms make from it share one OpPaths.
        if other is self:
            return True
        if isinstance(other, OpPaths):
            other = other._built()
        return self._built() == other

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Graph:
    """A workload for one shape bucket: tensors and ops in host program order."""

    name: str
    kind: str
    params: Mapping[str, float]
    tensors: Mapping[str, Tensor]
    ops: tuple[Op, ...]
    file: str = ""  # the workload file, for error messages
    op_paths: Mapping[str, str] = field(default_factory=dict)  # op name -> key path in `file`

    def op(self, name: str) -> Op:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def index(self, name: str) -> int:
        for i, o in enumerate(self.ops):
            if o.name == name:
                return i
        raise KeyError(name)

    def with_ops(self, ops: Iterable[Op], tensors: Mapping[str, Tensor] | None = None) -> Graph:
        return replace(
            self,
            ops=tuple(ops),
            tensors=MappingProxyType(dict(tensors if tensors is not None else self.tensors)),
        )

    def writers(self) -> dict[str, list[int]]:
        """Tensor name → indices of the ops that write it, in program order."""
        out: dict[str, list[int]] = {}
        for i, o in enumerate(self.ops):
            for t in o.writes:
                out.setdefault(t, []).append(i)
        return out

    def readers(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, o in enumerate(self.ops):
            for t in o.reads:
                out.setdefault(t, []).append(i)
        return out

    def dependencies(self) -> tuple[tuple[int, ...], ...]:
        """For each op, the earlier ops it must wait for: its tensors' last writers and `after`.
        Computed once per graph object (kept beside its fields: not part of ==, repr or replace)."""
        deps = self.__dict__.get("_dependencies")
        if deps is None:
            starts, flat = self.dependency_columns()
            deps = self.__dict__["_dependencies"] = tuple(
                tuple(flat[starts[i]:starts[i + 1]]) for i in range(len(self.ops)))
        return deps

    def dependency_columns(self) -> tuple[array[int], array[int]]:
        """`dependencies()` in two int arrays (16 bytes an op instead of about 90 for a tuple of int
        objects each): op i waits for `flat[starts[i]:starts[i + 1]]`, in the same order. Computed
        once per graph object, like `dependencies()`; the engine reads these."""
        cols = self.__dict__.get("_dependency_columns")
        if cols is None:
            cols = self.__dict__["_dependency_columns"] = self._dependency_columns()
        return cols

    def kernel_streams(self) -> tuple[int, ...]:
        """The streams the kernels run on, ascending. Computed once per graph object, like
        `dependency_columns()` (a sweep simulates one graph on several profiles)."""
        streams = self.__dict__.get("_kernel_streams")
        if streams is None:
            streams = self.__dict__["_kernel_streams"] = tuple(sorted({o.stream for o in self.ops if o.is_kernel}))
        return streams

    def _dependency_columns(self) -> tuple[array[int], array[int]]:
        last_writer: dict[str, int] = {}
        index: dict[str, int] | None = None  # op name -> position, made when an op has `after`
        starts = array("q", [0])
        flat = array("q")
        for i, o in enumerate(self.ops):
            found = [last_writer[t] for t in o.reads if t in last_writer]
            if o.after:
                if index is None:
                    index = {o.name: i for i, o in enumerate(self.ops)}
                found.extend(index[a] for a in o.after if a in index and index[a] < i)
            flat.extend(sorted(set(found)) if len(found) > 1 else found)
            starts.append(len(flat))
            for t in o.writes:
                last_writer[t] = i
        return starts, flat

    def kernel_count(self) -> int:
        return sum(1 for o in self.ops if o.is_kernel)
