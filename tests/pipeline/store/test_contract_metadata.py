"""Metadata on every adapter (design §13 "Categories and metadata"): a fact's metadata is
stored and read back; an UPDATE joins the values it brings to the fact's, on the version it
writes over, and keeps them when it brings none; a person's correction replaces them, and the
labels filters read follow."""

from __future__ import annotations

from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from testkit.documents import at, fact

METADATA = {"project": "apollo", "tier": 2, "beta": True, "deal.stage": "won"}


def _update(store, fact_id: str, text: str, run_id: str, metadata=None, replace=None) -> bool:
    return store.facts.update_fact(fact_id, FactUpdate(content=text, hash=text_hash(text), embedding=None,
                                                       embedding_model=None, run_id=run_id, now=at(60),
                                                       metadata=metadata, replace_metadata=replace))


def test_a_facts_metadata_is_stored_and_an_update_joins_or_keeps_it(store):
    store.facts.insert_fact(fact("f1", "The launch budget is 12,000 euros").model_copy(update={"metadata": METADATA}))
    assert store.facts.get_facts(["f1"])[0].metadata == METADATA
    assert _update(store, "f1", "The launch budget is 13,000 euros", "run-1")
    assert store.facts.get_facts(["f1"])[0].metadata == METADATA
    assert _update(store, "f1", "The launch budget is 14,000 euros", "run-2", {"project": "zeus", "tier": 2})
    assert store.facts.get_facts(["f1"])[0].metadata == {**METADATA, "project": ["apollo", "zeus"]}



def test_a_correction_replaces_the_facts_metadata_and_filters_follow(store):
    store.facts.insert_fact(fact("f1", "The launch budget is 12,000 euros").model_copy(update={"metadata": METADATA}))
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:project="apollo"']]) == {"f1"}
    assert _update(store, "f1", "The launch budget is 12,000 euros", "edit-1", replace={"project": ["zeus", "hera"]})
    got = store.facts.get_facts(["f1"])[0]
    assert got.metadata == {"project": ["zeus", "hera"]} and got.version == 2
    assert [h.content for h in got.history] == ["The launch budget is 12,000 euros"]
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:project="apollo"']]) == set()
    assert store.facts.labelled_fact_ids("a1", ["agent"], [["meta:tier=2"]]) == set()
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:project="hera"']]) == {"f1"}
    assert _update(store, "f1", "The launch budget is 13,000 euros", "edit-2", replace={})
    assert store.facts.get_facts(["f1"])[0].metadata == {}
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:project="zeus"']]) == set()
