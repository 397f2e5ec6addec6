"""forget-user by provenance (design §11): what a user said leaves agent-scope memory too.

Formation runs the real stages (scripted answers); the erasure rebuilds blobs through the
offline LLM provider, on SQLite and on the Mongo store over the Atlas emulation."""

from __future__ import annotations

import json

import pytest

from usecases.erase import forget_user
from usecases.verify import traces
from pipeline.formation import consolidate_stages as cs
from pipeline.formation import rebuild, stages
from pipeline.formation.consolidate_stages import ScopeBusy
from pipeline.formation.runner import Usage
from pipeline.errors import InvalidLLMAnswer
from pipeline.llm.offline import OfflineLLM
from pipeline.search.local import LocalFactSearch
from pipeline.service import MemoryService

from testkit.formation import decisions, facts, make_atlas_env, make_env, merge_all, reflections

GONE, KEPT = "u-1", "u-2"


@pytest.fixture(params=["sqlite", "mongo"])
def env(request, tmp_path):
    e = make_env(tmp_path) if request.param == "sqlite" else make_atlas_env(tmp_path)
    yield e
    e.store.close()


def _service(env) -> MemoryService:
    return MemoryService("agent-1", settings=env.settings, store=env.store, search=env.search,
                         embedder=env.embedder, clock=env.clock, run_starter=lambda run_id: None)


def _chat(env, user, session, said, *, agent_fact=(), agent_reflection=(), agent_id="agent-1"):
    env.llm.on("extract_facts", facts(*(("agent", text) for text in agent_fact)), times=1)
    env.llm.on("extract_reflections", reflections(agent=list(agent_reflection)), times=1)
    run_id = env.new_run([("user", user, said), ("assistant", None, "Noted.")], session_id=session,
                         users=(user,), agent_id=agent_id)
    env.through_reflections(run_id)
    return run_id


def _erase(env, user=GONE, agent_id=None):
    return forget_user(env.store, user, agent_id, settings=env.settings, llm=OfflineLLM(env.settings), clock=env.clock).counts


def _seen_by_kept(env) -> str:
    service = _service(env)
    context = service.get_memory_context(session_id="s-kept", user_id=KEPT)  # cached if still fresh
    found = service.search_facts("Quokka Hall venue parking", session_id="s-kept", user_id=KEPT)
    return context + json.dumps(found)


def test_a_one_to_one_detail_stored_as_agent_memory_is_gone_for_everyone_after_forget_user(env):
    _chat(env, GONE, "s-gone", "We booked Quokka Hall for the venue",
          agent_fact=["The venue is Quokka Hall"], agent_reflection=["Quokka Hall has poor parking"])
    _chat(env, KEPT, "s-kept", "The budget is fixed at 40k", agent_fact=["The budget is fixed at 40k"])
    stored = [f for f in env.live_facts(scope_key="agent") if "Quokka" in f.content]
    assert [f.source_user_ids for f in stored] == [[GONE]]
    assert "Quokka" in _seen_by_kept(env)  # shared by design while the user is not erased

    counts = _erase(env)

    assert counts["facts_by_source"] == 1 and counts["reflections_by_source"] == 1
    seen = _seen_by_kept(env)
    assert "Quokka" not in seen and "40k" in seen
    assert "Quokka" not in json.dumps(env.store.admin.dump_all(), default=str)
    assert traces(env.store.admin.dump_all(), GONE) == []


def test_no_cached_context_of_another_user_keeps_quoting_what_was_erased(env):
    _chat(env, GONE, "s-gone", "We booked Quokka Hall for the venue", agent_fact=["The venue is Quokka Hall"])
    assert "Quokka" in _service(env).get_memory_context(session_id="s-kept", user_id=KEPT)  # cached

    _erase(env)

    # stale, it would not be served; but the erased detail must not stay stored in it either
    assert "Quokka" not in json.dumps(env.store.admin.dump_all(), default=str)
    assert "Quokka" not in _service(env).get_memory_context(session_id="s-kept", user_id=KEPT)


