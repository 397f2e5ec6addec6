"""A person's memory survives the round trip ``export-user`` -> ``forget-user`` -> ``import``
(design §13 "Direct writes and import"), on both stores: the same facts with their history,
reflections and blob sections come back, resting on that person and stamped ``source: import``,
and ``forget-user`` with its verification still erases them all."""

from __future__ import annotations

import json

from pipeline.formation import consolidate_stages as cs
from pipeline.formation.runner import Usage
from pipeline.forgetting import verify_erasure
from pipeline.llm.offline import OfflineLLM
from pipeline.export import export_user
from pipeline.owner.curation import edit_fact
# the formation env on each store (SQLite; Mongo over the Atlas emulation), as erasure's tests use it
from tests.pipeline.formation.test_erasure import env  # noqa: F401
from testkit.formation import facts, merge_all, reflections
from usecases import metadata_keys
from usecases.erase import forget_user
from usecases.imports import import_file
from usecases.verify import traces

GONE, KEPT = "u-1", "u-2"


def _memory(env):
    """A one-to-one chat (a user fact, edited since, and a user reflection merged into the
    user's blob) and a group chat (an agent fact and reflections of both people merged into the
    agent blob)."""
    env.llm.on("extract_facts", facts(("user", "Maya lives in Lisbon"), ("agent", "The launch venue is Quokka Hall")),
               times=1)
    env.llm.on("extract_reflections", reflections(user=["Maya prefers short answers"]), times=1)
    metadata_keys.set_keys(env.store.ingest, "agent-1", ["project"], now=env.clock.now())
    env.through_reflections(env.new_run([("user", GONE, "I live in Lisbon and like short answers"),
                                         ("assistant", None, "Noted.")], session_id="s-maya", users=(GONE,),
                                        metadata={"project": "apollo", "channel": "web"}))
    env.llm.on("extract_facts", facts(), times=1)
    env.llm.on("extract_reflections", reflections(agent=[("Maya wants the launch on a Tuesday", [0]),
                                                         ("Tom handles audio and video", [2])]), times=1)
    env.through_reflections(env.new_run([("user", GONE, "I want the launch on a Tuesday"), ("assistant", None, "Ok."),
                                         ("user", KEPT, "I handle audio and video")],
                                        session_id="s-group", users=(GONE, KEPT)))
    env.llm.on("consolidate", merge_all)
    cs.merge_scope(env, "agent-1", f"user:{GONE}", model="m", holder="h-1", usage=Usage(), session_end="s-maya")
    cs.merge_scope(env, "agent-1", "agent", model="m", holder="h-2", usage=Usage(), session_end="s-group")
    [lisbon] = [f for f in env.live_facts(scope_key=f"user:{GONE}")]
    assert edit_fact(env, lisbon, "Maya lives in Porto", people=[GONE]) is not None


def _comparable(records):
    """What must come back: facts with their history, reflections, blob text, less how each
    was written (``source``) and whether it is shared (the others' part stays with them)."""
    out = []
    for r in records:
        if r["kind"] in ("message", "run_cost"):
            continue
        kept = {k: v for k, v in r.items() if k not in ("source", "shared", "version")
                or (k == "version" and r["kind"] == "fact")}
        if r["kind"] == "blob":
            kept["content"] = r["content"].split("\n", 1)[1]  # the "VERSION: n" line moves on
        out.append(kept)
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def _erase(env, user=GONE):
    return forget_user(env.store, user, "agent-1", settings=env.settings, llm=OfflineLLM(env.settings),
                       clock=env.clock).counts


def test_export_forget_import_gives_back_the_same_memory_and_forget_still_erases_it(env):
    _memory(env)
    exported = [json.dumps(r) for r in export_user(env.store, GONE, "agent-1")]
    assert {"fact", "reflection", "blob", "blob_section"} <= {json.loads(r)["kind"] for r in exported}
    _erase(env)
    assert list(export_user(env.store, GONE, "agent-1")) == []

    summary = import_file(env, [("\n".join(exported) + "\n").encode()], "agent-1", by="test")

    assert summary.rejected == 0, summary.rejects
    again = list(export_user(env.store, GONE, "agent-1"))
    assert _comparable(again) == _comparable(json.loads(r) for r in exported)
    porto = next(r for r in again if r["kind"] == "fact" and r["scope"] == "user")
    assert porto["content"] == "Maya lives in Porto" and [h["content"] for h in porto["history"]] == [
        "Maya lives in Lisbon"]
    assert porto["metadata"] == {"project": "apollo"}  # the marked key of its message, back with it
    assert {r["source"] for r in again if r["kind"] in ("fact", "reflection")} == {"import"}
    assert "Tom handles audio and video" in env.store.blobs.get_blob("agent-1", "agent").consolidated_content

    # importing the same file again adds nothing
    twice = import_file(env, [("\n".join(exported) + "\n").encode()], "agent-1", by="test")
    assert twice.added == 0 and twice.rejected == 0

    result = _erase(env)
    assert result["facts_by_source"] + result.get("facts", 0) >= 1
    assert verify_erasure(env.store, GONE, "agent-1").passed()
    assert traces(env.store.admin.dump_all(), GONE) == []
    assert "Porto" not in json.dumps(env.store.admin.dump_all(), default=str)
    assert "Tuesday" not in env.store.blobs.get_blob("agent-1", "agent").consolidated_content


def test_a_blob_an_owner_wrote_whole_is_exported_and_comes_back(env):
    """A user's blob replaced by an owner absorbed no reflection of theirs: the export still
    carries it, since it is theirs, and the round trip brings it back."""
    from usecases.edit import replace_user_blob

    replace_user_blob(env.store, env.settings, "agent-1", GONE, "[WORKING STYLE]\n- Maya prefers short answers",
                      by="owner", now=env.clock.now())
    exported = [r for r in export_user(env.store, GONE, "agent-1") if r["kind"] == "blob"]
    assert [(r["scope_key"], r["content"].split("\n", 1)[1]) for r in exported] == [
        (f"user:{GONE}", "[WORKING STYLE]\n- Maya prefers short answers")]
    _erase(env)
    assert env.store.blobs.get_blob("agent-1", f"user:{GONE}") is None
    summary = import_file(env, [("\n".join(json.dumps(r) for r in exported) + "\n").encode()], "agent-1", by="test")
    assert summary.rejected == 0, summary.rejects
    assert "Maya prefers short answers" in env.store.blobs.get_blob("agent-1", f"user:{GONE}").consolidated_content
