"""YAML loading into pydantic models, with errors that name the file and the key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sim.errors import InputError

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


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, reporting syntax errors with the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", file=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}invalid YAML: {problem}", file=str(path)) from None


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
