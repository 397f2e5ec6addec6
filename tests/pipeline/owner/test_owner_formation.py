"""An owner's controls through the real stages on SQLite (design §13): the offline rules honour
an instruction's topic lists; a paused scope keeps its content and forms nothing, its
messages are not formed twice, and resume forms the pause's messages only when asked."""

from __future__ import annotations

import pytest

from pipeline.formation.screening import guard_for
from pipeline.llm.offline import OfflineLLM
from pipeline.owner import controls
from pipeline.owner.backfill import backfill
from pipeline.stats import consolidation_status, memory_stats
from testkit.formation import make_env

PLANNING = [
    ("user", "u-1", "The caterer Bella Cucina charges $40 per guest."),
    ("user", "u-1", "The venue is Harbor Hall in Lisbon."),
    ("user", "u-1", "The budget is 12,000 euros."),
    ("user", "u-1", "I prefer short answers."),
]


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path)
    e.llm = OfflineLLM(e.settings)
    yield e
    e.store.close()


def _instruct(env, text, scope="all"):
    controls.set_instruction(env.store.ingest, guard_for(env.settings), "agent-1", "extraction", scope, text, by="owner",
                             now=env.clock.now())


def _texts(env, scope_key=None):
    return sorted(f.content for f in env.live_facts(scope_key=scope_key))


def test_without_instructions_the_rules_keep_catering_venue_and_budget(env):
    env.whole_chain(env.new_run(PLANNING))
    texts = " ".join(_texts(env))
    assert "Bella Cucina" in texts and "Harbor Hall" in texts and "12,000" in texts


def test_ignore_catering_leaves_catering_facts_out_of_the_next_run(env):
    _instruct(env, "Keep what matters for planning.\nignore: catering")
    env.whole_chain(env.new_run(PLANNING))
    texts = " ".join(_texts(env))
    assert "Bella Cucina" not in texts and "Harbor Hall" in texts and "12,000" in texts


def test_focus_keeps_only_facts_on_its_topics(env):
    _instruct(env, "focus: budget, venue")
    env.whole_chain(env.new_run(PLANNING))
    texts = _texts(env)
    assert len(texts) == 2 and any("Harbor Hall" in t for t in texts) and any("budget" in t for t in texts)


def _user_memory(env) -> str:
    blob = env.store.blobs.get_blob("agent-1", "user:u-1")
    buffered = env.store.reflections.unabsorbed_reflections("agent-1", "user:u-1")
    return " ".join([blob.consolidated_content if blob else "", *(r.content for r in buffered)])


@pytest.mark.parametrize("refined", [False, True])
def test_a_refinement_for_one_scope_type_leaves_the_others_alone(env, refined):
    if refined:
        _instruct(env, "ignore: short answers", scope="user")
    env.whole_chain(env.new_run(PLANNING))
    assert ("short answers" in _user_memory(env)) is not refined
    assert "Bella Cucina" in " ".join(_texts(env))


def _pause(env, target, session_id=None):
    return controls.pause(env.store.ingest, "agent-1", target, session_id=session_id, by="owner", now=env.clock.now())


def test_a_paused_agent_memory_forms_no_agent_facts_keeps_what_it_had_and_still_advances_the_watermark(env):
    env.whole_chain(env.new_run(PLANNING[:1], session_id="s-before"))
    before = _texts(env, "agent")
    _pause(env, "agent")
    run_id = env.new_run(PLANNING[1:], session_id="s-during")
    env.whole_chain(run_id)
    assert _texts(env, "agent") == before and before  # kept, nothing new
    assert env.store.reflections.unabsorbed_reflections("agent-1", "agent") == [] or all(
        r.source_session_id != "s-during" for r in env.store.reflections.unabsorbed_reflections("agent-1", "agent"))
    assert env.store.ingest.get_session("s-during").watermark == env.store.runs.get_run(run_id).seq_to
    stats = memory_stats(env.store, "agent-1", user_id="u-1", session_id="s-during")
    assert stats["scopes"]["agent"]["paused"] is True and stats["scopes"]["user:u-1"]["paused"] is False
    status = consolidation_status(env.store, env.settings, "agent-1", user_id=None, session_id=None)
    assert status["scopes"]["agent"]["paused"] is True


def test_resume_without_backfill_forms_nothing_of_the_pause_and_with_backfill_forms_it_once(env):
    pause = _pause(env, "agent")
    env.whole_chain(env.new_run(PLANNING[:3], session_id="s-during"))
    assert _texts(env, "agent") == []
    ended = controls.resume(env.store.ingest, "agent-1", "agent", now=env.clock.now())
    assert ended.paused_at == pause.paused_at and controls.list_pauses(env.store.ingest, "agent-1") == []
    assert _texts(env, "agent") == []  # the default: no backfill
    runs = backfill(env.store.runs, "agent-1", ended, env.clock.now(), env.settings.claim_lease_s)
    assert len(runs) == 1
    env.whole_chain(runs[0])
    texts = " ".join(_texts(env, "agent"))
    assert "Bella Cucina" in texts and "Harbor Hall" in texts
    assert env.store.runs.get_run(runs[0]).scopes_enabled == ["agent"]  # the resumed scope alone
    # a second backfill of the same pause finds nothing left: nothing is formed twice
    assert backfill(env.store.runs, "agent-1", ended, env.clock.now(), env.settings.claim_lease_s) == []


def test_pausing_the_whole_agent_forms_nothing_and_a_paused_session_no_session_memory(env):
    _pause(env, "all")
    run_id = env.new_run(PLANNING, session_id="s-all")
    env.whole_chain(run_id)
    assert _texts(env) == [] and env.store.runs.get_run(run_id).scopes_enabled == []
    controls.resume(env.store.ingest, "agent-1", "all", now=env.clock.now())
    _pause(env, "session", session_id="s-quiet")
    env.whole_chain(env.new_run([("user", "u-1", "Let's draft the invitation for the launch.")],
                                session_id="s-quiet"))
    assert env.store.reflections.unabsorbed_reflections("agent-1", "session:s-quiet") == []
    assert env.store.blobs.get_blob("agent-1", "session:s-quiet") is None


def test_the_next_consolidation_is_told_of_an_owners_section_edit_and_keeps_it(tmp_path):
    from pipeline.llm.scripted import ScriptedLLM
    from pipeline.owner import blobs
    from testkit.formation import blob_answer, facts, reflections

    asked = []

    def keep_sections(request):  # a faithful merge: every section kept, the reflections added
        asked.append(request)
        kept = [(s["name"], s["bullets"]) for s in request.inputs["current_sections"]]
        return blob_answer(*kept, ("NOTES", list(request.inputs["reflections"])))

    env = make_env(tmp_path)
    env.llm = ScriptedLLM()
    blobs.edit_section(env.store, env.settings, "agent-1", "agent", "budget", ["The launch budget is 12,000 euros"],
                       by="owner-key", now=env.clock.now())
    assert env.store.blobs.get_blob("agent-1", "agent").edited_by == "owner-key"
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(agent=["The team meets every Monday"]))
    env.llm.on("consolidate", keep_sections)
    env.whole_chain(env.new_run([("user", "u-1", "We meet every Monday.")], session_id="s-1", reason="session_end"))
    [agent_merge] = [r for r in asked if r.inputs["scope"] == "agent"]
    assert "written by the agent's owner" in agent_merge.prompt
    blob = env.store.blobs.get_blob("agent-1", "agent")
    assert blob.version == 2 and blob.edited_by is None
    assert "12,000 euros" in blob.consolidated_content and "every Monday" in blob.consolidated_content
    env.store.close()
