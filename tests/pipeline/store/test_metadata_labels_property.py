"""A fact's labels follow its metadata through any sequence of changes, on every adapter
(design §13 "Categories and metadata"): formation's UPDATEs join values, a person's corrections
replace them, and after each step a label filter finds exactly the facts whose metadata holds
that value (1 and true apart), as a plain model of the metadata says."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from schemas.metadata import merged, metadata_label, values_of
from testkit.documents import at, fact
from tests.pipeline.store.conftest import open_adapter

FACTS = ("f0", "f1", "f2")
DOMAIN = {"project": ("apollo", "zeus", "hera"), "tier": (1, 2, True)}
HELD = st.dictionaries(st.sampled_from(sorted(DOMAIN)), st.none(), max_size=2).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.one_of(st.sampled_from(DOMAIN[k]),
                                                     st.lists(st.sampled_from(DOMAIN[k]), min_size=1, max_size=3))
                                        for k in keys}))


class LabelsMachine(RuleBasedStateMachine):
    adapter = "sqlite"

    @initialize()
    def open(self):
        self.folder = tempfile.TemporaryDirectory()
        self.store = open_adapter(self.adapter, Path(self.folder.name))
        self.store.create_indexes()
        self.model: dict[str, dict] = {}
        for n, fact_id in enumerate(FACTS):
            self.store.facts.insert_fact(fact(fact_id, f"The launch note {n}"))
            self.model[fact_id] = {}
        self.runs = 0

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()
            self.folder.cleanup()

    def _update(self, fact_id: str, **change) -> None:
        self.runs += 1
        stored = self.store.facts.get_facts([fact_id])[0]
        assert self.store.facts.update_fact(fact_id, FactUpdate(
            content=stored.content, hash=text_hash(stored.content), embedding=None, embedding_model=None,
            run_id=f"run-{self.runs}", now=at(self.runs), **change))

    @rule(fact_id=st.sampled_from(FACTS), values=HELD)
    def formation_joins(self, fact_id, values):
        self._update(fact_id, metadata=values)
        self.model[fact_id] = merged(self.model[fact_id], values)

    @rule(fact_id=st.sampled_from(FACTS), values=HELD)
    def a_person_corrects(self, fact_id, values):
        self._update(fact_id, replace_metadata=merged({}, values))
        self.model[fact_id] = merged({}, values)

    @invariant()
    def labels_find_exactly_the_facts_holding_each_value(self):
        if not hasattr(self, "store"):
            return
        for key, values in DOMAIN.items():
            for value in values:
                label = metadata_label(key, value)
                holding = {f for f, meta in self.model.items()
                           if any(type(v) is type(value) and v == value for v in values_of(meta.get(key, [])))}
                assert self.store.facts.labelled_fact_ids("a1", ["agent"], [[label]]) == holding, label
        assert {f.fact_id: f.metadata for f in self.store.facts.get_facts(FACTS)} == self.model


def _case(adapter: str):
    machine = type(f"LabelsMachine_{adapter}", (LabelsMachine,), {"adapter": adapter})
    machine.TestCase.settings = settings(max_examples=12, stateful_step_count=8, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    return machine.TestCase


TestLabelsFollowMetadataOnSQLite = _case("sqlite")
TestLabelsFollowMetadataOnMongo = _case("mongo")
