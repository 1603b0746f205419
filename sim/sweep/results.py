"""Sweep results: the tidy table (one row per point × variant × bucket), its files, and the summary."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.metrics import TERMS
from sim.outputs import write_text_atomic

FIXED_COLUMNS = (
    "point", "key", "hardware", "gpu", "variant", "bucket", "bucket_index", "weight", "time_us",
    "gain_vs_baseline", *(f"{t}_us" for t in TERMS), "dominant", "kernels", "hbm_bytes", "path",
    "variant_weighted_time_us", "variant_gain", "coverage", "fallback_rate", "micro_gain",
    "regime", "shapes", "time_lo_us", "time_hi_us", "gain_lo", "gain_hi", "variant_gain_lo", "variant_gain_hi",
)


def _lo_hi(interval: Sequence[float] | None) -> tuple[float | None, float | None]:
    return (None, None) if interval is None else (interval[0], interval[1])


def tidy_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the finished points, in grid order; parameters as `param.NAME` columns."""
    rows = []
    for rec in records:
        if rec.get("status") != "ok":
            continue
        for hw in rec["result"]["hardware"]:
            for v in hw["variants"]:
                for bi, b in enumerate(v["buckets"]):
                    row: dict[str, Any] = {
                        "point": rec["index"], "key": rec["key"], "hardware": rec["hardware"], "gpu": hw["gpu"],
                        "variant": v["name"], "bucket": b["name"], "bucket_index": bi, "weight": b["weight"],
                        "time_us": b["time_us"], "gain_vs_baseline": b["gain_vs_baseline"],
                        **{f"{t}_us": b["breakdown_us"][t] for t in TERMS},
                        "dominant": b["dominant"], "kernels": b["kernels"], "hbm_bytes": b["hbm_bytes"],
                        "path": b["path"], "variant_weighted_time_us": v["weighted_time_us"],
                        "variant_gain": v["gain_vs_baseline"], "coverage": v["coverage"],
                        "fallback_rate": v["fallback_rate"], "micro_gain": v["micro"]["gain"],
                        "regime": b.get("regime"), "shapes": b.get("shapes"),
                    }
                    row["time_lo_us"], row["time_hi_us"] = _lo_hi(b.get("time_interval_us"))
                    row["gain_lo"], row["gain_hi"] = _lo_hi(b.get("gain_interval"))
                    row["variant_gain_lo"], row["variant_gain_hi"] = _lo_hi(v.get("gain_interval"))
                    for name, val in sorted(b["params"].items()):
                        row[f"param.{name}"] = val
                    rows.append(row)
    return rows


def columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    params = sorted({k for r in rows for k in r if k.startswith("param.")})
    return list(FIXED_COLUMNS) + params


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns(rows), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    write_text_atomic(path, buf.getvalue())


def write_parquet(path: Path, rows: Sequence[dict[str, Any]]) -> bool:
    """Parquet beside the CSV when pyarrow is importable; False when it is not."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    cols = columns(rows)
    table = pa.table({c: [r.get(c) for r in rows] for c in cols})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return True


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts by status and, per profile, the best variant over the points (by weighted step gain)."""
    counts = {s: sum(1 for r in records if r.get("status") == s) for s in ("ok", "infeasible", "invalid")}
    best: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("status") != "ok":
            continue
        for hw in rec["result"]["hardware"]:
            for v in hw["variants"]:
                if v["name"] == "baseline":
                    continue
                cur = best.get(rec["hardware"])
                if cur is None or v["gain_vs_baseline"] > cur["gain"]:
                    best[rec["hardware"]] = {
                        "hardware": rec["hardware"], "variant": v["name"], "point": rec["index"],
                        "params": rec["params"], "gain": v["gain_vs_baseline"],
                        "gain_interval": v.get("gain_interval"), "coverage": v["coverage"],
                        "fallback_rate": v["fallback_rate"], "micro_gain": v["micro"]["gain"],
                    }
    not_run = [
        {"point": r["index"], "hardware": r["hardware"], "params": r["params"], "status": r["status"],
         "reason": r["reason"]}
        for r in records if r.get("status") in ("infeasible", "invalid")
    ]
    return {"counts": counts, "best": list(best.values()), "not_run": not_run}
