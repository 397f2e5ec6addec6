"""Categories on every adapter (design §13 "Categories and metadata"): a fact's categories and
an agent's category list are stored and read back; an UPDATE sets new categories when given
and keeps the fact's when not."""

from __future__ import annotations

from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from schemas.documents import AgentSettings
from schemas.owner import CategoryList
from testkit.documents import T0, at, fact


def _update(store, fact_id: str, text: str, run_id: str, categories=None) -> bool:
    return store.facts.update_fact(fact_id, FactUpdate(content=text, hash=text_hash(text), embedding=None,
                                                 embedding_model=None, run_id=run_id, now=at(60),
                                                 categories=categories))


def test_a_facts_categories_are_stored_and_an_update_keeps_or_replaces_them(store):
    store.facts.insert_fact(fact("f1", "The launch budget is 12,000 euros").model_copy(
        update={"categories": ["finance", "projects"]}))
    store.facts.insert_fact(fact("f2", "Ines likes tea"))
    got = {f.fact_id: f for f in store.facts.get_facts(["f1", "f2"])}
    assert (got["f1"].categories, got["f2"].categories) == (["finance", "projects"], [])
    assert _update(store, "f1", "The launch budget is 13,000 euros", "run-1")
    assert store.facts.get_facts(["f1"])[0].categories == ["finance", "projects"]
    assert _update(store, "f1", "The launch budget is 14,000 euros", "run-2", ["finance"])
    assert store.facts.get_facts(["f1"])[0].categories == ["finance"]
    assert _update(store, "f1", "The launch budget is 15,000 euros", "run-3", [])
    assert store.facts.get_facts(["f1"])[0].categories == []


def test_an_agents_category_versions_are_stored_and_read_back(store):
    versions = [CategoryList(version=1, names=["venues"], set_by="k1", set_at=T0),
                CategoryList(version=2, names=[], set_by="k1", set_at=at(5), rolled_back_to=None)]
    store.ingest.put_agent_settings(AgentSettings(agent_id="A", categories=versions))
    assert store.ingest.get_agent_settings("A").categories == versions
    assert store.ingest.get_agent_settings("B").categories == []
