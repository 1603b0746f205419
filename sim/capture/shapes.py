"""Shapes as expressions of the workload's parameters, from captures at several sizes.

A capture records numbers. Captured once at the base parameters and once more per varied
parameter (that parameter doubled), each number that changed is solved for a monomial
`c * p1^e1 * p2^e2 ...` (e.g. `batch * seq`, `3 * batch * seq`), or else for a line in one
parameter (`cache_len + 1`); a third capture (every varied parameter tripled) checks each
expression. A number that fits neither stays a number and is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from sim.errors import KernelsimError

# op keys that are names, flags or math counts, not sizes
_FIXED_KEYS = {"name", "kind", "reads", "writes", "phase", "region", "aten", "math", "dtype", "layout", "causal",
               "direction", "axis", "after", "stream", "library", "backend", "framework_op"}


def _fraction_text(c: Fraction) -> tuple[str, str]:
    """(multiplier prefix, divisor suffix) for c: (`3 * `, ``), (``, ` / 16`)."""
    num = f"{c.numerator} * " if c.numerator != 1 else ""
    den = f" / {c.denominator}" if c.denominator != 1 else ""
    return num, den


def monomial(v0: float, base: Mapping[str, float], doubled: Mapping[str, float]) -> str | None:
    """`v0` at `base` and `doubled[p]` with parameter p doubled: the monomial, or None."""
    exps: dict[str, int] = {}
    for p, vp in doubled.items():
        if vp == v0:
            continue
        if v0 <= 0 or vp <= 0:
            return None
        e = math.log2(vp / v0)
        if abs(e - round(e)) > 1e-9 or round(e) == 0:
            return None
        exps[p] = round(e)
    if not exps:
        return None
    c = Fraction(v0)
    for p, e in exps.items():
        c /= Fraction(base[p]).limit_denominator() ** e
    c = c.limit_denominator(1 << 20)
    factors = " * ".join(p if e == 1 else f"{p} ** {e}" for p, e in sorted(exps.items()))
    num, den = _fraction_text(c)
    return f"{num}{factors}{den}"


def line(v0: float, base: Mapping[str, float], doubled: Mapping[str, float]) -> str | None:
    """`a * p + b` when only one parameter p changes the number, with a and b whole."""
    changed = [p for p, vp in doubled.items() if vp != v0]
    if len(changed) != 1:
        return None
    p = changed[0]
    a = Fraction(doubled[p] - v0) / Fraction(base[p]).limit_denominator()
    b = Fraction(v0) - a * Fraction(base[p]).limit_denominator()
    if a.denominator != 1 or b.denominator != 1:
        return None
    head = p if a == 1 else f"{a.numerator} * {p}"
    return head if b == 0 else f"{head} {'+' if b > 0 else '-'} {abs(b.numerator)}"


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if len(path) >= 2 and path[0] == "ops" and k in _FIXED_KEYS:
                continue
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield path, obj


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def structure(body: Mapping[str, Any]) -> list[Any]:
    """What must not change between captures at different sizes: op names, kinds, tensors read."""
    return [sorted(body["tensors"])] + [(o["name"], o["kind"], o.get("reads"), o.get("writes")) for o in body["ops"]]


def parameterize(base: dict[str, Any], base_params: Mapping[str, float],
                 doubled: Mapping[str, dict[str, Any]], check: dict[str, Any] | None = None,
                 check_params: Mapping[str, float] | None = None) -> list[str]:
    """Replace, in place, the numbers of `base` (`{"tensors": ..., "ops": ...}`) that vary with
    the parameters by expressions. `doubled[p]` is the same capture with p doubled. Returns
    the key paths that stayed numbers although they vary (or whose expression `check` refutes)."""
    want = structure(base)
    for p, body in doubled.items():
        if structure(body) != want:
            raise KernelsimError(
                f"capture: parameter '{p}' changes the op graph (not only its shapes): capture it as a fixed "
                "value, not a varied parameter")
    if check is not None and structure(check) != want:
        raise KernelsimError("capture: the check capture (all varied parameters tripled) changes the op graph")
    from sim import expr

    unsolved: list[str] = []
    for path, v0 in list(_leaves(base)):
        values = {p: _get(body, path) for p, body in doubled.items()}
        if all(v == v0 for v in values.values()):
            continue
        text = monomial(v0, base_params, values) or line(v0, base_params, values)
        where = ".".join(str(k) for k in path)
        if text is not None and check is not None and check_params is not None:
            if float(expr.evaluate(text, check_params)) != float(_get(check, path)):
                text = None
        if text is None:
            unsolved.append(where)
            continue
        _set(base, path, text)
    return unsolved
