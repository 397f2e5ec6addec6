"""consolidate / consolidate_scope / consolidate_session on fakes (design §5.5)."""

from __future__ import annotations

import threading

import pytest

from pipeline.errors import TransientError
from pipeline.formation import consolidate_stages as cs
from pipeline.formation.consolidation import OverWordLimit
from pipeline.formation.runner import Usage
from pipeline.llm.scripted import Fault
from schemas.documents import Reflection

from testkit.formation import blob_answer, facts, merge_all, reflections


def buffered(env, key, n, *, session_id="s-old", start=0, agent_id="agent-1"):
    scope = "agent" if key == "agent" else key.split(":")[0]
    env.store.reflections.insert_reflections([
        Reflection(reflection_id=f"r-{key}-{i}", agent_id=agent_id, scope=scope, scope_key=key,
                   user_id=key.split(":")[1] if scope == "user" else None,
                   session_id=key.split(":")[1] if scope == "session" else None,
                   content=f"reflection {i} about {key}", source_session_id=session_id, formed_at=env.clock.now())
        for i in range(start, start + n)
    ])


def unabsorbed(env, key):
    return [r.reflection_id for r in env.store.reflections.unabsorbed_reflections("agent-1", key)]


def due_after_run(env, user=0, agent=0, session=0, reason="threshold"):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run([("user", "u-1", "hello"), ("assistant", None, "hi")], session_id="s-1", reason=reason)
    buffered(env, "user:u-1", user)
    buffered(env, "agent", agent)
    buffered(env, "session:s-1", session)
    env.through_reflections(run_id)
    return run_id, cs.consolidate(run_id, env).output


@pytest.mark.parametrize("user,agent,session,due", [
    (3, 9, 3, []),
    (4, 9, 3, ["user:u-1"]),
    (0, 10, 0, ["agent"]),
    (0, 0, 4, ["session:s-1"]),
    (5, 12, 7, ["agent", "user:u-1", "session:s-1"]),
])
def test_a_scope_is_due_when_its_unabsorbed_count_reaches_its_threshold(env, user, agent, session, due):
    _, output = due_after_run(env, user, agent, session)
    assert output["due"] == due


def test_at_session_end_every_scope_holding_a_reflection_of_the_session_is_due(env):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(user=["Alice prefers short answers"], session=["Draft the plan"]))
    run_id = env.new_run([("user", "u-1", "hello"), ("assistant", None, "hi")], session_id="s-1", reason="session_end")
    buffered(env, "agent", 2, session_id="s-other")  # not from this session: below threshold, not due
    env.through_reflections(run_id)
    output = cs.consolidate(run_id, env).output
    assert output["session_end"] is True
    assert output["due"] == ["user:u-1", "session:s-1"]


def test_merge_writes_version_1_and_absorbs_exactly_the_merged_ids(env):
    run_id, output = due_after_run(env, user=4)
    env.llm.on("consolidate", merge_all)
    cs.consolidate_scope(run_id, 0, env)
    blob = env.store.blobs.get_blob("agent-1", "user:u-1")
    assert blob.version == 1 and blob.consolidated_content.startswith("VERSION: 1\n[NOTES]\n- reflection 0")
    assert unabsorbed(env, "user:u-1") == []
    absorbed = env.store.reflections.list_reflections("agent-1", "user:u-1")
    assert {r.consolidated_into for r in absorbed} == {1} and all(r.absorbed_at for r in absorbed)


def test_the_next_consolidation_increments_the_version_and_keeps_sections(env):
    env.llm.on("consolidate", merge_all)
    buffered(env, "user:u-1", 4)
    cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    buffered(env, "user:u-1", 4, start=4)
    cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-b", usage=Usage())
    blob = env.store.blobs.get_blob("agent-1", "user:u-1")
    assert blob.version == 2
    assert blob.consolidated_content.splitlines()[:2] == ["VERSION: 2", "[NOTES]"]
    assert "reflection 0 about" in blob.consolidated_content and "reflection 7 about" in blob.consolidated_content


