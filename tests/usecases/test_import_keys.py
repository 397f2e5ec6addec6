"""An import line whose key is stored already (design §13 "Direct writes and import"): a newer
line updates the fact under its key with history, as an owner's edit does; the same line changes
nothing; a retired fact under the key is not brought back."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from pipeline.expiry import stamp_expired
from testkit.formation import make_env
from usecases.imports import Importer, import_file


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path)
    yield e
    e.store.close()


def imported(env, *rows: dict):
    return import_file(env, ["".join(json.dumps(r) + "\n" for r in rows).encode()], "agent-1", by="test")


def maya(env):
    return env.store.facts.list_facts("agent-1", "user:u-1")


def test_a_crm_row_that_changed_updates_its_fact_with_history_and_the_same_row_changes_nothing(env):
    assert imported(env, {"user_id": "u-1", "text": "Maya renews in June", "import_key": "crm-17"}).added == 1
    [before] = maya(env)
    env.clock.advance(seconds=60)
    row = {"user_id": "u-1", "text": "Maya renews in July", "import_key": "crm-17", "categories": ["projects"]}
    done = imported(env, row)
    assert (done.added, done.updated, done.unchanged) == (0, 1, 0)
    [after] = maya(env)
    assert (after.fact_id, after.content, after.version, after.categories) == (
        before.fact_id, "Maya renews in July", 2, ["projects"])
    assert [h.content for h in after.history] == ["Maya renews in June"]
    assert after.embedding == env.embedder.embed(["Maya renews in July"]).vectors[0]   # embedded again
    again = imported(env, row)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 1)
    assert maya(env) == [after]


def test_only_the_categories_or_the_expiry_changing_is_an_update_too(env):
    row = {"user_id": "u-1", "text": "Maya has twelve seats", "import_key": "crm-18"}
    imported(env, row)
    later = env.clock.now() + timedelta(days=30)
    assert imported(env, {**row, "expires_at": later.isoformat()}).updated == 1
    assert maya(env)[0].expires_at == later
    assert imported(env, row).updated == 1   # the row no longer expires: neither does the fact
    [fact] = maya(env)
    assert (fact.expires_at, fact.version, fact.content) == (None, 3, "Maya has twelve seats")


def test_a_newer_line_is_screened_as_an_edit_is_and_a_bad_one_keeps_the_fact(env):
    imported(env, {"user_id": "u-1", "text": "Maya's gate is on the left", "import_key": "crm-19"})
    done = imported(env, {"user_id": "u-1", "text": "Maya's gate code is 4512", "import_key": "crm-19"})
    assert (done.updated, done.rejected) == (0, 1)
    assert (done.rejects[0].field, "access code" in done.rejects[0].why) == ("text", True)
    assert [f.content for f in maya(env)] == ["Maya's gate is on the left"]


def test_an_older_line_does_not_undo_an_edit_made_since(env):
    imported(env, {"user_id": "u-1", "text": "Maya renews in June", "import_key": "crm-17"})
    imported(env, {"user_id": "u-1", "text": "Maya renews in July", "import_key": "crm-17"})
    done = imported(env, {"user_id": "u-1", "text": "Maya renews in June", "import_key": "crm-17"})
    assert (done.updated, done.unchanged) == (0, 1)
    assert [f.content for f in maya(env)] == ["Maya renews in July"]


def test_two_lines_of_one_key_in_one_file_leave_the_later_one(env):
    done = imported(env, {"user_id": "u-1", "text": "Maya renews in June", "import_key": "crm-17"},
                    {"user_id": "u-1", "text": "Maya renews in August", "import_key": "crm-17"})
    assert (done.added, done.updated) == (1, 1)
    [fact] = maya(env)
    assert (fact.content, [h.content for h in fact.history]) == ("Maya renews in August", ["Maya renews in June"])


def test_a_retired_fact_under_the_key_is_not_brought_back_and_nothing_is_added_beside_it(env):
    soon = env.clock.now() + timedelta(hours=1)
    row = {"user_id": "u-1", "text": "Maya's trial ends soon", "import_key": "crm-20", "expires_at": soon.isoformat()}
    imported(env, row)
    env.clock.advance(seconds=7200)
    stamp_expired(env.store, env.clock.now(), 10)   # retired, reason expired
    newer = {"user_id": "u-1", "text": "Maya's trial was extended", "import_key": "crm-20"}
    [result] = Importer(env, "agent-1", by="test").feed([json.dumps(newer)])
    assert (result.outcome, result.line) == ("skipped", 1)
    assert result.why.startswith("the fact under this key was retired (expired)")
    assert maya(env) == []
    assert [f.content for f in env.store.facts.list_facts("agent-1", "user:u-1", include_retired=True)] == [
        "Maya's trial ends soon"]


def test_an_export_line_newer_than_the_stored_fact_updates_it(env):
    imported(env, {"user_id": "u-1", "text": "Maya likes tea", "import_key": "crm-21"})
    [fact] = maya(env)
    line = {"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": fact.fact_id, "scope": "user",
            "scope_key": "user:u-1", "content": "Maya likes green tea", "formed_at": fact.formed_at.isoformat()}
    assert imported(env, line).updated == 1
    assert [(f.fact_id, f.content) for f in maya(env)] == [(fact.fact_id, "Maya likes green tea")]
    assert imported(env, line).unchanged == 1


def test_a_line_whose_metadata_differs_replaces_the_facts_and_a_line_without_metadata_keeps_it(env):
    env.store.ingest.put_agent_settings(env.store.ingest.get_agent_settings("agent-1").model_copy(
        update={"metadata_keys": ["project", "tier"]}))
    row = {"user_id": "u-1", "text": "Maya runs the launch", "import_key": "crm-30",
           "metadata": {"project": "apollo", "tier": 1}}
    imported(env, row)
    [fact] = maya(env)
    assert imported(env, row).unchanged == 1
    assert imported(env, {**row, "metadata": {"project": "apollo", "tier": True}}).updated == 1   # true is not 1
    done = imported(env, {**row, "metadata": {"project": "zeus"}})
    assert (done.updated, maya(env)[0].metadata, maya(env)[0].version) == (1, {"project": "zeus"}, 3)
    assert env.store.facts.labelled_fact_ids("agent-1", ["user:u-1"], [['meta:project="apollo"']]) == set()
    assert env.store.facts.labelled_fact_ids("agent-1", ["user:u-1"], [['meta:project="zeus"']]) == {fact.fact_id}
    without = {k: v for k, v in row.items() if k != "metadata"}
    assert imported(env, without).unchanged == 1 and maya(env)[0].metadata == {"project": "zeus"}
    party = {**without, "text": "Maya runs the launch party"}
    assert imported(env, party).updated == 1 and maya(env)[0].metadata == {"project": "zeus"}
    assert imported(env, {**party, "metadata": {}}).updated == 1 and maya(env)[0].metadata == {}


def test_an_export_line_restores_its_metadata_over_the_facts_whatever_keys_are_marked(env):
    imported(env, {"user_id": "u-1", "text": "Maya likes tea", "import_key": "crm-31"})
    [fact] = maya(env)
    line = {"kind": "fact", "agent_id": "agent-1", "user_id": "u-1", "fact_id": fact.fact_id, "scope": "user",
            "scope_key": "user:u-1", "content": "Maya likes tea", "formed_at": fact.formed_at.isoformat(),
            "metadata": {"project": ["zeus", "apollo"]}}
    assert imported(env, line).updated == 1
    assert maya(env)[0].metadata == {"project": ["zeus", "apollo"]}
    assert imported(env, {**line, "metadata": {"project": ["apollo", "zeus"]}}).unchanged == 1
