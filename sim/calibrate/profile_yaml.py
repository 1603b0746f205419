"""Writing a hardware profile: a structured document (nested dicts in the order the file shows them)
dumped as YAML, never edited as text.

Sections are block style; a number with its provenance (`{value: …, source: …, measured_on: …}`) or a
table row is one flow-style line, so a profile reads (and diffs) one number per line. Key order is
the document's own (a loaded profile keeps its file order; a fitted one the schema's), and a float
that is a whole number is written as an integer. The file's leading comment lines (its header: where
the file comes from, how to regenerate it) are kept; provenance of a number lives in its fields.
"""

from __future__ import annotations

from typing import Any

import yaml


class _ProfileDumper(yaml.SafeDumper):
    """Block style for sections, one flow-style line per number (value and provenance together)."""


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    leaf = all(not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, dict) for x in v))
               for v in data.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=leaf)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flat = all(not isinstance(v, (dict, list)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)


def _represent_float(dumper: yaml.SafeDumper, data: float) -> yaml.Node:
    if data.is_integer() and abs(data) < 1e15:
        return dumper.represent_int(int(data))
    return yaml.SafeDumper.represent_float(dumper, data)


_ProfileDumper.add_representer(dict, _represent_dict)
_ProfileDumper.add_representer(list, _represent_list)
_ProfileDumper.add_representer(float, _represent_float)


def dump_profile(doc: dict[str, Any], header: str) -> str:
    """The profile file: `header`'s lines as `# ` comments, then `doc` as YAML."""
    body = yaml.dump(doc, Dumper=_ProfileDumper, sort_keys=False, allow_unicode=True, width=1 << 20)
    return "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + body


def header_of(text: str) -> str:
    """The leading comment lines of a profile file (without their `# `), as `dump_profile` takes them."""
    lines: list[str] = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines)


def load_profile_doc(text: str) -> tuple[dict[str, Any], str]:
    """A profile file as (its document, in file order; its header)."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError("a profile is a mapping at the top level")
    return doc, header_of(text)
