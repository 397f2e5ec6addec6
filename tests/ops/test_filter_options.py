"""``memoryctl search`` and ``memoryctl context`` narrowed with ``--category`` and ``--meta``
(design §13 "Categories and metadata"): values read as JSON when they are JSON scalars, the
same key twice as any of its values, and a bad filter one line naming the option, exit 2."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ops.cli import main
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import text_hash
from schemas.documents import AgentSettings, Fact
from schemas.settings import get_settings

FACTS = {  # id: (text, categories, metadata)
    "apollo": ("The Apollo venue budget is 50,000 euros", ["finance"], {"project": "apollo", "tier": 2, "code": "7"}),
    "zeus": ("The Zeus venue budget is 20,000 euros", ["finance", "travel"], {"project": "zeus", "tier": 1, "code": "2"}),
    "hera": ("The Hera venue budget is 10,000 euros", ["travel"], {"project": "hera", "tier": 2}),
}
SEARCH = ["search", "--agent", "a1", "--session", "s1", "--user", "u1", "-q", "venue budget", "--json"]
CONTEXT = ["context", "--agent", "a1", "--session", "s1", "--user", "u1"]


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "memory.db"
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    get_settings.cache_clear()
    store = SQLiteStore(str(path))
    store.create_indexes()
    store.ingest.put_agent_settings(AgentSettings(agent_id="a1", metadata_keys=["project", "tier", "code"]))
    emb = HashingEmbedder(384)
    for fact_id, (text, categories, metadata) in FACTS.items():
        store.facts.insert_fact(Fact(
            fact_id=fact_id, agent_id="a1", scope="agent", scope_key="agent", content=text, hash=text_hash(text),
            embedding=emb.embed([text]).vectors[0], embedding_model=emb.model, formed_at=datetime.now(timezone.utc),
            categories=categories, metadata=metadata))
    store.leases.bump_scope_versions("a1", ["agent"])
    store.close()
    yield path
    get_settings.cache_clear()


def _found(capsys, *options: str) -> set[str]:
    assert main([*SEARCH, *options]) == 0
    return {hit["id"] for hit in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize(("options", "found"), [
    ((), {"apollo", "zeus", "hera"}),
    (("--category", "finance"), {"apollo", "zeus"}),
    (("--category", "finance", "--category", "travel"), {"apollo", "zeus", "hera"}),
    (("--meta", "tier=2"), {"apollo", "hera"}),                       # the number 2
    (("--meta", 'tier="2"'), set()),                                  # the string "2": no fact holds it
    (("--meta", 'code="2"'), {"zeus"}),
    (("--meta", "code=2"), set()),
    (("--meta", "code=NaN"), set()),                                  # not JSON: the text "NaN", held by none
    (("--meta", "project=apollo", "--meta", "project=zeus"), {"apollo", "zeus"}),   # the same key: any of
    (("--meta", "project=apollo", "--meta", "tier=1"), set()),                      # two keys: both
    (("--category", "travel", "--meta", "tier=2"), {"hera"}),
])
def test_search_is_narrowed_by_category_and_meta_options(db, capsys, options, found):
    assert _found(capsys, *options) == found


def test_the_plain_answer_shows_each_hits_categories_and_metadata(db, capsys):
    assert main([*SEARCH[:-1], "--category", "travel", "--meta", "project=zeus"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "The Zeus venue budget" in line and line.endswith('{finance, travel, project="zeus", tier=1, code="2"}')


def test_context_is_narrowed_by_the_same_options(db, capsys):
    assert main([*CONTEXT, "--category", "travel", "--meta", "tier=2"]) == 0
    xml = capsys.readouterr().out
    assert "Hera venue" in xml and "Apollo venue" not in xml and "Zeus venue" not in xml


@pytest.mark.parametrize(("options", "line"), [
    (("--category", "finanse"), "--category: 'finanse' is not a category of agent 'a1': personal_details"),
    (("--category", "Finance"), "--category: 'Finance' is not a category name"),
    (("--meta", "colour=red"), "--meta colour: 'colour' is not a filterable metadata key of agent 'a1'; "
                               "its filterable keys: project, tier, code"),
    (("--meta", "tier=2.5"), "--meta tier: 2.5 is a fraction"),
    (("--meta", "tier"), "--meta: 'tier' is not KEY=VALUE"),
    (("--meta", "code=" + "[" * 3000), "--meta code: has 3000 characters; a value has at most 200"),  # no traceback
])
@pytest.mark.parametrize("command", [SEARCH, CONTEXT])
def test_a_bad_filter_is_one_line_naming_the_option_and_exit_2(db, capsys, command, options, line):
    assert main([*command, *options]) == 2
    said = [e for e in capsys.readouterr().err.splitlines() if e.startswith("memoryctl ")]
    assert len(said) == 1 and said[0].startswith(f"memoryctl {command[0]}: {line}"), said
