"""Safe arithmetic expressions over workload parameters (shapes, predicates).

Parsed with `ast` and evaluated by walking a whitelist of node types; Python's `eval`
is never used. Supports numbers, parameter names, + - * / // % **, comparisons,
`and`/`or`/`not`, conditional expressions and a few functions (min, max, ceil,
floor, log2, round_up, abs, int, pow2).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from functools import lru_cache

from sim.errors import InputError

Number = int | float | bool


def _round_up(x: float, multiple: float) -> float:
    return math.ceil(x / multiple) * multiple


def _is_pow2(x: float) -> bool:
    n = int(x)
    return n == x and n > 0 and (n & (n - 1)) == 0


FUNCTIONS: dict[str, Callable[..., Number]] = {
    "min": min,
    "max": max,
    "ceil": lambda x: math.ceil(x),
    "floor": lambda x: math.floor(x),
    "log2": math.log2,
    "sqrt": math.sqrt,
    "abs": abs,
    "int": int,
    "round_up": _round_up,
    "is_pow2": _is_pow2,
}

_BINOPS: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}
_CMPOPS: dict[type, Callable[[Number, Number], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


class ExprError(ValueError):
    """An expression that cannot be parsed or evaluated."""


@lru_cache(maxsize=4096)
def parse(source: str) -> ast.expr:
    """Parse `source` into an expression tree, rejecting anything outside the whitelist."""
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"not a valid expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ExprError("only these functions may be called: " + ", ".join(sorted(FUNCTIONS)))
            if node.keywords:
                raise ExprError("keyword arguments are not allowed")
        elif not isinstance(
            node,
            ast.Expression | ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.IfExp
            | ast.Name | ast.Constant | ast.Load | ast.operator | ast.unaryop | ast.boolop
            | ast.cmpop,
        ):
            raise ExprError(f"'{type(node).__name__}' is not allowed in an expression")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise ExprError(f"only numbers are allowed as constants, not {node.value!r}")
    return tree.body


def _eval(node: ast.expr, env: Mapping[str, Number]) -> Number:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int | float):  # parse() admits only numbers
            raise ExprError(f"only numbers are allowed as constants, not {node.value!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ExprError(f"unknown name '{node.id}' (known: {', '.join(sorted(env)) or 'none'})")
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        left, right = _eval(node.left, env), _eval(node.right, env)
        try:
            return op(left, right)
        except ZeroDivisionError:
            raise ExprError("division by zero") from None
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -val
        if isinstance(node.op, ast.UAdd):
            return +val
        if isinstance(node.op, ast.Not):
            return not val
        raise ExprError(f"operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(bool(_eval(v, env)) for v in node.values)
        return any(bool(_eval(v, env)) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op_node, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            if not _CMPOPS[type(op_node)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # guaranteed by parse()
        args = [_eval(a, env) for a in node.args]
        try:
            return FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise ExprError(f"{node.func.id}(): {exc}") from None
    raise ExprError(f"'{type(node).__name__}' is not allowed in an expression")


def evaluate(source: str | int | float, env: Mapping[str, Number]) -> Number:
    """Evaluate a number or an expression string against parameter values."""
    if isinstance(source, bool):
        return source
    if isinstance(source, int | float):
        return source
    return _eval(parse(source), env)


def check(source: str | int | float, names: set[str], *, file: str | None, path: str) -> None:
    """Raise InputError if `source` does not parse or uses a name outside `names`."""
    if isinstance(source, int | float):
        return
    try:
        tree = parse(source)
    except ExprError as exc:
        raise InputError(str(exc), file=file, path=path, value=source, expected="an arithmetic expression") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in names and node.id not in FUNCTIONS:
            raise InputError(
                f"unknown parameter '{node.id}'",
                file=file,
                path=path,
                value=source,
                expected="one of: " + ", ".join(sorted(names)),
            )


def evaluate_at(source: str | int | float, env: Mapping[str, Number], *, file: str | None, path: str) -> Number:
    """Evaluate, turning evaluation failures into InputError at `file: path`."""
    try:
        return evaluate(source, env)
    except ExprError as exc:
        raise InputError(str(exc), file=file, path=path, value=source, expected="an expression valid for these parameters") from None
