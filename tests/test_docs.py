"""Docs that cannot drift: generated blocks, the reference and the README walkthrough (issue 21)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from sim.cli import main
from sim.reference import (
    KEY_NOTES,
    SCHEMA_KINDS,
    json_schema,
    reference_markdown,
)

ROOT = Path(__file__).resolve().parent.parent
STALE = "stale; regenerate with: python scripts/gen_docs.py"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_reference_and_schemas_are_generated() -> None:
    assert (ROOT / "docs" / "reference.md").read_text(encoding="utf-8") == reference_markdown(), STALE
    for kind in SCHEMA_KINDS:
        committed = json.loads((ROOT / "docs" / "schema" / f"{kind}.schema.json").read_text(encoding="utf-8"))
        assert committed == json_schema(kind), f"docs/schema/{kind}.schema.json {STALE}"


def test_fast_blocks_match_a_run() -> None:
    """The main command, the walk-through and the trace predictions (the slow blocks: the slow test)."""
    gen = _gen_docs()
    fast = {name for name, g in gen.BLOCKS.items() if not g.slow}
    assert {"run-main", "walkthrough-run"} <= fast
    results = gen.refresh(fast, include_slow=False)
    assert {k.split("#")[1] for k in results} == fast
    stale = [k for k, (old, new) in results.items() if old != new]
    assert not stale, f"{stale} {STALE}"


@pytest.mark.slow
def test_every_generated_block_matches_a_run() -> None:
    stale = [k for k, (old, new) in _gen_docs().refresh().items() if old != new]
    assert not stale, f"{stale} {STALE}"


def test_every_block_in_the_docs_has_a_generator() -> None:
    gen = _gen_docs()
    for rel in gen.DOC_FILES:
        for m in gen.BLOCK.finditer((ROOT / rel).read_text(encoding="utf-8")):
            assert m["name"] in gen.BLOCKS, (rel, m["name"])


def test_walkthrough_from_the_readme_runs(tmp_path: Path) -> None:
    files = _gen_docs().walkthrough_files((ROOT / "README.md").read_text(encoding="utf-8"))
    assert set(files) == {"my_mlp.yaml", "my_first.yaml"}
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    out = tmp_path / "r.json"
    assert main(["run", str(tmp_path / "my_first.yaml"), "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    wl = yaml.safe_load(files["my_mlp.yaml"])
    assert [o["kind"] for o in wl["ops"]] == ["gemm", "elementwise", "elementwise"]
    (hw,) = result["hardware"]
    fused = next(v for v in hw["variants"] if v["name"] == "fused")
    assert len(fused["buckets"]) == 3
    base = next(v for v in hw["variants"] if v["name"] == "baseline")
    assert fused["buckets"][0]["kernels"] == base["buckets"][0]["kernels"] - 1  # two kernels became one


def test_reference_examples_parse_with_their_models() -> None:
    from sim.reference import op_examples, transform_examples
    from sim.schema.scenario import TransformSpec, transform_keys
    from sim.schema.workload import entry_union, op_kinds

    assert set(op_examples()) == set(op_kinds())
    assert set(transform_examples()) == set(transform_keys())
    entry: TypeAdapter[Any] = TypeAdapter(entry_union())
    for kind, text in op_examples().items():
        op = entry.validate_python(yaml.safe_load(text))
        assert op.kind == kind
    for key, text in transform_examples().items():
        spec = TransformSpec.model_validate(yaml.safe_load(text))
        assert spec.kind_and_args()[0] == key


def test_key_notes_name_real_keys() -> None:
    from pydantic import BaseModel

    from sim.reference import _walk, root_model
    from sim.schema.workload import OpBase

    models: dict[str, type[BaseModel]] = {}
    for kind in SCHEMA_KINDS:
        for m in _walk(root_model(kind), stop=set()):
            models[m.__name__] = m
    for m in _walk(OpBase, stop=set()):
        models[m.__name__] = m
    import sim.schema.scenario as sc
    import sim.schema.workload as wl

    for mod in (sc, wl):
        for name in dir(mod):
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, BaseModel):
                models.setdefault(name, obj)
    for model_name, key in KEY_NOTES:
        assert model_name in models, model_name
        keys = {f.alias or n for n, f in models[model_name].model_fields.items()}
        assert key in keys, (model_name, key)


def test_reference_covers_every_key_and_math_op() -> None:
    from sim.hardware import load_profile
    from sim.reference import MATH_PROFILE

    text = reference_markdown()
    for kind in SCHEMA_KINDS:
        for name in root_model_fields(kind):
            assert f"| `{name}` |" in text, (kind, name)
    for name in load_profile(MATH_PROFILE).op_costs:
        assert f"| `{name}` |" in text


def root_model_fields(kind: str) -> list[str]:
    from sim.reference import root_model

    return [f.alias or n for n, f in root_model(kind).model_fields.items()]


def test_schema_command_writes_json_schema(tmp_path: Path) -> None:
    out = tmp_path / "scenario.schema.json"
    assert main(["schema", "scenario", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc == json_schema("scenario")
    assert "variants" in doc["properties"]


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where `40.0e6` is a string; editors read YAML 1.2, where it is a number."""


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"),
    list("-+0123456789."))