def test_an_over_long_answer_is_asked_again_with_the_excess_stated(env):
    env.settings.word_limit_user = 20
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", blob_answer(("NOTES", ["word " * 30])), times=1)
    env.llm.on("consolidate", blob_answer(("NOTES", ["short enough"])), times=1)
    result = cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    calls = [c for c in env.llm.calls if c.operation == "consolidate"]
    assert [c.inputs["excess_words"] for c in calls] == [None, 14]  # 34 words rendered, limit 20
    assert result["over_limit_answers"] == [14]
    assert env.store.blobs.get_blob("agent-1", "user:u-1").consolidated_content == "VERSION: 1\n[NOTES]\n- short enough"


def test_a_blob_is_never_stored_over_its_limit_and_the_buffer_stays(env):
    env.settings.word_limit_user = 20
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", blob_answer(("NOTES", ["word " * 30])))
    with pytest.raises(OverWordLimit):
        cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    assert env.llm.count("consolidate") == 1 + env.settings.consolidation_max_length_retries
    assert env.store.blobs.get_blob("agent-1", "user:u-1") is None
    assert len(unabsorbed(env, "user:u-1")) == 4
    assert isinstance(OverWordLimit("x"), TransientError)


def test_a_failed_consolidation_keeps_the_buffer(env):
    buffered(env, "session:s-1", 4)
    env.llm.on("consolidate", Fault("server_error"))
    with pytest.raises(TransientError):
        cs.merge_scope(env, "agent-1", "session:s-1", model="m", holder="run-a", usage=Usage())
    assert len(unabsorbed(env, "session:s-1")) == 4 and env.store.blobs.get_blob("agent-1", "session:s-1") is None


def test_a_reflection_that_arrives_during_the_merge_stays_in_the_buffer(env):
    buffered(env, "user:u-1", 4)

    def merge_while_one_arrives(request):
        buffered(env, "user:u-1", 1, start=99)
        return merge_all(request)

    env.llm.on("consolidate", merge_while_one_arrives)
    cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    assert unabsorbed(env, "user:u-1") == ["r-user:u-1-99"]
    assert "reflection 99" not in env.store.blobs.get_blob("agent-1", "user:u-1").consolidated_content


def test_two_consolidations_of_one_scope_at_once_one_wins_the_lease(env):
    buffered(env, "user:u-1", 4)
    inside, release = threading.Event(), threading.Event()

    def slow_merge(request):
        inside.set()
        release.wait(10)
        return merge_all(request)

    env.llm.on("consolidate", slow_merge)
    outcome = {}
    first = threading.Thread(target=lambda: outcome.setdefault("a", cs.merge_scope(
        env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())))
    first.start()
    assert inside.wait(10)
    with pytest.raises(cs.ScopeBusy):
        cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-b", usage=Usage())
    release.set()
    first.join(10)
    assert outcome["a"]["status"] == "merged"
    assert env.store.blobs.get_blob("agent-1", "user:u-1").version == 1
    assert env.llm.count("consolidate") == 1


def test_a_crash_between_saving_the_blob_and_absorbing_only_absorbs_on_rerun(env):
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", merge_all)
    real_mark = env.store.reflections.mark_absorbed
    env.store.reflections.mark_absorbed = lambda *a, **k: (_ for _ in ()).throw(ConnectionError("worker lost"))
    with pytest.raises(ConnectionError):
        cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    env.store.reflections.mark_absorbed = real_mark
    assert len(unabsorbed(env, "user:u-1")) == 4 and env.store.blobs.get_blob("agent-1", "user:u-1").version == 1
    env.store.leases.release_lease("consolidate:agent-1:user:u-1", "run-a")
    result = cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    assert result["status"] == "already_merged"
    assert env.store.blobs.get_blob("agent-1", "user:u-1").version == 1
    assert unabsorbed(env, "user:u-1") == []
    assert env.llm.count("consolidate") == 1


def test_session_consolidation_without_a_run_merges_scopes_holding_this_sessions_reflections(env):
    env.add_messages([("user", "u-1", "hello")], session_id="s-9")
    buffered(env, "session:s-9", 1, session_id="s-9")
    buffered(env, "user:u-1", 1, session_id="s-9")
    buffered(env, "agent", 3, session_id="s-other")
    env.llm.on("consolidate", merge_all)
    results = cs.consolidate_session("agent-1", "s-9", env)
    assert sorted(r["scope_key"] for r in results) == ["session:s-9", "user:u-1"]
    assert env.store.blobs.get_blob("agent-1", "agent") is None
    again = cs.consolidate_session("agent-1", "s-9", env)
    assert again == [] and env.llm.count("consolidate") == 2


