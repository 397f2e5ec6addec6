"""v1 blobs cut into whole units, screened and fitted to a word limit (``ops/v1_blobs.py``)."""

from __future__ import annotations

import pytest

from ops.v1_blobs import Section, fit, read_sections, render, screen, units_of, within_limit


@pytest.mark.parametrize(("line", "units"), [
    ("Alice prefers short answers. She pays monthly!", ["Alice prefers short answers.", "She pays monthly!"]),
    ("- Prefers Spanish. Short answers.", ["- Prefers Spanish. Short answers."]),   # a bullet is whole
    ("3. Third point. Still it.", ["3. Third point. Still it."]),
    ("Version 2.5 ships on Monday", ["Version 2.5 ships on Monday"]),              # no space after the dot
    ("   ", []),
])
def test_a_bullet_is_one_unit_and_a_paragraph_one_per_sentence(line, units):
    assert units_of(line) == units


def test_a_blob_that_fits_renders_as_written():
    text = "[PREFERENCES]\n- Spanish\n- Short answers\n\n[WORK]\nRuns the design reviews."
    sections = read_sections(text)
    assert fit(sections, 300) == []
    assert render(sections) == text


def test_fit_drops_the_last_unit_of_the_largest_section_first_and_keeps_every_header():
    sections = [Section("[A]", [["a1 a1 a1.", "a2 a2 a2."], ["a3 a3 a3."]]), Section("[B]", [["b1 b1 b1."]])]
    # [A] holds 10 words, [B] 4: 14 against 8, so A loses its last two units, in their order
    assert fit(sections, 8) == [(0, "a2 a2 a2."), (0, "a3 a3 a3.")]
    assert render(sections) == "[A]\na1 a1 a1.\n\n[B]\nb1 b1 b1."


def test_fit_counts_the_version_line():
    sections = [Section("[A]", [["one two."]])]
    assert fit(sections, 5, version=1) == []   # "VERSION: 1", "[A]" and 2 words: 5
    sections = [Section("[A]", [["one two three."]])]
    assert fit(sections, 5, version=1) == [(0, "one two three.")]
    assert render(sections, version=1) == "VERSION: 1\n\n[A]"


def test_screen_drops_refused_units_and_lines_left_empty():
    sections = read_sections("[A]\nKeep this. Drop this.\nDrop this.")
    screen(sections, lambda unit: not unit.startswith("Drop"))
    assert render(sections) == "[A]\nKeep this."


@pytest.mark.parametrize(("units", "limit", "items", "refused"), [
    (["One two three. Four five. Six."], 5, ["One two three. Four five.", "Six."], []),
    (["- a bullet of five words. Then two."], 5, ["a bullet of five words.", "Then two."], []),
    (["Short one. " + "x " * 7 + "end."], 5, ["Short one."], ["x x x x x x x end."]),
])
def test_an_item_is_packed_in_sentences_within_its_limit_and_a_longer_sentence_refused(units, limit, items,
                                                                                         refused):
    assert within_limit(units, limit) == (items, refused)
