"""Error types that reach users: each names the file, the key path, the value and what was expected."""

from __future__ import annotations

from sim.limits import MAX_MESSAGE_CHARS, MAX_VALUE_CHARS


def short_repr(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """`repr(value)` cut to `limit` characters; never fails (huge integers, odd objects)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails must not hide the error itself
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[: limit - 20] + f"... ({len(text)} characters)"
    return text


def shorten(text: str, limit: int = 160) -> str:
    """A long file name or key path keeps its start and its end."""
    return text if len(text) <= limit else f"{text[: limit // 2 - 2]}...{text[-(limit // 2 - 2):]}"


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message as one line of at most `limit` characters."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 15] + " ... (cut)"
    return text


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
        where = ": ".join(shorten(p) for p in (self.file, self.path) if p)
        detail = self.problem
        extras = []
        if self.value is not None:
            extras.append(f"got {short_repr(self.value)}")
        if self.expected:
            extras.append(f"expected {self.expected}")
        if extras:
            detail += " (" + "; ".join(extras) + ")"
        return one_line(f"{where}: {detail}" if where else detail)

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
