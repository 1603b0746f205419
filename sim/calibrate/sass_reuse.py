"""Reload distances of a Triton kernel's spilled words, read from its SASS (issue 18): pure text processing,
no sim imports, so that scripts/spill_traffic.py (run in a bare triton environment) loads this file directly."""

from __future__ import annotations

import re

_SASS_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9]+)*)\s*([^;]*);")
_LOCAL_ADDR = re.compile(r"\[R1(?:\+(0x[0-9a-f]+|\d+))?\]")
_ACCESS_BYTES = {"64": 8, "128": 16, "U8": 1, "S8": 1, "U16": 2, "S16": 2}  # plain: 4


def reload_distances(sass: str) -> list[tuple[int, int]]:
    """Per local load (LDL) of one thread's straight-line SASS: how many bytes the thread touched since it last
    stored or loaded that word (other local words, each counted once, plus its global loads: the input lines
    that share L1 with the spills), and the load's bytes; merged per distance, in order of distance. Every
    resident thread runs the same code, so a reload hits L1 while distance x resident threads fit in it.
    A load of a word never stored before counts at distance 0 (none in the compiled kernels)."""
    seq: list[tuple[str, int, int]] = []  # (LDL | STL | LDG, first local byte, bytes)
    for op, mods, args in _SASS_OP.findall(sass):
        width = next((_ACCESS_BYTES[m] for m in mods.split(".")[1:] if m in _ACCESS_BYTES), 4)
        if op in ("LDL", "STL"):
            a = _LOCAL_ADDR.search(args)
            seq.append((op, int(a.group(1), 0) if a and a.group(1) else 0, width))
        elif op == "LDG":
            seq.append((op, -1, width))
    last: dict[int, int] = {}  # local word -> index of its last access
    merged: dict[int, int] = {}
    for i, (op, off, width) in enumerate(seq):
        if op == "LDG":
            continue
        words = [off + 4 * j for j in range(max(1, width // 4))]
        if op == "LDL":
            since = min((last[w] for w in words if w in last), default=i)
            touched: set[int] = set()
            global_bytes = 0
            for op2, off2, width2 in seq[since + 1:i]:
                if op2 == "LDG":
                    global_bytes += width2
                else:
                    touched.update(off2 + 4 * j for j in range(max(1, width2 // 4)))
            dist = 4 * len(touched - set(words)) + global_bytes
            merged[dist] = merged.get(dist, 0) + width
        for w in words:
            last[w] = i
    return sorted(merged.items())

