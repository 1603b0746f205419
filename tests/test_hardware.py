"""Hardware profiles: every shipped profile loads, is plausible, carries provenance; occupancy rules."""

from __future__ import annotations

import itertools

import pytest
import yaml

from sim.errors import InfeasibleError
from sim.hardware import Hardware, list_profiles, load_profile, occupancy
from tests.conftest import ROOT

SHIPPED = sorted((ROOT / "hardware_profiles").glob("*.yaml"))


def test_shipped_profiles_exist() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s"} <= names
    assert set(list_profiles()) >= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_profile_plausible(path) -> None:  # type: ignore[no-untyped-def]
    hw = load_profile(str(path))
    assert 10 <= hw.sm_count <= 400
    assert 0.5e9 <= hw.clock_hz <= 3.5e9
    assert 100e9 <= hw.hbm_sustained_bps <= hw.hbm_peak_bps <= 20e12
    assert 50e-9 <= hw.mem_latency_s <= 3e-6
    assert 10e12 <= hw.tensor_flops["bf16"] <= 5e15
    assert hw.max_warps_per_sm * hw.warp_size == hw.max_threads_per_sm
    assert 0 < hw.gemm_max_efficiency <= 1
    assert 0 < hw.kernel_fixed_s < 20e-6
    assert hw.eager_op_s > 0 and hw.launch_queue_depth >= 1


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_number_has_provenance(path) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(path.read_text())

    def walk(node, where):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            if "value" in node or "fp32" in node or "sfu" in node or "int" in node or "source" in node:
                assert node.get("source") in {"datasheet", "measured", "estimate", "published"}, where
                if node["source"] == "measured":
                    assert node.get("measured_on") and node.get("date"), where
                return
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            raise AssertionError(f"bare number without provenance at {where}")

    # A system profile (`base: GPU-profile`) holds only what it adds or overrides.
    for key in ("sm", "memory", "compute", "gemm", "efficiency", "kernel", "host", "links", "topology"):
        if key in doc or "base" not in doc and key != "topology":
            walk(doc[key], key)


def test_no_copy_pasted_numbers_across_gpus() -> None:
    """Distinct GPUs must differ in the numbers that define them (a copy-paste guard)."""
    hws = [load_profile(str(p)) for p in SHIPPED if p.stem in {"h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s"}]
    for a, b in itertools.combinations(hws, 2):
        assert (a.hbm_peak_bps, a.hbm_capacity) != (b.hbm_peak_bps, b.hbm_capacity), (a.name, b.name)


