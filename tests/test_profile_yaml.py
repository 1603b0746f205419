"""The profile writer (sim/calibrate/profile_yaml.py): a structured document dumped with a stable key
order, one flow-style line per number, the file's header comments kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.calibrate.profile_yaml import dump_profile, header_of, load_profile_doc

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["h200-measured", "h200-nvl2"])
def test_generated_profiles_are_their_own_document_dumped_again(name: str) -> None:
    text = (ROOT / "hardware_profiles" / f"{name}.yaml").read_text()
    doc, header = load_profile_doc(text)
    assert dump_profile(doc, header) == text


def test_numbers_are_one_line_sections_are_blocks_and_key_order_is_the_documents() -> None:
    doc = {"schema": "kernelsim.hardware/v1", "memory": {"b": {"value": 2.0, "source": "estimate"},
                                                         "a": {"value": 1.5, "spread": [1.0, 2.0]}}}
    text = dump_profile(doc, "first line\n\nthird")
    assert text == ("# first line\n#\n# third\nschema: kernelsim.hardware/v1\nmemory:\n"
                    "  b: {value: 2, source: estimate}\n  a: {value: 1.5, spread: [1, 2]}\n")
    assert header_of(text) == "first line\n\nthird"
    assert load_profile_doc(text) == (doc, "first line\n\nthird")


def test_a_document_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="mapping"):
        load_profile_doc("- a\n- b\n")
