"""Terminal tables (rich) for run results, sized to the terminal without ever cutting a number.

Every table is declared as a list of `Col`s (header, how to format a row, numeric or not): a
column is added in one place. `print_table` fits a table to the console: numeric columns never
wrap and are never cut; name columns wrap (fold) first; when the numbers alone do not fit, the
table is split into column groups, each repeating the key columns (variant, bucket).

Views of `kernelsim run`:
- compact (default): per hardware profile, the weighted table and each variant's worst bucket;
- `--buckets`: also the full per-bucket tables, split into column groups to fit the width;
- `--wide`: the full per-bucket tables as single wide tables, whatever the terminal width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sim.metrics import TERMS
from sim.validate.bands import band_note, band_pct, band_us

Row = Any
_NAME_MAX_UNFOLDED = 12  # a name longer than this may fold onto more lines when the width is short


@dataclass(frozen=True)
class Col:
    """One table column: its header, the text of a row's cell, and whether it holds a number."""

    header: str
    cell: Callable[[Row], str]
    numeric: bool = True


def pct(x: float | None) -> str:
    """A gain as a signed percentage; `—` when there is none."""
    return "—" if x is None else f"{x * 100:+.1f}%"


def _cells(cols: Sequence[Col], rows: Sequence[Row]) -> list[list[str]]:
    return [[c.cell(r) for c in cols] for r in rows]


def _natural_width(header: str, cells: list[str]) -> int:
    return max([len(header), *(len(x) for x in cells)])


def _table_width(widths: Sequence[int]) -> int:
    # no outer edge and no outer padding; between two columns one space of (collapsed) padding and the rule
    return sum(widths) + 2 * (len(widths) - 1)


def _min_width(col: Col, cells: list[str]) -> int:
    """Numbers keep their full width (their header may wrap at spaces); a name folds only past 12 characters."""
    header_word = max(len(w) for w in col.header.split())
    longest = max([len(x) for x in cells] or [0])
    if col.numeric:
        return max(header_word, longest)
    return max(header_word, min(longest, _NAME_MAX_UNFOLDED))


