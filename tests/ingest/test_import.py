"""Importing a Kineto trace: step selection, launch↔kernel linking, families, shapes, launch
configs, host gaps, cross-stream waits, and malformed traces named by event."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.errors import InputError
from sim.ingest import import_trace, workload_yaml
from sim.ingest.build import workload_doc
from sim.ingest.families import families, kernel_family
from sim.ingest.kineto import read_step
from sim.workload import load_workload
from tests.conftest import FIXTURES
from tests.ingest.conftest import MALFORMED


def test_default_step_is_the_last(synth_gz: Path) -> None:
    ev = read_step(synth_gz)
    assert [s.name for s in ev.steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert ev.step.name == "ProfilerStep#3"


@pytest.mark.parametrize(("want", "name"), [("2", "ProfilerStep#2"), ("ProfilerStep#1", "ProfilerStep#1"),
                                            ("-1", "ProfilerStep#3")])
def test_step_by_name_or_index(synth_gz: Path, want: str, name: str) -> None:
    assert read_step(synth_gz, want).step.name == name


def test_unknown_step_lists_the_steps(synth_gz: Path) -> None:
    with pytest.raises(InputError, match=r"no such step.*ProfilerStep#1, ProfilerStep#2, ProfilerStep#3"):
        read_step(synth_gz, "9")


def test_every_kernel_is_linked_to_its_launch(synth_gz: Path) -> None:
    ev = read_step(synth_gz)
    # 1 copy + 2 layers × (gemm, gelu, dropout, layer norm, triton) + the side-stream reduction
    assert len(ev.gpu) == 12
    by_corr = {r.correlation: r for r in ev.runtime}
    for g in ev.gpu:
        assert g.correlation in by_corr and g.ts >= by_corr[g.correlation].ts


def test_imported_ops(synth_gz: Path) -> None:
    step = import_trace(synth_gz)
    kernels = [o for o in step.ops if o.family]
    assert step.family_counts() == {"copy": 1, "gemm": 2, "elementwise": 4, "reduction": 3, "triton": 2}
    gemm = next(o.doc for o in kernels if o.family == "gemm")
    assert (gemm["kind"], gemm["m"], gemm["n"], gemm["k"], gemm["dtype"]) == ("gemm", 1024, 4096, 1024, "bf16")
    # Launch configuration straight from the trace: grid 64×4×1, block 384, registers, shared memory.
    assert gemm["launch"] == {"grid": 256, "block": 384, "regs_per_thread": 168, "smem_per_block": 213000}
    triton = [o.doc for o in kernels if o.family == "triton"]
    assert all(d["unpriced"] and d["measured_us"] == 7.0 for d in triton)
    copy = next(o.doc for o in kernels if o.family == "copy")
    assert (copy["kind"], copy["direction"], copy["engine"]) == ("copy", "h2d", "copy_engine")
    side = next(o.doc for o in kernels if o.doc["stream"] == 13)
    assert side["after"] == [triton[-1]["name"]]  # the event wait on the main stream's last kernel
    gaps = [o.doc for o in step.ops if o.doc["kind"] == "host"]
    assert any(g["duration_us"] >= 30 for g in gaps)  # the Python gap outside any CPU op
    assert step.launch_latency_us == pytest.approx(5.0)


def test_yaml_loads_with_the_workload_loader(synth_gz: Path, tmp_path: Path) -> None:
    step = import_trace(synth_gz)
    out = tmp_path / "w.yaml"
    out.write_text(workload_yaml(step, synth_gz))
    wl = load_workload(out)
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    assert graph.kernel_count() == 12
    gemm = next(o for o in graph.ops if o.attrs.get("family") == "gemm")
    assert gemm.host_s is not None and gemm.attrs["measured_us"] == 40.0
    assert yaml.safe_load(out.read_text())["schema"] == "kernelsim.workload/v1"


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "gemm"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>", "gemm"),
        ("nvjet_tst_128x64_64x8_2x1_v_bz_TNT", "gemm"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "reduction"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", "reduction"),
        ("void (anonymous namespace)::softmax_warp_forward<>", "reduction"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", "attention"),
        ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"),
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "copy"),
        ("void at::native::batched_transpose_kernel<>", "layout"),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "collective"),
        ("triton_poi_fused_gelu_native_dropout_0", "triton"),
        ("triton_red_fused_native_layer_norm_1", "triton"),
        ("my_custom_kernel", "unknown"),
    ],
)
def test_families(name: str, family: str) -> None:
    assert kernel_family(name) == family and family in families()


def test_memcpy_and_memset_are_copies() -> None:
    assert kernel_family("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy") == "copy"
    assert kernel_family("Memset (Device)", "gpu_memset") == "copy"


MALFORMED_CASES = [
    ("truncated.json", r"truncated or malformed JSON in traceEvents\[3\]"),
    ("truncated.json.gz", "truncated gzip file"),
    ("missing_field.json", r"traceEvents\[3\] \('void at::native::vectorized_elementwise_kernel.*missing field 'ts'"),
    ("out_of_order.json", r"traceEvents\[3\].*events out of order.*before its launch traceEvents\[2\]"),
    ("kernel_without_launch.json", r"traceEvents\[3\].*GPU activity with no launch.*got 99"),
    ("unknown_event_type.json", r"traceEvents\[2\] \('mystery'\): unknown event type \(got 'Q'"),
    ("launch_without_correlation.json", r"traceEvents\[2\] \('cudaLaunchKernel'\): missing field 'args.correlation'"),
    ("not_json.json", "malformed JSON at character 0"),
]


@pytest.mark.parametrize(("name", "message"), MALFORMED_CASES, ids=[c[0] for c in MALFORMED_CASES])
def test_malformed_traces_name_the_problem(name: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        import_trace(MALFORMED / name)


def test_valid_minimal_fixture() -> None:
    step = import_trace(MALFORMED / "valid_minimal.json")
    assert step.measured_time_us == pytest.approx(52.0)  # 1000 → kernel end 1052
    (op,) = [o for o in step.ops if o.family]
    assert op.doc["kind"] == "elementwise" and op.doc["math"] == {"gelu": 1}


def test_trace_without_steps_is_one_span(tmp_path: Path) -> None:
    text = (MALFORMED / "valid_minimal.json").read_text().replace("ProfilerStep#1", "not a step")
    p = tmp_path / "nosteps.json"
    p.write_text(text)
    step = import_trace(p)
    assert step.events.step.name == "whole trace"
    with pytest.raises(InputError, match="no ProfilerStep# markers"):
        import_trace(p, "1")


def test_helper_kernels_of_one_cpu_op_are_not_priced_twice() -> None:
    """An SDPA backward launches its main kernel and cuDNN helpers: only the longest gets the shapes."""
    path = MALFORMED.parent / "traces" / "transformer_eager.json.gz"
    if not path.exists():
        pytest.skip("real trace fixture not captured yet")
    step = import_trace(path)
    attn = [o.doc for o in step.ops if o.family == "attention"]
    backward = [d for d in attn if d.get("direction") == "backward" or d.get("phase") == "backward"]
    assert sum(1 for d in backward if d["kind"] == "attention") == 1
    assert all(d.get("unpriced") for d in backward if d["kind"] != "attention")


def test_bias_gradient_sum_keeps_one_row() -> None:
    """`sum(dim=0, keepdim=True)` of a [2048, 16384] gradient writes [1, 16384] (column sums), not the input's shape."""
    step = import_trace(FIXTURES / "traces" / "mlp_eager.json.gz")
    doc = workload_doc(step, FIXTURES / "traces" / "mlp_eager.json.gz")
    tensors = doc["tensors"]
    sums = [d for d in doc["ops"] if d["kind"] == "reduction" and d.get("axis") == "rows"]
    assert sums, "the bias-gradient sums are column sums"
    for d in sums:
        (out,) = d["writes"]
        rows, cols = d["rows"], d["cols"]
        assert tensors[out]["shape"] == [1, cols]
        assert [tensors[r]["shape"] for r in d["reads"]] == [[rows, cols]]
    assert any((d["rows"], d["cols"]) == (2048, 16384) for d in sums)


