"""Hypothesis strategies for hostile inputs: expressions, YAML documents, Kineto traces, command lines.

Each strategy draws a `Case`: the files to create in a fresh folder, the command line, the
outputs it names, and the strings one of which an exit-2 message must contain (the file or
flag at fault). Placeholders in text (`__DEEP__`, `__BIGINT__`) are expanded after JSON/YAML
serialization, to produce what serializers refuse to write (1000-deep arrays, 5000-digit
integers).
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.fuzz import base

NAMES = ("tokens", "hidden", "k", "batch", "nope", "__class__", "x")
FUNCS = ("min", "max", "ceil", "floor", "log2", "sqrt", "abs", "int", "round_up", "is_pow2", "pow", "eval",
         "__import__", "open")
BINOPS = ("+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@")
CMPOPS = ("==", "!=", "<", "<=", ">", ">=", "is", "is not", "in", "not in")
NASTY_EXPRESSIONS = (
    "9**9**9", "tokens**tokens**tokens", "2**1024 + 0.0", "-(2**2**2**2**2)", "int(1e400)", "1e309",
    "tokens*1e308", "tokens is 1", "tokens in 1", "round_up(tokens, 0)", "(-8)**0.5", "0**-1", "log2(0)",
    "sqrt(-1)", "10**8", "1/0", "1 % 0", "1 // 0", "max()", "min(1)", "abs(1, 2)", "tokens.real", "[1]",
    "'a'", "b'x'", "lambda: 1", "__import__('os')", "(lambda: 1)()", "f'{1}'", "*tokens", "tokens[0]",
    "{1: 2}", "{1}", "(1, 2)", "x := 1", "yield 1", "await x", "...", "None", "True", "1j", "1e-400",
    "float('nan')", "tokens if", "", " ", "\x00", "1 if 0 else " * 5000 + "1", "1**" * 30000 + "1",
    "(" * 5000 + "1" + ")" * 5000, "-" * 10000 + "1", "not " * 3000 + "1", "1" * 5000, "0x" + "f" * 2000,
    "int(10**18) * 10**18", "ceil(1e300) * 1e300", "2**63", "2**62 * 4", "-2**63 - 1", "floor(-1e19)",
)


def _atom() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NAMES),
        st.integers(-10, 5000).map(str),
        st.sampled_from(("0", "-1", "1e308", "1e309", "0.5", "2**64", "10**30", "1e-300", "True", "4294967296")),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
    )


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(BINOPS), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, st.sampled_from(CMPOPS), inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(st.sampled_from(("-", "+", "not ", "~")), inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) if ({t[1]}) else ({t[2]})"),
        st.tuples(inner, st.sampled_from(("and", "or")), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(st.sampled_from(FUNCS), st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
    )


def expressions() -> st.SearchStrategy[str]:
    """Arithmetic-looking expressions, valid or not, plus known hostile ones and long chains."""
    chains = st.tuples(st.sampled_from(("1**", "2**", "1 if 0 else ", "-", "not ", "(", "tokens*")),
                       st.integers(1, 40000)).map(lambda t: t[0] * t[1] + "1" + (")" * t[1] if t[0] == "(" else ""))
    return st.one_of(st.recursive(_atom(), _extend, max_leaves=12), st.sampled_from(NASTY_EXPRESSIONS), chains)


def environments() -> st.SearchStrategy[dict[str, Any]]:
    value = st.one_of(st.integers(-2**70, 2**70), st.floats(), st.booleans(), st.integers(0, 10**5))
    return st.dictionaries(st.sampled_from(NAMES[:4]), value, max_size=4)


def bad_values() -> st.SearchStrategy[Any]:
    """Values to put anywhere in a YAML document."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-2**80, 2**80), st.integers(-3, 3),
        st.sampled_from([0, -1, 10**400, 2**64, 10**8]),
        st.floats(), st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e308, -0.0, 5e-324]),
        st.text(max_size=20), st.sampled_from(["__DEEP__", "__BIGINT__", "__HUGE_STRING__", "x" * 300]),
        EXPRESSIONS,
    )
    return st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3))


