"""The offline compile table of the harness's spilling Triton configs (calibration/h200/spill_traffic) and
its lookup (sim.calibrate.spill_traffic), issue 18."""

from __future__ import annotations

import json

from sim.calibrate.spill_traffic import TABLE, load_table, traffic_bytes_per_thread
from sim.resources import shipped


def _rows() -> list[dict]:
    return json.loads(shipped(TABLE).read_text())["records"]


def test_the_offline_compile_reproduces_every_device_record_and_its_sass_agrees_with_ptxas() -> None:
    rows = _rows()
    assert len(rows) >= 40 and all(r["matches_device"] for r in rows)
    for r in rows:
        assert [r["n_regs"], r["n_spills"]] in r["device_recorded"]
        assert r["stack_frame_bytes"] == 4 * r["n_spills"]
        # ptxas -v's spill bytes are the SASS's LDL/STL bytes; one branch (the exit): straight-line code
        assert (r["sass_stl_bytes"], r["sass_ldl_bytes"]) == (r["spill_store_bytes"], r["spill_load_bytes"])
        assert r["sass_branches"] <= 1
        if not r["n_spills"]:
            assert r["spill_store_bytes"] == r["spill_load_bytes"] == 0


def test_the_allocator_that_gave_up_moves_several_times_its_area() -> None:
    by = {(r["kernel"], r["BLOCK"], r["num_warps"]): r for r in _rows()}

    def ratio(key: tuple[str, int, int]) -> float:
        r = by[key]
        return (r["spill_store_bytes"] + r["spill_load_bytes"]) / (8 * r["n_spills"])

    # at 255 registers a spilled word is stored once and loaded about once
    assert 0.95 < ratio(("bias_gelu_dropout_fwd", 8192, 4)) < 1.05
    assert 1.05 < ratio(("bias_gelu_dropout_bwd", 8192, 4)) < 1.2
    # at 32 registers (128 and 256 elements per thread) it is reloaded: 3-4 x
    assert 2.5 < ratio(("bias_gelu_dropout_fwd", 16384, 4)) < ratio(("bias_gelu_dropout_bwd", 16384, 4))
    assert ratio(("bias_gelu_dropout_fwd", 16384, 4)) < ratio(("bias_gelu_dropout_fwd", 16384, 2)) < 4.5


def test_lookup_exact_scaled_and_unknown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    doc = {"records": [
        {"kernel": "k", "BLOCK": 16, "num_warps": 4, "n_regs": 32, "n_spills": 100, "spill_store_bytes": 500,
         "spill_load_bytes": 700, "matches_device": True},
        {"kernel": "k", "BLOCK": 32, "num_warps": 4, "n_regs": 32, "n_spills": 100, "spill_store_bytes": 1,
         "spill_load_bytes": 1, "matches_device": False},
    ]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    rec = {"kernel": "k", "BLOCK": 16, "num_warps": 4, "n_regs": 32, "n_spills": 100}
    assert traffic_bytes_per_thread(rec, str(path)) == 1200
    # the same config compiled to another local size: its traffic per word times the record's words
    assert traffic_bytes_per_thread({**rec, "n_spills": 50}, str(path)) == 600
    # other registers, a row that did not match the device, no spills: unknown
    assert traffic_bytes_per_thread({**rec, "n_regs": 40}, str(path)) is None
    assert traffic_bytes_per_thread({**rec, "BLOCK": 32}, str(path)) is None
    assert traffic_bytes_per_thread({**rec, "n_spills": 0}, str(path)) is None
    # a record that carries its own counts is read as it is
    assert traffic_bytes_per_thread({**rec, "spill_store_bytes": 3, "spill_load_bytes": 4}, str(path)) == 7
    assert set(load_table(str(path))) == {("k", 16, 4, 32, 100)}


SASS = """
        /*0000*/                   STL [R1+0x4], R2 ;
        /*0010*/                   STL.64 [R1+0x8], R4 ;
        /*0020*/              @!P0 LDG.E.128 R8, desc[UR4][R6.64] ;
        /*0030*/                   LDL R2, [R1+0x4] ;
        /*0040*/                   STL [R1], R3 ;
        /*0050*/                   LDL.64 R4, [R1+0x8] ;
        /*0060*/                   LDL R3, [R1] ;
        /*0070*/                   EXIT ;
"""


def test_a_reload_distance_counts_the_other_words_and_global_loads_touched_since_the_words_last_access() -> None:
    from sim.calibrate.sass_reuse import reload_distances

    # [R1+4] (4 bytes) after the pair at +8 (8) and a 16-byte global load: 24; the pair at +8 (8 bytes) after the
    # global load (16), +4 (4) and +0 (4): 24; [R1] (4 bytes) after the pair alone: 8
    assert reload_distances(SASS) == [(8, 4), (24, 12)]


def test_the_compile_table_gives_every_spilling_configs_reload_distances_and_they_add_up_to_its_loads() -> None:
    for r in _rows():
        if r["n_spills"]:
            assert sum(b for _, b in r["ldl_reload_distances"]) == r["spill_load_bytes"], r
