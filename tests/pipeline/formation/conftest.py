"""Stage tests run on hand-written fakes of every port: a SQLite store in a tmp dir, the
scripted LLM, the hashing embedder, the local search and a frozen clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from pipeline import trigger
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.formation import consolidate_stages, finish as finish_mod, stages
from pipeline.llm.scripted import ScriptedLLM
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import AgentSettings, FormationRun, StoredMessage
from schemas.settings import Settings


@dataclass
class Env:
    settings: Settings
    store: SQLiteStore
    llm: ScriptedLLM
    embedder: HashingEmbedder
    search: LocalFactSearch
    clock: FrozenClock
    counter: dict = field(default_factory=lambda: {"msg": 0, "run": 0})

    # ---- building runs -------------------------------------------------------------------
    def agent(self, agent_id: str = "agent-1", **toggles) -> None:
        self.store.put_agent_settings(AgentSettings(agent_id=agent_id, **toggles))

    def add_messages(self, rows, *, session_id="s-1", agent_id="agent-1", users=("u-1",), tier=0):
        """rows: (role, sender_id or None, text)."""
        for role, sender, text in rows:
            self.counter["msg"] += 1
            n = self.counter["msg"]
            self.clock.advance(seconds=1)
            self.store.ingest_message(StoredMessage(
                agent_id=agent_id, session_id=session_id, message_id=f"m{n}", event_id=f"e{n}",
                role=role, sender_id=sender, sender_name=sender.title() if sender else None,
                content=text, created_at=self.clock.now(), ingested_at=self.clock.now(),
                weighted_tokens=trigger.estimate_tokens(text), session_users=list(users), user_tier=tier,
            ), self.clock.now())

    def claim(self, session_id="s-1", agent_id="agent-1", reason="session_end") -> str:
        self.counter["run"] += 1
        run = self.store.try_claim(session_id, trigger.session_end_rule(), FormationRun(
            run_id=f"run-{self.counter['run']}", agent_id=agent_id, session_id=session_id, seq_from=0,
            seq_to=0, reason=reason, created_at=self.clock.now(),
        ), self.clock.now(), self.settings.claim_lease_s)
        assert run is not None, "nothing to claim"
        return run.run_id

    def new_run(self, rows, **kw) -> str:
        """Messages in a session (a fresh one per run unless named), then a claim on them."""
        kw.setdefault("session_id", f"s-{self.counter['run'] + 1}")
        session_id = kw["session_id"]
        agent_id = kw.get("agent_id", "agent-1")
        reason = kw.pop("reason", "threshold")
        self.add_messages(rows, **kw)
        return self.claim(session_id=session_id, agent_id=agent_id, reason=reason)

    # ---- running runs --------------------------------------------------------------------
    def through_reflections(self, run_id: str) -> None:
        for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts, stages.extract_reflections):
            assert stage(run_id, self) is not None

    def whole_chain(self, run_id: str):
        self.through_reflections(run_id)
        due = consolidate_stages.consolidate(run_id, self).output["due"]
        for i in range(len(due)):
            consolidate_stages.consolidate_scope(run_id, i, self)
        assert consolidate_stages.scopes_done(self, run_id)
        return finish_mod.finish(run_id, self)

    def live_facts(self, agent_id="agent-1", scope_key=None):
        return self.store.list_facts(agent_id, scope_key)

    def all_facts(self, agent_id="agent-1", scope_key=None):
        return self.store.list_facts(agent_id, scope_key, include_retired=True)


@pytest.fixture
def env(tmp_path) -> Env:
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'm.db'}", llm_provider="offline",
                        embedding_provider="hashing")
    store = SQLiteStore(str(tmp_path / "m.db"))
    store.create_indexes()
    e = Env(settings, store, ScriptedLLM(), HashingEmbedder(64), LocalFactSearch(store), FrozenClock())
    e.agent()
    yield e
    store.close()


def hours(n: float) -> timedelta:
    return timedelta(hours=n)