@dataclass
class Case:
    """One input: files to create, the command line, and what a failure must name."""

    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)  # path -> dir | fifo | readonly | readonly_dir | link:TARGET
    outputs: list[str] = field(default_factory=list)  # output paths the command line names
    blame: list[str] = field(default_factory=list)  # an exit-2 message must contain one of these
    direct: tuple[str, dict[str, Any]] | None = None  # an evaluator call instead of a command line
    note: str = ""  # what was mutated, for the report


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any, how: str) -> Any:
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "wrap":
        parent[last] = [parent[last]]
    elif how == "add_key" and isinstance(parent[last], dict):
        parent[last][value if isinstance(value, str) else "unknown_key"] = 1
    else:
        parent[last] = value
    return doc


def _expand(text: str) -> str:
    return (text.replace("'__DEEP__'", "[" * 1500 + "]" * 1500).replace('"__DEEP__"', "[" * 1500 + "]" * 1500)
            .replace("__DEEP__", "[" * 1500 + "]" * 1500)
            .replace("'__BIGINT__'", "9" * 5000).replace('"__BIGINT__"', "9" * 5000).replace("__BIGINT__", "9" * 5000)
            .replace("__HUGE_STRING__", "z" * 300_000))


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))


@st.composite
def text_mutation(draw: st.DrawFn, text: str) -> str:
    how = draw(st.sampled_from(("truncate", "insert", "bomb", "deep", "bigint", "tabs", "bytes", "none", "none")))
    if how == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if how == "insert":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(("&a ", "*a", ": ", "- ", "{", "]", "!!python/object:os.system ",
                                                 "\t", "\x00", "'", '"', "\n  - ", "<<: *a\n", "!!binary ",
                                                 ".inf", ".nan", "1e400", "9" * 5000))) + text[at:]
    if how == "bomb":
        return ALIAS_BOMB + text
    if how == "deep":
        return text + "\ndeep: " + "[" * draw(st.integers(60, 3000)) + "\n"
    if how == "bigint":
        return text + "\nbig: " + "9" * draw(st.integers(25, 6000)) + "\n"
    if how == "tabs":
        return text.replace("  ", "\t", 1)
    if how == "bytes":
        return text + "\n# " + "\udcff".encode("utf-8", "surrogatepass").decode("latin-1")
    return text


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter when present: 10x faster


def _dump(doc: Any) -> str:
    return _expand(yaml.dump(doc, Dumper=_DUMPER, sort_keys=False, width=10_000))


@st.composite
def yaml_cases(draw: st.DrawFn) -> Case:
    """A mutated workload or scenario (key paths replaced, deleted, wrapped; text truncated, bombed)."""
    wl, scn = copy.deepcopy(base.WORKLOAD), copy.deepcopy(base.SCENARIO)
    target = draw(st.sampled_from(("workload.yaml", "s.yaml")))
    doc = wl if target == "workload.yaml" else scn
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(("set", "set", "set", "delete", "wrap", "add_key")))
        if not path and how != "set":
            continue
        try:
            doc = _set(doc, path, draw(BAD_VALUES), how)
        except (KeyError, IndexError, TypeError):
            pass
    wl_text, scn_text = _dump(wl), _dump(scn)
    if target == "workload.yaml":
        wl_text = draw(text_mutation(wl_text))
    else:
        scn_text = draw(text_mutation(scn_text))
    cmd = draw(st.sampled_from(("run", "run", "run", "advise", "sweep")))
    argv = [cmd, "s.yaml", "--quiet"]
    outputs: list[str] = []
    if cmd == "run" and draw(st.booleans()):
        argv += ["--json", "out.json", "--trace", "out_trace.json"]
        outputs = ["out.json", "out_trace.json"]
    if cmd == "sweep":
        argv += ["--workers", "1", "--out", "sw", "--no-plots"]
        outputs = ["sw"]
        scn_text += "\nsweep: {params: {tokens: [128, 256]}}\n" if "sweep" not in scn_text else ""
    return Case("yaml", argv, files={"workload.yaml": wl_text.encode("utf-8", "surrogateescape"),
                                     "s.yaml": scn_text.encode("utf-8", "surrogateescape")},
                outputs=outputs, blame=["workload.yaml", "s.yaml", "h200-sxm"])


