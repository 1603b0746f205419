"""Shape expressions solved from captures at several sizes."""

from __future__ import annotations

import pytest

from sim.capture.shapes import line, monomial, parameterize
from sim.errors import KernelsimError

BASE = {"batch": 4, "seq": 1024}


def test_monomials() -> None:
    v = 3 * 4 * 1024
    assert monomial(v, BASE, {"batch": 2 * v, "seq": 2 * v}) == "3 * batch * seq"
    assert monomial(4 * 1024 / 16, BASE, {"batch": 512, "seq": 512}) == "batch * seq / 16"
    assert monomial(16 * 1024 * 1024, BASE, {"batch": 16 * 1024 * 1024, "seq": 4 * 16 * 1024 * 1024}) == "16 * seq ** 2"
    assert monomial(1024, BASE, {"batch": 1024, "seq": 1024}) is None  # constant
    assert monomial(1025, {"seq": 1024}, {"seq": 2049}) is None  # not a power law


def test_lines() -> None:
    assert line(1025, {"seq": 1024}, {"seq": 2049}) == "seq + 1"
    assert line(2 * 512 - 3, {"cache_len": 512}, {"cache_len": 2 * 1024 - 3}) == "2 * cache_len - 3"
    assert line(10, BASE, {"batch": 20, "seq": 30}) is None  # two parameters


def test_parameterize_rewrites_numbers_and_checks() -> None:
    def body(b: int, s: int) -> dict:
        return {"tensors": {"x": {"shape": [b, s, 64], "dtype": "bf16"}},
                "ops": [{"name": "a", "kind": "gemm", "m": b * s, "n": 64, "k": 64, "reads": ["x"], "writes": ["x"],
                         "math": {"add": 1}}]}

    base = body(4, 16)
    left = parameterize(base, {"batch": 4, "seq": 16}, {"batch": body(8, 16), "seq": body(4, 32)},
                        check=body(12, 48), check_params={"batch": 12, "seq": 48})
    assert left == []
    assert base["tensors"]["x"]["shape"] == ["batch", "seq", 64]
    assert base["ops"][0]["m"] == "batch * seq" and base["ops"][0]["n"] == 64


def test_parameterize_reports_what_the_check_refutes() -> None:
    def body(v: int) -> dict:
        return {"tensors": {}, "ops": [{"name": "a", "kind": "copy", "bytes": v}]}

    base = body(16)
    # 16 at seq=16 and 32 at seq=32 looks like `seq`, but 49 at seq=48 refutes it: kept as a number
    left = parameterize(base, {"seq": 16}, {"seq": body(32)}, check=body(49), check_params={"seq": 48})
    assert left == ["ops.0.bytes"] and base["ops"][0]["bytes"] == 16


def test_parameter_that_changes_the_graph_is_refused() -> None:
    one = {"tensors": {}, "ops": [{"name": "a", "kind": "copy", "bytes": 1}]}
    two = {"tensors": {}, "ops": [{"name": "a", "kind": "copy", "bytes": 1}, {"name": "b", "kind": "copy", "bytes": 1}]}
    with pytest.raises(KernelsimError, match="parameter 'layers' changes the op graph"):
        parameterize(one, {"layers": 1}, {"layers": two})
