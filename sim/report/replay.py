"""`kernelsim replay` for people: the result (schema kernelsim.replay/v1) as a fitted table and notes."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from sim.report.tables import Col, print_table


def render_replay(result: dict[str, Any], console: Console) -> None:
    """The replay result as a table: step time, then per family measured vs predicted."""
    def err(x: float | None, digits: int = 1) -> str:
        return "-" if x is None else f"{x * 100:+.{digits}f}%"

    rows = [{"family": name, **f} for name, f in result["families"].items()]
    rows.append({"family": "step", "kernels": result["kernels"], "measured_us": result["measured_time_us"],
                 "predicted_us": result["predicted_time_us"], "error": result["error"],
                 "unpriced": result["unpriced"]["kernels"], "digits": 2})
    print_table(console, f"{result['trace']} · {result['step']} · {result['mode']} on {result['hardware']}", [
        Col("family", lambda r: r["family"], numeric=False), Col("kernels", lambda r: str(r["kernels"])),
        Col("measured us", lambda r: f"{r['measured_us']:.1f}"), Col("predicted us", lambda r: f"{r['predicted_us']:.1f}"),
        Col("error", lambda r: err(r["error"], r.get("digits", 1))), Col("unpriced", lambda r: str(r["unpriced"]))],
        rows, sections=[len(rows) - 2])
    u = result["unpriced"]
    console.print(f"unpriced (shapes unknown, kept at measured time): {u['kernels']} kernels, "
                  f"{u['measured_us']:.1f} us" + (f" ({', '.join(f'{k} {v}' for k, v in u['families'].items())})"
                                                   if u["families"] else ""))
    if "host" in result:
        h = result["host"]
        console.print(f"host time between launches priced from the profile: {h['predicted_host_us']:.1f} us "
                      f"(the trace's: {h['trace_host_us']:.1f} us); with the trace's host times, as `kernelsim run` "
                      f"on the imported workload keeps them, the step is {h['step_with_trace_host_us']:.1f} us")
    for note in result["notes"]:
        console.print(f"note: {note}")
