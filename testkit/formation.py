"""The stage-test environment (fakes of every port), scripted answers and store snapshots,
shared by the formation stage tests and the formation task tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline import trigger
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.formation import consolidate_stages, finish as finish_mod, stages
from pipeline.llm.scripted import ScriptedLLM
from pipeline.prompts.consolidation import BlobSection, ConsolidationAnswer
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.prompts.facts import ExtractedFact, FactsAnswer
from pipeline.prompts.reflections import ReflectionItem, ReflectionsAnswer
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
        self.store.ingest.put_agent_settings(AgentSettings(agent_id=agent_id, **toggles))

    def add_messages(self, rows, *, session_id="s-1", agent_id="agent-1", users=("u-1",), tier=0, metadata=None):
        """rows: (role, sender_id or None, text); ``metadata``: every message's (``schemas.metadata``)."""
        for role, sender, text in rows:
            self.counter["msg"] += 1
            n = self.counter["msg"]
            self.clock.advance(seconds=1)
            self.store.ingest.ingest_message(StoredMessage(
                agent_id=agent_id, session_id=session_id, message_id=f"m{n}", event_id=f"e{n}",
                role=role, sender_id=sender, sender_name=sender.title() if sender else None,
                content=text, created_at=self.clock.now(), ingested_at=self.clock.now(),
                weighted_tokens=trigger.estimate_tokens(text), session_users=list(users), user_tier=tier,
                metadata=dict(metadata or {}),
            ), self.clock.now())

    def claim(self, session_id="s-1", agent_id="agent-1", reason="session_end") -> str:
        self.counter["run"] += 1
        run = self.store.runs.try_claim(session_id, trigger.session_end_rule(), FormationRun(
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
        return self.store.facts.list_facts(agent_id, scope_key)

    def all_facts(self, agent_id="agent-1", scope_key=None):
        return self.store.facts.list_facts(agent_id, scope_key, include_retired=True)


def make_env(tmp_path) -> Env:
    """A SQLite store in ``tmp_path``, the scripted LLM, the hashing embedder, the local search
    and a frozen clock; agent ``agent-1`` registered with default toggles."""
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'm.db'}", llm_provider="offline",
                        embedding_provider="hashing")
    store = SQLiteStore(str(tmp_path / "m.db"))
    store.create_indexes()
    e = Env(settings, store, ScriptedLLM(), HashingEmbedder(64), LocalFactSearch(store), FrozenClock())
    e.agent()
    return e


def make_atlas_env(tmp_path, *, index_lag_s: float = 0.0) -> Env:
    """``make_env`` on the Mongo store over the strict Atlas emulation, searched through the
    Atlas adapter; with ``index_lag_s`` a write is searchable only that long after it (on the
    env's clock), as on Atlas, whose search indexes are eventually consistent."""
    from pipeline.search.atlas import AtlasFactSearch
    from pipeline.search.atlas_indexes import ensure_search_indexes
    from pipeline.store.mongo import MongoStore
    from testkit.mongo_emulation import emulated_database

    e = make_env(tmp_path)
    e.store.close()
    e.store = MongoStore(emulated_database(clock=e.clock, index_lag_s=index_lag_s))
    e.store.create_indexes()
    ensure_search_indexes(e.store.col("facts"), e.embedder.dim, wait_s=0, progress=lambda line: None)
    e.search = AtlasFactSearch.from_store(e.store)
    e.settings = e.settings.model_copy(update={"atlas_search": True})
    e.agent()
    return e


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
    """reflections(agent=["text", ("text", [aliases])], ...): a bare text cites message #0."""
    def items(level):
        return [ReflectionItem(text=i, sources=[0]) if isinstance(i, str) else ReflectionItem(text=i[0], sources=list(i[1]))
                for i in level]
    return ReflectionsAnswer(agent=items(agent), user=items(user), session=items(session))


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
    dump = env.store.admin.dump_all()
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