SLOTS = (
    ("ops", 0, "m"), ("ops", 0, "k"), ("ops", 2, "numel"), ("ops", 3, "count"), ("ops", 1, "math", "gelu"),
    ("ops", 1, "launch", "block"), ("ops", 1, "launch", "elems_per_thread"), ("tensors", "x", "shape", 0),
    ("tensors", "s", "shape", 0), ("ops", 4, "rows"), ("ops", 4, "cols"), ("ops", 4, "passes"),
    ("ops", 5, "heads"), ("ops", 5, "seq_q"), ("ops", 5, "seq_kv"), ("ops", 5, "head_dim"), ("ops", 6, "bytes"),
    ("ops", 8, "duration_us"), ("ops", 8, "framework_ops"), ("ops", 3, "ops", 0, "numel"),
    ("distribution", "buckets", 0, "weight"), ("distribution", "buckets", 1, "params", "tokens"),
    ("parameters", "hidden"),
)
SCN_SLOTS = (
    ("variants", 1, "transforms", 0, "specialize", "when"), ("variants", 1, "transforms", 0, "specialize", "pad", "k"),
    ("variants", 2, "transforms", 0, "dispatch", "when"), ("variants", 0, "transforms", 0, "fuse", "launch", "block"),
)


@st.composite
def expression_cases(draw: st.DrawFn) -> Case:
    """An expression in a workload or scenario slot, or a direct evaluator call."""
    source = draw(EXPRESSIONS)
    if draw(st.integers(0, 3)) == 0:
        return Case("expr-direct", [], direct=(source, draw(ENVIRONMENTS)), note=repr(source[:80]))
    wl, scn = copy.deepcopy(base.WORKLOAD), copy.deepcopy(base.SCENARIO)
    slot = draw(st.sampled_from(SLOTS + SCN_SLOTS))
    _set(wl if slot in SLOTS else scn, slot, source, "set")
    tokens = 128
    if draw(st.booleans()):  # a bucket value that makes the expression's arithmetic extreme
        tokens = draw(st.sampled_from((0, -1, 1, 2**31, 10**15, 0.5)))
        wl["distribution"]["buckets"][0]["params"]["tokens"] = tokens
    argv = ["run", "s.yaml", "--quiet", "--json", "out.json"]
    return Case("expr", argv, files={"workload.yaml": _dump(wl).encode(), "s.yaml": _dump(scn).encode()},
                outputs=["out.json"], blame=["workload.yaml", "s.yaml", "h200-sxm"],
                note=f"{'.'.join(map(str, slot))} = {source[:80]!r} (tokens {tokens})")


_TRACE_EVENTS = base.trace_events()
TRACE_FIELDS = ("ts", "dur", "args", "name", "ph", "cat", "tid", "pid", "stream", "correlation", "grid", "block",
                "Input Dims", "Input type", "Concrete Inputs", "bytes", "registers per thread", "shared memory",
                "wait_on_stream", "cuda_sync_kind", "External id")
TRACE_VALUES = st.one_of(
    st.none(), st.booleans(), st.sampled_from([-1, 0, 1, 7, 2**63, 10**400, -10**20, 1e400, 1e308, 0.5]),
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.text(max_size=8), st.sampled_from(["x", "12.5", "NaN", "__DEEP__", "__BIGINT__", "1e999"]),
    st.lists(st.integers(-3, 2**40), max_size=4), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just([[[[1]]]]),
)