def _stored_blob(env, key, text, version=1):
    from schemas.documents import ConsolidatedBlob

    env.store.blobs.save_blob(ConsolidatedBlob(
        agent_id="agent-1", scope="user", scope_key=key, user_id="u-1", consolidated_content=text,
        word_limit=300, version=version,
    ), expected_version=0)


def test_an_answer_that_drops_a_section_unnamed_is_asked_again_naming_it(env):
    _stored_blob(env, "user:u-1", "VERSION: 1\n[PREFERENCES]\n- Alice likes tea\n[GOALS]\n- Run a marathon")
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", blob_answer(("PREFERENCES", ["Alice likes tea", "reflection 0"])), times=1)
    env.llm.on("consolidate", blob_answer(("PREFERENCES", ["Alice likes tea"]), ("GOALS", ["Run a marathon"])),
               times=1)
    result = cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    calls = [c for c in env.llm.calls if c.operation == "consolidate"]
    assert [c.inputs["missing_sections"] for c in calls] == [[], ["GOALS"]]
    assert result["lost_section_answers"] == [["GOALS"]]
    assert "[GOALS]\n- Run a marathon" in env.store.blobs.get_blob("agent-1", "user:u-1").consolidated_content


def test_a_section_named_outdated_by_the_answer_may_go(env):
    _stored_blob(env, "user:u-1", "VERSION: 1\n[PREFERENCES]\n- Alice likes tea\n[TRIP]\n- Flying to Oslo Friday")
    buffered(env, "user:u-1", 4)
    answer = blob_answer(("PREFERENCES", ["Alice likes tea"]))
    answer.outdated_sections = ["trip"]
    env.llm.on("consolidate", answer)
    result = cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    assert result["status"] == "merged" and result["outdated_sections"] == ["trip"]
    assert env.llm.count("consolidate") == 1
    assert "TRIP" not in env.store.blobs.get_blob("agent-1", "user:u-1").consolidated_content


def test_a_blob_never_loses_a_section_and_the_buffer_stays_when_every_answer_drops_it(env):
    _stored_blob(env, "user:u-1", "VERSION: 1\n[PREFERENCES]\n- Alice likes tea\n[GOALS]\n- Run a marathon")
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", blob_answer(("PREFERENCES", ["Alice likes tea"])))
    with pytest.raises(cs.rules.LostSections):
        cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())
    assert env.llm.count("consolidate") == 1 + env.settings.consolidation_max_length_retries
    assert env.store.blobs.get_blob("agent-1", "user:u-1").version == 1
    assert len(unabsorbed(env, "user:u-1")) == 4


def test_the_source_note_of_the_offline_rules_is_not_a_section_to_keep(env):
    _stored_blob(env, "user:u-1", "VERSION: 1\n[NOTES]\n- a\n[SOURCE]\n- Formed by the offline rules provider")
    buffered(env, "user:u-1", 4)
    env.llm.on("consolidate", merge_all)
    assert cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-a", usage=Usage())["status"] == "merged"


def test_a_consolidation_that_waited_on_the_lease_does_not_merge_what_is_left_below_the_threshold(env):
    run_id, output = due_after_run(env, user=4)
    assert output["due"] == ["user:u-1"]
    env.llm.on("consolidate", merge_all)
    # another run merged the key while this one waited; one new reflection arrived since
    cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="run-other", usage=Usage())
    buffered(env, "user:u-1", 1, start=50)
    result = cs.consolidate_scope(run_id, 0, env).output
    assert result["status"] == "not_due" and result["unabsorbed"] == 1
    assert env.llm.count("consolidate") == 1
    assert env.store.blobs.get_blob("agent-1", "user:u-1").version == 1
    assert unabsorbed(env, "user:u-1") == ["r-user:u-1-50"]


def test_at_session_end_a_scope_holding_a_reflection_of_the_session_is_still_merged_below_the_threshold(env):
    env.add_messages([("user", "u-1", "hello")], session_id="s-9")
    buffered(env, "user:u-1", 1, session_id="s-9")
    env.llm.on("consolidate", merge_all)
    result = cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="h", usage=Usage(), session_end="s-9")
    assert result["status"] == "merged"
    assert cs.merge_scope(env, "agent-1", "user:u-1", model="m", holder="h2", usage=Usage(),
                          session_end="s-9")["status"] == "nothing_to_merge"
