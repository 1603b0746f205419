"""Progress for commands that take more than a couple of seconds: a spinner on standard error."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from rich.console import Console


def busy(text: str) -> AbstractContextManager[Any]:
    """A spinner on standard error while a long computation runs, on a terminal only (pipes and files
    get nothing); the command's output is printed after it ends."""
    err = Console(stderr=True)
    return err.status(text) if err.is_terminal else nullcontext()
