"""Sessions belong to their people, as a property (design §12): two users and the platform
interleave starting sessions, publishing, ``remember``, reading, editing and erasing over REST,
MCP and the inspector, and no user ever reads a message, a session blob or a fact of a session
whose humans do not include them.

Each example is the app ``memoryctl serve`` runs, over a fresh SQLite store; what it publishes
goes through the real ingest. Who a session's humans *should* be is kept by the model below,
independently of what the store says: the platform names them (never a stranger in someone's
own MCP session ``mcp:<agent>:<user>``), and a user adds only themself, and only to their own
session. The ``form`` step writes what formation writes from a session, from the store's own
list of its humans: the session's blob, and a user fact for each of those humans, so a
polluted list of humans turns into memory a stranger can read, as it would in production.
Every text carries a marker naming where it was said; a read that shows a marker of a session
the reader is not a human of is a leak.
"""

from __future__ import annotations

import re
from collections import defaultdict

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pipeline.store.sqlite import SQLiteStore
from schemas.documents import ConsolidatedBlob
from tests.api.harness import EMB, build, ingest_published, mcp_call, ui_sign_in
from testkit.documents import fact

USERS = ("u1", "u2")
OWN = {u: f"mcp:A:{u}" for u in USERS}
# the users' own sessions, two the platform may start, and an own session's id from before it
# named the agent (reserved all the same)
SESSIONS = (OWN["u1"], OWN["u2"], "s-a", "s-b", "mcp:u1")
MARK = re.compile(r"zq\d+k")


