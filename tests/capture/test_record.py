"""Live captures on the meta device (need torch; CPU is enough)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.capture import capture, capture_factory, examples
from sim.workload import load_workload
from tests.capture.conftest import bundle

pytestmark = pytest.mark.torch


def test_plain_module_fixed_shapes(tmp_path: Path) -> None:
    import torch

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
        x = torch.empty(16, 32)
    result = capture(model, (x,))
    wl = result.workload
    assert wl["parameters"] == {} and wl["kind"] == "training"
    names = [o["name"] for o in wl["ops"] if o["kind"] != "host"]
    assert names[:3] == ["model.0.addmm", "model.1.relu", "model.2.addmm"]
    assert result.uncosted == {}
    result.write(tmp_path / "seq.yaml")
    assert load_workload(tmp_path / "seq.yaml").spec.kind == "training"


def test_module_paths_phases_and_nodes() -> None:
    result = capture_factory(examples.gpt, {"batch": 2, "seq": 16, "layers": 2, "d": 64, "heads": 2, "ffn": 128,
                                            "vocab": 256, "max_seq": 32}, vary=[])
    events = result.recording["events"]
    ops = [e for e in events if e["type"] == "op"]
    assert {e["phase"] for e in ops} == {"forward", "backward", "optimizer"}
    modules = {e["module"] for e in ops}
    assert {"blocks.1.qkv", "blocks.0.fc2", "tok", "ln_f", "head", "loss", "optimizer"} <= modules
    # backward ops run under the module whose forward made them
    assert any(e["module"] == "blocks.1.fc1" and e["phase"] == "backward" and e["aten"] == "aten.mm.default"
               for e in ops)
    nodes = [e for e in events if e["type"] == "autograd_node"]
    assert sum(1 for n in nodes if n["node"] == "AccumulateGrad") == 2 + 2 * 12 + 2 + 1
    assert not any(e["aten"] == "aten.zeros_like.default" for e in ops if e["phase"] == "optimizer")  # steady state


def test_live_capture_matches_committed_recording() -> None:
    """The committed mlp fixture is what a capture records (same op sequence and shapes)."""
    committed = bundle("mlp")["base"]
    fresh = capture_factory(examples.mlp, committed["params"], vary=[]).recording

    def digest(rec: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(e["type"], e.get("aten", e.get("node", "")), e.get("module", "")) for e in rec["events"]]

    assert digest(fresh) == digest(committed)


def test_llama_rms_norm_is_one_fused_kernel_each_way() -> None:
    result = capture_factory(examples.measured_llama, {"batch": 1, "seq": 16, "vocab": 256}, vary=[])
    assert result.uncosted == {}
    ops = result.workload["ops"]
    fwd = [o for o in ops if o.get("aten") == "aten._fused_rms_norm.default"]
    bwd = [o for o in ops if o.get("aten") == "aten._fused_rms_norm_backward.default"]
    assert len(fwd) == 9  # two per block, the final norm
    assert len(bwd) == 2 * 9  # input gradient + weight gradient
    assert fwd[0]["name"] == "blocks.0.n1._fused_rms_norm" and fwd[0]["rows"] == 16 and fwd[0]["cols"] == 1024
    # nothing of the meta device's decomposition (pow, mean, rsqrt) is left
    assert not any(o.get("aten") in ("aten.pow.Tensor_Scalar", "aten.mean.dim", "aten.rsqrt.default") for o in ops)


MODEL_FILE = """
import torch

def build(n=4):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.lin(x)
            return y * y.sum().item() if n == 3 else y

    return Net(), (torch.empty(n, 8, requires_grad=True),)
"""


def test_cli_file_factory_and_a_model_that_fails_on_meta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sim.cli import main

    src = tmp_path / "my_model.py"
    src.write_text(MODEL_FILE)
    out = tmp_path / "w.yaml"
    rec = tmp_path / "rec.json"
    assert main(["capture", f"{src}:build", "--param", "n=4", "-o", str(out), "--save-recording", str(rec)]) == 0
    again = tmp_path / "again.yaml"
    assert main(["capture", str(rec), "-o", str(again)]) == 0  # the saved bundle lowers to the same workload
    assert again.read_text() == out.read_text()
    wl = load_workload(out)
    assert wl.spec.parameters == {"n": 4}
    assert any(o.name == "lin.addmm" for o in wl.spec.ops)
    # at n=3 the model reads a value (.item()), which the meta device cannot: one error line, exit 2
    assert main(["capture", f"{src}:build", "--param", "n=3", "-o", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "failed on the meta device" in err[0] and ".item()" in err[0]
