"""Reference loader for `kernelsim advise --dispatch-table` files (schema `kernelsim.dispatch/v1`).

A runtime loads the table once and asks, per call, which path to take for its shape:

    table = DispatchTable.load("dispatch.json")
    table.lookup({"tokens": 4096}, hardware="h200-measured")   # → "compiled" or "baseline"

Each entry matches exact values of the table's `parameters`; a shape that matches no entry
takes the table's `default_path` (the baseline: the library kernels). Standard library
only, so it can be copied into a serving or training codebase. docs/advise.md has the format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError

DISPATCH_SCHEMA = "kernelsim.dispatch/v1"


@dataclass(frozen=True)
class Table:
    hardware: str
    variant: str | None
    parameters: tuple[str, ...]
    default_path: str
    entries: tuple[tuple[tuple[float, ...], str], ...]  # (values of `parameters`, path)

    def lookup(self, params: Mapping[str, float]) -> str:
        missing = [p for p in self.parameters if p not in params]
        if missing:
            raise KeyError(f"dispatch table for {self.hardware} needs parameter(s) {', '.join(missing)}")
        key = tuple(float(params[p]) for p in self.parameters)
        for values, path in self.entries:
            if values == key:
                return path
        return self.default_path


@dataclass(frozen=True)
class DispatchTable:
    scenario: str
    tables: tuple[Table, ...]

    @classmethod
    def load(cls, path: str | Path) -> DispatchTable:
        file = str(path)
        from sim.limits import MAX_YAML_BYTES
        from sim.schema.loader import read_input_text

        text = read_input_text(Path(path), max_bytes=MAX_YAML_BYTES, what="dispatch table (JSON)")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:  # not JSON, a number over the digit limit, deep nesting
            raise InputError(f"cannot read dispatch table: {type(exc).__name__}: {str(exc)[:100]}", file=file) from None
        return cls.from_dict(doc, file)

    @classmethod
    def from_dict(cls, doc: Any, file: str | None = None) -> DispatchTable:
        if not isinstance(doc, dict) or doc.get("schema") != DISPATCH_SCHEMA:
            got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise InputError("not a dispatch table", file=file, path="schema", value=got, expected=DISPATCH_SCHEMA)
        tables = []
        for i, t in enumerate(doc.get("tables") or []):
            where = f"tables[{i}]"
            try:
                params = tuple(str(p) for p in t["parameters"])
                entries = tuple((tuple(float(e["match"][p]) for p in params), str(e["path"])) for e in t["entries"])
                tables.append(Table(str(t["hardware"]), t.get("variant"), params, str(t["default_path"]), entries))
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"malformed table ({type(exc).__name__}: {exc})", file=file, path=where) from None
        if not tables:
            raise InputError("no tables", file=file, path="tables", expected="one table per hardware profile")
        return cls(str(doc.get("scenario", "")), tuple(tables))

    def table(self, hardware: str | None = None) -> Table:
        if hardware is None:
            if len(self.tables) > 1:
                raise KeyError("several hardware profiles in this table; name one: "
                               + ", ".join(t.hardware for t in self.tables))
            return self.tables[0]
        for t in self.tables:
            if t.hardware == hardware:
                return t
        raise KeyError(f"no table for hardware '{hardware}' (have: {', '.join(t.hardware for t in self.tables)})")

    def lookup(self, params: Mapping[str, float], hardware: str | None = None) -> str:
        """The path for a shape: the matching entry's, else the default (baseline) path."""
        return self.table(hardware).lookup(params)
