"""Output files: atomic (a temporary file in the same folder, then a rename: nothing half-written),
never over an input of the same command, never over a read-only file, and every OS error on
writing an OutputError naming the file (one `error:` line, exit 2 at the CLI).

Inputs are registered as they are opened (`note_input`, called by the YAML loader and the trace
reader; the CLI also registers its positional arguments), and every writer here refuses a path
that resolves to one of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sim.errors import KernelsimError

_INPUTS: set[str] = set()  # resolved paths read by the current command
_NAME_MAX = 255  # bytes in one path component on Linux/macOS file systems


class OutputError(KernelsimError):
    """An output that cannot or must not be written: the file and the reason, on one line."""

    def __init__(self, file: str, problem: str) -> None:
        self.file = file
        self.problem = problem
        super().__init__(f"{file}: {problem}" if file else problem)


def _resolved(path: Path | str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def note_input(path: Path | str) -> None:
    """Register a file this command reads, so that no output of the command replaces it."""
    if str(path):
        _INPUTS.add(_resolved(path))


def reset_inputs() -> None:
    """Forget the registered inputs (the CLI calls this when a command starts)."""
    _INPUTS.clear()


def is_input(path: Path | str) -> bool:
    return _resolved(path) in _INPUTS


def check_output_path(value: str, flag: str, *, folder: bool = False, inputs: Iterable[str | Path] = ()) -> Path:
    """Validate an output path given on the command line before any work is done.

    Refuses: an empty path, a path component over 255 bytes, a file where a folder is
    expected (or the reverse), a path that is an input of the command, a read-only
    existing file or folder.
    """
    if value is None or str(value).strip() == "":
        raise OutputError("", f"{flag}: empty path (expected a {'folder' if folder else 'file'} path)")
    p = Path(value)
    for part in p.parts:
        if len(os.fsencode(part)) > _NAME_MAX:
            raise OutputError(f"{str(p)[:80]}...", f"{flag}: a path component is longer than {_NAME_MAX} bytes")
    for i in inputs:
        if str(i) and _resolved(i) == _resolved(p):
            raise OutputError(str(p), f"{flag} names an input of this command; refusing to overwrite it")
    if is_input(p):
        raise OutputError(str(p), f"{flag} names an input of this command; refusing to overwrite it")
    if p.exists():
        if folder and not p.is_dir():
            raise OutputError(str(p), f"{flag} names a file, expected a folder")
        if not folder and p.is_dir():
            raise OutputError(str(p), f"{flag} names a folder, expected a file path")
        if not folder and not p.is_file():
            raise OutputError(str(p), f"{flag} names a device or special file, expected a regular file path")
        if _read_only(p):
            raise OutputError(str(p), f"{flag}: the {'folder' if folder else 'file'} is read-only")
    return p


def _read_only(p: Path) -> bool:
    """No write permission bits at all (checked by mode, so the answer is the same for root)."""
    try:
        return not (p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) or not os.access(p, os.W_OK)
    except OSError:
        return False


def _os_problem(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _make_parents(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return those created (to remove them on failure)."""
    missing = []
    cur = folder
    while not cur.exists():
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    if cur.exists() and not cur.is_dir():
        raise OutputError(str(cur), "is a file, cannot create a folder in it")
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            _remove_dirs(missing)
            raise OutputError(str(d), f"cannot create folder: {_os_problem(exc)}") from None
    return missing


def _remove_dirs(created: Sequence[Path]) -> None:
    for d in created:  # deepest first
        try:
            d.rmdir()
        except OSError:
            pass


def _check_target(path: Path) -> None:
    if str(path) == "":
        raise OutputError("", "empty output path")
    if is_input(path):
        raise OutputError(str(path), "is an input of this command; refusing to overwrite it")
    if path.is_dir():
        raise OutputError(str(path), "is a folder, expected a file path")
    if path.exists() and _read_only(path):
        raise OutputError(str(path), "the file is read-only; refusing to replace it")
    if path.parent.exists() and _read_only(path.parent):
        raise OutputError(str(path), f"the folder {path.parent} is read-only")


