"""One screen at every write path (design §11): ``screening.screen_write`` for single items,
``screen_blob`` for consolidation answers and rebuilds, ``screen_excerpt`` for run records."""

from __future__ import annotations

import json

import pytest

from pipeline.erasure import Rebuild
from pipeline.formation import rebuild, stages
from pipeline.formation.screening import Screened, screen_blob, screen_write
from pipeline.formation.secrets import SecretGuard
from schemas.documents import ConsolidatedBlob, Reflection

from testkit.formation import blob_answer, decisions, facts, reflections

GUARD = SecretGuard()
PASSPHRASE = "correct horse battery staple"


@pytest.mark.parametrize(("text", "scope", "owner", "outcome", "scope_after", "found"), [
    ("Alice prefers short answers", "agent", None, "kept", "agent", None),
    ("Tom handles the AV", "agent", None, "kept", "agent", None),
    ("Password for the shared drive: tulip42", "user", "u-1", "dropped", None, "password"),
    (f"My passphrase is {PASSPHRASE}", "agent", None, "dropped", None, "password"),
    ("Deploy with sk-proj-abcdEFGH1234ijklMNOP5678qrst", "session", None, "dropped", None, "api_key"),
    ("Reach Alice at alice@home.example", "agent", "u-1", "rescoped", "user", "email"),
    ("Reach Alice at alice@home.example", "agent", None, "dropped", None, "email"),
    ("Reach Alice at alice@home.example", "user", "u-1", "kept", "user", None),
    ("u-alice asked for the summary", "agent", "u-alice", "rescoped", "user", "user_id"),
])
def test_screen_write_keeps_moves_or_drops_one_item(text, scope, owner, outcome, scope_after, found):
    counts = Screened()
    verdict = screen_write(text, scope, guard=GUARD, owner=owner, user_id=owner, counts=counts)
    assert (verdict.outcome, verdict.scope, verdict.found) == (outcome, scope_after, found)
    assert verdict.text == (None if outcome == "dropped" else text)
    assert verdict.user_id == (owner if scope_after == "user" else None)
    assert counts.secrets_dropped == (found in ("password", "api_key"))
    assert counts.contacts_rescoped == (outcome == "rescoped")


def test_screen_blob_removes_only_the_lines_that_may_not_be_stored():
    blob = ("VERSION: 3\n[TEAM]\n- Tom handles the AV\n- Reach Tom at tom@home.example\n"
            "[ACCESS]\n- The vault passphrase is correct horse battery staple\n- Badges at the front desk")
    counts = Screened()
    assert screen_blob(blob, "agent", guard=GUARD, counts=counts) == (
        "VERSION: 3\n[TEAM]\n- Tom handles the AV\n[ACCESS]\n- Badges at the front desk"
    )
    assert (counts.secrets_dropped, counts.contacts_dropped) == (1, 1)
    # in user scope the person's own contact data stays
    assert "tom@home.example" in screen_blob(blob, "user", guard=GUARD)


def test_a_consolidation_answer_carrying_a_secret_or_contact_data_is_screened_and_counted(env):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(agent=[f"Keep the notes short {i}" for i in range(10)]))
    env.llm.on("consolidate", blob_answer(("NOTES", [
        "Keep the notes short", f"The vault passphrase is {PASSPHRASE}", "Reach Alice at alice@home.example",
    ])))
    run_id = env.new_run([("user", "u-1", "notes please"), ("assistant", None, "ok")])
    env.whole_chain(run_id)
    blob = env.store.blobs.get_blob("agent-1", "agent").consolidated_content
    assert "Keep the notes short" in blob
    assert PASSPHRASE not in blob and "alice@home.example" not in blob
    run = env.store.runs.get_run(run_id)
    assert (run.totals["secrets_dropped"], run.totals["contacts_dropped"]) == (1, 1)
    assert run.stages["consolidate_scope:0"].output["screened"]["kinds"] == {"password": 1, "email": 1}


def test_a_rebuilt_blob_is_screened_like_a_consolidation(env):
    now = env.clock.now()
    env.store.reflections.insert_reflections([Reflection(
        reflection_id="r-1", agent_id="agent-1", scope="agent", scope_key="agent", content="Badges at the desk",
        formed_at=now, absorbed=True, absorbed_at=now, consolidated_into=1, source_user_ids=["u-2"],
    )])
    env.store.blobs.save_blob(ConsolidatedBlob(agent_id="agent-1", scope="agent", scope_key="agent",
                                         consolidated_content="VERSION: 1\n[NOTES]\n- Badges at the desk",
                                         word_limit=1200, version=1, last_consolidated_at=now), expected_version=0)
    env.llm.on("consolidate", blob_answer(("NOTES", ["Badges at the desk", "Card 4111 1111 1111 1111 on file"])))
    out = rebuild.rebuild_blob(env, Rebuild("agent-1", "agent", ("r-1",)), holder="erasure:x")
    assert out["status"] == "rebuilt" and out["secrets_dropped"] == 1
    assert env.store.blobs.get_blob("agent-1", "agent").consolidated_content == "VERSION: 2\n[NOTES]\n- Badges at the desk"


def test_a_password_said_in_chat_is_kept_in_no_run_record(env):
    said = f"The team files live on the shared drive. Password for the shared drive: tulip42, passphrase {PASSPHRASE}."
    env.llm.on("extract_facts", facts(("user", "The team files live on the shared drive")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run([("user", "u-1", "I organise the launch."), ("assistant", None, "Noted."),
                          ("user", "u-1", said)])
    env.whole_chain(run_id)
    run = env.store.runs.get_run(run_id)
    record = json.dumps(run.model_dump(mode="json"))
    assert "tulip42" not in record and PASSPHRASE not in record
    assert run.stages["embed_facts"].output["excerpt_lines_blanked"] == 1
    # the fact stays, without the line that carried the secret
    [fact] = env.live_facts()
    assert fact.content == "The team files live on the shared drive" and fact.source_text is None
    derived = {name: rows for name, rows in env.store.admin.dump_all().items() if not name.endswith("messages")}
    assert "tulip42" not in json.dumps(derived, default=str)


def test_an_agent_update_whose_merged_text_carries_contact_data_adds_the_new_fact_instead(env):
    env.llm.on("extract_facts", facts(("agent", "The caterer is Luna Foods")), times=1)
    first = env.new_run([("user", "u-1", "Luna Foods caters"), ("assistant", None, "ok")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(first, env)
    env.llm.on("extract_facts", facts(("agent", "The caterer is Luna Foods of Porto")), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "The caterer is Luna Foods of Porto, ask ana@home.example")))
    second = env.new_run([("user", "u-1", "Luna is from Porto"), ("assistant", None, "ok")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(second, env)
    assert sorted(f.content for f in env.all_facts()) == ["The caterer is Luna Foods", "The caterer is Luna Foods of Porto"]
    output = env.store.runs.get_run(second).stages["decide_facts"].output
    assert (output["update_contacts"], output["update_secrets"]) == (1, 0)
    assert [d["reason"] for d in output["decisions"]] == ["update_contact"]