@st.composite
def trace_cases(draw: st.DrawFn) -> Case:
    """A mutated small Kineto trace given to import-trace or replay (plain, gzip, truncated)."""
    events = copy.deepcopy(_TRACE_EVENTS)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(events) - 1))
        ev = events[i]
        if not isinstance(ev, dict):
            continue
        how = draw(st.sampled_from(("field", "field", "field", "arg", "arg", "delete", "duplicate", "replace")))
        key = draw(st.sampled_from(TRACE_FIELDS))
        if how == "field":
            ev[key] = draw(TRACE_VALUES)
        elif how == "arg":
            args = ev.get("args")
            if isinstance(args, dict):
                args[key] = draw(TRACE_VALUES)
            else:
                ev["args"] = {key: draw(TRACE_VALUES)}
        elif how == "delete":
            ev.pop(key, None)
        elif how == "duplicate":
            events.insert(i, copy.deepcopy(ev))
        else:
            events[i] = draw(TRACE_VALUES)  # type: ignore[call-overload]
    text = _expand(json.dumps(base.trace_doc(events)))  # NaN/Infinity written as JavaScript does
    form = draw(st.sampled_from(("plain", "plain", "plain", "gzip", "truncate", "truncate_gzip", "garbage")))
    data = text.encode()
    name = "t.json"
    if form == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif form in ("gzip", "truncate_gzip"):
        name = "t.json.gz"
        data = gzip.compress(data, mtime=0)
        if form == "truncate_gzip":
            data = data[: draw(st.integers(0, len(data)))]
    elif form == "garbage":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    cmd = draw(st.sampled_from(("import", "replay", "replay_predict")))
    if cmd == "import":
        argv, outputs = ["import-trace", name, "-o", "w.yaml"], ["w.yaml"]
    else:
        argv = ["replay", name, "--hardware", "h200-sxm", "--quiet", "--json", "r.json", "--trace", "rt.json"]
        outputs = ["r.json", "rt.json"]
        if cmd == "replay_predict":
            argv += ["--mode", "predict"]
    return Case("trace", argv, files={name: data}, outputs=outputs, blame=[name, "h200-sxm"])


_VALID: dict[str, bytes] = {}


def _valid_files() -> dict[str, bytes]:
    if not _VALID:
        _VALID.update({"workload.yaml": _dump(base.WORKLOAD).encode(), "s.yaml": _dump(base.SCENARIO).encode(),
                       "t.json": base.trace_text(base.trace_events()).encode()})
    return dict(_VALID)


LONG = "n" * 300


