"""The shape of a capture recording (`kernelsim capture --save-recording`), checked before it is
lowered: a recording is user input (a file that may be edited, truncated or come from another
version), so each wrong value is one InputError naming the file, the key path, the value and what
was expected — never a KeyError from deep inside the lowering rules.

What is checked is what sim/capture/record.py writes and sim/capture/lower.py reads: storages
(`nbytes`, `dtype`, `device`), events of four types with their keys, tensor references (`storage`
within the storage list, `shape`/`stride` integer lists of one length, `offset`, `extent`), and a
bundle's recordings and parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.errors import InputError
from sim.limits import MAX_JSON_DEPTH

RECORDING_SCHEMA = "kernelsim.capture/v1"
BUNDLE_SCHEMA = "kernelsim.capture-bundle/v1"
PHASES = ("forward", "backward", "optimizer", "other")
MAX_DIM = 2**40  # one tensor dimension, stride or offset (elements)
MAX_NUMEL = 2**50  # elements of one tensor view
MAX_PARAM = 2**40  # a capture parameter (tokens, hidden, ...)
_EVENT_KEYS: dict[str, dict[str, type]] = {
    "module_call": {"module": str, "phase": str},
    "autograd_node": {"module": str, "phase": str},
    "backward_call": {},
    "op": {"aten": str, "module": str, "phase": str, "args": list, "kwargs": dict, "arg_names": list,
           "mutates": list},
}


class _Check:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, problem: str, path: str, value: Any, expected: str) -> None:
        raise InputError(problem, file=self.file, path=path, value=value, expected=expected)

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            self.fail("wrong type", path, value, "a JSON object")
        return value

    def key(self, node: Mapping[str, Any], key: str, path: str, kind: type, expected: str) -> Any:
        if key not in node:
            self.fail("required key is missing", f"{path}.{key}" if path else key, None, expected)
        value = node[key]
        if kind is int:
            return self.integer(value, f"{path}.{key}" if path else key, 0, MAX_DIM)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            self.fail("wrong type", f"{path}.{key}" if path else key, value, expected)
        return value

    def integer(self, value: Any, path: str, low: int, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            self.fail("bad integer", path, value, f"an integer from {low} to {high}")
        return int(value)

    def number(self, value: Any, path: str) -> float:
        if (not isinstance(value, int | float) or isinstance(value, bool) or value != value
                or not 0 < value <= MAX_PARAM):
            self.fail("bad parameter", path, value, f"a positive number up to {MAX_PARAM}")
        return float(value)

    def params(self, value: Any, path: str) -> dict[str, float]:
        node = self.mapping(value, path)
        return {str(k): self.number(v, f"{path}.{k}") for k, v in node.items()}

    def tensor(self, ref: Mapping[str, Any], path: str, storages: int) -> None:
        self.integer(ref.get("storage"), f"{path}.storage", 0, storages - 1)
        shape = self.key(ref, "shape", path, list, "a list of sizes")
        stride = self.key(ref, "stride", path, list, "a list of strides")
        dims = [self.integer(s, f"{path}.shape[{i}]", 0, MAX_DIM) for i, s in enumerate(shape)]
        for i, s in enumerate(stride):
            self.integer(s, f"{path}.stride[{i}]", 0, MAX_DIM)
        if len(stride) != len(shape):
            self.fail("stride and shape differ in length", f"{path}.stride", stride, f"{len(shape)} strides")
        numel = 1
        for d in dims:
            numel *= d
        if numel > MAX_NUMEL:
            self.fail("tensor too large", f"{path}.shape", shape, f"at most {MAX_NUMEL} elements")
        self.key(ref, "offset", path, int, "an element offset")
        self.key(ref, "extent", path, int, "the elements the view spans")
        self.key(ref, "dtype", path, str, "a dtype name (e.g. bf16)")
        self.key(ref, "device", path, str, "a device type (meta, cuda, cpu)")

    def value(self, value: Any, path: str, storages: int, depth: int = 0) -> None:
        """An argument or output: a tensor reference, a list of values, or a scalar."""
        if depth > MAX_JSON_DEPTH:
            self.fail("nested too deeply", path, None, f"at most {MAX_JSON_DEPTH} levels")
        if isinstance(value, dict):
            if "storage" not in value:
                self.fail("an object that is not a tensor reference", path, value, "a tensor reference with 'storage'")
            self.tensor(value, path, storages)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.value(v, f"{path}[{i}]", storages, depth + 1)
        elif not (value is None or isinstance(value, bool | int | float | str)):
            self.fail("wrong type", path, value, "a tensor reference, a list, a number, a string or null")

    def event(self, ev: Any, path: str, storages: int) -> None:
        node = self.mapping(ev, path)
        kind = str(node.get("type"))
        if kind not in _EVENT_KEYS:
            self.fail("unknown event type", f"{path}.type", node.get("type"), "op, module_call, autograd_node or backward_call")
        for key, typ in _EVENT_KEYS[kind].items():
            self.key(node, key, path, typ, f"a {typ.__name__}")
        if "phase" in node and node["phase"] not in PHASES:
            self.fail("unknown phase", f"{path}.phase", node["phase"], ", ".join(PHASES))
        if kind != "op":
            return
        if node.get("call") is not None:  # the torch function call the op ran under, with its name
            self.integer(node["call"], f"{path}.call", 0, 2**62)
            self.key(node, "call_name", path, str, "the torch function's name")
        if not all(isinstance(n, str) for n in node["arg_names"]):
            self.fail("wrong type", f"{path}.arg_names", node["arg_names"], "a list of argument names")
        if not all(isinstance(n, str) for n in node["mutates"]):
            self.fail("wrong type", f"{path}.mutates", node["mutates"], "a list of argument names")
        self.value(node["args"], f"{path}.args", storages)
        for k, v in node["kwargs"].items():
            self.value(v, f"{path}.kwargs.{k}", storages)
        self.value(node.get("outputs"), f"{path}.outputs", storages)

    def recording(self, rec: Any, path: str) -> None:
        node = self.mapping(rec, path)
        where = f"{path}." if path else ""
        if node.get("schema") != RECORDING_SCHEMA:
            self.fail("not a kernelsim capture recording", f"{where}schema", node.get("schema"), RECORDING_SCHEMA)
        storages = self.key(node, "storages", path, list, "a list of storages")
        for i, st in enumerate(storages):
            s = self.mapping(st, f"{where}storages[{i}]")
            self.key(s, "nbytes", f"{where}storages[{i}]", int, "a byte count")
            self.key(s, "dtype", f"{where}storages[{i}]", str, "a dtype name")
            self.key(s, "device", f"{where}storages[{i}]", str, "a device type")
            if "name" in s and not isinstance(s["name"], str):
                self.fail("wrong type", f"{where}storages[{i}].name", s["name"], "a name")
        events = self.key(node, "events", path, list, "a list of events")
        for i, ev in enumerate(events):
            self.event(ev, f"{where}events[{i}]", len(storages))
        if node.get("params") is not None:
            self.params(node["params"], f"{where}params")
        sdpa = node.get("sdpa")
        if sdpa is not None:
            self.mapping(sdpa, f"{where}sdpa")
            backends = sdpa.get("backends")
            if backends is not None and not (isinstance(backends, list) and all(isinstance(b, str) for b in backends)):
                self.fail("wrong type", f"{where}sdpa.backends", backends, "a list of backend names")


def check_recording(rec: Any, file: str) -> None:
    """A single recording (the JSON object `record_step` returns)."""
    _Check(file).recording(rec, "")


def check_bundle(data: Any, file: str) -> None:
    """A bundle saved by `kernelsim capture --save-recording`: base, doubled per parameter, check."""
    c = _Check(file)
    node = c.mapping(data, "")
    c.recording(node.get("base"), "base")
    params = c.params(node.get("params") or {}, "params")
    doubled = c.mapping(node.get("doubled", {}), "doubled")
    for name, rec in doubled.items():
        if name not in params:
            c.fail("a doubled parameter that is not a parameter", f"doubled.{name}", name,
                   f"one of: {', '.join(params) or 'none'}")
        c.recording(rec, f"doubled.{name}")
    vary = node.get("vary")
    if vary is not None and not (isinstance(vary, list) and all(isinstance(v, str) and v in params for v in vary)):
        c.fail("bad list of varied parameters", "vary", vary, f"names among: {', '.join(params) or 'none'}")
    if node.get("check") is not None:
        c.recording(node["check"], "check")
        check_params = c.params(node.get("check_params"), "check_params")
        missing = [p for p in doubled if p not in check_params]
        if missing:
            c.fail("the check recording's parameters miss a varied one", "check_params", sorted(check_params),
                   f"values for {', '.join(missing)}")
    if node.get("name") is not None and not isinstance(node["name"], str):
        c.fail("wrong type", "name", node["name"], "a name")
