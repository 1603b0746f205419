"""The profile's `library` section: the libraries' heuristics are profile data with provenance, read as
hw.library, and the cost model follows them (no copy of them left in code)."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from sim.costmodel.nccl import Links, plan_collective
from sim.hardware import list_profiles, load_profile
from sim.topology import default_topology
from tests.conftest import ROOT

US = 1e-6


@pytest.mark.parametrize("name", sorted(list_profiles()))
def test_every_shipped_profile_has_the_section_with_a_source_for_each_number(name: str) -> None:
    import yaml

    from sim.hardware import _profile_data

    lib = _profile_data(list_profiles()[name])["library"]

    def numbers(node: dict, path: str) -> list[str]:
        if "source" in node:
            assert node.get("ref") or node.get("note"), f"{path}: a library number names its source"
            return [path]
        return [p for k, v in node.items() for p in numbers(v, f"{path}.{k}")]

    # attention 3, elementwise 2, reduction 5, memcpy 3, nccl 3 + 3 latency rows and 4 more
    assert len(numbers(lib, "library")) == 23, yaml.safe_dump(lib)


def test_nccl_latencies_and_chunks_come_from_the_profile() -> None:
    hw = load_profile("h200-sxm")
    topo = default_topology(450e9)
    links = Links(intra_bps=360e9, intra_kind="nvlink", nic_bps=47e9, nccl=hw.library.nccl)
    plan = plan_collective("all_reduce", 1 << 30, 8, 1, links, topo, algorithm="ring", protocol="simple")
    assert plan.latency_s == pytest.approx(8.4 * US + 14 * 3.4 * US, rel=1e-12)
    # ring base 10 us more and NVLink hops 1 us more: 10 + 14 x 1 us later, the transfer unchanged
    nccl = hw.library.nccl
    slower = replace(nccl, base_latency_s={**nccl.base_latency_s, "ring": {**nccl.base_latency_s["ring"],
                                                                            "simple": 18.4 * US}},
                     hop_latency_s={**nccl.hop_latency_s, "nvlink": {**nccl.hop_latency_s["nvlink"], "simple": 4.4 * US}})
    plan2 = plan_collective("all_reduce", 1 << 30, 8, 1, replace(links, nccl=slower), topo, algorithm="ring",
                            protocol="simple")
    assert plan2.latency_s - plan.latency_s == pytest.approx(24 * US, rel=1e-9)
    assert plan2.transfer_s == plan.transfer_s
    # NVLS runs Simple only: the profile lists no LL latency for it
    assert nccl.base_latency_s["nvls"]["ll"] == float("inf")


def test_no_library_constant_is_left_in_the_cost_model() -> None:
    gone = {"TILE", "DECODE_KV_CHUNK", "DEFAULT_THREADS", "VECTOR_BYTES", "REDUCTION_THREADS", "MEMCPY_LAUNCH",
            "BASE_LATENCY_US", "HOP_LATENCY_US", "CHUNK_BYTES", "TREE_BANDWIDTH_FACTOR"}
    found = []
    for path in sorted((ROOT / "sim" / "costmodel").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            found += [f"{path.name}: {t.id}" for t in targets if isinstance(t, ast.Name) and t.id in gone]
    assert found == []
