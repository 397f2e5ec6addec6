"""Scripted answers and store snapshots shared by the formation stage tests."""

from __future__ import annotations

from pipeline.prompts.consolidation import BlobSection, ConsolidationAnswer
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.prompts.facts import ExtractedFact, FactsAnswer
from pipeline.prompts.reflections import ReflectionsAnswer

ALICE_CHAT = [
    ("user", "u-1", "I am Alice and my email is alice@example.com."),
    ("assistant", None, "Noted."),
    ("user", "u-1", "I prefer short answers."),
    ("assistant", None, "Sure."),
]


def facts(*items: tuple[str, str]) -> FactsAnswer:
    """facts(("user", "Alice's email is ..."), ("agent", "..."))"""
    return FactsAnswer(facts=[ExtractedFact(scope=scope, text=text) for scope, text in items])


def reflections(agent=(), user=(), session=()) -> ReflectionsAnswer:
    return ReflectionsAnswer(agent=list(agent), user=list(user), session=list(session))


def decisions(*items: tuple) -> DecisionsAnswer:
    """decisions((new, action, existing, text), ...)"""
    out = []
    for item in items:
        new, action, existing, text = (*item, None, None)[:4]
        out.append(FactDecision(new=new, action=action, existing=existing, text=text))
    return DecisionsAnswer(decisions=out)


def blob_answer(*sections: tuple[str, list[str]]) -> ConsolidationAnswer:
    return ConsolidationAnswer(sections=[BlobSection(name=n, bullets=b) for n, b in sections])


def merge_all(request) -> ConsolidationAnswer:
    """A consolidation that keeps every reflection as one bullet (what a faithful merge does)."""
    bullets = [b for s in request.inputs["current_sections"] for b in s["bullets"]]
    bullets += list(request.inputs["reflections"])
    return blob_answer(("NOTES", bullets))


def snapshot(env, agent_id="agent-1") -> dict:
    """Everything a rerun must leave unchanged (scope stamps excepted: bumping them again only
    invalidates caches)."""
    dump = env.store.dump_all()
    facts_rows = sorted(
        (f["fact_id"], f["content"], f.get("version"), len(f.get("history") or []), bool(f.get("retired_at")))
        for f in _docs(dump, "facts")
    )
    refl_rows = sorted(
        (r["reflection_id"], r["content"], bool(r.get("absorbed")), r.get("consolidated_into"))
        for r in _docs(dump, "reflections")
    )
    blob_rows = sorted(
        (b["agent_id"], b["scope_key"], b.get("version"), b.get("consolidated_content"))
        for b in _docs(dump, "consolidated")
    )
    return {"facts": facts_rows, "reflections": refl_rows, "blobs": blob_rows}


def _docs(dump: dict, collection: str) -> list[dict]:
    for name, rows in dump.items():
        if name.endswith(collection):
            return rows
    raise KeyError(f"no {collection} in the store dump ({sorted(dump)})")
