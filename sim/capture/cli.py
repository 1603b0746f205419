"""What `kernelsim capture` does with its source: import MODULE:FACTORY and capture it, or lower
a saved recording bundle (no torch). Argument parsing stays in sim/cli.py."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sim.capture.api import CaptureResult, capture_factory, from_recordings
from sim.capture.check import BUNDLE_SCHEMA, check_bundle, check_recording
from sim.errors import InputError, KernelsimError
from sim.limits import MAX_RECORDING_BYTES
from sim.schema.loader import read_input_text


def load_factory(source: str) -> Callable[..., Any]:
    """`pkg.module:NAME` or `path/to/file.py:NAME` -> the callable."""
    module_name, sep, attr = source.rpartition(":")
    if not sep or not module_name or not attr:
        raise InputError("bad capture source", path="source", value=source,
                         expected="MODULE:FACTORY (e.g. sim.capture.examples:gpt) or a .json recording")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise InputError("file not found", path="source", value=module_name, expected="a Python file")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise InputError("cannot import", path="source", value=module_name, expected="a Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import module ({exc})", path="source", value=module_name,
                         expected="an importable module (and torch, the kernelsim torch extra)") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError("no such function in the module", path="source", value=source,
                         expected=f"a callable '{attr}' in {module_name}")
    return factory


def run_capture(source: str, params: Mapping[str, float], *, vary: list[str] | None = None,
                buckets: list[dict[str, Any]] | None = None, name: str | None = None, module_calls: bool = True,
                keep_recordings: bool = False, sdpa_backend: str | None = None) -> CaptureResult:
    """Capture (or lower a saved bundle) as `kernelsim capture` asks; the CLI writes the files."""
    if source.endswith(".json"):
        return lower_bundle(Path(source), buckets=buckets, name=name, module_calls=module_calls)
    factory = load_factory(source)
    try:
        result = capture_factory(factory, params, vary=vary, name=name, buckets=buckets, module_calls=module_calls,
                                 keep_recordings=keep_recordings, sdpa_backend=sdpa_backend)
    except KernelsimError:
        raise
    except TypeError as exc:
        raise InputError(f"the factory did not accept the parameters or returned something else ({exc})",
                         path="--param", value=dict(params), expected="the factory's keyword arguments") from None
    except Exception as exc:  # the user's model failed on the meta device (e.g. .item(), a CUDA-only op)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"the step failed on the meta device ({type(exc).__name__}: {first})", path="source",
                         value=source, expected="a model that runs on torch.device('meta') without reading values") from None
    return result


def lower_bundle(path: Path, *, buckets: list[dict[str, Any]] | None = None, name: str | None = None,
                 module_calls: bool = True) -> CaptureResult:
    """Lower a recording (or a bundle of recordings at several sizes) saved by --save-recording."""
    text = read_input_text(path, max_bytes=MAX_RECORDING_BYTES, what="capture recording (.json)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg} at line {exc.lineno})", file=str(path)) from None
    except RecursionError:
        raise InputError("nested too deeply", file=str(path), expected="a capture recording") from None
    except ValueError as exc:  # json's own limits, e.g. an integer past 4300 digits
        raise InputError(f"not a readable capture recording ({str(exc).splitlines()[0]})", file=str(path)) from None
    file = str(path)
    if isinstance(data, dict) and data.get("schema") == BUNDLE_SCHEMA:
        check_bundle(data, file)
        return _located(file, lambda: from_recordings(
            data["base"], data.get("doubled", {}), data.get("check_params", {}), check=data.get("check"),
            name=name or data.get("name", path.stem), params=data.get("params"), vary=data.get("vary"),
            buckets=buckets, module_calls=module_calls))
    check_recording(data, file)
    return _located(file, lambda: from_recordings(data, {}, {}, name=name or path.stem, buckets=buckets,
                                                  module_calls=module_calls))


def _located(file: str, lower: Callable[[], CaptureResult]) -> CaptureResult:
    """Run the lowering of a checked recording; an op whose arguments do not fit its lowering rule
    (a hand-edited recording: an mm with a scalar where a tensor was) is an error naming the file."""
    try:
        return lower()
    except InputError as exc:
        if exc.file is None:
            exc.file = file
            exc.args = (exc.render(),)
        raise
    except KernelsimError as exc:
        raise InputError(f"the recording does not lower: {exc}", file=file) from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError,
            StopIteration) as exc:
        raise InputError(f"the recording does not lower: an op's arguments do not fit its rule ({type(exc).__name__}: "
                         f"{exc})", file=file, expected="a recording as kernelsim capture --save-recording writes it"
                         ) from None
