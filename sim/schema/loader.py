"""YAML loading into pydantic models, with errors that name the file and the key path."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sim.errors import InputError
from sim.limits import MAX_INT_DIGITS, MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from sim.outputs import note_input

M = TypeVar("M", bound=BaseModel)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as `graph[3].shape`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _file_loc(loc: tuple[int | str, ...], data: Any) -> tuple[int | str, ...]:
    """Drop the parts pydantic adds that are not keys of the file (tagged-union tags, validators)."""
    out: list[int | str] = []
    node = data
    for part in loc:
        if isinstance(part, str) and isinstance(node, dict) and part not in node:
            if node.get("kind") == part or part.startswith("function-") or "[" in part:
                continue
        out.append(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return tuple(out)


def _lookup(data: Any, loc: tuple[int | str, ...]) -> Any:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def validation_to_input_error(exc: ValidationError, file: str, data: Any) -> InputError:
    """The first pydantic error as an InputError (file, key path, value, expectation)."""
    err = exc.errors(include_url=False)[0]
    loc = _file_loc(err["loc"], data)
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        return InputError(
            f"unknown key '{loc[-1]}'", file=file, path=format_loc(loc), expected="one of the documented keys"
        )
    if err["type"] == "missing":
        return InputError("required key is missing", file=file, path=format_loc(loc))
    if isinstance(value, dict | list):
        value = _lookup(data, loc) if not isinstance(_lookup(data, loc), dict | list) else None
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return InputError(msg, file=file, path=format_loc(loc), value=value)


def open_input(path: Path, *, max_bytes: int, what: str = "file") -> BinaryIO:
    """Open an input file for reading, only if it is a regular file no larger than `max_bytes`.

    A folder, a device (/dev/zero), a FIFO or an oversized file is an InputError naming it.
    """
    file = str(path)
    if file == "":
        raise InputError(f"empty {what} path", expected="a file path")
    try:
        # stat before opening: opening a FIFO would block until a writer appears
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise InputError("is a folder", file=file, expected=f"a {what}")
        if not stat.S_ISREG(mode):
            raise InputError("not a regular file (a device, FIFO or socket)", file=file, expected=f"a {what}")
        fh = path.open("rb")
    except FileNotFoundError:
        raise InputError("file not found", file=file) from None
    except IsADirectoryError:
        raise InputError("is a folder", file=file, expected=f"a {what}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise InputError(f"cannot read file: {getattr(exc, 'strerror', None) or exc}", file=file) from None
    note_input(path)
    try:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file", file=file, expected=f"a {what}")
        if st.st_size > max_bytes:
            raise InputError(f"file too large: {st.st_size} bytes (limit {max_bytes})", file=file)
    except BaseException:
        fh.close()
        raise
    return fh


def read_input_text(path: Path, *, max_bytes: int, what: str = "file") -> str:
    """The UTF-8 text of a regular input file of at most `max_bytes` bytes."""
    with open_input(path, max_bytes=max_bytes, what=what) as fh:
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror or exc}", file=str(path)) from None
    if len(data) > max_bytes:  # grew while being read
        raise InputError(f"file too large (limit {max_bytes} bytes)", file=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", file=str(path)) from None


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader with limits: nesting depth, nodes after alias expansion, integer size, finite floats."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise _LimitError(f"nested more than {MAX_YAML_DEPTH} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _LimitError(f"integer with {digits} digits (limit {MAX_INT_DIGITS})", node.start_mark)
        return int(yaml.constructor.SafeConstructor.construct_yaml_int(self, node))  # also bound to _FastLoader

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = float(yaml.constructor.SafeConstructor.construct_yaml_float(self, node))
        if not math.isfinite(value):
            raise _LimitError(f"number {str(node.value)[:40]!r} is not finite (inf, NaN or out of range)",
                              node.start_mark)
        return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


class _LimitError(Exception):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded (memoized, so an alias bomb costs no time)."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    active: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            children = _children(node)
            total = 1
            for c in children:
                total += size[id(c)]
                if total > MAX_YAML_NODES:
                    raise _LimitError(f"more than {MAX_YAML_NODES} values once aliases are expanded "
                                      "(an alias bomb?)", node.start_mark)
            size[key] = total
            continue
        if key in size:
            continue
        if key in active:
            raise _LimitError("an alias refers to a node that contains it (recursive alias)", node.start_mark)
        active.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


_CLoader = getattr(yaml, "CSafeLoader", None)


if _CLoader is not None:

    class _FastLoader(_CLoader):  # type: ignore[valid-type,misc]
        """libyaml's parser and composer (C, about 10x faster) with the same constructors as _BoundedLoader.

        Its composer recurses in C with no depth check, so it only ever sees a document whose
        nesting an event pass (flat, in C) has bounded first; see _check_events.
        """

    _FastLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
    _FastLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


def _check_events(text: str) -> None:
    """One pass over the parser's events (no recursion): nesting depth and node count within the limits."""
    assert _CLoader is not None
    events = _CLoader(text)
    try:
        depth = nodes = 0
        while events.check_event():
            ev = events.get_event()
            if isinstance(ev, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise _LimitError(f"nested more than {MAX_YAML_DEPTH} levels deep", ev.start_mark)
            elif isinstance(ev, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
            if isinstance(ev, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise _LimitError(f"more than {MAX_YAML_NODES} values", ev.start_mark)
    finally:
        events.dispose()


def parse_yaml_text(text: str, file: str) -> Any:
    """Parse YAML text with limits; syntax errors and limits are InputErrors with the line and column."""
    try:
        if _CLoader is not None:
            _check_events(text)
            loader: Any = _FastLoader(text)
        else:
            loader = _BoundedLoader(text)  # the reader checks the characters here (NUL and other controls)
    except _LimitError as exc:
        where = f"line {exc.mark.line + 1}, column {exc.mark.column + 1}: " if exc.mark else ""
        raise InputError(f"{where}{exc.problem}", file=file) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}invalid YAML: {problem}", file=file) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _LimitError as exc:
        where = f"line {exc.mark.line + 1}, column {exc.mark.column + 1}: " if exc.mark else ""
        raise InputError(f"{where}{exc.problem}", file=file) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}invalid YAML: {problem}", file=file) from None
    except (ValueError, TypeError) as exc:  # a scalar the constructor cannot convert (bad dates, unhashable keys)
        raise InputError(f"invalid YAML value: {exc}", file=file) from None
    except RecursionError:
        raise InputError(f"nested too deeply (limit {MAX_YAML_DEPTH} levels)", file=file) from None
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a YAML file with limits (size, regular file, nesting, aliases, number sizes)."""
    return parse_yaml_text(read_input_text(path, max_bytes=MAX_YAML_BYTES, what="YAML file"), str(path))


def load_yaml_model(path: Path, model: type[M], context: dict[str, Any] | None = None) -> M:
    """Load `path` and validate it as `model`; every failure is an InputError naming the file."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(
            "the file must hold a mapping at the top level", file=str(path), value=type(data).__name__, expected="a YAML mapping"
        )
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise validation_to_input_error(exc, str(path), data) from None
