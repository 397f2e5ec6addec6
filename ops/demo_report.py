"""What ``make demo`` prints once the sample is formed: the memory, the runs, and what the
agent sees (the memory context and a ``search_facts`` answer)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ops.runs import format_run
from usecases.runs import run_summary
from schemas.documents import scope_key

# What the agent is asked about in the demo: Maya, in her follow-up session.
CONTEXT_SESSION = "s3-maya-followup"
CONTEXT_USER = "user-maya"
SEARCH_QUERY = "Where does Maya live now?"


def heading(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(3, 76 - len(title)))


def _scopes(events: Sequence[dict]) -> dict[str, dict[str, list[str]]]:
    """agent id -> {"users": [...], "sessions": [...]}, in order of appearance."""
    out: dict[str, dict[str, list[str]]] = {}
    for event in events:
        entry = out.setdefault(event["agent_id"], {"users": [], "sessions": []})
        if event["session_id"] not in entry["sessions"]:
            entry["sessions"].append(event["session_id"])
        for user in event.get("session_users", []):
            if user not in entry["users"]:
                entry["users"].append(user)
    return out


def _keys(scopes: dict[str, list[str]]) -> list[str]:
    return (
        ["agent"]
        + [scope_key("user", user_id=u) for u in scopes["users"]]
        + [scope_key("session", session_id=s) for s in scopes["sessions"]]
    )


def print_facts(store, agent_id: str, keys: Sequence[str]) -> None:
    heading(f"Facts of {agent_id}")
    for key in keys:
        facts = [] if key.startswith("session:") else store.facts.list_facts(agent_id, key)
        if facts:
            print(f"[{key}]")
            for fact in reversed(facts):
                version = f" (v{fact.version}, was: {fact.history[-1].content!r})" if fact.history else ""
                filed = f"  [{', '.join(fact.categories)}]" if fact.categories else ""
                print(f"  - {fact.content}{version}{filed}")


def print_reflections(store, agent_id: str, keys: Sequence[str]) -> None:
    heading(f"Reflections of {agent_id}")
    for key in keys:
        reflections = store.reflections.list_reflections(agent_id, key)
        if reflections:
            print(f"[{key}]")
            for reflection in reflections:
                mark = "absorbed" if reflection.absorbed else "buffered"
                print(f"  - ({mark}) {reflection.content}")


def print_blobs(store, agent_id: str, keys: Sequence[str]) -> None:
    heading(f"Consolidated memory of {agent_id}")
    for key in keys:
        blob = store.blobs.get_blob(agent_id, key)
        if blob and blob.consolidated_content:
            print(f"[{key}] version {blob.version}, limit {blob.word_limit} words")
            print(textwrap.indent(blob.consolidated_content, "  "))


def print_runs(store) -> None:
    heading("Formation runs (stage timings)")
    runs = sorted(store.runs.list_runs(limit=1000), key=lambda r: r.created_at)
    for run in runs:
        print(format_run(run_summary(run)))


def print_read_side(deps, agent_id: str) -> None:
    from pipeline.service import MemoryService

    service = MemoryService(
        agent_id, settings=deps.settings, store=deps.store, search=deps.search, embedder=deps.embedder,
        clock=deps.clock,
    )
    # the context as the agent gets it before answering the question: the facts found for
    # it first (<RelevantFacts>), then the blobs' and the recent facts
    heading(f"Memory context for {CONTEXT_USER} in {CONTEXT_SESSION}, asked {SEARCH_QUERY!r}")
    print(service.get_memory_context(session_id=CONTEXT_SESSION, user_id=CONTEXT_USER, query=SEARCH_QUERY)
          or "(empty)")
    heading(f"search_facts({SEARCH_QUERY!r})")
    hits = service.search_facts(SEARCH_QUERY, session_id=CONTEXT_SESSION, user_id=CONTEXT_USER, top_k=5)
    for hit in hits:
        print(f"  {hit['score']:.4f}  [{hit['scope']}] {hit['content']}  ({hit['age']})")
    if not hits:
        print("  (no fact passed the thresholds)")


def print_report(deps, events: Sequence[dict], elapsed_s: float) -> None:
    store = deps.store
    for agent_id, scopes in _scopes(events).items():
        keys = _keys(scopes)
        print_facts(store, agent_id, keys)
        print_reflections(store, agent_id, keys)
        print_blobs(store, agent_id, keys)
    print_runs(store)
    for agent_id in _scopes(events):
        print_read_side(deps, agent_id)
    messages = sum(1 for e in events if e.get("type") == "message.added")
    print(f"\n{messages} messages in {len(_scopes(events)[events[0]['agent_id']]['sessions'])} sessions "
          f"formed in {elapsed_s:.1f} s")