def test_a_blob_that_absorbed_the_users_reflection_is_rebuilt_from_the_others(env):
    _chat(env, GONE, "s-gone", "Quokka Hall parking is awful", agent_reflection=["Quokka Hall has poor parking"])
    _chat(env, KEPT, "s-kept", "Please keep budget notes short", agent_reflection=["Keep budget notes short"])
    env.llm.on("consolidate", merge_all)
    cs.merge_scope(env, "agent-1", "agent", model="m", holder="h-1", usage=Usage(), session_end="s-kept")
    before = env.store.blobs.get_blob("agent-1", "agent")
    assert "Quokka" in before.consolidated_content and "budget" in before.consolidated_content
    # a blob whose only absorbed reflection is the user's has nothing left: it goes
    _chat(env, GONE, "s-gone-2", "Quokka Hall again", agent_reflection=["Quokka Hall again"], agent_id="agent-2")
    cs.merge_scope(env, "agent-2", "agent", model="m", holder="h-2", usage=Usage(), session_end="s-gone-2")

    counts = _erase(env)

    blob = env.store.blobs.get_blob("agent-1", "agent")
    assert blob.version == before.version + 1
    assert "Quokka" not in blob.consolidated_content and "budget" in blob.consolidated_content.lower()
    kept = env.store.reflections.list_reflections("agent-1", "agent")
    assert [r.content for r in kept] == ["Keep budget notes short"]
    assert blob.absorbing_ids == [kept[0].reflection_id]
    assert env.store.blobs.get_blob("agent-2", "agent") is None
    assert (counts["blobs_rebuilt"], counts["blobs_deleted"]) == (1, 1)
    assert "Quokka" not in _service(env).get_memory_context(session_id="s-kept", user_id=KEPT)
    # the rebuild's model call is paid for like any other: the agent's cost counts it
    [spent] = [r for r in env.store.stats.list_usage("agent-1") if r.stage == "rebuild_blob"]
    assert sum(row["calls"] for row in spent.by_model.values()) == 1


def test_a_group_item_formed_from_two_users_is_deleted_and_counted_and_the_others_own_fact_stays(env):
    env.llm.on("extract_facts", facts(("agent", "The offsite is in Porto in May")))
    env.llm.on("extract_reflections", reflections(agent=[("The team wants morning calls", [0, 1])]))
    run_id = env.new_run([("user", GONE, "I would like morning calls"),
                          ("user", KEPT, "Let us hold the offsite in Porto in May")],
                         session_id="s-group", users=(GONE, KEPT))
    env.through_reflections(run_id)
    shared = env.store.reflections.list_reflections("agent-1", "agent")
    assert [sorted(r.source_user_ids) for r in shared] == [[GONE, KEPT]]

    counts = _erase(env)

    assert counts["shared_deleted"] == 1 and env.store.reflections.list_reflections("agent-1", "agent") == []
    assert [(f.content, f.source_user_ids) for f in env.live_facts(scope_key="agent")] == [
        ("The offsite is in Porto in May", [KEPT])]


def _group_chat(env, *agent_facts):
    """A chat of both users, each reflected on as agent memory from their own message."""
    env.llm.on("extract_facts", facts(*(("agent", text) for text in agent_facts)))
    env.llm.on("extract_reflections", reflections(agent=[("Maya wants the launch on a Tuesday", [0]),
                                                         ("Tom handles audio, video and streaming", [2])]))
    run_id = env.new_run([("user", GONE, "I want the launch on a Tuesday"), ("assistant", None, "Noted."),
                          ("user", KEPT, "I handle audio, video and streaming")],
                         session_id="s-group", users=(GONE, KEPT))
    env.through_reflections(run_id)


def test_in_a_group_chat_forgetting_one_person_keeps_what_the_others_said_in_the_agent_blob(env):
    _group_chat(env)
    assert sorted((r.content, tuple(r.source_user_ids)) for r in env.store.reflections.list_reflections("agent-1", "agent")) == [
        ("Maya wants the launch on a Tuesday", (GONE,)), ("Tom handles audio, video and streaming", (KEPT,))]
    env.llm.on("consolidate", merge_all)
    cs.merge_scope(env, "agent-1", "agent", model="m", holder="h-1", usage=Usage(), session_end="s-group")

    counts = _erase(env)

    assert (counts["shared_deleted"], counts["reflections_by_source"], counts["blobs_rebuilt"]) == (0, 1, 1)
    assert [r.content for r in env.store.reflections.list_reflections("agent-1", "agent")] == [
        "Tom handles audio, video and streaming"]
    blob = env.store.blobs.get_blob("agent-1", "agent").consolidated_content
    assert "audio, video and streaming" in blob and "Tuesday" not in blob