def _write_temp(path: Path, data: bytes) -> str:
    """Write `data` to a new temporary file beside `path`; return its name."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(str(path), f"cannot write: {_os_problem(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; an output file is as readable as any other
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(str(path), f"cannot write: {_os_problem(exc)}") from None
        raise
    return tmp


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_files_atomic(files: Sequence[tuple[Path, bytes]]) -> None:
    """Write several files as one step: every temporary file first, then the renames back to back.

    A failure before the renames leaves none of the files; the renames run with SIGINT, SIGTERM
    and SIGHUP blocked, so an interrupt cannot fall between them (only SIGKILL can).
    """
    seen: set[str] = set()
    for path, _ in files:
        _check_target(path)
        if _resolved(path) in seen:
            raise OutputError(str(path), "named twice as an output of this command")
        seen.add(_resolved(path))
    created: list[Path] = []
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            created += _make_parents(path.parent)
            temps.append((_write_temp(path, data), path))
        blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            _rename_all(temps)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    except BaseException:
        for tmp, _ in temps:
            _unlink(tmp)
        _remove_dirs(sorted(created, key=lambda d: len(d.parts), reverse=True))
        raise


def _rename_all(temps: Sequence[tuple[str, Path]]) -> None:
    """Rename every temporary file onto its target; if one rename fails, undo the ones done
    (a new file is removed, a replaced one restored from a hard link kept until the end)."""
    done: list[tuple[Path, str | None]] = []  # (target, backup of what it replaced)
    try:
        for tmp, path in temps:
            backup = None
            if len(temps) > 1 and path.exists():
                backup = f"{tmp}.old"
                try:
                    os.link(path, backup)
                except OSError:
                    backup = None
            try:
                os.replace(tmp, path)
            except OSError as exc:
                if backup is not None:
                    _unlink(backup)
                raise OutputError(str(path), f"cannot write: {_os_problem(exc)}") from None
            done.append((path, backup))
    except BaseException:
        for path, backup in reversed(done):
            if backup is not None:
                with contextlib.suppress(OSError):
                    os.replace(backup, path)
            else:
                _unlink(str(path))
        raise
    for _, backup in done:
        if backup is not None:
            _unlink(backup)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_files_atomic([(path, data)])


def write_text_atomic(path: Path, text: str) -> None:
    write_files_atomic([(path, text.encode("utf-8"))])


class _NotPlain(Exception):
    """A value the fast writer leaves to json.dumps (a non-str key, an unknown type, NaN or inf)."""


_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps uses with ensure_ascii (C)
_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")


def _plain_json(o: Any, level: int) -> str:
    """`json.dumps(o, indent=2, sort_keys=True)` at nesting `level`, the same text, for str-keyed
    dicts, lists, tuples, str, int, float, bool and None: built by joins instead of json's
    generator chain (which it must use whenever `indent` is set), with the leaves of a dict or list
    written in the loop; about 1.5x faster on the run results a sweep writes per point."""
    t = type(o)
    if t is dict:
        if not o:
            return "{}"
        inner = "\n" + "  " * (level + 1)
        parts = []
        for k, v in sorted(o.items()):
            if type(k) is not str:
                raise _NotPlain
            tv = type(v)
            if tv is float and v - v == 0.0:  # finite (NaN and inf give NaN)
                parts.append(_encode_str(k) + ": " + _float_repr(v))
            elif tv is str:
                parts.append(_encode_str(k) + ": " + _encode_str(v))
            else:
                parts.append(_encode_str(k) + ": " + _plain_json(v, level + 1))
        return "{" + inner + ("," + inner).join(parts) + "\n" + "  " * level + "}"
    if t is list or t is tuple:
        if not o:
            return "[]"
        inner = "\n" + "  " * (level + 1)
        return "[" + inner + ("," + inner).join([_float_repr(v) if type(v) is float and v - v == 0.0 else
                                                  _plain_json(v, level + 1) for v in o]) + "\n" + "  " * level + "]"
    # The order of json's own checks, for the leaves and for subclasses.
    if isinstance(o, str):
        return _encode_str(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return _int_repr(o)
    if isinstance(o, float):
        if o != o or o == _INF or o == -_INF:
            raise _NotPlain
        return _float_repr(o)
    if isinstance(o, (list, tuple)):
        return _plain_json(list(o), level)
    if isinstance(o, dict):
        return _plain_json(dict(o), level)
    raise _NotPlain


def dumps(data: Any, where: Path | str | None = None) -> str:
    """Deterministic JSON: sorted keys, fixed float formatting by Python's repr; NaN and inf refused.

    The text is json.dumps(data, indent=2, sort_keys=True, allow_nan=False)'s; plain data takes a
    faster writer of the same text (_plain_json), anything else (and every error) json.dumps."""
    try:
        return _plain_json(data, 0) + "\n"
    except (_NotPlain, RecursionError):
        pass
    try:
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as exc:  # a non-finite number reached an output: an input let one through
        raise OutputError(str(where or ""), f"cannot write JSON: {exc} (a result is inf or NaN: an input value is "
                                            "too extreme for the model; check the profile and the workload)") from None


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, dumps(data, path))
