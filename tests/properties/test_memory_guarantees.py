"""The memory guarantees of design §11, held together by one stateful property test.

A Hypothesis ``RuleBasedStateMachine`` drives the whole pipeline (``tests/properties/stack.py``:
the real SQLite store, ingest, formation stages, sweeps and ``forget-user``; the offline LLM,
the hashing embedder, a frozen clock) and two ``MemoryService`` instances over the same store,
standing in for two processes of an agent runtime. Users say distinctive tokens (``zq007v``,
``qvxbad``) in one-to-one and group sessions; a group is declared with ``on_session_start`` on
one instance and its messages are published through the other. Sessions end and resume, users
move house, users are erased, toggles flip, formation tasks run in any order the chains allow
and beat sweeps after the clock moves.

After every step, reading every (user, session) pair of the model through both instances
(``get_memory_context`` and ``search_facts`` for every token stored in a fact) and a dump of
the store:

1. A token said only by user X reaches another user only through agent-scope memory, or
   through the memory of the very session X said it in (its participants heard it). Never
   through X's user scope, never through user scope while the session is a group chat (X
   included), never as a contact detail (email, phone) in agent scope, never when it is a
   secret. Toggles hold: no user scope with user memory off, no agent scope with agent memory
   off, no context with ``MEMORY_ALWAYS_IN_CONTEXT`` off, no search with ``MEMORY_RAG`` off.
2. After ``forget-user X`` no output to anyone contains a token X said, no stored document
   does either (X's messages go with them), and the ``--verify`` audit finds nothing, then and
   after every later step.
3. A superseded value is never live: every fact a context or a search shows is live and open
   (no ``valid_to``); once a user's later city is in memory (any version of any of their
   facts), no live fact holds an earlier one. The offline rules correct a slot when the dedup
   candidate search finds the old fact, which with the lexical hashing embedder needs the same
   phrasing: "I live in <A>" then "I live in <B>" (content score ~0.89). "I moved to <B>"
   scores 0.62 against "lives in <A>", below the 0.7 candidate floor (MiniLM gives ~0.64 for
   invented names), so the test says only the form the rules are known to handle.
4. A resumed session never has more runs than the thresholds allow: a threshold run covers
   at least ``MEMORY_FORMATION_MESSAGE_INTERVAL`` messages (tokens never reach theirs here), a
   cold run at least ``MEMORY_MIN_MESSAGES_TO_FORM``, and a session has no more session-end
   runs than it has ends.
5. No secret is stored in facts (history included), reflections, blobs or what a run
   formed (its extracted facts, decided texts and reflections), and no stored text of facts,
   reflections and blobs matches the secret guard. Messages keep the raw text by design
   (design §11: only derived memory is screened) and are not checked; every other stored
   document, source excerpts included, is checked by ``test_secrets_never_stored``.

Budget: ``MEMORY_PROPERTY_EXAMPLES`` (default 40) examples of up to ``MEMORY_PROPERTY_STEPS``
(default 40) steps; under a minute on a shared 2-core machine. With ``CI`` set the run is
derandomized (the same examples each time); no example database is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipeline.formation.secrets import SecretGuard
from schemas.documents import AgentSettings
from schemas.settings import Settings
from tests.properties.stack import AGENT, Stack

USERS = {"user-ana": "Ana", "user-ben": "Ben", "user-cid": "Cid", "user-dee": "Dee", "user-eve": "Eve"}
NOUNS = ("shuttle", "gate", "badge", "dock", "table", "locker", "kiosk")
CITY_PARTS = ("Zor", "Quen", "Vald", "Brix", "Tamo", "Selk", "Ondr", "Pyx")
EXAMPLES = int(os.environ.get("MEMORY_PROPERTY_EXAMPLES", "40"))
STEPS = int(os.environ.get("MEMORY_PROPERTY_STEPS", "40"))
# what a kind of sentence is (how the test may see its token): statements of the shared world,
# of the speaker, contact data, secrets, a city the speaker lives in
KINDS = ("agent_fact", "agent_reflection", "user_fact", "user_reflection", "contact_email_agent",
         "contact_email_user", "contact_phone", "secret_password", "secret_password_agent", "secret_api_key",
         "secret_card", "city")
CONTACT = {"contact_email_agent", "contact_email_user", "contact_phone"}
SECRET = {k for k in KINDS if k.startswith("secret")}
_SECTION = re.compile(r"<(AgentMemory|UserMemory|SessionMemory)>(.*?)</\1>", re.S)
_FACT_LINE = re.compile(r"^\s*- \[(agent|user)\] (.*) \(\d+[mhd] ago\)$", re.M)
_SCOPE = {"AgentMemory": "agent", "UserMemory": "user", "SessionMemory": "session"}


@dataclass
class Said:
    token: str
    user: str
    session: str
    kind: str
    at: datetime


@dataclass
class SessionModel:
    users: list[str]
    ended: bool = False
    messages: int = 0


@dataclass
class Model:
    tokens: dict[str, Said] = field(default_factory=dict)
    sessions: dict[str, SessionModel] = field(default_factory=dict)
    erased: set[str] = field(default_factory=set)
    cities: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)


def _luhn_complete(body: str) -> str:
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def _letters(n: int) -> str:
    out = ""
    for _ in range(3):
        n, r = divmod(n, 26)
        out += chr(ord("a") + r)
    return out


class MemoryGuarantees(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memprops-"))
        self.settings = Settings(
            _env_file=None, store_url=f"sqlite:///{self.tmp / 'memory.db'}", llm_provider="offline",
            embedding_provider="hashing", formation_message_interval=6, formation_token_interval=100000,
            min_messages_to_form=3, consolidation_threshold_agent=3, consolidation_threshold_user=2,
            consolidation_threshold_session=2,
        )
        self.stack = Stack(self.tmp / "memory.db", self.settings)
        self.model = Model()
        self.counter = 0
        self.guard = SecretGuard()

    def teardown(self) -> None:
        self.stack.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers ------------------------------------------------------------------------
    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _live_users(self) -> list[str]:
        return [u for u in USERS if u not in self.model.erased]

    def _sentence(self, kind: str, speaker: str) -> tuple[str, str]:
        """(token, sentence) of a kind; every token is new."""
        n = self._next()
        tok = f"zq{n:03d}v"
        noun = NOUNS[n % len(NOUNS)]
        if kind == "agent_fact":
            return tok, f"The {noun} number is {tok}."
        if kind == "agent_reflection":
            tok = f"qvx{_letters(n)}"
            return tok, f"The launch theme is {tok}."
        if kind == "user_fact":
            return tok, f"My {noun} number is {tok}."
        if kind == "user_reflection":
            tok = f"qvx{_letters(n)}"
            return tok, f"I prefer the {tok} layout."
        if kind == "contact_email_agent":
            return tok, f"The caterer email is {tok}@example.org."
        if kind == "contact_email_user":
            return tok, f"My email is {tok}@example.org."
        if kind == "contact_phone":
            tok = f"4{n % 100:02d}-555-{1000 + n:04d}"
            return tok, f"The caterer phone is {tok}."
        if kind == "secret_password":
            return tok, f"My password is {tok}-9!"
        if kind == "secret_password_agent":
            return tok, f"The wifi password is {tok}-9!"
        if kind == "secret_api_key":
            return tok, f"The staging API key is sk-proj-{tok}Q8r2LmX7pV4tZ."
        if kind == "secret_card":
            tok = _luhn_complete(f"4{n:014d}")
            return tok, f"My card number is {tok}."
        city = CITY_PARTS[n % len(CITY_PARTS)] + _letters(n) + "ia"
        return city.lower(), f"I live in {city}."

    def _publish(self, session_id: str, speaker: str, text: str, via: int) -> None:
        self.stack.clock.advance(minutes=1)
        n = self._next()
        self.stack.services[via].maybe_form_memories([
            {"message_id": f"m{n}", "role": "user", "sender_id": speaker, "sender_name": USERS[speaker],
             "content": text},
            {"message_id": f"m{n}r", "role": "assistant", "content": "Noted."},
        ], session_id=session_id)
        self.model.sessions[session_id].messages += 2
        # a message after the end reopens the session (design §11)
        self.model.sessions[session_id].ended = False

    # ---- rules --------------------------------------------------------------------------
    @initialize(via=st.integers(0, 1))
    def first_sessions(self, via):
        """One-to-one sessions (Ana on two devices at once) and a group, so that people can
        talk from the first step."""
        for session_id, users in (("s-ana", ["user-ana"]), ("s-ana-phone", ["user-ana"]), ("s-ben", ["user-ben"]),
                                  ("g-team", ["user-ana", "user-ben", "user-cid"])):
            self.model.sessions[session_id] = SessionModel(users)
        self.stack.services[via].on_session_start(session_id="g-team", user_ids=["user-ana", "user-ben", "user-cid"])

    @precondition(lambda self: len(self._live_users()) >= 1)
    @rule(data=st.data(), via=st.integers(0, 1))
    def open_one_to_one(self, data, via):
        user = data.draw(st.sampled_from(self._live_users()))
        session_id = f"s{self._next()}"
        self.model.sessions[session_id] = SessionModel([user])
        if data.draw(st.booleans()):
            self.stack.services[via].on_session_start(session_id=session_id, user_ids=[user])

    @precondition(lambda self: len(self._live_users()) >= 2)
    @rule(data=st.data(), via=st.integers(0, 1))
    def open_group(self, data, via):
        users = data.draw(st.lists(st.sampled_from(self._live_users()), min_size=2, max_size=3, unique=True))
        session_id = f"g{self._next()}"
        self.model.sessions[session_id] = SessionModel(users)
        self.stack.services[via].on_session_start(session_id=session_id, user_ids=users)

    def _open_sessions(self) -> list[str]:
        return [s for s, m in self.model.sessions.items() if all(u not in self.model.erased for u in m.users)]

    @precondition(lambda self: bool(self._open_sessions()))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), via=st.integers(0, 1))
    def say(self, data, kind, via):
        """A user says a distinctive token; group messages go through either instance (the
        group was declared on one of them)."""
        self._say(data, kind, via, self._open_sessions())

    @precondition(lambda self: any(len(self.model.sessions[s].users) == 1 for s in self._open_sessions()))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), via=st.integers(0, 1))
    def say_one_to_one(self, data, kind, via):
        self._say(data, kind, via, [s for s in self._open_sessions() if len(self.model.sessions[s].users) == 1])

    @precondition(lambda self: any(len(self.model.sessions[s].users) > 1 for s in self._open_sessions()))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), via=st.integers(0, 1))
    def say_in_group(self, data, kind, via):
        self._say(data, kind, via, [s for s in self._open_sessions() if len(self.model.sessions[s].users) > 1])

    @precondition(lambda self: any(len(self.model.sessions[s].users) == 1 for s in self._open_sessions()))
    @rule(data=st.data(), via=st.integers(0, 1))
    def move_house(self, data, via):
        """"I live in <city>" in a one-to-one session: a correction of the last one said."""
        self._say(data, "city", via, [s for s in self._open_sessions() if len(self.model.sessions[s].users) == 1])

    def _say(self, data, kind, via, sessions):
        session_id = data.draw(st.sampled_from(sessions))
        speaker = data.draw(st.sampled_from(self.model.sessions[session_id].users))
        token, text = self._sentence(kind, speaker)
        self._publish(session_id, speaker, text, via)
        self.model.tokens[token] = Said(token, speaker, session_id, kind, self.stack.clock.now())
        if kind == "city":
            self.model.cities.setdefault(speaker, []).append((self.stack.clock.now(), token))
        self._work(data)

    def _work(self, data) -> None:
        """Meanwhile the workers take a few pending tasks, in any order."""
        for _ in range(data.draw(st.integers(0, 6), label="tasks meanwhile")):
            if not self.stack.queue:
                break
            self.stack.run_task(data.draw(st.integers(0, len(self.stack.queue) - 1), label="task"))

    @precondition(lambda self: bool(self._open_sessions()))
    @rule(data=st.data(), via=st.integers(0, 1))
    def chat(self, data, via):
        """Small talk: messages that count toward the thresholds and form nothing."""
        session_id = data.draw(st.sampled_from(self._open_sessions()))
        speaker = data.draw(st.sampled_from(self.model.sessions[session_id].users))
        self._publish(session_id, speaker, "Thanks, that works for me.", via)
        self._work(data)

    @precondition(lambda self: any(not m.ended for m in self.model.sessions.values()))
    @rule(data=st.data(), via=st.integers(0, 1))
    def end_session(self, data, via):
        session_id = data.draw(st.sampled_from([s for s, m in self.model.sessions.items() if not m.ended]))
        self.stack.clock.advance(minutes=1)
        self.stack.services[via].on_session_end(session_id=session_id)
        self.model.sessions[session_id].ended = True
        self.stack.clock.advance(minutes=1)  # a later message is written after the end: a resume
        self._work(data)

    @precondition(lambda self: bool(self.stack.queue))
    @rule(data=st.data())
    def run_one_task(self, data):
        """Any pending task: stages of different runs interleave, fan-out scopes in any order."""
        self.stack.run_task(data.draw(st.integers(0, len(self.stack.queue) - 1)))

    @precondition(lambda self: bool(self.stack.queue))
    @rule()
    def run_oldest_task(self):
        self.stack.run_task(0)

    @precondition(lambda self: bool(self.stack.queue))
    @rule()
    def drain(self):
        for _ in range(200):
            if not self.stack.queue:
                break
            self.stack.run_task(0)

    @rule(minutes=st.sampled_from([1, 11, 90, 60 * 24 * 3]))
    def time_passes(self, minutes):
        """The clock moves, then beat sweeps cold sessions and retries stale runs."""
        self.stack.clock.advance(minutes=minutes)
        self.stack.beat()

    @precondition(lambda self: len(self.model.erased) < 2 and len(self.model.tokens) >= 6)
    @rule(data=st.data())
    def forget(self, data):
        user = data.draw(st.sampled_from(self._live_users()))
        left = self.stack.forget(user)
        self.model.erased.add(user)
        assert left == [], f"forget-user --verify found traces of {user}: {left}"

    @rule(toggle=st.sampled_from(["user_memory_enabled", "agent_memory_enabled", "always_in_context",
                                  "facts_fifo", "rag"]))
    def flip_toggle(self, toggle):
        """An agent toggle (in the store, for every process and the formation), or a
        deployment-wide read toggle, flipped in both processes."""
        store = self.stack.deps.store
        if toggle.endswith("_enabled"):
            agent = store.ingest.get_agent_settings(AGENT)
            store.ingest.put_agent_settings(agent.model_copy(update={toggle: not getattr(agent, toggle)}))
            return
        for service in self.stack.services:
            service.settings = service.settings.model_copy(update={toggle: not getattr(service.settings, toggle)})

    # ---- invariants ---------------------------------------------------------------------
    def _allowed(self, token: str, reader: str, session_id: str, scope: str, toggles: AgentSettings) -> str | None:
        """Why ``token`` must not show to ``reader`` in ``session_id`` from ``scope`` (None: it may)."""
        said = self.model.tokens[token]
        if said.kind in SECRET:
            return "a secret"
        if said.user in self.model.erased:
            return f"said by {said.user}, who was erased"
        group = len([u for u in self.model.sessions[session_id].users if u not in self.model.erased]) > 1
        if scope == "agent":
            if not toggles.agent_memory_enabled:
                return "agent scope with agent memory off"
            return "contact data in agent scope" if said.kind in CONTACT else None
        if scope == "user":
            if not toggles.user_memory_enabled:
                return "user scope with user memory off"
            if group:
                return "user scope in a group chat"
            return None if reader == said.user else f"{said.user}'s user scope"
        return None if session_id == said.session else f"memory of session {said.session}"

    def _tokens_in(self, text: str) -> list[str]:
        return [t for t in self.model.tokens if t in text.lower()]

    @invariant()
    def guarantees_hold(self):
        stack, model = self.stack, self.model
        dump = stack.deps.store.admin.dump_all()
        facts = {f["fact_id"]: f for f in _rows(dump, "facts")}
        self._storage(dump, facts)
        toggles = stack.deps.store.ingest.get_agent_settings(AGENT)
        fact_tokens = sorted({t for f in facts.values() if f.get("retired_at") is None
                              for t in self._tokens_in(f["content"])})
        for session_id, session in model.sessions.items():
            for reader in session.users:
                if reader in model.erased:
                    continue
                for service in stack.services:
                    self._check_context(service, reader, session_id, toggles, facts)
                    self._check_search(service, reader, session_id, toggles, facts, fact_tokens)

    def _check_context(self, service, reader, session_id, toggles, facts) -> None:
        xml = service.get_memory_context(session_id=session_id, user_id=reader)
        where = f"context of {reader} in {session_id}"
        if not service.settings.always_in_context:
            assert xml == "", f"{where}: shown with always_in_context off"
        live = {f["content"] for f in facts.values() if f.get("retired_at") is None and f.get("valid_to") is None}
        for section, body in _SECTION.findall(xml):
            for token in self._tokens_in(body):
                why = self._allowed(token, reader, session_id, _SCOPE[section], toggles)
                assert why is None, f"{where}: {token} shown from {section}: {why}\n{xml}"
        for scope, content in _FACT_LINE.findall(xml):
            assert content in live, f"{where}: a fact shown is not live and current: {content!r}\n{xml}"
            for token in self._tokens_in(content):
                why = self._allowed(token, reader, session_id, scope, toggles)
                assert why is None, f"{where}: {token} shown in <Facts> [{scope}]: {why}\n{xml}"

    def _check_search(self, service, reader, session_id, toggles, facts, fact_tokens) -> None:
        where = f"search of {reader} in {session_id}"
        for i in range(0, len(fact_tokens), 3):
            hits = service.search_facts(fact_tokens[i:i + 3], session_id=session_id, user_id=reader, top_k=20)
            if not service.settings.rag:
                assert hits == [], f"{where}: results with rag off"
            for hit in hits:
                stored = facts.get(hit["id"])
                assert stored is not None and stored.get("retired_at") is None and stored.get("valid_to") is None, \
                    f"{where}: a result is not a live, current fact: {hit}"
                for token in self._tokens_in(hit["content"]):
                    why = self._allowed(token, reader, session_id, hit["scope"], toggles)
                    assert why is None, f"{where}: {token} found in [{hit['scope']}]: {why}"

    def _storage(self, dump, facts) -> None:
        model = self.model
        derived = {name: _rows(dump, name) for name in ("facts", "reflections", "consolidated")}
        text = {name: json.dumps(docs, default=str).lower() for name, docs in derived.items()}
        text["runs"] = json.dumps([_formed(run) for run in _rows(dump, "runs")], default=str).lower()
        everything = json.dumps(dump, default=str).lower()
        for token, said in model.tokens.items():
            if said.kind in SECRET:
                found = [name for name, blob in text.items() if token in blob]
                assert not found, f"secret {token} ({said.kind}) stored in {found}"
            if said.user in model.erased and token in everything:
                where = {name: [d for d in docs if token in json.dumps(d, default=str).lower()]
                         for name, docs in dump.items()}
                raise AssertionError(f"{token} of erased {said.user} still stored: "
                                     f"{ {k: v for k, v in where.items() if v} }")
        for fact in derived["facts"]:
            for content in [fact["content"], *[h.get("content", "") for h in fact.get("history") or []]]:
                assert self.guard.kind(content) is None, f"a fact holds a secret: {content!r}"
            assert fact.get("valid_to") is None or fact.get("retired_at") is not None, \
                f"a superseded fact is live: {fact['fact_id']} {fact['content']!r}"
        for doc in derived["reflections"]:
            assert self.guard.kind(doc["content"]) is None, f"a reflection holds a secret: {doc['content']!r}"
        for doc in derived["consolidated"]:
            assert self.guard.kind(doc["consolidated_content"]) is None, \
                f"a blob holds a secret: {doc['consolidated_content']!r}"
        for user in model.erased:
            assert not _traces(dump, user), f"traces of erased {user}: {_traces(dump, user)}"
        self._cities(facts)
        self._runs(dump)

    def _cities(self, facts) -> None:
        for user, said in self.model.cities.items():
            if user in self.model.erased:
                continue
            order = [city for _, city in sorted(said)]
            mine = [f for f in facts.values() if f.get("scope_key") == f"user:{user}"]
            versions = " ".join([f["content"] for f in mine] + [h.get("content", "") for f in mine
                                                                 for h in f.get("history") or []]).lower()
            formed = [city for city in order if city in versions]
            if not formed:
                continue
            latest = formed[-1]
            for f in mine:
                if f.get("retired_at") is None:
                    stale = [c for c in formed if c != latest and c in f["content"].lower()]
                    assert not stale, (f"{user} said {order}; {latest} is in memory, yet a live fact holds "
                                       f"{stale}: {f['content']!r}")

    def _runs(self, dump) -> None:
        sessions = {s["session_id"]: s for s in _rows(dump, "sessions")}
        ends: dict[str, int] = {}
        for run in _rows(dump, "runs"):
            size = run["seq_to"] - run["seq_from"] + 1
            where = f"run {run['run_id']} of {run['session_id']} ({run['reason']}, {size} messages)"
            if run["reason"] == "threshold":
                assert size >= self.settings.formation_message_interval, f"{where}: under the threshold"
            elif run["reason"] == "cold":
                assert size >= self.settings.min_messages_to_form, f"{where}: under the cold minimum"
            elif run["reason"] == "session_end":
                ends[run["session_id"]] = ends.get(run["session_id"], 0) + 1
        for session_id, count in ends.items():
            session = sessions.get(session_id)
            allowed = len(session.get("ended_history") or []) if session else 0
            assert count <= allowed, f"session {session_id}: {count} session-end runs for {allowed} ends"


def _rows(dump: dict, collection: str) -> list[dict]:
    for name, rows in dump.items():
        if name.endswith(collection):
            return rows
    return []


def _formed(run: dict) -> list:
    """What a run formed, as stored in its stage outputs: the extracted facts, the decided
    effects (merged texts) and the reflections."""
    stages = run.get("stages") or {}
    out = (stages.get("extract_facts") or {}).get("output") or {}
    decided = (stages.get("decide_facts") or {}).get("output") or {}
    reflected = (stages.get("extract_reflections") or {}).get("output") or {}
    return [out.get("facts"), decided.get("effects"), reflected.get("reflections")]


def _traces(dump: dict, user: str) -> list[str]:
    from usecases.verify import traces

    return traces(dump, user, AGENT)


MemoryGuarantees.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
    # explain traces every line of a failing example again: minutes here, past the test timeout
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
TestMemoryGuarantees = MemoryGuarantees.TestCase
