"""sim.outputs.dumps: the fast writer gives json.dumps(indent=2, sort_keys=True)'s text, byte for byte,
and leaves everything else (and every error) to json.dumps."""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from enum import IntEnum

import pytest

from sim.outputs import OutputError, _plain_json, dumps


def _reference(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


class _Level(IntEnum):
    HIGH = 3


def _random_value(rng: random.Random, depth: int) -> object:
    pick = rng.randrange(9 if depth < 4 else 6)
    if pick == 0:
        return rng.choice(["", "plain", "é ü \u2603 \U0001f600", 'quote " back \\ slash', "tab\tnew\nline\x00"])
    if pick == 1:
        return rng.choice([0, -1, 7, 2**70, -(2**64), True, False])
    if pick == 2:
        return rng.choice([0.0, -0.0, 1e-05, 1e16, 1e22, 0.1 + 0.2, -3.5e-300, 5e-324, 1.7976931348623157e308])
    if pick == 3:
        return None
    if pick == 4:
        return rng.random() * 10 ** rng.randint(-20, 20)
    if pick == 5:
        return rng.choice(["x", "key", "Z", "a b"])
    if pick == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 7:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {rng.choice(["b", "a", "A", "é", "k1", "k10", "k2", ""]): _random_value(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def test_random_plain_data_gives_json_dumps_text() -> None:
    rng = random.Random(23)
    for _ in range(2000):
        data = _random_value(rng, 0)
        assert dumps(data) == _reference(data)


@pytest.mark.parametrize("data", [
    {1: "int key", 2: "sorted"},  # non-str keys: json.dumps converts them
    {"a": _Level.HIGH, "b": OrderedDict([("z", 1), ("y", 2)])},  # int and dict subclasses
    {"x": [1.5, {"nested": ()}], "y": {}},
])
def test_other_data_gives_json_dumps_text(data: object) -> None:
    assert dumps(data) == _reference(data)


def test_numpy_floats_as_json_writes_them() -> None:
    np = pytest.importorskip("numpy")
    data = {"v": np.float64(0.1), "w": [np.float64(1e-7)]}
    assert dumps(data) == _reference(data)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused(bad: float) -> None:
    with pytest.raises(OutputError, match="inf or NaN"):
        dumps({"result": [1.0, bad]}, "out.json")


def test_unknown_types_fall_back_to_json() -> None:
    with pytest.raises(TypeError):
        dumps({"s": {1, 2}})
    with pytest.raises(Exception, match="not JSON serializable"):
        _reference({"s": {1, 2}})


def test_plain_writer_is_used_for_plain_data() -> None:
    assert _plain_json({"b": [1, 2.5], "a": None}, 0) == json.dumps({"b": [1, 2.5], "a": None}, indent=2, sort_keys=True)