def test_cudnn_attention_backward_keeps_is_causal() -> None:
    """aten::_scaled_dot_product_cudnn_attention_backward has is_causal 15th (grad_out, q, k, v, out,
    logsumexp, philox seed/offset, attn_bias, cum_seq_q/k, max_q, max_k, dropout_p, is_causal): read
    at max_q's place, the causal backward of a real H200 trace came out non-causal (twice the work)."""
    path = Path(__file__).resolve().parents[2] / "validation" / "h200" / "traces_heldout" / "transformer_eager_b2_s2048.json.gz"
    ops = [o.doc for o in import_trace(path).ops if o.doc.get("kind") == "attention"]
    assert [(o["direction"], o["causal"]) for o in ops] == [("forward", True), ("backward", True)]


def test_attention_backend_is_the_library_the_kernels_name() -> None:
    """The held-out H200 trace ran cuDNN's SDPA (cudnn_generated_* kernels): the imported ops say
    `backend: cudnn`, so the profile prices them by the cuDNN fit, not the flash default."""
    from sim.ingest.shapes import attention_backend

    path = Path(__file__).resolve().parents[2] / "validation" / "h200" / "traces_heldout" / "transformer_eager_b2_s2048.json.gz"
    ops = [o.doc for o in import_trace(path).ops if o.doc.get("kind") == "attention"]
    assert [o.get("backend") for o in ops] == ["cudnn", "cudnn"]
    assert attention_backend("flash_fwd_kernel<...>") == "flash"
    assert attention_backend("void at::native::elementwise_kernel", "aten::mm") is None


def test_read_steps_gives_what_read_step_gives_for_each_step() -> None:
    from sim.ingest.kineto import read_steps

    path = Path(__file__).resolve().parents[2] / "calibration" / "h200" / "host_context" / "A" / "traces" / "mlp_train_t128.json.gz"
    many = read_steps(path, ["-1", "-3", "-4"])
    for name, ev in zip(["-1", "-3"], many, strict=False):
        one = read_step(path, name)
        assert not isinstance(ev, InputError)
        assert ev.step == one.step and ev.cpu_ops == one.cpu_ops and ev.runtime == one.runtime and ev.gpu == one.gpu
    assert isinstance(many[2], InputError) and "no such step" in str(many[2])
