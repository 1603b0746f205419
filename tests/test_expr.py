"""The safe expression evaluator: arithmetic works, anything else is refused."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.expr import ExprError, evaluate


def test_arithmetic_and_functions() -> None:
    env = {"tokens": 1000, "hidden": 4096}
    assert evaluate("tokens * hidden", env) == 4096000
    assert evaluate("round_up(tokens, 128)", env) == 1024
    assert evaluate("tokens % 128 == 0", env) is False
    assert evaluate("tokens >= 512 and hidden % 8 == 0", env) is True
    assert evaluate("max(1, tokens // 3)", env) == 333
    assert evaluate("is_pow2(hidden)", env) is True
    assert evaluate(7, env) == 7


@pytest.mark.parametrize(
    "source",
    ["__import__('os')", "tokens.__class__", "[1, 2]", "lambda: 1", "open('x')", "'abc'", "tokens if"],
)
def test_refuses_non_arithmetic(source: str) -> None:
    with pytest.raises(ExprError):
        evaluate(source, {"tokens": 1})


def test_unknown_name_and_division_by_zero() -> None:
    with pytest.raises(ExprError, match="unknown name 'batch'"):
        evaluate("batch * 2", {"tokens": 1})
    with pytest.raises(ExprError, match="division by zero"):
        evaluate("tokens / 0", {"tokens": 1})


@given(st.integers(-10**6, 10**6), st.integers(1, 10**6))
def test_matches_python_integer_arithmetic(a: int, b: int) -> None:
    env = {"a": a, "b": b}
    assert evaluate("a * b + a // b - a % b", env) == a * b + a // b - a % b
