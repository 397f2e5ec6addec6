"""The consolidated blob format: VERSION line, [SECTION] headers, "- " bullets; round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.prompts.consolidation import BlobSection, blob_words, parse_blob, render_blob


def test_render_writes_version_line_then_sections_and_bullets():
    sections = [BlobSection(name="PREFERENCES", bullets=["Alice prefers short answers"]),
                BlobSection(name="goals", bullets=["Alice is learning  Rust\nfast", "  "])]
    assert render_blob(4, sections) == (
        "VERSION: 4\n[PREFERENCES]\n- Alice prefers short answers\n[GOALS]\n- Alice is learning Rust fast"
    )


def test_empty_sections_keep_their_header():
    assert render_blob(1, [BlobSection(name="PINNED", bullets=[])]) == "VERSION: 1\n[PINNED]"
    assert parse_blob("VERSION: 1\n[PINNED]") == (1, [BlobSection(name="PINNED", bullets=[])])


@pytest.mark.parametrize(
    ("text", "version", "sections"),
    [
        ("", 0, []),
        ("VERSION: 7", 7, []),
        ("free text from the old system", 0, [("NOTES", ["free text from the old system"])]),
        ("VERSION: 2\n- orphan\n[A]\n* star bullet\nplain line", 2, [("NOTES", ["orphan"]), ("A", ["star bullet", "plain line"])]),
        ("VERSION: 2\n[A]\n- x\n[B]\n- y\n[A]\n- z", 2, [("A", ["x", "z"]), ("B", ["y"])]),
        ("\n\nVERSION: 3\n\n[Session State]\n-   spaced   out  \n", 3, [("SESSION STATE", ["spaced out"])]),
        ("[A]\n- VERSION: 9", 0, [("A", ["VERSION: 9"])]),
    ],
)
def test_parse_is_lenient_with_blobs_not_written_by_render(text, version, sections):
    parsed_version, parsed = parse_blob(text)
    assert parsed_version == version
    assert [(s.name, s.bullets) for s in parsed] == sections


_words = st.text(alphabet=st.characters(categories=("L", "N", "P", "Zs"), exclude_characters="[]"), min_size=1, max_size=30)
_bullet = _words.map(lambda s: " ".join(s.split())).filter(bool)
_name = st.from_regex(r"[A-Z][A-Z ]{0,18}[A-Z]", fullmatch=True).map(lambda s: " ".join(s.split()))


@given(st.integers(min_value=0, max_value=10_000),
       st.lists(st.tuples(_name, st.lists(_bullet, max_size=5)), max_size=5, unique_by=lambda t: t[0]))
def test_parse_inverts_render(version, raw_sections):
    sections = [BlobSection(name=n, bullets=b) for n, b in raw_sections]
    assert parse_blob(render_blob(version, sections)) == (version, sections)


def test_blob_words_count_the_version_line_headers_and_bullet_marks():
    sections = [BlobSection(name="SESSION STATE", bullets=["one two three"])]
    assert blob_words(1, sections) == 2 + 2 + 4