def fit_widths(cols: Sequence[Col], cells: list[list[str]], width: int) -> list[int]:
    """Column widths for `width` characters: natural when they fit; else numeric columns at their cells'
    width (headers wrap), then the widest names narrowed one character at a time down to their minimum."""
    natural = [_natural_width(c.header, [r[i] for r in cells]) for i, c in enumerate(cols)]
    if _table_width(natural) <= width:
        return natural
    mins = [_min_width(c, [r[i] for r in cells]) for i, c in enumerate(cols)]
    widths = [m if c.numeric else n for c, m, n in zip(cols, mins, natural, strict=True)]
    excess = _table_width(widths) - width
    while excess > 0:
        shrinkable = [i for i, c in enumerate(cols) if not c.numeric and widths[i] > mins[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: (widths[i], -i))
        widths[widest] -= 1
        excess -= 1
    return widths


def column_groups(cols: Sequence[Col], cells: list[list[str]], keys: int, width: int) -> list[list[int]]:
    """Split column indexes into groups that each fit `width` at their minimum widths.

    The first `keys` columns start every group. A group holds at least one non-key column even
    when that alone is wider than `width` (then the terminal wraps the line: nothing is cut).
    """
    mins = [_min_width(c, [row[i] for row in cells]) for i, c in enumerate(cols)]
    key_idx = list(range(keys))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(keys, len(cols)):
        trial = key_idx + current + [i]
        if current and _table_width([mins[j] for j in trial]) > width:
            groups.append(key_idx + current)
            current = []
        current.append(i)
    if current or not groups:
        groups.append(key_idx + current)
    if len(groups) > 1:  # the same number of groups, more even (no lone last column) when that fits too
        values = list(range(keys, len(cols)))
        size = -(-len(values) // len(groups))
        even = [key_idx + values[i:i + size] for i in range(0, len(values), size)]
        if len(even) == len(groups) and all(_table_width([mins[j] for j in g]) <= width for g in even):
            return even
    return groups


def _rich_table(title: str, cols: Sequence[Col], cells: list[list[str]], sections: Sequence[int],
                widths: Sequence[int]) -> Table:
    t = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              collapse_padding=True)
    for c, w in zip(cols, widths, strict=True):
        header = Text(c.header, no_wrap=False)  # a header may wrap at its spaces; the numbers below never do
        t.add_column(header, justify="right" if c.numeric else "left", no_wrap=c.numeric, overflow="fold",
                     width=w)
    for n, row in enumerate(cells):
        t.add_row(*(escape(x) for x in row), end_section=n in sections)
    return t


def _print_at(console: Console, table: Table, width: int) -> None:
    """Print at least `width` characters wide (rich clamps a print's width to the console's)."""
    if width <= console.width:
        console.print(table)
        return
    saved = console.width
    console.width = width  # the terminal wraps the long lines: nothing is cut
    try:
        console.print(table, crop=False)
    finally:
        console.width = saved


def print_table(console: Console, title: str, cols: Sequence[Col], rows: Sequence[Row], keys: int = 1,
                sections: Sequence[int] = (), wide: bool = False) -> None:
    """Print rows as a table that fits the console; split into column groups when it does not.

    `sections`: row indexes after which a blank line is left. `wide`: one table at its natural
    width, whatever the console width (for files and wide terminals).
    """
    cells = _cells(cols, rows)
    if wide:
        widths = [_natural_width(c.header, [r[i] for r in cells]) for i, c in enumerate(cols)]
        _print_at(console, _rich_table(title, cols, cells, sections, widths), _table_width(widths))
        return
    groups = column_groups(cols, cells, keys, console.width)
    for g, idx in enumerate(groups):
        part = f" ({g + 1}/{len(groups)})" if len(groups) > 1 else ""
        sub_cols = [cols[i] for i in idx]
        sub_cells = [[row[i] for i in idx] for row in cells]
        widths = fit_widths(sub_cols, sub_cells, console.width)
        _print_at(console, _rich_table(title + part, sub_cols, sub_cells, sections, widths), _table_width(widths))


# -- run tables: one list of columns each -------------------------------------------------------

def _gain(v: dict[str, Any], b: dict[str, Any]) -> str:
    return "" if v["name"] == "baseline" else pct(b["gain_vs_baseline"])


#: Per variant × bucket (row: (variant, bucket, first bucket of the variant?)).
BUCKET_COLUMNS: list[Col] = [
    Col("variant", lambda r: r[0]["name"] if r[2] else "", numeric=False),
    Col("bucket", lambda r: r[1]["name"], numeric=False),
    Col("weight", lambda r: f"{r[1]['weight']:.2f}"),
    Col("time µs", lambda r: f"{r[1]['time_us']:.1f}"),
    Col("time band µs", lambda r: band_us(r[1].get("time_interval_us"))),  # 90 % band (sim.validate.bands)
    Col("gain", lambda r: _gain(r[0], r[1])),
    Col("gain band", lambda r: "" if r[0]["name"] == "baseline" else band_pct(r[1].get("gain_interval"))),
    *[Col(term, (lambda t: lambda r: f"{r[1]['breakdown_us'][t]:.1f}")(term)) for term in TERMS],
    Col("host busy", lambda r: f"{r[1]['host_share'] * 100:.0f}%" if "host_share" in r[1] else "-"),
    Col("dominant", lambda r: r[1]["dominant"], numeric=False),
    Col("kernels", lambda r: str(r[1]["kernels"])),
    Col("HBM MB", lambda r: f"{r[1]['hbm_bytes'] / 1e6:.1f}"),
    Col("path", lambda r: r[1]["path"], numeric=False),
]


def _if_variant(fmt: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
    return lambda v: "" if v["name"] == "baseline" else fmt(v)


#: Per variant, weighted over the bucket distribution.
WEIGHTED_COLUMNS: list[Col] = [
    Col("variant", lambda v: v["name"], numeric=False),
    Col("weighted µs", lambda v: f"{v['weighted_time_us']:.1f}"),
    Col("step gain", _if_variant(lambda v: pct(v["gain_vs_baseline"]))),
    Col("gain band", _if_variant(lambda v: band_pct(v.get("gain_interval")))),  # 90 % band (sim.validate.bands)
    Col("kernel gain", _if_variant(lambda v: pct(v["micro"]["gain"]))),
    Col("coverage", _if_variant(lambda v: f"{v['coverage'] * 100:.0f}%")),
    Col("fallback", _if_variant(lambda v: f"{v['fallback_rate'] * 100:.0f}%")),
]


#: Each variant's worst bucket (row: (variant, bucket, baseline bucket)).
WORST_COLUMNS: list[Col] = [
    Col("variant", lambda r: r[0]["name"], numeric=False),
    Col("bucket", lambda r: r[1]["name"], numeric=False),
    Col("weight", lambda r: f"{r[1]['weight']:.2f}"),
    Col("baseline µs", lambda r: f"{r[2]['time_us']:.1f}"),
    Col("time µs", lambda r: f"{r[1]['time_us']:.1f}"),
    Col("gain", lambda r: pct(r[1]["gain_vs_baseline"])),
    Col("gain band", lambda r: band_pct(r[1].get("gain_interval"))),
    Col("dominant", lambda r: r[1]["dominant"], numeric=False),
    Col("path", lambda r: r[1]["path"], numeric=False),
]


#: Exposed communication on the critical rank (row: (variant, bucket, first of the variant?)).
COMM_COLUMNS: list[Col] = [
    Col("variant", lambda r: r[0]["name"] if r[2] else "", numeric=False),
    Col("bucket", lambda r: r[1]["name"], numeric=False),
    Col("ranks", lambda r: str(r[1]["comm"]["ranks"])),
    Col("time µs", lambda r: f"{r[1]['time_us']:.1f}"),
    Col("comm µs", lambda r: f"{r[1]['comm']['comm_time_us']:.1f}"),
    Col("exposed µs", lambda r: f"{r[1]['comm']['exposed_comm_us']:.1f}"),
    Col("hidden µs", lambda r: f"{r[1]['comm']['hidden_comm_us']:.1f}"),
    Col("wait µs", lambda r: f"{r[1]['comm']['rendezvous_wait_us']:.1f}"),
    Col("exposed share", lambda r: f"{r[1]['comm']['exposed_comm_us'] / r[1]['time_us'] * 100:.1f}%"),
    Col("collectives", lambda r: str(len(r[1]["comm"]["collectives"]))),
    Col("algorithm/protocol", lambda r: ", ".join(sorted(
        {f"{x.get('algorithm', '—')}/{x.get('protocol', '—')}" for x in r[1]["comm"]["collectives"]})),
        numeric=False),
]


#: Per kernel of one bucket (row: a dict of sim.report.kernels.kernel_rows), the Speed-of-Light view.
KERNEL_COLUMNS: list[Col] = [
    Col("kernel", lambda k: k["kernel"], numeric=False),
    Col("kind", lambda k: k["kind"], numeric=False),
    Col("time µs", lambda k: f"{k['time_us']:.1f}"),
    Col("GB/s", lambda k: f"{k['achieved_gbps']:.0f}"),
    Col("TFLOP/s", lambda k: f"{k['achieved_tflops']:.1f}"),
    Col("HBM SOL", lambda k: f"{k['hbm_peak_share'] * 100:.0f}%"),
    Col("FLOP SOL", lambda k: f"{k['compute_peak_share'] * 100:.0f}%"),
    Col("occupancy", lambda k: "—" if k["occupancy"] is None else f"{k['occupancy'] * 100:.0f}%"),
    Col("regs", lambda k: "—" if k["regs_per_thread"] is None else str(k["regs_per_thread"])),
    Col("limiter", lambda k: k["limiter"], numeric=False),
]


def render_kernels(kernels: dict[str, Any], console: Console, wide: bool = False) -> None:
    """`run --kernels`: per hardware profile and variant, every kernel of one bucket."""
    for hw_name, variants in kernels["hardware"].items():
        console.print(f"\n[bold]{escape(hw_name)}[/bold] — kernels at {escape(kernels['bucket'])} "
                      "(time running alone; SOL: % of the profile's peak HBM bandwidth / FLOP rate)")
        for var, rows in variants.items():
            print_table(console, f"{var}", KERNEL_COLUMNS, rows, keys=1, wide=wide)


#: `kernelsim diff`: one row per hardware × variant × bucket present in both runs.
DIFF_COLUMNS: list[Col] = [
    Col("variant", lambda r: r["variant"], numeric=False),
    Col("bucket", lambda r: r["bucket"], numeric=False),
    Col("A µs", lambda r: f"{r['a_time_us']:.1f}"),
    Col("B µs", lambda r: f"{r['b_time_us']:.1f}"),
    Col("B vs A", lambda r: pct(r["change"])),
    Col("A gain", lambda r: "" if r["variant"] == "baseline" else pct(r["a_gain"])),
    Col("B gain", lambda r: "" if r["variant"] == "baseline" else pct(r["b_gain"])),
]


def render_diff(diff: dict[str, Any], a_name: str, b_name: str, console: Console) -> None:
    """Per hardware profile: A and B side by side; what only one side has, listed."""
    console.print(f"A: {escape(a_name)}\nB: {escape(b_name)}\nB vs A: B's time / A's time − 1 (negative: B faster)")
    for hw in dict.fromkeys(r["hardware"] for r in diff["rows"]):
        rows = [r for r in diff["rows"] if r["hardware"] == hw]
        sections = [i for i in range(len(rows) - 1) if rows[i]["variant"] != rows[i + 1]["variant"]]
        other = diff.get("paired_profiles", {}).get(hw)
        console.print(f"\n[bold]{escape(hw)}[/bold]" + (f" (A) vs [bold]{escape(other)}[/bold] (B)" if other else ""))
        print_table(console, "A vs B per bucket (weighted: over A's bucket distribution)", DIFF_COLUMNS, rows,
                    keys=2, sections=sections)
    for side in ("only_a", "only_b"):
        if diff[side]:
            names = ", ".join(" / ".join(k) for k in diff[side])
            console.print(f"only in {side[-1].upper()}: {escape(names)}", highlight=False)


def _bucket_rows(hw: dict[str, Any]) -> tuple[list[Row], list[int]]:
    rows: list[Row] = []
    sections: list[int] = []
    for v in hw["variants"]:
        rows.extend((v, b, i == 0) for i, b in enumerate(v["buckets"]))
        sections.append(len(rows) - 1)
    return rows, sections[:-1]


def worst_buckets(hw: dict[str, Any]) -> list[Row]:
    """Each variant's bucket with the lowest gain over the baseline, losses first."""
    base = next((v for v in hw["variants"] if v["name"] == "baseline"), None)
    if base is None:
        return []
    base_by_name = {b["name"]: b for b in base["buckets"]}
    worst: list[Row] = []
    for v in hw["variants"]:
        pairs = [(v, b, base_by_name[b["name"]]) for b in v["buckets"]
                 if v is not base and b.get("gain_vs_baseline") is not None and b["name"] in base_by_name]
        if pairs:
            worst.append(min(pairs, key=lambda p: p[1]["gain_vs_baseline"]))
    return sorted(worst, key=lambda p: p[1]["gain_vs_baseline"])


def render_run(result: dict[str, Any], console: Console, buckets: bool = False, wide: bool = False) -> None:
    """Per hardware profile: the weighted table and the worst buckets; all buckets with `buckets`/`wide`."""
    console.print(f"[bold]scenario[/bold] {escape(result['scenario'])}  "
                  f"[bold]workload[/bold] {escape(result['workload'])}")
    for hw in result["hardware"]:
        src = "measured" if hw["measured"] else "datasheet/estimates"
        console.print(f"\n[bold]{escape(hw['name'])}[/bold] ({escape(hw['gpu'])}; {src})")
        if buckets or wide:
            rows, sections = _bucket_rows(hw)
            print_table(console, "per bucket", BUCKET_COLUMNS, rows, keys=2, sections=sections, wide=wide)
        print_table(console, "weighted over the bucket distribution", WEIGHTED_COLUMNS, hw["variants"], wide=wide)
        console.print("step gain: end to end, weighted over the buckets; kernel gain: the replaced kernels vs "
                      "the new ones alone (the microbenchmark view)", style="dim")
        console.print(band_note(hw), style="dim", highlight=False)
        if not (buckets or wide):
            worst = worst_buckets(hw)
            if worst:
                n = len(hw["variants"][0]["buckets"])
                print_table(console, f"each variant's worst bucket (of {n}; all: --buckets)", WORST_COLUMNS,
                            worst, keys=2)
        comm_rows: list[Row] = []
        for v in hw["variants"]:
            with_comm = [b for b in v["buckets"] if "comm" in b]
            comm_rows.extend((v, b, i == 0) for i, b in enumerate(with_comm))
        if comm_rows:
            print_table(console, "communication (critical rank)", COMM_COLUMNS, comm_rows,
                        keys=2, wide=wide)