def test_shipped_files_validate_against_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for kind, folder in (("workload", "workloads"), ("scenario", "scenarios"), ("hardware", "hardware_profiles")):
        for path in sorted((ROOT / folder).glob("*.yaml")):
            doc = yaml.load(path.read_text(), Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
            if kind == "hardware" and "base" in doc:
                continue  # a profile derived from a base profile holds only its changes
            jsonschema.validate(doc, json_schema(kind))


@pytest.mark.slow
def test_readme_python_api_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API"):text.index("## Commands")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    for folder in ("scenarios", "workloads"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / "traces").symlink_to(ROOT / "tests" / "fixtures" / "traces")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md (Python API)", "exec"), namespace)  # noqa: S102 - the README's own example
    assert namespace["result"].variant("compiled").buckets
    assert namespace["grid"].summary["counts"]["ok"] > 0
    assert (tmp_path / "sweep_out" / "results.csv").is_file()


def test_fast_prose_figures_match_a_run() -> None:
    """The figures in the README's prose (`<!-- fig:NAME -->`) that a quick run gives (the rest: the slow test)."""
    gen = _gen_docs()
    fast = {name for name, g in gen.PROSE.items() if not g.slow}
    assert fast, "no fast prose figure"
    results = gen.refresh(fast, include_slow=False)
    assert {k.split("@")[1] for k in results} == fast
    stale = {k: new for k, (old, new) in results.items() if old != new}
    assert not stale, f"{stale} {STALE}"


def test_every_prose_figure_has_a_generator_and_is_used() -> None:
    gen = _gen_docs()
    used = {m["name"] for rel in gen.DOC_FILES for m in gen.FIG.finditer((ROOT / rel).read_text(encoding="utf-8"))}
    assert used == set(gen.PROSE), (sorted(used - set(gen.PROSE)), sorted(set(gen.PROSE) - used))


#: A result figure (a percentage, a ratio, a time, percentage points) in the README's prose or tables
#: outside the generated blocks and `<!-- fig -->` spans.
_RESULT_FIGURE = re.compile(r"[-+−]?\d+(?:\.\d+)?(?:\s?(?:[–…]|to)\s?[-+−]?\d+(?:\.\d+)?)?\s?(?:%|×|µs|ms|pp)")
#: Figures in the README's prose that are not results of a run, each with why (a definition, a target).
NOT_RESULTS = {
    "a 90 % bootstrap interval": "the interval's definition",
    "carries a 90 % band": "the band's definition",
    "for a 1 % / 5 % step gain": "advise's two target gains (inputs)",
}


def prose_figures(text: str) -> list[str]:
    """Result figures typed by hand into Markdown (prose and tables): not in code, generated blocks or figure spans."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!-- gen:.*?<!-- /gen -->", "", text, flags=re.S)
    text = re.sub(r"<!-- fig:[\w-]+ -->[^<\n]*<!-- /fig -->", "FIGURE", text)
    text = " ".join(text.split())
    for phrase in NOT_RESULTS:
        text = text.replace(phrase, "")
    return [m.group() for m in _RESULT_FIGURE.finditer(text)]


def test_readme_prose_has_no_hand_typed_result() -> None:
    """Every result figure in the README is generated from a run (scripts/gen_docs.py) and checked."""
    found = prose_figures((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not found, f"hand-typed figures in README.md (make them <!-- fig:NAME --> spans): {found}"


def test_prose_figure_check_finds_a_typed_figure() -> None:
    assert prose_figures("The step loses 10 % and the kernel runs 1.2× faster.") == ["10 %", "1.2×"]
    assert prose_figures("It wins <!-- fig:x -->+2.0 %<!-- /fig --> end to end.") == []


#: Figures still typed by hand in the other docs' prose and tables (measured facts quoted from raw files,
#: definitions, examples, thresholds): a tripwire, the count per file may only fall as they become generated.
HAND_KEPT = {"docs/advise.md": 5, "docs/capture.md": 35, "docs/communication.md": 13,  # issue 20's contention/DDP section now generated (was 56)
             "docs/json.md": 3,
             "docs/robustness.md": 0, "docs/serving.md": 1, "docs/sweeps.md": 1, "docs/traces.md": 36,
             # an analysis note (issue 18): device measurements quoted from validation/h200/wave3/gemm_l2 and
             # the held-out sets, and the figures of a model experiment that was not landed
             "docs/gemm_small_m.md": 101,
             # an analysis note (issue 15, host13): figures of one run of scripts/host_clock_parts.py on committed data
             # (the parts' clock exponents, validate's own-speed rows with per-part speeds: not landed as a switch)
             "docs/host_clock_parts.md": 15}


def test_docs_hand_typed_figures_do_not_grow() -> None:
    gen = _gen_docs()
    generated_whole = set(gen.generated_files())
    counts = {rel: len(prose_figures((ROOT / rel).read_text(encoding="utf-8")))
              for rel in gen.DOC_FILES if rel != "README.md" and rel not in generated_whole}
    grown = {rel: (n, HAND_KEPT.get(rel, 0)) for rel, n in counts.items() if n > HAND_KEPT.get(rel, 0)}
    assert not grown, f"hand-typed figures added (now, before): {grown}; make them <!-- fig:NAME --> spans"