@st.composite
def cli_cases(draw: st.DrawFn) -> Case:
    """Odd command lines and file-system cases: outputs over inputs, empty and overlong paths,
    read-only files and folders, devices, FIFOs and folders as inputs, bad flags."""
    files = _valid_files()
    templates: list[tuple[list[str], dict[str, str], list[str], list[str]]] = [
        # argv, special files, outputs, blame
        (["run", "s.yaml", "--quiet", "--json", ""], {}, [], ["--json"]),
        (["run", "s.yaml", "--quiet", "--trace", ""], {}, [], ["--trace"]),
        (["run", "s.yaml", "--quiet", "--plots", ""], {}, [], ["--plots"]),
        (["run", "s.yaml", "--quiet", "--report", ""], {}, [], ["--report"]),
        (["sweep", "s.yaml", "--quiet", "--out", ""], {}, [], ["--out"]),
        (["advise", "s.yaml", "--quiet", "--json", ""], {}, [], ["--json"]),
        (["replay", "t.json", "--hardware", "h200-sxm", "--json", ""], {}, [], ["--json"]),
        (["import-trace", "t.json", "-o", ""], {}, [], ["-o"]),
        (["run", "s.yaml", "--quiet", "--json", "s.yaml"], {}, [], ["s.yaml"]),
        (["run", "s.yaml", "--quiet", "--json", "workload.yaml"], {}, [], ["workload.yaml"]),
        (["run", "s.yaml", "--quiet", "--trace", "./workload.yaml"], {}, [], ["workload.yaml"]),
        (["run", "s.yaml", "--quiet", "--json", "link.json"], {"link.json": "link:s.yaml"}, [], ["link.json"]),
        (["advise", "s.yaml", "--quiet", "--json", "s.yaml"], {}, [], ["s.yaml"]),
        (["advise", "s.yaml", "--quiet", "--dispatch-table", "workload.yaml"], {}, [], ["workload.yaml"]),
        (["serve", "s.yaml", "--quiet", "--json", "s.yaml"], {}, [], ["s.yaml"]),
        (["replay", "t.json", "--hardware", "h200-sxm", "--json", "t.json"], {}, [], ["t.json"]),
        (["replay", "t.json", "--hardware", "h200-sxm", "--trace", "t.json"], {}, [], ["t.json"]),
        (["import-trace", "t.json", "-o", "t.json"], {}, [], ["t.json"]),
        (["import-trace", "t.json", "-o", "s.yaml"], {"s.yaml": "readonly"}, [], ["s.yaml"]),
        (["run", "s.yaml", "--quiet", "--json", "ro.json"], {"ro.json": "readonly"}, [], ["ro.json"]),
        (["run", "s.yaml", "--quiet", "--json", "rodir/o.json"], {"rodir": "readonly_dir"}, [], ["rodir"]),
        (["run", "s.yaml", "--quiet", "--plots", "rodir"], {"rodir": "readonly_dir"}, [], ["rodir"]),
        (["import-trace", "t.json", "-o", "rodir/w.yaml"], {"rodir": "readonly_dir"}, [], ["rodir"]),
        (["sweep", "s.yaml", "--quiet", "--workers", "1", "--out", "rodir"], {"rodir": "readonly_dir"}, [], ["rodir"]),
        (["run", "s.yaml", "--quiet", "--json", LONG + ".json"], {}, [], ["--json"]),
        (["import-trace", "t.json", "-o", f"new/{LONG}/w.yaml"], {}, [], ["-o"]),
        (["run", "s.yaml", "--quiet", "--json", "/".join(["d" * 200] * 30) + "/o.json"], {}, [], ["ddd"]),
        (["run", "/dev/zero", "--quiet"], {}, [], ["/dev/zero"]),
        (["run", "fifo.yaml", "--quiet"], {"fifo.yaml": "fifo"}, [], ["fifo.yaml"]),
        (["replay", "fifo.yaml", "--hardware", "h200-sxm"], {"fifo.yaml": "fifo"}, [], ["fifo.yaml"]),
        (["run", "folder", "--quiet"], {"folder": "dir"}, [], ["folder"]),
        (["import-trace", "folder", "-o", "w.yaml"], {"folder": "dir"}, [], ["folder"]),
        (["run", "missing.yaml"], {}, [], ["missing.yaml"]),
        (["run", "s.yaml", "--hardware", "/dev/zero", "--quiet"], {}, [], ["/dev/zero"]),
        (["run", "s.yaml", "--hardware", "nonexistent-gpu", "--quiet"], {}, [], ["nonexistent-gpu"]),
        (["run", "s.yaml", "--trace-bucket", "99", "--trace", "tt.json", "--quiet"], {}, [], ["--trace-bucket"]),
        (["sweep", "s.yaml", "--workers", "0", "--out", "sw"], {}, [], ["--workers"]),
        (["serve", "s.yaml", "--rates", "nan"], {}, [], ["--rates"]),
        (["serve", "s.yaml", "--requests", "0"], {}, [], ["--requests"]),
        ([], {}, [], ["kernelsim"]),
        (["bogus"], {}, [], ["kernelsim"]),
        (["run"], {}, [], ["kernelsim"]),
        (["run", "s.yaml", "--bogus"], {}, [], ["kernelsim"]),
        (["replay", "t.json"], {}, [], ["kernelsim"]),
        (["run", "s.yaml\x00x"], {}, [], ["s.yaml"]),
        (["run", "[red]x[/red].yaml"], {}, [], ["x[/red].yaml"]),
    ]
    argv, special, outputs, blame = draw(st.sampled_from(templates))
    blame = list(blame)
    if draw(st.integers(0, 4)) == 0:  # the input itself empty, binary or not UTF-8
        files["s.yaml"] = draw(st.sampled_from((b"", b"\xff\xfe\x00garbage", b"- just\n- a list\n", b"~\n")))
        blame.append("s.yaml")
    return Case("cli", list(argv), files=files, special=dict(special), outputs=list(outputs), blame=blame)


