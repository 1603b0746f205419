"""The import graph of `sim/` respects its layers (docs/architecture.md): a module imports only
modules of its own layer or of layers below it. Read from the source (AST), stdlib only, every
import statement counted: module level, inside functions and under TYPE_CHECKING alike."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "sim"

# Bottom to top. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("sim.errors", "sim.limits", "sim.resources", "sim.gcpause", "sim.outputs", "sim.expr", "sim.graph",
              "sim.kernelcost", "sim.version", "sim.busbw")),
    ("schema", ("sim.schema",)),
    ("hardware", ("sim.hardware", "sim.topology")),
    ("model", ("sim.workload", "sim.transforms", "sim.ingest", "sim.dispatch_table")),
    ("costmodel", ("sim.costmodel",)),
    ("ops", ("sim.ops",)),
    ("engine", ("sim.engine", "sim.trace", "sim.ranks", "sim.metrics")),
    ("run", ("sim.run", "sim.replay", "sim.validate.bands")),
    ("apps", ("sim.serving", "sim.sweep", "sim.advise", "sim.report", "sim.validate", "sim.calibrate", "sim.capture",
              "sim.reference")),
    ("interface", ("sim", "sim.__main__", "sim.api", "sim.cli", "sim.commands_calibrate")),
)

# Upward imports not yet removed: (importer, imported) -> why, and what removes it.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int:
    best, found = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    if found is None:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS and docs/architecture.md")
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def imports_of(path: Path) -> set[str]:
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(source: str, module: str, is_package: bool) -> set[str]:
    """The `sim` modules that `module`'s source imports; `from P import x` counts P.x when that is a
    module (`from sim import expr`), else P (`from sim.api import run`)."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name == "sim" or a.name.startswith("sim."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base != "sim" and not base.startswith("sim."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if _is_module(sub) else base)
    return out


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(SIM.rglob("*.py"))}


def upward_imports() -> list[tuple[str, str, str, str]]:
    names = [name for name, _ in LAYERS]
    bad = []
    for importer, imported in sorted(import_graph().items()):
        lo = layer_of(importer)
        for target in sorted(imported):
            hi = layer_of(target)
            if hi > lo:
                bad.append((importer, names[lo], target, names[hi]))
    return bad


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_upward_imports() -> None:
    found = [(a, la, b, lb) for a, la, b, lb in upward_imports() if (a, b) not in ALLOWED_UPWARD]
    assert not found, "upward imports:\n" + "\n".join(f"  {a} ({la}) -> {b} ({lb})" for a, la, b, lb in found)


def test_allow_list_is_current() -> None:
    """An allowed upward import that no longer exists is removed from the list."""
    present = {(a, b) for a, _, b, _ in upward_imports()}
    stale = sorted(set(ALLOWED_UPWARD) - present)
    assert not stale, f"allow-list entries no longer needed: {stale}"


def test_layers_are_documented() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for name, _ in LAYERS:
        assert f"### {name}" in doc, f"layer '{name}' has no section in docs/architecture.md"


def test_checker_sees_upward_imports() -> None:
    """The checker itself: imports inside functions, relative ones and `from sim import <module>` count."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sim.trace import Trace\n"
              "def f():\n    from sim.engine import simulate\n    from sim import expr\n    from . import gemm\n")
    found = imports_in(source, "sim.costmodel.probe", is_package=False)
    assert found == {"sim.trace", "sim.engine", "sim.expr", "sim.costmodel.gemm"}
    assert layer_of("sim.engine") > layer_of("sim.costmodel.probe")  # so the test above would fail on it
    assert imports_in("from sim.api import run\n", "sim.cli", is_package=False) == {"sim.api"}


def test_the_engine_reads_no_profile() -> None:
    """The engine schedules with the kernel costs and host prices it is given (issue 24): it imports
    neither the profile (sim.hardware) nor any pricing beyond the HostCosts type."""
    imported = imports_of(SIM / "engine.py")
    assert "sim.hardware" not in imported
    assert {m for m in imported if m.startswith("sim.costmodel")} <= {"sim.costmodel.host"}
