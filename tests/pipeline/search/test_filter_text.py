"""Metadata as people type it (``KEY=VALUE`` lines): what a page shows of a fact's metadata
reads back as the same values, types included, so that saving a form unchanged changes nothing."""

from __future__ import annotations

import pytest

from pipeline.search.filter_text import metadata_pairs, pair_lines


@pytest.mark.parametrize("metadata, shown", [
    ({"project": "apollo"}, "project=apollo"),
    ({"tier": 2, "beta": True}, "beta=true\ntier=2"),
    ({"code": "2", "flag": "true", "quoted": '"x"'}, 'code="2"\nflag="true"\nquoted="\\"x\\""'),
    ({"project": ["apollo", "zeus"]}, "project=apollo\nproject=zeus"),
    ({"note": " padded ", "city": "São Paulo"}, 'city=São Paulo\nnote=" padded "'),
    ({}, ""),
])
def test_a_facts_metadata_shown_as_lines_reads_back_as_the_same_values(metadata, shown):
    assert pair_lines(metadata) == shown
    back = metadata_pairs(shown.splitlines()) or {}
    assert back == metadata and {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in metadata.items()}
