"""Secrets never reach the store, from LLM or offline answers, and the run counts them."""

from __future__ import annotations

from ops.runs import format_run
from usecases.runs import run_summary
from pipeline.formation import stages
from pipeline.llm.offline import OfflineLLM

from testkit.formation import ALICE_CHAT, decisions, facts, reflections

EMAIL = "Alice's email is alice@example.com"
PASSWORD = "Alice's wifi password is hunter2"


def _contents(env) -> list[str]:
    return [f.content for f in env.all_facts()]


def _reflections(env) -> list[str]:
    dump = env.store.admin.dump_all()
    rows = next(rows for name, rows in dump.items() if name.endswith("reflections"))
    return [r["content"] for r in rows]


def test_a_fact_giving_a_password_is_dropped_and_counted_on_the_run(env):
    env.llm.on("extract_facts", facts(("user", PASSWORD), ("user", EMAIL),
                                      ("agent", "The venue IBAN is DE89 3704 0044 0532 0130 00")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    assert _contents(env) == [EMAIL]
    run = env.store.runs.get_run(run_id)
    assert run.totals["secrets_dropped"] == 2
    assert run.stages["extract_facts"].output["screened"]["kinds"] == {"password": 1, "iban": 1}


def test_a_reflection_carrying_a_token_is_dropped_at_every_level(env):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(
        agent=["Deploys use the token ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
        user=["Alice prefers short answers"],
        session=["Alice shared the card 4111 1111 1111 1111 for the booking"],
    ))
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    assert _reflections(env) == ["Alice prefers short answers"]
    assert env.store.runs.get_run(run_id).totals["secrets_dropped"] == 2


def test_an_update_whose_merged_text_carries_a_secret_adds_the_new_fact_instead(env):
    env.llm.on("extract_facts", facts(("user", "Alice's wifi is called Lumen-Guest")), times=1)
    first = env.new_run(ALICE_CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(first, env)
    env.llm.on("extract_facts", facts(("user", "Alice's wifi is called Lumen-Guest-5G")), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "Alice's wifi Lumen-Guest-5G has the password hunter2")))
    second = env.new_run([("user", "u-1", "the wifi changed"), ("assistant", None, "ok")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(second, env)
    assert sorted(_contents(env)) == ["Alice's wifi is called Lumen-Guest", "Alice's wifi is called Lumen-Guest-5G"]
    output = env.store.runs.get_run(second).stages["decide_facts"].output
    assert output["update_secrets"] == 1
    assert [d["reason"] for d in output["decisions"]] == ["update_secret"]


def test_the_offline_rules_answer_is_screened_too(env):
    env.llm = OfflineLLM(env.settings)
    run_id = env.new_run([
        ("user", "u-1", "My email is alice@example.com."),
        ("assistant", None, "Noted."),
        ("user", "u-1", "My wifi password is hunter2."),
        ("assistant", None, "Got it."),
        ("user", "u-1", "Always use my API key sk-proj-abcdEFGH1234ijklMNOP5678qrst for the deploys."),
    ])
    env.whole_chain(run_id)
    stored = _contents(env) + _reflections(env)
    assert [t for t in stored if "email is alice@example.com" in t]
    assert not [t for t in stored if "hunter2" in t or "sk-proj" in t]
    assert env.store.runs.get_run(run_id).totals["secrets_dropped"] >= 2


def test_memoryctl_runs_shows_what_was_never_stored(env):
    env.llm.on("extract_facts", facts(("user", PASSWORD), ("user", EMAIL)))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    summary = run_summary(env.store.runs.get_run(run_id))
    assert (summary["secrets_dropped"], summary["contacts_rescoped"], summary["contacts_dropped"]) == (1, 0, 0)
    assert "never stored: secrets_dropped=1, contacts_rescoped=0, contacts_dropped=0" in format_run(summary)


def test_a_rerun_reuses_the_screened_output_even_if_the_patterns_changed(env):
    env.llm.on("extract_facts", facts(("user", "Alice's licence is ACME-123456"), ("user", EMAIL)))
    env.llm.on("extract_reflections", reflections())
    env.llm.on("decide_facts", decisions((0, "ADD")))  # the two facts of the run are close enough to compare
    run_id = env.new_run(ALICE_CHAT)
    stages.extract_facts(run_id, env)
    env.settings = env.settings.model_copy(update={"secret_patterns": [r"ACME-\d+"]})
    assert stages.extract_facts(run_id, env).reused
    env.whole_chain(run_id)
    assert sorted(_contents(env)) == [EMAIL, "Alice's licence is ACME-123456"]


def _fact_rows(env) -> str:
    dump = env.store.admin.dump_all()
    return str(next(rows for name, rows in dump.items() if name.endswith("facts")))


def test_a_fact_does_not_keep_a_source_line_that_carries_a_secret(env):
    """The fact is fine, its message is not: the line its text search would read stays out."""
    env.llm.on("extract_facts", facts(("user", "Alice lives in Berlin")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run([("user", "u-1", "My wifi password is hunter2 and I live in Berlin now."),
                          ("assistant", None, "Noted.")])
    env.whole_chain(run_id)
    [fact] = env.all_facts()
    assert fact.content == "Alice lives in Berlin" and fact.source_text is None
    assert "hunter2" not in _fact_rows(env)


def test_an_agent_fact_does_not_keep_a_source_line_with_contact_data(env):
    env.llm.on("extract_facts", facts(("agent", "The offsite venue is in Porto"), ("user", "Alice plans the offsite")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run([("user", "u-1", "The offsite venue is in Porto, send the plans to alice.w@example.com"),
                          ("assistant", None, "Will do.")])
    env.whole_chain(run_id)
    by_scope = {f.scope: f for f in env.all_facts()}
    assert by_scope["agent"].source_text is None and "alice.w@example.com" not in by_scope["agent"].search_text
    assert "alice.w@example.com" in by_scope["user"].source_text  # her own scope may hold it