EXPRESSIONS = expressions()
ENVIRONMENTS = environments()
BAD_VALUES = bad_values()


_PROFILE = yaml.safe_load((Path(__file__).resolve().parents[2] / "hardware_profiles" / "h200-sxm.yaml").read_text())
PROFILE_VALUES = st.one_of(
    st.sampled_from([0, -1, 0.0, 1e-300, 1e308, 10**30, 2**64, float("inf"), float("nan"), None, "x", True, [], {}]),
    st.floats(), st.integers(-10, 10**6),
)


@st.composite
def profile_cases(draw: st.DrawFn) -> Case:
    """A mutated hardware profile (a number, its source, a whole section) given with --hardware."""
    prof = copy.deepcopy(_PROFILE)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(prof) if p]
        path = draw(st.sampled_from(paths))
        if path[-1] != "value" and draw(st.integers(0, 3)) > 0:  # mostly the numbers themselves
            values = [p for p in paths if p[-1] == "value"]
            path = draw(st.sampled_from(values))
        how = draw(st.sampled_from(("set", "set", "set", "delete")))
        with contextlib.suppress(KeyError, IndexError, TypeError):
            prof = _set(prof, path, draw(PROFILE_VALUES), how)
    text = draw(text_mutation(_dump(prof)))
    files = _valid_files()
    files["hw.yaml"] = text.encode("utf-8", "surrogateescape")
    cmd = draw(st.sampled_from(("run", "run", "advise", "replay")))
    if cmd == "replay":
        argv = ["replay", "t.json", "--hardware", "hw.yaml", "--mode", "predict", "--quiet", "--json", "r.json"]
    else:
        argv = [cmd, "s.yaml", "--hardware", "hw.yaml", "--quiet", "--json", "out.json"]
    return Case("profile", argv, files=files, outputs=[argv[-1]], blame=["hw.yaml", "h200-sxm", "workload.yaml",
                                                                         "s.yaml", "t.json"])


_RECORDING = Path(__file__).parents[1] / "fixtures" / "capture" / "mlp.bundle.json"
_RECORDING_DOC: list[Any] = []


@st.composite
def recording_cases(draw: st.DrawFn) -> Case:
    """A mutated capture recording bundle lowered by `kernelsim capture` (no torch): values replaced,
    keys deleted, values wrapped in lists, then the text truncated or with bytes inserted."""
    if not _RECORDING_DOC:
        _RECORDING_DOC.append(json.loads(_RECORDING.read_text()))
    doc = copy.deepcopy(_RECORDING_DOC[0])
    paths = _paths(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(("replace", "replace", "delete", "wrap")))
        if not path or how != "replace" and not path:
            continue
        with contextlib.suppress(KeyError, IndexError, TypeError):
            doc = _set(doc, path, draw(bad_values()), how)
        paths = _paths(doc)
    text = _expand(json.dumps(doc))
    form = draw(st.sampled_from(("plain", "plain", "plain", "truncate", "garbage")))
    data = text.encode()
    if form == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif form == "garbage":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return Case("recording", ["capture", "r.json", "-o", "w.yaml"], files={"r.json": data}, outputs=["w.yaml"],
                blame=["r.json"])


_KINDS = {"yaml": yaml_cases(), "expr": expression_cases(), "trace": trace_cases(), "cli": cli_cases(),
          "profile": profile_cases(), "recording": recording_cases()}
_MIX = ("cli", "yaml", "expr", "trace", "profile", "yaml", "expr", "trace", "profile", "yaml", "expr", "trace", "cli",
        "recording")


@st.composite
def _any_case(draw: st.DrawFn) -> Case:
    return draw(_KINDS[draw(st.sampled_from(_MIX))])


def cases() -> st.SearchStrategy[Case]:
    """Every kind of case: scenario/workload YAML, expressions (a quarter of them direct evaluator
    calls) and traces about 21% each, hardware profiles and command-line/file-system cases about 14% each,
    capture recordings 7%."""
    return _any_case()
