"""``memoryctl curate`` (design §13): an owner lists, edits and deletes the agent's shared facts
and pending reflections, rewrites a blob section and replaces a user's blob from the command
line, with the API's checks and an audit entry without content for each change."""

from __future__ import annotations

import json

import pytest

from ops import cli
from schemas.documents import Reflection
from schemas.settings import get_settings
from testkit.documents import T0, fact


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    get_settings.cache_clear()
    assert cli.main(["create-indexes"]) == 0
    from pipeline.store import open_store

    opened = open_store(get_settings())
    opened.facts.insert_fact(fact("f1", "The launch budget is 12,000 euros", agent="A"))
    opened.facts.insert_fact(fact("f-user", "Maya lives in Porto", agent="A", user="maya"))
    opened.reflections.insert_reflections([Reflection(reflection_id="r1", agent_id="A", scope="agent", scope_key="agent",
                                          content="The team prefers written recaps", formed_at=T0)])
    yield opened
    opened.close()
    get_settings.cache_clear()


def test_an_owner_curates_the_agents_shared_memory_from_the_command_line(store, capsys, tmp_path):
    assert cli.main(["curate", "facts", "A", "--json"]) == 0
    assert [f["id"] for f in json.loads(capsys.readouterr().out)] == ["f1"]
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", "The launch budget is 13,000 euros"]) == 0
    assert "f1 is now version 2" in capsys.readouterr().out
    assert store.facts.get_facts(["f1"])[0].history[0].content == "The launch budget is 12,000 euros"
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", "The wifi password is Tr0ub4dor&3xq"]) == 2
    assert "--text: the text carries a password" in capsys.readouterr().err
    assert cli.main(["curate", "edit-fact", "A", "f-user", "--text", "Maya lives in Lisbon"]) == 2
    assert "no live fact 'f-user' in agent A's shared memory" in capsys.readouterr().err
    assert cli.main(["curate", "edit-reflection", "A", "r1", "--text", "The team prefers recaps by email"]) == 0
    assert store.reflections.unabsorbed_reflections("A", "agent")[0].history[0].content == "The team prefers written recaps"
    assert cli.main(["curate", "delete-reflection", "A", "r1"]) == 0
    assert store.reflections.unabsorbed_reflections("A", "agent") == []
    assert cli.main(["curate", "edit-section", "A", "budget", "--line", "13,000 euros in total"]) == 0
    assert "[BUDGET]\n- 13,000 euros in total" in capsys.readouterr().out
    blob_file = tmp_path / "maya.txt"
    blob_file.write_text("[PREFERENCES]\n- Maya wants bullet points\n", encoding="utf-8")
    assert cli.main(["curate", "replace-blob", "A", "--user", "maya", "--file", str(blob_file)]) == 0
    assert store.blobs.get_blob("A", "user:maya").edited_by == "cli"
    assert cli.main(["curate", "delete-fact", "A", "f1"]) == 0
    assert store.facts.get_facts(["f1"]) == []
    capsys.readouterr()
    assert cli.main(["audit", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {"item.edit", "item.delete", "blob.edit", "blob.replace"} <= {e["action"] for e in entries}
    assert "13,000" not in json.dumps(entries) and "bullet points" not in json.dumps(entries)


def test_an_owner_sets_and_clears_a_facts_expiry_from_the_command_line(store, capsys):
    text = "The launch budget is 12,000 euros"
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", text, "--expires", "2020-01-01"]) == 2
    assert "--expires" in capsys.readouterr().err and store.facts.get_facts(["f1"])[0].version == 1
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", text, "--expires", "next week"]) == 2
    assert "expected a date such as" in capsys.readouterr().err
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", text, "--expires", "2999-03-10"]) == 0
    assert store.facts.get_facts(["f1"])[0].expires_at.isoformat() == "2999-03-11T00:00:00+00:00"  # the end of that day
    capsys.readouterr()
    assert cli.main(["curate", "facts", "A", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["expires_at"].startswith("2999-03-11") and listed["expired"] is False
    assert cli.main(["curate", "edit-fact", "A", "f1", "--text", text, "--no-expiry"]) == 0
    assert store.facts.get_facts(["f1"])[0].expires_at is None


def test_a_fact_whose_expiry_passed_is_listed_as_expired_and_not_edited(store, capsys):
    store.facts.insert_fact(fact("f-old", "The venue is booked until May", agent="A").model_copy(
        update={"expires_at": T0}))
    assert cli.main(["curate", "facts", "A"]) == 0
    assert "The venue is booked until May (expired)" in capsys.readouterr().out
    assert cli.main(["curate", "edit-fact", "A", "f-old", "--text", "The venue is booked until June"]) == 2
    assert "expired at" in capsys.readouterr().err


def test_an_owner_corrects_a_facts_metadata_from_the_command_line(store, capsys):
    text = "The launch budget is 12,000 euros"
    store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(
        update={"metadata_keys": ["project", "tier"]}))
    edit = ["curate", "edit-fact", "A", "f1", "--text", text]
    assert cli.main([*edit, "--meta", "project=zeus", "--meta", "project=hera", "--meta", "tier=2"]) == 0
    assert '{"project": ["zeus", "hera"], "tier": 2}' in capsys.readouterr().out
    assert store.facts.labelled_fact_ids("A", ["agent"], [["meta:tier=2"]]) == {"f1"}
    assert cli.main([*edit, "--meta", "tier=3"]) == 0
    assert store.facts.get_facts(["f1"])[0].metadata == {"tier": 3}
    assert store.facts.labelled_fact_ids("A", ["agent"], [['meta:project="zeus"']]) == set()
    assert cli.main([*edit, "--meta", "plan=pro"]) == 2
    assert "--meta plan: is not one of the agent's filterable keys: project, tier" in capsys.readouterr().err
    assert cli.main([*edit]) == 0
    assert store.facts.get_facts(["f1"])[0].metadata == {"tier": 3}
    assert cli.main([*edit, "--no-meta"]) == 0
    assert store.facts.get_facts(["f1"])[0].metadata == {}