def test_the_export_holds_what_rests_on_the_user_and_is_empty_after_forget_user(env):
    _group_chat(env, "The launch is on a Tuesday")
    env.llm.on("consolidate", merge_all)
    cs.merge_scope(env, "agent-1", "agent", model="m", holder="h-1", usage=Usage(), session_end="s-group")

    records = list(_service(env).export_user(GONE))

    kinds = {r["kind"] for r in records}
    assert {"message", "fact", "reflection", "blob_section", "run_cost"} <= kinds
    assert [r["content"] for r in records if r["kind"] == "message"] == ["I want the launch on a Tuesday"]
    assert [r["bullets"] for r in records if r["kind"] == "blob_section"] == [["Maya wants the launch on a Tuesday"]]
    assert "audio" not in json.dumps(records)  # another person's message and memory stay out
    _erase(env)
    assert list(_service(env).export_user(GONE)) == []
    # the rebuilt agent blob now rests on Tom alone: his export holds it whole
    assert ["blob"] == [r["kind"] for r in _service(env).export_user(KEPT) if "audio" in r.get("content", "")
                        and r["kind"].startswith("blob")]


def test_an_answer_citing_a_message_outside_the_conversation_is_asked_again(env):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(agent=[("The team wants morning calls", [7])]), times=1)
    env.llm.on("extract_reflections", reflections(agent=[("The team wants morning calls", [1])]))
    run_id = env.new_run([("user", GONE, "Hi"), ("user", KEPT, "Morning calls suit us all")],
                         session_id="s-group", users=(GONE, KEPT))
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    # the schema of the request bounds every alias to the conversation (0..1 here)
    with pytest.raises(InvalidLLMAnswer, match=r"agent\.0\.sources\.0: Input should be less than or equal to 1"):
        stages.extract_reflections(run_id, env)
    assert env.store.reflections.list_reflections("agent-1", "agent") == []
    stages.extract_reflections(run_id, env)
    assert [r.source_user_ids for r in env.store.reflections.list_reflections("agent-1", "agent")] == [[KEPT]]
    assert env.llm.count("extract_reflections") == 2


def test_an_old_agent_fact_without_provenance_is_attributed_by_its_run_or_counted(env):
    run_id = _chat(env, GONE, "s-gone", "Our loading dock opens at 7", agent_fact=["The loading dock opens at 7"])
    fact = env.live_facts(scope_key="agent")[0]
    # as stored before provenance: no source users (its run record still exists)
    env.store.facts.retire_fact(fact.fact_id, env.clock.now(), "r-x")
    env.store.facts.insert_fact(fact.model_copy(update={"fact_id": "f-old", "source_user_ids": [], "hash": "h-old"}))
    env.store.facts.insert_fact(fact.model_copy(update={"fact_id": "f-unknown", "source_user_ids": [], "hash": "h-unknown",
                                                  "source_run_id": None, "content": "Unknown origin"}))
    assert any("sources include the user" in t for t in traces(env.store.admin.dump_all(), GONE))
    assert env.store.runs.get_run(run_id) is not None

    counts = _erase(env)

    assert [f.fact_id for f in env.all_facts(scope_key="agent")] == ["f-unknown"]
    assert counts["unattributed"] == 1
    assert traces(env.store.admin.dump_all(), GONE) == []


def test_an_update_adds_the_new_sources_so_a_correction_by_the_user_goes_with_them(env):
    _chat(env, KEPT, "s-kept", "The venue holds 80 people", agent_fact=["The venue holds 80 people"])
    old = env.live_facts(scope_key="agent")[0]
    env.llm.on("extract_facts", facts(("agent", "The venue holds 120 people")))
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "The venue holds 120 people")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run([("user", GONE, "Actually the venue holds 120 people")], session_id="s-gone", users=(GONE,))
    env.through_reflections(run_id)
    assert sorted(env.store.facts.get_facts([old.fact_id])[0].source_user_ids) == [GONE, KEPT]

    counts = _erase(env)

    assert env.store.facts.get_facts([old.fact_id]) == [] and counts["shared_deleted"] == 1


