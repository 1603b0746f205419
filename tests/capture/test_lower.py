"""Lowering committed recordings (no torch): kernels, host work, tensor identity, uncosted ops."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.capture import from_recordings
from sim.capture.lower import lower
from sim.errors import InputError
from sim.run import load_scenario, run_scenario
from sim.workload import load_workload
from tests.capture.conftest import bundle


def lowered_workload(name: str, **kw: Any) -> dict[str, Any]:
    b = bundle(name)
    result = from_recordings(b["base"], b["doubled"], b["check_params"], check=b["check"], name=name,
                             params=b["params"], vary=b["vary"], **kw)
    return result.workload


def write_and_load(tmp_path: Path, name: str) -> Path:
    b = bundle(name)
    result = from_recordings(b["base"], b["doubled"], b["check_params"], check=b["check"], name=name,
                             params=b["params"], vary=b["vary"])
    path = tmp_path / f"{name}.yaml"
    result.write(path)
    return path


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "decode", "gpt"])
def test_bundles_lower_to_loadable_runnable_workloads(name: str, tmp_path: Path) -> None:
    path = write_and_load(tmp_path, name)
    wl = load_workload(path)  # kernelsim's own schema and checks
    assert wl.spec.ops
    scn = tmp_path / "scn.yaml"
    scn.write_text(yaml.safe_dump({"schema": "kernelsim.scenario/v1", "name": "t", "workload": str(path),
                                   "hardware": ["h200-sxm"]}))
    result, _ = run_scenario(load_scenario(scn))
    assert result["hardware"][0]["variants"][0]["weighted_time_us"] > 0
    assert "UNCOSTED" not in path.read_text()


def kernels(wl: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [o for o in wl["ops"] if o["kind"] != "host" and o["phase"] == phase]


def test_mlp_kernels_and_dataflow() -> None:
    wl = lowered_workload("mlp")
    fwd = kernels(wl, "forward")
    assert [(o["kind"], o.get("aten")) for o in fwd] == [
        ("gemm", "aten.mm.default"), ("elementwise", "aten.add.Tensor"), ("elementwise", "aten.gelu.default"),
        ("elementwise", "aten.native_dropout.default"), ("gemm", "aten.mm.default")]
    mm, add, gelu, drop, mm2 = fwd
    # the bias add broadcasts b1: PyTorch's strided elementwise kernel
    assert add["math"] == {"add": 1, "broadcast_index": 1} and add["launch"]["elems_per_thread"] == 4
    assert gelu["math"] == {"gelu": 1} and gelu["launch"]["elems_per_thread"] == 8
    # tensor identity: each op reads what the previous one wrote; dropout writes output and mask
    assert add["reads"][0] == mm["writes"][0] and gelu["reads"] == add["writes"] and drop["reads"] == gelu["writes"]
    assert len(drop["writes"]) == 2 and mm2["reads"][0] == drop["writes"][0]
    assert wl["tensors"][drop["writes"][1]]["dtype"] == "bool"
    assert mm["m"] == "tokens" and add["numel"] == "128 * tokens"
    bwd = kernels(wl, "backward")
    assert sorted(o["kind"] for o in bwd) == ["elementwise", "elementwise", "gemm", "gemm", "gemm", "gemm", "reduction"]
    bias_grad = next(o for o in bwd if o["kind"] == "reduction")
    assert bias_grad["axis"] == "rows" and bias_grad["rows"] == "tokens" and bias_grad["cols"] == 128
    assert bias_grad["writes"] == ["act.bias.grad"]
    gelu_bwd = next(o for o in bwd if o.get("aten") == "aten.gelu_backward.default")
    assert add["writes"][0] in gelu_bwd["reads"]  # the saved pre-activation, by identity


def test_mlp_host_work_counts_the_recorded_nodes_and_views() -> None:
    b = bundle("mlp")
    wl = lowered_workload("mlp")
    hosts = [o for o in wl["ops"] if o["kind"] == "host"]
    nodes = sum(1 for e in b["base"]["events"] if e["type"] == "autograd_node")
    views = sum(1 for e in b["base"]["events"] if e["type"] == "op" and e["aten"] in (
        "aten.t.default", "aten.view.default", "aten.detach.default"))
    # MmBackward x2, NativeDropoutBackward, GeluBackward, AddBackward, AccumulateGrad x4 (w1, bias, w2, x)
    assert sum(o.get("autograd_nodes", 0) for o in hosts) == nodes == 9
    assert sum(o.get("framework_ops", 0) for o in hosts) == views
    assert sum(o.get("backward_calls", 0) for o in hosts) == 1
    assert sum(o.get("module_calls", 0) for o in hosts) == 3  # model, act, act.drop
    no_mc = lowered_workload("mlp", module_calls=False)
    assert sum(o.get("module_calls", 0) for o in no_mc["ops"]) == 0


def test_transformer_names_are_module_paths_and_shapes_expressions() -> None:
    wl = lowered_workload("transformer_block")
    by_name = {o["name"]: o for o in wl["ops"]}
    qkv = by_name["qkv.addmm"]  # the measured block (sim/calibrate/gpu/models.py) is flat
    assert (qkv["m"], qkv["n"], qkv["k"]) == ("batch * seq", 192, 64)
    # bf16, head_dim 32, no mask: PyTorch picks cuDNN on sm90 (lowering.yaml sdpa)
    attn = by_name["model._scaled_dot_product_cudnn_attention"]
    assert (attn["batch"], attn["heads"], attn["seq_q"], attn["seq_kv"], attn["head_dim"], attn["causal"]) == (
        "batch", 2, "seq", "seq", 32, True)
    assert attn["backend"] == "cudnn" and attn["framework_op"] == "aten::scaled_dot_product_attention"
    # q, k, v are thirds of one qkv buffer: each read as its own part, not the whole buffer
    assert len(attn["reads"]) == 3 and all(".part" in r for r in attn["reads"])
    assert by_name["model.bwd._scaled_dot_product_cudnn_attention_backward"]["backend"] == "cudnn"
    ln = by_name["ln1.native_layer_norm"]
    assert (ln["rows"], ln["cols"], ln["launch"]["grid"]) == ("batch * seq", 64, "batch * seq")
    assert {"ln1.bwd.native_layer_norm_backward.input", "ln1.bwd.native_layer_norm_backward.weight"} <= set(by_name)
    assert "fc1.bwd.mm" in by_name and "model.gelu" in by_name
    assert wl["tensors"]["input0"]["shape"] == ["batch", "seq", 64]


def test_decode_cache_length_is_a_parameter() -> None:
    wl = lowered_workload("decode")
    attn = next(o for o in wl["ops"] if o["kind"] == "attention")
    assert (attn["seq_q"], attn["seq_kv"]) == (1, "cache_len")
    writes = [o for o in wl["ops"] if o.get("aten") == "aten.index_copy_.default"]
    assert len(writes) == 4 and all(o["kind"] == "copy" for o in writes)  # k and v, 2 layers
    assert wl["kind"] == "serving"
    assert not any(o["phase"] == "backward" for o in wl["ops"])


def test_gpt_optimizer_embedding_and_loss() -> None:
    wl = lowered_workload("gpt")
    opt = [o for o in wl["ops"] if o["phase"] == "optimizer" and o["kind"] != "host"]
    # AdamW foreach: lerp, mul, addcmul, sqrt, div, add, addcdiv (+ mul of weight decay), one launch
    # each at these sizes (all tensors < 110 and < 320 chunks)
    assert [o["aten"] for o in opt] == [
        "aten._foreach_mul_.Scalar", "aten._foreach_lerp_.Scalar", "aten._foreach_mul_.Scalar",
        "aten._foreach_addcmul_.Scalar", "aten._foreach_sqrt.default", "aten._foreach_div_.ScalarList",
        "aten._foreach_add_.Scalar", "aten._foreach_addcdiv_.ScalarList"]
    n_params = 2 + 12 + 2 + 1  # embeddings, one block, final LayerNorm, head
    assert len(opt[0]["reads"]) == n_params and opt[0]["launch"] == {"block": 512, "grid": n_params}
    assert "tok.weight.exp_avg" in opt[1]["reads"]
    names = {o["name"] for o in wl["ops"]}
    assert {"tok.bwd.embedding_dense_backward.zero", "tok.bwd.embedding_dense_backward.sort",
            "tok.bwd.embedding_dense_backward.scatter_add"} <= names
    assert "loss.nll_loss_forward" in names and "loss._log_softmax" in names


def test_foreach_chunks_split_big_tensors_over_launches() -> None:
    def ref(storage: int, n: int) -> dict[str, Any]:
        return {"storage": storage, "shape": [n], "stride": [1], "offset": 0, "extent": n, "dtype": "fp32",
                "device": "meta"}

    sizes = [320 * 65536 + 5, 10]
    refs = [ref(i, n) for i, n in enumerate(sizes)]
    rec = {"schema": "kernelsim.capture/v1", "torch": "x", "params": {},
           "storages": [{"nbytes": 4 * n, "dtype": "fp32", "device": "meta"} for n in sizes],
           "events": [{"type": "op", "aten": "aten._foreach_mul_.Scalar", "module": "", "phase": "optimizer",
                       "args": [refs, 0.5], "kwargs": {}, "arg_names": ["self", "scalar"], "mutates": ["self"],
                       "outputs": None}]}
    ops = lower(rec).ops
    assert [(o["launch"]["grid"], o["numel"]) for o in ops] == [(320, 320 * 65536), (2, 15)]
    # the first tensor is split: each launch charges only its own chunks
    assert ops[0]["reads"] == ops[0]["writes"] and len(ops[0]["reads"]) == 1
    assert len(ops[1]["reads"]) == 2


def test_unknown_aten_op_is_reported_never_dropped() -> None:
    b = copy.deepcopy(bundle("mlp")["base"])
    gelu = next(e for e in b["events"] if e.get("aten") == "aten.gelu.default")
    gelu["aten"] = "aten.my_custom_op.default"
    with pytest.warns(UserWarning, match="my_custom_op"):
        result = from_recordings(b, {}, {})
    assert result.uncosted == {"aten.my_custom_op.default": 1}
    assert "UNCOSTED" in result.yaml() and "my_custom_op" in result.yaml()
    plain = lower(bundle("mlp")["base"])
    changed = lower(b)
    host = sum(o.get("framework_ops", 0) for o in changed.ops) - sum(o.get("framework_ops", 0) for o in plain.ops)
    assert host == 1 and len(changed.ops) <= len(plain.ops)


def test_not_a_recording_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not a kernelsim capture recording"):
        lower({"schema": "something/else"})


def test_same_recording_same_yaml() -> None:
    b = bundle("transformer_block")
    one = from_recordings(b["base"], b["doubled"], b["check_params"], check=b["check"], params=b["params"]).yaml()
    two = from_recordings(b["base"], b["doubled"], b["check_params"], check=b["check"], params=b["params"]).yaml()
    assert one == two
