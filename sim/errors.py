"""Error types that reach users: each names the file, the key path, the value and what was expected."""

from __future__ import annotations


class KernelsimError(Exception):
    """Base for errors kernelsim reports to a user (exit code 2 at the CLI)."""


class InputError(KernelsimError):
    """Bad user input: YAML, traces, CLI arguments.

    The message reads `FILE: KEY.PATH: problem (got VALUE; expected WHAT)`.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        path: str | None = None,
        value: object = None,
        expected: str | None = None,
    ) -> None:
        self.file = file
        self.path = path
        self.value = value
        self.expected = expected
        self.problem = problem
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(p for p in (self.file, self.path) if p)
        detail = self.problem
        extras = []
        if self.value is not None:
            extras.append(f"got {self.value!r}")
        if self.expected:
            extras.append(f"expected {self.expected}")
        if extras:
            detail += " (" + "; ".join(extras) + ")"
        return f"{where}: {detail}" if where else detail

    def within(self, file: str | None = None, prefix: str | None = None) -> InputError:
        """Return a copy located in `file`, with `prefix` put in front of the key path."""
        path = self.path
        if prefix:
            path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path or ''}"
        return InputError(
            self.problem,
            file=file or self.file,
            path=path,
            value=self.value,
            expected=self.expected,
        )


class InfeasibleError(KernelsimError):
    """A configuration that cannot run on the hardware (e.g. a block that fits on no SM)."""


class UncostedOpError(KernelsimError):
    """An op kind with no registered cost function: never priced as a silent zero."""
