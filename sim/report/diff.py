"""`kernelsim diff A.json B.json`: two run results side by side, per hardware × variant × bucket.

Two runs of one scenario (before and after a model or profile change), or one scenario on two
profiles written to two files. Rows are matched by hardware, variant and bucket name; what only
one side has is listed, never silently dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.errors import InputError

RUN_SCHEMA = "kernelsim.run/v1"


def load_run(path: Path) -> dict[str, Any]:
    """A `kernelsim run --json` document, or an InputError naming the file."""
    from sim.limits import MAX_YAML_BYTES
    from sim.schema.loader import read_input_text

    text = read_input_text(path, max_bytes=MAX_YAML_BYTES, what="run result (JSON)")  # regular file, size cap
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # not JSON, an integer over the digit limit, deep nesting
        raise InputError(f"not a JSON file: {str(exc)[:120]}", file=str(path)) from None
    if not isinstance(doc, dict) or doc.get("schema") != RUN_SCHEMA:
        schema = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError("not a kernelsim run result", file=str(path), path="schema", value=schema,
                         expected=f"{RUN_SCHEMA} (kernelsim run --json)")
    return doc


def _index(doc: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for hw in doc["hardware"]:
        for v in hw["variants"]:
            out[(hw["name"], v["name"], "weighted")] = {"time_us": v["weighted_time_us"],
                                                        "gain": v.get("gain_vs_baseline"), "weight": None}
            for b in v["buckets"]:
                out[(hw["name"], v["name"], b["name"])] = {"time_us": b["time_us"], "gain": b.get("gain_vs_baseline"),
                                                           "weight": b["weight"]}
    return out


def diff_runs(a: dict[str, Any], b: dict[str, Any], pair_profiles: bool = False) -> dict[str, Any]:
    """Rows matched by (hardware, variant, bucket); with `pair_profiles`, A's and B's single profiles
    are paired whatever their names (one scenario run on two profiles)."""
    ia, ib = _index(a), _index(b)
    paired: dict[str, str] = {}
    if pair_profiles:
        (ha,), (hb,) = {k[0] for k in ia}, {k[0] for k in ib}
        ib = {(ha, v, bucket): x for (h, v, bucket), x in ib.items() if h == hb}
        paired[ha] = hb
    rows = []
    for key in ia:
        if key in ib:
            ta, tb = ia[key]["time_us"], ib[key]["time_us"]
            rows.append({"hardware": key[0], "variant": key[1], "bucket": key[2], "weight": ia[key]["weight"],
                         "a_time_us": ta, "b_time_us": tb, "change": tb / ta - 1 if ta > 0 else None,
                         "a_gain": ia[key]["gain"], "b_gain": ib[key]["gain"]})
    return {"schema": "kernelsim.diff/v1", "a": a.get("scenario"), "b": b.get("scenario"), "rows": rows,
            "paired_profiles": paired,
            "only_a": [list(k) for k in ia if k not in ib], "only_b": [list(k) for k in ib if k not in ia]}
