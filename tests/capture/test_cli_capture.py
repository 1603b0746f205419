"""`kernelsim capture`: lowering a saved bundle (no torch), bad input exits 2 with one error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.cli import main
from sim.workload import load_workload
from tests.capture.conftest import CAPTURE


def test_capture_from_bundle_writes_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tb.yaml"
    rc = main(["capture", str(CAPTURE / "transformer_block.bundle.json"), "-o", str(out),
               "--bucket", "batch=2,seq=16:0.5", "--bucket", "batch=1,seq=32:0.5"])
    assert rc == 0
    wl = load_workload(out)
    assert [b.params for b in wl.spec.distribution.buckets] == [{"batch": 2, "seq": 16}, {"batch": 1, "seq": 32}]
    assert set(wl.spec.parameters) == {"batch", "seq"}
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["capture", "nofactory", "-o", "X"], "bad capture source"),
    (["capture", "no_such_module_xyz:f", "-o", "X"], "cannot import module"),
    (["capture", "sim.capture.examples:nope", "-o", "X"], "no such function"),
    (["capture", "MISSING.json", "-o", "X"], "file not found"),
    (["capture", "sim.capture.examples:mlp", "--param", "tokens", "-o", "X"], "bad parameter"),
    (["capture", str(CAPTURE / "mlp.bundle.json"), "--bucket", "tokens=4", "-o", "X"], "bad bucket"),
])
def test_bad_input_exits_2_with_one_error_line(argv: list[str], message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a if a != "X" else str(tmp_path / "out.yaml") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]
    assert not (tmp_path / "out.yaml").exists()


def test_strict_refuses_uncosted_ops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    data = json.loads((CAPTURE / "mlp.bundle.json").read_text())["base"]
    for ev in data["events"]:
        if ev.get("aten") == "aten.gelu.default":
            ev["aten"] = "aten.my_custom_op.default"
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(data))
    out = tmp_path / "o.yaml"
    with pytest.warns(UserWarning):
        assert main(["capture", str(rec), "-o", str(out), "--strict"]) == 2
    assert "my_custom_op" in capsys.readouterr().err and not out.exists()
    with pytest.warns(UserWarning):
        assert main(["capture", str(rec), "-o", str(out)]) == 0
    assert "uncosted" in capsys.readouterr().out
