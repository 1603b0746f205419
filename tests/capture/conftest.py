"""Capture tests: committed recordings (no torch) and, where torch is installed, live captures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "capture"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason="needs torch (pip install 'kernelsim[torch]')")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def bundle(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CAPTURE / f"{name}.bundle.json").read_text())
    return data
