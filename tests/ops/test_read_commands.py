import json
from datetime import datetime, timezone

import pytest

from ops.cli import main
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import text_hash
from schemas.documents import Fact
from schemas.settings import get_settings


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "memory.db"
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("MEMORY_SEARCH_TEXT_THRESHOLD", "0")
    get_settings.cache_clear()
    store = SQLiteStore(str(path))
    store.create_indexes()
    emb = HashingEmbedder(384)
    content = "Mars Festival budget is $50,000"
    store.facts.insert_fact(Fact(
        fact_id="f1", agent_id="a1", scope="agent", scope_key="agent", content=content, hash=text_hash(content),
        embedding=emb.embed([content]).vectors[0], embedding_model=emb.model,
        formed_at=datetime.now(timezone.utc),
    ))
    store.leases.bump_scope_versions("a1", ["agent"])
    store.close()
    yield path
    get_settings.cache_clear()


def test_context_json_holds_the_xml(db, capsys):
    assert main(["context", "--agent", "a1", "--session", "s1", "--user", "u1", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert "[agent] Mars Festival budget is $50,000 (0m ago)" in payload["context"]


def test_context_max_tokens_packs_within_the_budget(db, capsys):
    assert main(["context", "--agent", "a1", "--session", "s1", "--max-tokens", "14", "--json"]) == 0
    xml = json.loads(capsys.readouterr().out)["context"]
    assert '<Omitted facts="1"/>' in xml and "Mars" not in xml


def test_context_max_tokens_must_be_positive(db, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["context", "--agent", "a1", "--session", "s1", "--max-tokens", "0"])
    assert exit_.value.code == 2
    assert "--max-tokens: must be at least 1" in capsys.readouterr().err


def test_context_query_shows_the_facts_found_for_the_message_first(db, capsys):
    assert main(["context", "--agent", "a1", "--session", "s1", "--query", "festival budget", "--json"]) == 0
    xml = json.loads(capsys.readouterr().out)["context"]
    assert "<RelevantFacts>\n  - [agent] Mars Festival budget is $50,000" in xml and "<Facts>" not in xml


def test_a_blank_context_query_is_a_clear_error(db, capsys):
    assert main(["context", "--agent", "a1", "--session", "s1", "--query", "  "]) != 0
    assert "query" in capsys.readouterr().err


def test_search_json_lists_results(db, capsys):
    assert main(["search", "--agent", "a1", "--session", "s1", "--user", "u1", "-q", "festival budget", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in results] == ["f1"]


def test_search_text_output_and_debug(db, capsys):
    assert main(["search", "--agent", "a1", "--session", "s1", "-q", "budget", "-q", "festival", "--debug"]) == 0
    out = capsys.readouterr().out
    assert "[agent] Mars Festival budget is $50,000" in out and '"timings_ms"' in out


def test_bad_top_k_is_a_clear_error(db, capsys):
    assert main(["search", "--agent", "a1", "--session", "s1", "-q", "x", "--top-k", "0"]) == 2
    assert "top_k" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["stats", "status"])
def test_stats_and_status_json_cover_the_requested_scopes(db, capsys, command):
    assert main([command, "--agent", "a1", "--user", "u1", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["scopes"]) == {"agent", "user:u1"}
    if command == "stats":
        assert payload["scopes"]["agent"]["facts"] == 1


def test_stats_read_as_figures_not_python_reprs(db, capsys):
    assert main(["stats", "--agent", "a1", "--user", "u1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("memory of agent a1\n") and "facts=1" in out
    assert "{" not in out and "[" not in out and "'" not in out     # no dict, list or str repr
    assert "tokens=input " in out and "cost=" in out


def test_context_and_search_as_of_show_memory_as_it_was_valid_then(db, capsys):
    before = "2020-01-01T00:00:00Z"
    assert main(["context", "--agent", "a1", "--session", "s1", "--as-of", before, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context"] == ""
    assert main(["search", "--agent", "a1", "--session", "s1", "-q", "festival budget", "--as-of", before,
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["search", "--agent", "a1", "--session", "s1", "-q", "festival budget", "--as-of",
                 datetime.now(timezone.utc).replace(tzinfo=None).isoformat(), "--json"]) == 0  # no offset: UTC
    [hit] = json.loads(capsys.readouterr().out)
    assert (hit["id"], hit["content"], hit["valid_to"]) == ("f1", "Mars Festival budget is $50,000", None)


def test_context_and_search_as_of_age_a_replayed_fact_from_when_it_was_said(db, capsys):
    """A history replayed today: the fact is recorded now, said weeks before ``--as-of``."""
    store = SQLiteStore(str(db))
    content = "Maya Chen moved from Lisbon to Porto"
    store.facts.insert_fact(Fact(
        fact_id="f2", agent_id="a1", scope="agent", scope_key="agent", content=content, hash=text_hash(content),
        embedding=HashingEmbedder(384).embed([content]).vectors[0], embedding_model=HashingEmbedder(384).model,
        formed_at=datetime.now(timezone.utc), valid_from=datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc),
    ))
    store.leases.bump_scope_versions("a1", ["agent"])
    store.close()
    as_of = "2026-03-06T21:00:00Z"
    assert main(["context", "--agent", "a1", "--session", "s1", "--as-of", as_of, "--json"]) == 0
    assert f"[agent] {content} (4d ago)" in json.loads(capsys.readouterr().out)["context"]
    assert main(["context", "--agent", "a1", "--session", "s1", "--as-of", as_of, "--query", "Maya Porto",
                 "--json"]) == 0
    assert f"[agent] {content} (4d ago)" in json.loads(capsys.readouterr().out)["context"]
    assert main(["search", "--agent", "a1", "--session", "s1", "-q", "Maya Porto", "--as-of", as_of, "--json"]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert (hit["content"], hit["age"]) == (content, "4d ago")


def test_as_of_that_is_not_a_time_is_a_clear_error(db, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["context", "--agent", "a1", "--session", "s1", "--as-of", "last tuesday"])
    assert exit_.value.code == 2
    assert "--as-of: expected an ISO 8601 time" in capsys.readouterr().err
