"""Import is idempotent by its key, whatever happens between two imports (design §13): any
sequence of imports of overlapping files and of owners' edits of imported facts, over the real
store (both adapters), leaves exactly the facts a simple model says, and reports each line as
the model does: one fact per (user, key) first seen with a text its scope did not hold; a line
whose key is stored updates its fact to a text that is new to the fact, and changes nothing
when it says the fact's text or an older one (so an edit is never undone or doubled)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pipeline.owner.curation import edit_fact
from pipeline.text import normalize
from testkit.formation import make_atlas_env, make_env
from usecases.imports import import_file

USERS = ("u-1", "u-2")
TEXTS = ("Ana renews in June", "ana renews  in JUNE", "Ana has twelve seats", "Ana pays by invoice",
         "Ana moved to Porto")
LINES = st.tuples(st.sampled_from(USERS), st.sampled_from(TEXTS), st.sampled_from([None, "crm-1", "crm-2"]))


class ImportMachine(RuleBasedStateMachine):
    adapter = "sqlite"

    @initialize()
    def open(self):
        import tempfile
        from pathlib import Path

        self.folder = tempfile.TemporaryDirectory()
        path = Path(self.folder.name)
        self.env = make_env(path) if self.adapter == "sqlite" else make_atlas_env(path)
        self.texts: dict[tuple[str, str], str] = {}        # (user, key) -> its text now
        self.older: dict[tuple[str, str], set[str]] = {}   # (user, key) -> its earlier texts, normalized

    def teardown(self):
        if hasattr(self, "env"):
            self.env.store.close()
            self.folder.cleanup()

    @rule(lines=st.lists(LINES, min_size=1, max_size=5))
    def import_a_file(self, lines):
        body = "".join(json.dumps({"user_id": u, "text": t, **({"import_key": k} if k else {})}) + "\n"
                       for u, t, k in lines).encode()
        summary = import_file(self.env, [body], "agent-1", by="test")
        expected = {"added": 0, "updated": 0, "unchanged": 0, "exists": 0}
        for user, text, key in lines:
            expected[self._line(user, " ".join(text.split()), key or normalize(text))] += 1  # stored on one line
        assert {k: getattr(summary, k) for k in expected} == expected

    def _line(self, user: str, text: str, key: str) -> str:
        """What the model says one line does, in file order."""
        known = (user, key)
        held = {normalize(t) for (u, _), t in self.texts.items() if u == user}
        if known in self.texts:
            now = self.texts[known]
            if normalize(text) == normalize(now) or normalize(text) in self.older[known]:
                return "unchanged"
            if normalize(text) in held:
                return "exists"
            self.older[known].add(normalize(now))
            self.texts[known] = text
            return "updated"
        if normalize(text) in held:
            return "exists"
        self.texts[known], self.older[known] = text, set()
        return "added"

    @rule(data=st.data(), new=st.sampled_from(("Ana renews in July", "Ana has ten seats", "Ana left")))
    def an_owner_edits_an_imported_fact(self, data, new):
        live = [f for u in USERS for f in self.env.store.facts.list_facts("agent-1", f"user:{u}")]
        if not live:
            return
        fact = data.draw(st.sampled_from(live))
        if any(normalize(new) == normalize(t) for (u, _), t in self.texts.items() if u == fact.user_id):
            return
        assert edit_fact(self.env, fact, new, people=[fact.user_id]) is not None
        known = next(k for k, t in self.texts.items() if k[0] == fact.user_id and t == fact.content)
        self.older[known].add(normalize(fact.content))
        self.texts[known] = new

    @invariant()
    def the_store_holds_what_the_model_says(self):
        if not hasattr(self, "env"):
            return
        stored = sorted((f.user_id, f.content) for u in USERS for f in self.env.store.facts.list_facts("agent-1", f"user:{u}"))
        assert stored == sorted((u, t) for (u, _), t in self.texts.items())


def _case(adapter: str):
    machine = type(f"ImportMachine_{adapter}", (ImportMachine,), {"adapter": adapter})
    machine.TestCase.settings = settings(max_examples=10, stateful_step_count=6, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    return machine.TestCase


TestImportIsIdempotentOnSQLite = _case("sqlite")
TestImportIsIdempotentOnMongo = _case("mongo")


def test_a_fact_edited_since_its_import_is_not_brought_back_by_importing_again(tmp_path):
    env = make_env(tmp_path)
    line = json.dumps({"user_id": "u-1", "text": "Ana renews in June"}).encode() + b"\n"
    assert import_file(env, [line], "agent-1", by="test").added == 1
    [fact] = env.store.facts.list_facts("agent-1", "user:u-1")
    edit_fact(env, fact, "Ana renews in July", people=["u-1"])
    again = import_file(env, [line], "agent-1", by="test")
    assert (again.added, again.unchanged, again.updated) == (0, 1, 0)
    assert [f.content for f in env.store.facts.list_facts("agent-1", "user:u-1")] == ["Ana renews in July"]
    env.store.close()
