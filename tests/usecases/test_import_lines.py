"""How an import reads its lines (``usecases.imports``): cut where the newlines are, whatever
the pieces the bytes arrive in; a line past the bound rejected without holding it; each bad
line reported with its number, the field as the line spells it, and why."""

from __future__ import annotations

import json

import pytest

from testkit.formation import make_env
from usecases import metadata_keys
from usecases.import_lines import LineSplitter, TooLong, split_lines
from usecases.imports import Importer


@pytest.mark.parametrize("pieces, lines", [
    ([b"a\nb\n"], [b"a", b"b"]),
    ([b"a", b"\nb", b"", b"c\n", b"d"], [b"a", b"bc", b"d"]),
    ([b"\n\n"], [b"", b""]),
    ([b"x" * 5, b"y" * 5, b"\nz"], [b"x" * 5 + b"y" * 5, b"z"]),
])
def test_lines_are_cut_at_newlines_whatever_the_pieces(pieces, lines):
    assert list(split_lines(pieces, max_bytes=100)) == lines


def test_a_line_past_the_bound_is_marked_and_the_next_one_is_whole():
    splitter = LineSplitter(max_bytes=100)
    out = splitter.feed(b"y" * 80) + splitter.feed(b"y" * 80) + splitter.feed(b"y" * 80 + b"\nnext\n")
    assert isinstance(out[0], TooLong) and len(out[0]) <= 100 and out[1] == b"next"


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path)
    yield e
    e.store.close()


@pytest.mark.parametrize("line, field, why", [
    (b"\xff{}", "line", "not UTF-8"),
    (b"[1, 2]", "line", "one JSON object"),
    (b"[" * 20000 + b"]" * 20000, "line", "nests deeper"),
    (json.dumps({"kind": "note", "text": "x"}).encode(), "kind", "expected one of blob, blob_section, fact"),
    (json.dumps({"user_id": "u-1", "text": "Ana likes tea", "categories": ["ok", ""]}).encode(), "categories[1]",
     "at least 1 character"),
    (json.dumps({"user_id": "u-1", "text": "Ana likes tea", "expires_at": 1770000000}).encode(), "expires_at",
     "ISO 8601"),
    (json.dumps({"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": "f1", "scope": "user",
                 "scope_key": None, "content": "Ana likes tea", "formed_at": "2026-01-01T00:00:00Z"}).encode(),
     "scope_key", "another person's user memory"),
    (json.dumps({"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": "f1", "scope": "user",
                 "scope_key": "user:u-1", "content": "Ana likes tea", "formed_at": "2026-01-01T00:00:00Z",
                 "history": [{"content": "Ana's password is hunter2hunter2", "version": 1,
                              "changed_at": "2026-01-01T00:00:00Z"}]}).encode(),
     "history[0].content", "password"),
    (json.dumps({"user_id": "u-1", "text": "Ana likes tea", "metadata": {"plan": "pro"}}).encode(), "metadata.plan",
     "not one of the agent's filterable keys: project"),
    (json.dumps({"user_id": "u-1", "text": "Ana likes tea", "metadata": {"project": 0.5}}).encode(),
     "metadata.project", "0.5 is a fraction"),
    (json.dumps({"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": "f1", "scope": "user",
                 "scope_key": "user:u-1", "content": "Ana likes tea", "formed_at": "2026-01-01T00:00:00Z",
                 "metadata": {"project": ["apollo", 1.5]}}).encode(), "metadata.project", "[1] 1.5 is a fraction"),
    (json.dumps({"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": "f1", "scope": "user",
                 "scope_key": "user:u-1", "content": "Ana likes tea", "formed_at": "2026-01-01T00:00:00Z",
                 "metadata": {"no key": 1}}).encode(), "metadata.no key", "is not a metadata key"),
])
def test_each_bad_line_is_named_by_number_and_field_and_the_good_ones_are_kept(env, line, field, why):
    metadata_keys.set_keys(env.store.ingest, "agent-1", ["project"], now=env.clock.now())
    good = json.dumps({"user_id": "u-1", "text": "Ana likes green tea"}).encode()
    importer = Importer(env, "agent-1", by="test")
    results = importer.feed([good, line, good.replace(b"green", b"black")])
    assert [(r.line, r.outcome) for r in results] == [(1, "added"), (2, "rejected"), (3, "added")]
    assert results[1].field == field and why in results[1].why, results[1]
    assert len(env.store.facts.list_facts("agent-1", "user:u-1")) == 2


def test_a_simple_line_keeps_the_metadata_of_the_agents_filterable_keys(env):
    metadata_keys.set_keys(env.store.ingest, "agent-1", ["project", "tier"], now=env.clock.now())
    line = json.dumps({"user_id": "u-1", "text": "Ana likes green tea", "metadata": {"project": "apollo", "tier": 2}})
    [result] = Importer(env, "agent-1", by="test").feed([line.encode()])
    assert result.outcome == "added"
    assert [f.metadata for f in env.store.facts.list_facts("agent-1", "user:u-1")] == [{"project": "apollo", "tier": 2}]
