"""Framework calls and the SDPA backend (no torch): what the capture names on committed recordings."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.capture.record import select_sdpa_backend
from tests.capture.conftest import CAPTURE
from tests.capture.test_lower import lowered_workload

ROOT = Path(__file__).resolve().parents[2]


def _ref(shape: list[int], dtype: str = "bf16") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype}


@pytest.mark.parametrize(("q", "k", "dtype", "mask", "dropout", "causal", "backend"), [
    ([8, 16, 1024, 128], [8, 16, 1024, 128], "bf16", False, 0.0, True, "cudnn"),  # training block
    ([8, 16, 1, 128], [8, 16, 512, 128], "bf16", False, 0.0, False, "cudnn"),  # decode (the H200 traces)
    ([8, 16, 1024, 128], [8, 16, 1024, 128], "bf16", True, 0.0, False, "cudnn"),  # cuDNN takes a mask
    ([8, 16, 1024, 256], [8, 16, 1024, 256], "bf16", False, 0.0, True, "flash"),  # head_dim over cuDNN 9.19's 128
    ([8, 16, 1024, 256], [8, 16, 1024, 256], "bf16", True, 0.0, False, "efficient"),  # flash takes no mask
    ([8, 16, 64, 256], [8, 16, 1024, 256], "bf16", False, 0.0, True, "efficient"),  # flash: causal needs square
    ([8, 16, 1, 64], [8, 16, 1, 64], "fp16", False, 0.0, False, "flash"),  # cuDNN: seq_kv 1
    ([8, 16, 128, 60], [8, 16, 128, 60], "bf16", False, 0.0, False, "flash"),  # cuDNN: head_dim multiple of 8
    ([8, 16, 128, 64], [8, 16, 128, 64], "bf16", False, 0.1, False, "flash"),  # cuDNN: dropout in 1/16 steps
    ([8, 16, 128, 64], [8, 16, 128, 64], "fp32", False, 0.0, False, "efficient"),
    ([8, 16, 128, 62], [8, 16, 128, 62], "fp32", False, 0.0, False, "math"),  # fp32 needs head_dim % 4
])
def test_sdpa_backend_by_shape(q: list[int], k: list[int], dtype: str, mask: bool, dropout: float, causal: bool,
                               backend: str) -> None:
    assert select_sdpa_backend(_ref(q, dtype), _ref(k, dtype), _ref(k, dtype), mask=mask, dropout_p=dropout,
                               is_causal=causal) == backend


def test_sdpa_backend_table_says_what_it_describes() -> None:
    table = yaml.safe_load((ROOT / "sim" / "capture" / "lowering.yaml").read_text())["sdpa"]
    assert table["torch"] and table["gpu"] and table["order"][0] == "cudnn"
    assert set(table["order"]) == set(table["backends"])


def _by_call(ops: list[dict[str, Any]], times: int = 1) -> Counter[str]:
    """Framework calls per step: kernel ops naming one count 1, host ops their `framework_ops`."""
    out: Counter[str] = Counter()
    for op in ops:
        if op.get("kind") == "repeat":
            out.update(_by_call(op["ops"], int(op["count"]) if isinstance(op["count"], int) else 4))
        elif "framework_op" in op and op.get("phase", "forward") == "forward":
            out[op["framework_op"]] += times * (op.get("framework_ops", 1) if op["kind"] == "host" else 1)
    return out


def test_a_linear_is_one_call_its_views_inside_it() -> None:
    wl = lowered_workload("decode")
    gemms = [o for o in wl["ops"] if o["kind"] == "gemm"]
    assert gemms and all(o["framework_op"] == "aten::linear" for o in gemms)
    hosts = [o for o in wl["ops"] if o["kind"] == "host" and o.get("framework_ops")]
    # every kernel-less framework op is a named call; no t or view of a Linear is left over
    assert all("framework_op" in o for o in hosts)
    assert not {o["framework_op"] for o in hosts} & {"aten::t", "aten::linear", "aten::_unsafe_view"}


def test_captured_decode_names_the_calls_the_shipped_decode_names() -> None:
    captured = yaml.safe_load((CAPTURE / "decode.captured.yaml").read_text())
    shipped = yaml.safe_load((ROOT / "workloads" / "decode_step.yaml").read_text())
    cap, ship = _by_call(captured["ops"]), _by_call(shipped["ops"])
    assert cap == ship
    assert cap["aten::linear"] == 16 and cap["aten::slice"] == 8