def test_occupancy_known_cases(h200: Hardware) -> None:
    # 256 threads × 32 regs: 8 warps/block; registers allow 65536/(32*32)=64 warps → 8 blocks; warps limit 8.
    occ = occupancy(h200, 256, 32, 0, grid=10_000)
    assert (occ.blocks_per_sm, occ.warps_per_sm) == (8, 64)
    # 128 regs/thread: 4096 regs per warp → 16 warps/SM → 2 blocks of 8 warps.
    occ = occupancy(h200, 256, 128, 0, grid=10_000)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == (2, 16, "registers")
    # Allocation granularity: 33 regs round up to 40 per thread (1280 per warp, 256-register units).
    occ = occupancy(h200, 128, 33, 0, grid=10_000)
    assert occ.blocks_per_sm == (65536 // 1280) // 4
    # Shared memory: 100 KB per block (+1 KB reserved) → 2 blocks per 228 KB SM.
    occ = occupancy(h200, 128, 32, 100 * 1024, grid=10_000)
    assert (occ.blocks_per_sm, occ.limiter) == (2, "shared_memory")
    # Small blocks hit the 32-blocks-per-SM limit.
    occ = occupancy(h200, 32, 16, 0, grid=10_000)
    assert (occ.blocks_per_sm, occ.limiter) == (32, "blocks")
    # Waves and tail: 132 SMs × 8 blocks = 1056 per wave.
    occ = occupancy(h200, 256, 32, 0, grid=1057)
    assert occ.waves == 2


def test_occupancy_spills_and_infeasible(h200: Hardware) -> None:
    occ = occupancy(h200, 128, 300, 0, grid=1)
    assert occ.regs_per_thread == 255 and occ.spilled_regs_per_thread == 45
    with pytest.raises(InfeasibleError, match="2048 threads"):
        occupancy(h200, 2048, 32, 0, grid=1)
    with pytest.raises(InfeasibleError, match="shared memory"):
        occupancy(h200, 128, 32, 300 * 1024, grid=1)
    with pytest.raises(InfeasibleError, match="fits on no SM"):
        occupancy(h200, 1024, 255, 0, grid=1)


def _schema_field(path: str) -> object:
    """The annotation the profile file's model gives `path` (dots between sections), None if no such key."""
    from typing import get_args

    from pydantic import BaseModel

    from sim.schema.hardware import HardwareProfileFile

    ann: object = HardwareProfileFile
    for part in path.split("."):
        models = [a for a in (ann, *get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not models or part not in models[0].model_fields:
            return None
        ann = models[0].model_fields[part].annotation
    return ann


def test_every_runtime_field_names_a_profile_key_and_converts_by_its_unit() -> None:
    import dataclasses

    from sim.hardware import UNIT_SCALE

    read = [f for f in dataclasses.fields(Hardware) if "profile" in f.metadata]
    assert len(read) > 80  # the numbers are read by declaration, not by hand
    for f in read:
        path = f.metadata["profile"]
        assert _schema_field(path) is not None, f"Hardware.{f.name}: the profile has no key {path}"
        words = path.replace(".", "_").split("_")
        units = [w for w in words if w in UNIT_SCALE]
        expected = UNIT_SCALE[units[-1]] if units else 1.0
        assert f.metadata["scale"] == expected, f"Hardware.{f.name} ({path}): scale {f.metadata['scale']}"
        if expected != 1.0:  # an SI field's name says its SI unit, not the file's
            assert f.name.endswith(("_s", "_hz", "_bps", "_flops")), f.name


def test_a_runtime_field_is_the_file_value_in_si_units() -> None:
    hw = load_profile("h200-measured")
    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    assert hw.clock_hz == doc["sm"]["clock_mhz"]["value"] * 1e6
    assert hw.kernel_fixed_s == doc["kernel"]["fixed_us"]["value"] * 1e-6
    assert hw.hbm_sustained_bps == doc["memory"]["hbm_sustained_gbps"]["value"] * 1e9
    assert hw.sm_count == int(doc["sm"]["count"]["value"]) and isinstance(hw.sm_count, int)
    by_kind = doc["host"]["eager_op_us_by_kind"]
    assert by_kind and hw.eager_op_by_kind_s == {k: v["value"] * 1e-6 for k, v in by_kind.items()}
    assert hw.ddp_forward_s is None if "ddp" not in doc["host"] else hw.ddp_forward_s == \
        doc["host"]["ddp"]["forward_us"]["value"] * 1e-6


def test_the_spill_l1_partial_switch_is_read_from_the_memory_section(tmp_path) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    assert doc["memory"]["spill_l1_partial"] is False and load_profile("h200-measured").spill_l1_partial is False
    doc["memory"]["spill_l1_partial"] = True
    path = tmp_path / "h200-spill-partial.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_profile(str(path)).spill_l1_partial is True


@pytest.mark.parametrize(("profile", "section", "drop"), [
    *[("h200-measured", "layer_norm_kernel", k) for k in ("gb_block_x", "bwd_stream_gbps", "vec_elems", "block_ns",
                                                          "rms_gb_stream_gbps", "fb_forward_regs")],
    *[("h200-sxm", "softmax_kernel", k) for k in ("warp_chain_ns_warm", "warp_chain_fp32_ratio", "warm_l2_share",
                                                  "warp_max_bytes")]])
def test_a_kernel_law_with_a_missing_key_is_an_input_error(tmp_path, profile: str, section: str,  # type: ignore[no-untyped-def]
                                                            drop: str) -> None:
    # a profile that keeps a law's trigger key (layer_norm_kernel: iter_ns, bwd_iter_ns, gb_iter_ns, their rms_
    # twins, fb_moments_iter_ns; softmax_kernel: warp_slot_ns) without a key the law reads is refused when it loads,
    # naming both, instead of a KeyError when an op is priced
    from sim.errors import InputError

    doc = yaml.safe_load((ROOT / "hardware_profiles" / f"{profile}.yaml").read_text())
    del doc[section][drop]
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=f"{section}.*lacks {drop}"):
        load_profile(str(path))


@pytest.mark.parametrize("n", [1e-300, 0.1, 0.49])
def test_a_knee_exponent_out_of_range_is_an_input_error(tmp_path, n: float) -> None:  # type: ignore[no-untyped-def]
    # (X^-n + B^-n)^(-1/n) tends to 0 with n: a tiny exponent left no streaming bandwidth and a division by zero
    # deep in the memory model (found by the fuzz campaign); it is refused when the profile loads, naming the key
    from sim.errors import InputError

    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-sxm.yaml").read_text())
    doc["memory"]["bandwidth_knee_exponent"]["value"] = n
    path = tmp_path / "knee.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match="memory.bandwidth_knee_exponent .* is below 0.5"):
        load_profile(str(path))
