"""The one check of ids, free text and instants that every door uses (schemas/values.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schemas.values import check_id_chars, check_instant, check_text, text_problem


@pytest.mark.parametrize(("value", "problem"), [
    ("Porto, 4000\ttab\nnewline\r", None),
    ("emoji 🎉 and ü", None),
    ("a\x00b", "contains U+0000, a NUL character, at character 1"),
    ("ab\udc00", "contains U+DC00, a lone surrogate"),
    ("\ud83c", "contains U+D83C, a lone surrogate"),
    ("x\x1b[31m and DEL \x7f are kept as written", None),
])
def test_free_text_refuses_nul_and_lone_surrogates_only(value, problem):
    found = text_problem(value)
    assert (found is None) if problem is None else (found or "").startswith(problem), found


@pytest.mark.parametrize("value", ["a\tb", "a\nb", "a\x7fb", "a\udc00b", "a\x00b"])
def test_an_id_refuses_every_control_character_and_surrogates(value):
    with pytest.raises(ValueError, match="an id is printable text"):
        check_id_chars(value)


def test_storable_text_and_printable_ids_pass_unchanged():
    assert check_text("line one\nline two") == "line one\nline two"
    assert check_id_chars("user-ü 7") == "user-ü 7"


_14 = timezone(timedelta(hours=14))


@pytest.mark.parametrize(("value", "ok"), [
    (datetime(1, 1, 1, tzinfo=_14), False),          # year 0 in UTC: overflowed before
    (datetime(1, 1, 1, tzinfo=timezone.utc), False),
    (datetime(9999, 12, 31, 23, 59, tzinfo=timezone(-timedelta(hours=14))), False),
    (datetime(1899, 12, 31, 23, 59, 59, tzinfo=timezone.utc), False),
    (datetime(3000, 1, 1, tzinfo=timezone.utc), False),
    (datetime(1900, 1, 1, tzinfo=timezone.utc), True),
    (datetime(2026, 5, 1, 12, tzinfo=_14), True),
    (datetime(2026, 5, 1, 12), True),                 # naive: read as UTC
])
def test_an_instant_lies_in_the_span_or_names_it(value, ok):
    if ok:
        assert check_instant(value).tzinfo == timezone.utc
    else:
        with pytest.raises(ValueError, match=r"from 1900-01-01T00:00:00Z up to \(not including\) 3000-01-01T00:00:00Z"):
            check_instant(value)
