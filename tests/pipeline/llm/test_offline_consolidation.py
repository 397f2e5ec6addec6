"""Offline consolidate: merged, de-duplicated, newer wins, sections kept, always within the limit."""

from __future__ import annotations

import pytest

from pipeline.llm.offline import OfflineLLM
from pipeline.llm.offline_rules.consolidation import SOURCE_NOTE, SOURCE_SECTION
from pipeline.prompts.consolidation import (
    BlobSection,
    ConsolidationAnswer,
    blob_words,
    build_consolidation_request,
    parse_blob,
    render_blob,
)
from pipeline.text import normalize


def consolidate(scope, blob, reflections, limit=300, excess=None) -> list[BlobSection]:
    request = build_consolidation_request(scope, blob, reflections, word_limit=limit, model="tier", excess_words=excess)
    parsed = OfflineLLM().complete(request).parsed
    assert isinstance(parsed, ConsolidationAnswer)
    return parsed.sections


def bullets(sections) -> list[str]:
    return [b for s in sections if s.name != SOURCE_SECTION for b in s.bullets]


@pytest.mark.parametrize(
    ("scope", "reflection", "section"),
    [
        ("user", "Alice prefers short answers", "PREFERENCES"),
        ("user", "Alice wants to learn Rust this year", "GOALS"),
        ("user", "Alice plays the cello in a quartet", "NOTES"),
        ("session", "Pinned link shared by Alice: https://example.com/deck", "PINNED"),
        ("session", "Alice requested: Can you draft the sponsor letter?", "REQUESTS"),
        ("session", "The sponsor letter draft is half done", "SESSION STATE"),
        ("agent", "We decided to move the launch online", "PROJECTS"),
        ("agent", "Volunteers in the community ask for a shared calendar", "COMMUNITY"),
        ("agent", "Answers use a warm, casual tone", "PERSONA AND STYLE"),
    ],
)
def test_a_first_consolidation_groups_reflections_into_named_sections(scope, reflection, section):
    sections = consolidate(scope, "", [reflection])
    assert [(s.name, s.bullets) for s in sections] == [(section, [reflection]), (SOURCE_SECTION, [SOURCE_NOTE])]


def test_the_blob_says_it_was_formed_by_the_offline_provider_once():
    first = consolidate("user", "", ["Alice prefers short answers"])
    again = consolidate("user", render_blob(1, first), ["Alice likes cats"])
    assert [s.name for s in again].count(SOURCE_SECTION) == 1
    assert again[-1] == BlobSection(name=SOURCE_SECTION, bullets=[SOURCE_NOTE])


def test_existing_sections_are_kept_in_order_even_when_nothing_new_goes_there():
    blob = "VERSION: 3\n[GOALS]\n- Alice is training for a marathon\n[HOBBIES]\n- Alice paints\n[EMPTY ONE]"
    names = [s.name for s in consolidate("user", blob, ["Alice prefers short answers"])]
    assert names == ["GOALS", "HOBBIES", "EMPTY ONE", "PREFERENCES", SOURCE_SECTION]


def test_duplicates_are_merged_by_normalized_text():
    blob = "VERSION: 1\n[PREFERENCES]\n- Alice prefers short answers"
    sections = consolidate("user", blob, ["alice prefers SHORT answers.", "Alice likes cats", "Alice likes cats"])
    assert bullets(sections) == ["Alice prefers short answers", "Alice likes cats"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice prefers answers in English", "Alice prefers answers in Spanish"),
        ("The launch is planned for May 5", "The launch is planned for June 9"),
        ("Alice prefers short answers", "Alice prefers long answers"),
    ],
)
def test_newer_information_replaces_the_line_about_the_same_subject(old, new):
    sections = consolidate("user", f"VERSION: 1\n[PREFERENCES]\n- {old}\n- Alice likes cats", [new])
    assert old not in bullets(sections)
    assert new in bullets(sections) and "Alice likes cats" in bullets(sections)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Maya Chen requested: Can you draft the press invitation?", "Maya Chen requested: Send the draft to maya@x.example"),
        ("Maya Chen prefers Slack for updates", "Maya Chen prefers short answers"),
        ("Pinned link shared by Maya: https://a.example/deck", "Pinned link shared by Maya: https://a.example/budget"),
    ],
)
def test_lines_that_only_share_a_lead_in_or_a_name_both_stay(older, newer):
    scope = "session" if ":" in older else "user"
    assert sorted(bullets(consolidate(scope, "", [older, newer]))) == sorted([older, newer])


def test_nothing_is_invented():
    blob = "VERSION: 2\n[PREFERENCES]\n- Alice prefers short answers"
    reflections = ["Alice likes cats", "Alice wants to learn Rust"]
    known = {normalize(t) for t in ["Alice prefers short answers", *reflections]}
    assert {normalize(b) for b in bullets(consolidate("user", blob, reflections))} <= known


@pytest.mark.parametrize(("scope", "limit"), [("session", 200), ("user", 300), ("agent", 1200), ("user", 40)])
def test_the_rendered_blob_always_fits_the_word_limit_dropping_the_oldest_first(scope, limit):
    blob = render_blob(7, [BlobSection(name="NOTES", bullets=[f"Old note {i} about the festival planning work" for i in range(60)])])
    reflections = [f"Reflection {i}: volunteers asked for shuttle number {i} to the venue" for i in range(120)]
    sections = consolidate(scope, blob, reflections, limit=limit)
    assert blob_words(10**6, sections) <= limit
    kept = bullets(sections)
    assert kept[-1] == reflections[-1]                   # the newest survives
    assert "Old note 0 about the festival planning work" not in kept
    assert [s.name for s in sections][-1] == SOURCE_SECTION


def test_a_retry_with_the_excess_stated_still_fits():
    reflections = [f"Alice mentioned hobby number {i} with some detail" for i in range(50)]
    sections = consolidate("user", "", reflections, limit=120, excess=30)
    assert blob_words(999, sections) <= 120


def test_a_limit_too_small_for_the_note_drops_lines_and_the_note_but_stays_valid():
    sections = consolidate("session", "", ["Alice requested: Can you draft the sponsor letter?"], limit=8)
    assert blob_words(5, sections) <= 8


def test_the_answer_round_trips_through_the_blob_format():
    sections = consolidate("user", "VERSION: 4\n[PREFERENCES]\n- Alice prefers tea", ["Alice likes cats"])
    assert parse_blob(render_blob(5, sections)) == (5, sections)