class Doors(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.folder = tempfile.TemporaryDirectory()
        self.store = SQLiteStore(f"{self.folder.name}/memory.db")
        self.store.create_indexes()
        self.api = build(self.store)
        self.rest = self.api.client().__enter__()
        self.ui = {}
        for user in USERS:
            self.ui[user] = self.api.client().__enter__()
            ui_sign_in(self.ui[user], self.api.token(user=user))
        self.humans: dict[str, set[str]] = defaultdict(set)   # the model: who each session's humans should be
        self.writer: dict[str, str] = {}                      # marker -> a user whose own session took it
        self.said: dict[str, str] = {}                        # marker -> session, once ingested
        self.n = 0

    def teardown(self) -> None:
        for client in (self.rest, *self.ui.values()):
            client.__exit__(None, None, None)
        self.store.close()
        self.folder.cleanup()

    # ------------------------------------------------------------------ the model ---------
    def _marker(self) -> str:
        self.n += 1
        return f"zq{self.n}k"

    def _platform_names(self, session: str, humans) -> None:
        for h in humans:
            if not session.startswith("mcp:") or session == OWN[h]:
                self.humans[session].add(h)

    def _user_joins(self, user: str, session: str) -> None:
        if session == OWN[user]:
            self.humans[session].add(user)

    def _bearer(self, who: str, **headers) -> dict[str, str]:
        credential = self.api.keys["agent_a"] if who == "platform" else self.api.token(user=who)
        return {"Authorization": f"Bearer {credential}", **headers}

    def _check_read(self, reader: str, text: str, where: str) -> None:
        for marker in MARK.findall(text):
            session = self.said.get(marker)
            assert session is None or reader in self.humans[session], (
                f"{reader} read {marker} of {session} (humans {sorted(self.humans[session])}) at {where}")

    # ------------------------------------------------------------------ writes ------------
    @rule(session=st.sampled_from(SESSIONS), humans=st.sets(st.sampled_from(USERS), min_size=1))
    def platform_starts(self, session, humans):
        answer = self.rest.post(f"/v1/agents/A/sessions/{session}/start", json={"user_ids": sorted(humans)},
                                headers=self._bearer("platform"))
        assert answer.status_code in (200, 403), answer.text
        if answer.status_code == 200:
            self._platform_names(session, humans)

    @rule(session=st.sampled_from(SESSIONS), sender=st.sampled_from(USERS))
    def platform_publishes(self, session, sender):
        marker = self._marker()
        answer = self.rest.post(f"/v1/agents/A/sessions/{session}/messages", headers=self._bearer("platform"), json={
            "messages": [{"message_id": marker, "role": "user", "sender_id": sender, "content": f"note {marker}"}],
            "session_users": [sender]})
        assert answer.status_code in (202, 403), answer.text
        if answer.status_code == 202:
            self._platform_names(session, [sender])

    @rule(user=st.sampled_from(USERS), session=st.sampled_from(SESSIONS))
    def user_publishes(self, user, session):
        marker = self._marker()
        answer = self.rest.post(f"/v1/agents/A/sessions/{session}/messages", headers=self._bearer(user), json={
            "messages": [{"message_id": marker, "role": "user", "content": f"note {marker}"}]})
        assert answer.status_code in (202, 403), answer.text
        if answer.status_code == 202:
            self._user_joins(user, session)

    @rule(who=st.sampled_from(("platform", *USERS)), user=st.sampled_from(USERS),
          session=st.none() | st.sampled_from(SESSIONS))
    def remembers_over_mcp(self, who, user, session):
        marker = self._marker()
        headers = self._bearer(who, **({"X-Memory-Session": session} if session else {}),
                               **({"X-Memory-User": user} if who == "platform" else {}))
        user = user if who == "platform" else who
        answer = mcp_call(self.rest, headers, "remember", {"text": f"note {marker}"})
        assert answer.status_code in (200, 403), answer.text
        if answer.status_code == 200 and not answer.json()["result"]["isError"]:
            if session is None:
                self.writer[marker] = user  # the connection's own session, wherever the server put it
            elif who == "platform":
                self._platform_names(session, [user])
            else:
                self._user_joins(user, session)

    @rule()
    def workers_ingest(self):
        ingest_published(self.api)
        for session in SESSIONS:
            for message in self.store.ingest.get_messages(session, 0, 10_000):
                for marker in MARK.findall(message.content):
                    self.said[marker] = session
                    if marker in self.writer:
                        self.humans[session].add(self.writer[marker])

    @rule(session=st.sampled_from(SESSIONS))
    def formation_writes_memory(self, session):
        stored = self.store.ingest.get_session(session)
        if stored is None:
            return
        text = " ".join(MARK.findall(" ".join(m.content for m in self.store.ingest.get_messages(session, 0, 10_000))))
        key = f"session:{session}"
        blob = self.store.blobs.get_blob("A", key)
        version = blob.version if blob else 0
        self.store.blobs.save_blob(ConsolidatedBlob(agent_id="A", scope="session", scope_key=key, session_id=session,
                                              consolidated_content=f"VERSION: {version + 1}\nSaid: {text}",
                                              word_limit=300, version=version + 1), expected_version=version)
        for human in stored.users:
            self.n += 1
            formed = fact(f"f{self.n}", f"In {session} it was said: {text}", agent="A", user=human, session=session,
                          embedding=EMB.embed([text or "nothing"]).vectors[0], model=EMB.model,
                          formed=self.api.deps.clock.now())
            self.store.facts.insert_fact(formed.model_copy(update={"source_user_ids": [human]}))
        self.store.leases.bump_scope_versions("A", [key, *(f"user:{h}" for h in stored.users)])

    @rule(user=st.sampled_from(USERS), pick=st.integers(0, 50), erase=st.booleans())
    def user_edits_or_erases_a_fact(self, user, pick, erase):
        facts = self.store.facts.list_facts("A")
        if not facts:
            return
        target = facts[pick % len(facts)]
        path = f"/v1/agents/A/users/{user}/memory/facts/{target.fact_id}"
        answer = (self.rest.delete(path, headers=self._bearer(user)) if erase else
                  self.rest.patch(path, headers=self._bearer(user), json={"content": f"{target.content} (checked)"}))
        assert answer.status_code in (200, 403, 404), answer.text
        if answer.status_code == 200:
            assert target.user_id == user or set(target.source_user_ids) <= {user}, (user, target)
        else:
            assert [f.content for f in self.store.facts.get_facts([target.fact_id])] == [target.content]

    # ------------------------------------------------------------------ reads -------------
    @rule(user=st.sampled_from(USERS), session=st.sampled_from(SESSIONS))
    def user_reads_over_rest(self, user, session):
        for path in (f"/v1/agents/A/sessions/{session}/context", f"/v1/agents/A/users/{user}/memory"):
            answer = self.rest.get(path, headers=self._bearer(user))
            assert answer.status_code in (200, 403), answer.text
            self._check_read(user, answer.text, path)

    @rule(user=st.sampled_from(USERS), session=st.none() | st.sampled_from(SESSIONS))
    def user_reads_over_mcp(self, user, session):
        headers = self._bearer(user, **({"X-Memory-Session": session} if session else {}))
        answer = mcp_call(self.rest, headers, "get_memory_context", {})
        assert answer.status_code in (200, 403), answer.text
        self._check_read(user, answer.text, f"mcp {session}")

    @rule(user=st.sampled_from(USERS), session=st.sampled_from(SESSIONS))
    def user_reads_in_the_inspector(self, user, session):
        pages = [f"/ui/agents/A/sessions/{session}"]
        pages += [f"/ui/messages/{session}/{m.message_id}" for m in self.store.ingest.get_messages(session, 0, 10_000)]
        for path in pages:
            answer = self.ui[user].get(path)
            assert answer.status_code in (200, 403, 404), (path, answer.status_code)
            self._check_read(user, answer.text, path)

    @invariant()
    def no_session_holds_a_stranger(self):
        for session in SESSIONS:
            stored = self.store.ingest.get_session(session)
            if stored is not None:
                assert set(stored.users) <= self.humans[session], (session, stored.users, self.humans[session])


Doors.TestCase.settings = settings(max_examples=12, stateful_step_count=14, deadline=None,
                                   suppress_health_check=list(HealthCheck))
test_no_user_reads_a_session_whose_humans_do_not_include_them = Doors.TestCase
