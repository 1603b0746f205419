"""Safe arithmetic expressions over workload parameters (shapes, predicates).

Parsed with `ast` and checked completely at parse time against a small grammar (numbers,
parameter names, + - * / // % **, comparisons ==, !=, <, <=, >, >=, `and`/`or`/`not`,
conditional expressions and a few functions with fixed arities: min, max, ceil, floor,
log2, sqrt, round_up, abs, int, is_pow2); Python's `eval` is never used. Evaluation is
bounded: the source length and nesting depth are limited, every value stays finite and
within +-2**63 (a power is checked before it is computed), and division by zero, a complex
result or a domain error is an ExprError.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from functools import lru_cache

from sim.errors import InputError
from sim.limits import MAX_EXPR_CHARS, MAX_EXPR_DEPTH, MAX_MAGNITUDE

Number = int | float | bool


class ExprError(ValueError):
    """An expression that cannot be parsed or evaluated."""


def _round_up(x: float, multiple: float) -> float:
    if multiple == 0:
        raise ExprError("round_up(): the multiple must not be 0")
    return math.ceil(x / multiple) * multiple


def _is_pow2(x: float) -> bool:
    n = int(x)
    return n == x and n > 0 and (n & (n - 1)) == 0


def _log2(x: float) -> float:
    if x <= 0:
        raise ExprError(f"log2(): needs a positive number, got {x!r}")
    return math.log2(x)


def _sqrt(x: float) -> float:
    if x < 0:
        raise ExprError(f"sqrt(): needs a non-negative number, got {x!r}")
    return math.sqrt(x)


# name -> (function, minimum arguments, maximum arguments or None for any number)
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "min": (min, 2, None),
    "max": (max, 2, None),
    "ceil": (math.ceil, 1, 1),
    "floor": (math.floor, 1, 1),
    "log2": (_log2, 1, 1),
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "int": (int, 1, 1),
    "round_up": (_round_up, 2, 2),
    "is_pow2": (_is_pow2, 1, 1),
}


def _pow(a: Number, b: Number) -> Number:
    if a == 0 and b < 0:
        raise ExprError("division by zero (0 to a negative power)")
    if a < 0 and b != int(b):
        raise ExprError(f"a negative number to a fractional power has no real value ({a!r} ** {b!r})")
    if abs(a) > 1 and b > 0 and b * math.log2(abs(a)) > 63:
        raise ExprError(f"result too large: {a!r} ** {b!r} exceeds 2**63")
    try:
        return a**b
    except OverflowError:
        raise ExprError(f"result too large: {a!r} ** {b!r}") from None


_BINOPS: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: _pow,
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_CMPOPS: dict[type, Callable[[Number, Number], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_UNARY = (ast.USub, ast.UAdd, ast.Not)
_ALLOWED = "numbers, parameter names, + - * / // % **, == != < <= > >=, and/or/not, x if c else y, " \
           "and the functions " + ", ".join(sorted(FUNCTIONS))


def _check_value(v: Number) -> Number:
    """Every computed value is finite and within +-2**63."""
    if isinstance(v, bool):
        return v
    if not isinstance(v, int | float):  # complex or anything else: not a real number
        raise ExprError(f"the result is not a real number ({type(v).__name__})")
    if isinstance(v, float) and not math.isfinite(v):
        raise ExprError("the result is not finite (overflow, inf or NaN)")
    if abs(v) > MAX_MAGNITUDE:
        raise ExprError("result too large: exceeds 2**63 in magnitude")
    return v


def _check_node(node: ast.AST) -> None:
    """One node of the grammar; anything else is refused with what is allowed."""
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed; allowed: {_ALLOWED}")
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, _UNARY):
            raise ExprError(f"operator {type(node.op).__name__} is not allowed; allowed: {_ALLOWED}")
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _CMPOPS:
                word = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(type(op), type(op).__name__)
                raise ExprError(f"comparison '{word}' is not allowed; use == != < <= > >=")
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExprError("only these functions may be called: " + ", ".join(sorted(FUNCTIONS)))
        if node.keywords:
            raise ExprError("keyword arguments are not allowed")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ExprError("*arguments are not allowed")
        _, lo, hi = FUNCTIONS[node.func.id]
        n = len(node.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}" if hi is None else f"{lo} to {hi}"
            raise ExprError(f"{node.func.id}() takes {want} argument{'s' if want != '1' else ''}, got {n}")
    elif isinstance(node, ast.Name):
        if not isinstance(node.ctx, ast.Load):
            raise ExprError(f"'{node.id}' cannot be assigned")
    elif isinstance(node, ast.Constant):
        v = node.value
        if not isinstance(v, int | float):  # True and False are allowed too
            raise ExprError(f"only numbers are allowed as constants, not {type(v).__name__}")
        _check_value(v)
    elif not isinstance(node, ast.Expression | ast.BoolOp | ast.IfExp | ast.Load | ast.operator | ast.unaryop
                        | ast.boolop | ast.cmpop):
        raise ExprError(f"'{type(node).__name__}' is not allowed in an expression; allowed: {_ALLOWED}")


@lru_cache(maxsize=4096)
def parse(source: str) -> ast.expr:
    """Parse `source` into an expression tree, checking the whole grammar, the length and the depth."""
    if len(source) > MAX_EXPR_CHARS:
        raise ExprError(f"expression too long: {len(source)} characters (limit {MAX_EXPR_CHARS})")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"not a valid expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, huge literals, nesting the parser refuses
        raise ExprError(f"not a valid expression: {type(exc).__name__}: {str(exc)[:80]}") from None
    # Iterative walk with depths, so a deep tree is refused before anything recurses over it.
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH:
            raise ExprError(f"expression nested too deeply (limit {MAX_EXPR_DEPTH} levels)")
        _check_node(node)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body


def _eval(node: ast.expr, env: Mapping[str, Number]) -> Number:
    if isinstance(node, ast.Constant):
        return node.value  # type: ignore[return-value]  # parse() admits only finite numbers
    if isinstance(node, ast.Name):
        if node.id in env:
            return _check_value(env[node.id])
        raise ExprError(f"unknown name '{node.id}' (known: {', '.join(sorted(env)) or 'none'})")
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        try:
            return _check_value(_BINOPS[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ExprError(f"division by zero ({left!r} {_SYMBOLS[type(node.op)]} {right!r})") from None
        except OverflowError:
            raise ExprError(f"result too large ({left!r} {_SYMBOLS[type(node.op)]} {right!r})") from None
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -val
        if isinstance(node.op, ast.UAdd):
            return +val
        return not val
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
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a, env) for a in node.args]
        try:
            return _check_value(FUNCTIONS[node.func.id][0](*args))
        except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
            if isinstance(exc, ExprError):
                raise
            raise ExprError(f"{node.func.id}(): {exc}") from None
    raise ExprError(f"'{type(node).__name__}' is not allowed in an expression")  # parse() admits no other node


def evaluate(source: str | int | float, env: Mapping[str, Number]) -> Number:
    """Evaluate a number or an expression string against parameter values."""
    if isinstance(source, bool):
        return source
    if isinstance(source, int | float):
        return _check_value(source)
    if not isinstance(source, str):
        raise ExprError(f"not a number or an expression: {type(source).__name__}")
    return _eval(parse(source), env)


def check(source: str | int | float, names: set[str], *, file: str | None, path: str) -> None:
    """Raise InputError if `source` does not parse or uses a name outside `names`."""
    try:
        if isinstance(source, int | float):
            _check_value(source)
            return
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