def test_a_run_in_flight_for_an_erased_user_applies_nothing_and_ends_erased(env):
    env.llm.on("extract_facts", facts())
    run_id = env.new_run([("user", GONE, "Quokka Hall has poor parking")], session_id="s-gone", users=(GONE,))
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None
    # the erasure lands while extract_reflections waits on its LLM call
    env.llm.on("extract_reflections",
               lambda request: (_erase(env), reflections(agent=["Quokka Hall has poor parking"]))[1])

    assert stages.extract_reflections(run_id, env) is None

    run = env.store.runs.get_run(run_id)
    assert run.status == "erased" and run.stages == {}
    assert env.store.reflections.list_reflections("agent-1", "agent") == []
    assert cs.consolidate(run_id, env) is None  # the chain stops
    assert traces(env.store.admin.dump_all(), GONE) == []


def test_erasure_waits_for_a_merge_of_the_same_scope_and_removes_nothing_of_the_plan_while_it_runs(env, monkeypatch):
    _chat(env, GONE, "s-gone", "We booked Quokka Hall", agent_fact=["The venue is Quokka Hall"],
          agent_reflection=["Quokka Hall has poor parking"])
    assert env.store.leases.acquire_lease("consolidate:agent-1:agent", "run-merging", env.clock.now(), 300)
    monkeypatch.setattr(rebuild, "LEASE_WAIT_S", 0.0)

    with pytest.raises(ScopeBusy, match="run forget-user again later"):
        _erase(env)
    assert [r.content for r in env.store.reflections.list_reflections("agent-1", "agent")] == ["Quokka Hall has poor parking"]

    env.store.leases.release_lease("consolidate:agent-1:agent", "run-merging")
    counts = _erase(env)  # running it again finishes the erasure
    assert counts["reflections_by_source"] == 1 and counts["facts_by_source"] == 1
    assert traces(env.store.admin.dump_all(), GONE) == []


def test_a_reflection_of_the_assistants_turns_only_is_the_addressed_users(env):
    env.llm.on("extract_facts", facts(), times=1)
    env.llm.on("extract_reflections", reflections(agent=["Quokka Hall tours run on Fridays"]), times=1)
    run_id = env.new_run([("assistant", None, "Quokka Hall tours run on Fridays")], session_id="s-gone", users=(GONE,))
    env.through_reflections(run_id)
    assert [r.source_user_ids for r in env.store.reflections.list_reflections("agent-1", "agent")] == [[GONE]]

    assert _erase(env)["reflections_by_source"] == 1
    assert env.store.reflections.list_reflections("agent-1", "agent") == []


def test_an_effect_a_stage_applies_while_the_erasure_reads_the_store_is_removed_too(env):
    _chat(env, GONE, "s-gone", "We booked Quokka Hall", agent_fact=["The venue is Quokka Hall"])
    fact = env.live_facts(scope_key="agent")[0]
    resting_on, reads = env.store.provenance.resting_on, []

    def read_then_a_late_effect(*args):
        out = resting_on(*args)
        reads.append(1)
        if len(reads) == 2:  # a stage that checked its run just before the erasure ended it
            env.store.facts.insert_fact(fact.model_copy(update={"fact_id": "run-late:0", "hash": "h-late",
                                                          "content": "Quokka Hall has a stage"}))
        return out

    env.store.provenance.resting_on = read_then_a_late_effect
    counts = _erase(env)

    assert env.store.facts.get_facts(["run-late:0"]) == [] and counts["facts_by_source"] == 2
    assert traces(env.store.admin.dump_all(), GONE) == []


def test_search_segment_files_holding_the_erased_facts_go_with_the_erasure(tmp_path):
    env = make_env(tmp_path)
    folder = tmp_path / "segments"
    env.settings = env.settings.model_copy(update={"search_segment_dir": str(folder)})
    env.search = LocalFactSearch(env.store, segment_dir=str(folder))
    _chat(env, GONE, "s-gone", "We booked Quokka Hall for the venue", agent_fact=["The venue is Quokka Hall"])
    _chat(env, KEPT, "s-kept", "The budget is fixed at 40k", agent_fact=["The budget is fixed at 40k"])

    def on_disk(word: bytes) -> bool:
        return any(word in p.read_bytes() for p in folder.rglob("*") if p.is_file())

    assert "Quokka" in _seen_by_kept(env) and on_disk(b"quokka")  # the search wrote its segments
    _erase(env)
    # gone from disk with the erasure, not at the agent's next search
    assert not on_disk(b"quokka")
    seen = _seen_by_kept(env)
    assert "Quokka" not in seen and "40k" in seen and not on_disk(b"quokka")
    env.store.close()
