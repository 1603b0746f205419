"""Stream the events of a Chrome-format trace (plain or gzip JSON) in bounded memory.

Standard library only: `json.JSONDecoder.raw_decode` decodes one value at a time from a
sliding text buffer, so memory is one read chunk plus the largest single event, whatever
the file size (a 200 MB trace never becomes one Python object). The C-accelerated
scanner does the parsing, so this is about as fast as `json.load` per byte.

Errors are InputErrors naming the file and the event index or byte offset: a truncated
file (plain or gzip), a value that is not JSON, a top level that is not an object or has
no `traceEvents` array.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from sim.errors import InputError
from sim.limits import MAX_TRACE_BYTES
from sim.schema.loader import open_input

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20  # one event larger than this is treated as malformed
_WS = " \t\r\n"


def _open(path: Path) -> TextIO:
    raw = open_input(path, max_bytes=MAX_TRACE_BYTES, what="trace file")
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")


class _NotFinite(ValueError):
    """NaN, Infinity or -Infinity in a trace: JSON has no such numbers and kernelsim accepts none."""


def _reject_constant(name: str) -> Any:
    raise _NotFinite(name)


class _Reader:
    """A text buffer over a stream with a read position; refills on demand."""

    def __init__(self, fh: TextIO, file: str) -> None:
        self.fh = fh
        self.file = file
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters consumed before buf[0]
        self.eof = False

    def _read(self, n: int) -> str:
        try:
            return self.fh.read(n)
        except EOFError:
            raise InputError("truncated gzip file: the compressed stream ends before its end marker",
                             file=self.file) from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"corrupt gzip data: {exc}", file=self.file) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text: {exc.reason}", file=self.file) from None

    def fill(self, want: int = CHUNK_CHARS) -> bool:
        """Drop consumed text and read more; False at end of file."""
        if self.eof:
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos:]
        self.pos = 0
        data = self._read(want)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def skip_ws(self) -> str:
        """Skip whitespace; return the next character ('' at end of file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.skip_ws()
        if c == "":
            raise InputError(f"truncated file: ended where {what} was expected (character {self.offset})",
                             file=self.file)
        if c not in chars:
            raise InputError(f"malformed JSON at character {self.offset}: expected {what}, found {c!r}",
                             file=self.file)
        self.pos += 1
        return c

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def value(self, decoder: json.JSONDecoder, what: str, index: int = 0) -> Any:
        """Decode one JSON value at the read position, refilling until it is complete.

        `what` names the value in error messages; `{}` in it is replaced by `index`.
        """
        self.skip_ws()
        while True:
            try:
                obj, end = decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise InputError(f"{what.format(index)} is nested too deeply (character {self.offset})",
                                 file=self.file) from None
            except _NotFinite as exc:
                raise InputError(f"{what.format(index)} holds {exc.args[0]}, which is not a finite number "
                                 f"(near character {self.offset})", file=self.file) from None
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise InputError(f"truncated or malformed JSON in {what.format(index)} at character {self.base + exc.pos}: "
                                     f"{exc.msg}", file=self.file) from None
                if len(self.buf) - self.pos > MAX_EVENT_CHARS:
                    raise InputError(f"malformed JSON in {what.format(index)} at character {self.base + exc.pos}: {exc.msg}",
                                     file=self.file) from None
                self.fill(max(CHUNK_CHARS, len(self.buf) - self.pos))
                continue
            except ValueError as exc:  # an integer over Python's digit limit
                raise InputError(f"{what.format(index)}: a number is too long (near character {self.offset}): "
                                 f"{str(exc)[:80]}", file=self.file) from None
            # A number that ends at the buffer's end may continue in the next chunk.
            if end >= len(self.buf) and not self.eof:
                self.fill(CHUNK_CHARS)
                continue
            self.pos = end
            return obj


def iter_events(path: Path, meta: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the objects of the top-level `traceEvents` array in file order.

    Other top-level keys are decoded and, when `meta` is given, stored in it (they are
    small: schemaVersion, deviceProperties, distributedInfo...).
    """
    file = str(path)
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    with _open(path) as fh:
        r = _Reader(fh, file)
        if r.skip_ws() == "":
            raise InputError("empty file", file=file, expected="a Chrome trace JSON object")
        if r.skip_ws() == "[":
            raise InputError("the trace is a bare JSON array", file=file,
                             expected='an object with a "traceEvents" array (PyTorch profiler / Kineto format)')
        r.expect("{", "'{' (a JSON object)")
        seen_events = False
        if r.skip_ws() == "}":
            r.pos += 1
        else:
            while True:
                key = r.value(decoder, "a top-level key")
                if not isinstance(key, str):
                    raise InputError(f"malformed JSON at character {r.offset}: a key must be a string", file=file)
                r.expect(":", "':'")
                if key == "traceEvents":
                    seen_events = True
                    yield from _array(r, decoder)
                else:
                    val = r.value(decoder, f"top-level key {key!r}".replace("{", "{{").replace("}", "}}"))
                    if meta is not None:
                        meta[key] = val
                if r.expect(",}", "',' or '}'") == "}":
                    break
        if r.skip_ws() != "":
            raise InputError(f"unexpected text after the trace object at character {r.offset}", file=file)
        if not seen_events:
            raise InputError("no 'traceEvents' array", file=file, expected="a PyTorch profiler (Kineto) trace")


def _array(r: _Reader, decoder: json.JSONDecoder) -> Iterator[dict[str, Any]]:
    r.expect("[", "'[' (the traceEvents array)")
    if r.skip_ws() == "]":
        r.pos += 1
        return
    index = 0
    while True:
        ev = r.value(decoder, "traceEvents[{}]", index)
        if not isinstance(ev, dict):
            raise InputError("an event is not a JSON object", file=r.file, path=f"traceEvents[{index}]",
                             value=type(ev).__name__)
        yield ev
        index += 1
        if r.expect(",]", "',' or ']' after an event") == "]":
            return
