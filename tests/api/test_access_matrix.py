"""Each credential reaches only what it should, on every route (design §12, §13): admin keys
every agent, agent keys one agent with their scopes (the runtime's read any of its users and
publish; a curator's the owner's controls only), user tokens one user of one agent. Invalid
credentials of every kind get 401 everywhere."""

from __future__ import annotations

import time

import jwt
import pytest

from schemas.access import Job, subject_digest
from tests.api.harness import SECRET
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

ADMIN, AGENT_A, AGENT_B, U1, U2 = "admin", "agent A", "agent B", "token A/u1", "token A/u2"
CURATOR_A, CURATOR_B = "curator A", "curator B"
REACHING = (ADMIN, AGENT_A, AGENT_B, U1, U2, CURATOR_A, CURATOR_B)
INVALID = ("none", "wrong key", "revoked key", "expired token", "bad signature", "alg none", "unknown kid",
           "too long-lived token")

# (name, method, path, json body, {credential: status}); credentials not named get 403
U = "/v1/agents/A/users/u1"
S = "/v1/agents/A/sessions/s1"
MESSAGE = {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hello there"}]}
ROUTES = [
    ("context", "GET", f"{S}/context?user_id=u1", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("context json", "GET", f"{S}/context?user_id=u1&format=json", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("search", "POST", f"{S}/search", {"query": "email", "user_id": "u1"}, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("publish", "POST", f"{S}/messages", MESSAGE, {ADMIN: 202, AGENT_A: 202, U1: 202}),
    ("session start", "POST", f"{S}/start", {"user_ids": ["u1"]}, {ADMIN: 200, AGENT_A: 200}),
    ("session end", "POST", f"{S}/end", None, {ADMIN: 202, AGENT_A: 202}),
    ("stats", "GET", "/v1/agents/A/stats?user_id=u1", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("status", "GET", "/v1/agents/A/status?user_id=u1", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("my memory", "GET", f"{U}/memory", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("edit fact", "PATCH", f"{U}/memory/facts/f-u1", {"content": "Alice's email is a@example.org"}, {ADMIN: 200, U1: 200}),
    ("delete fact", "DELETE", f"{U}/memory/facts/f-u1", None, {ADMIN: 200, U1: 200}),
    ("delete shared", "DELETE", f"{U}/memory/facts/f-agent-u1", None, {ADMIN: 200, U1: 200}),
    ("delete reflection", "DELETE", f"{U}/memory/reflections/r-u1", None, {ADMIN: 200, U1: 200}),
    ("withdraw fact", "POST", f"{U}/memory/facts/f-withdrawable/withdraw", None, {ADMIN: 200, U1: 200}),
    ("withdraw reflection", "POST", f"{U}/memory/reflections/r-withdrawable/withdraw", None, {ADMIN: 200, U1: 200}),
    ("read switch", "GET", f"{U}/memory-setting", None, {ADMIN: 200, AGENT_A: 200, U1: 200}),
    ("switch", "PUT", f"{U}/memory-setting", {"enabled": False}, {ADMIN: 200, U1: 200}),
    ("export", "GET", f"{U}/export", None, {ADMIN: 200, U1: 200}),
    ("forget me", "POST", f"{U}/forget", None, {ADMIN: 202, U1: 202}),
    ("job", "GET", "/v1/jobs/job-u1", None, {ADMIN: 200, U1: 200, AGENT_A: 404, AGENT_B: 404, U2: 404, CURATOR_A: 404,
                                             CURATOR_B: 404}),
    ("runs", "GET", "/v1/admin/runs", None, {ADMIN: 200}),
    ("replay", "POST", "/v1/admin/replay-failed", {}, {ADMIN: 200}),
    ("cost", "GET", "/v1/admin/cost?agent_id=A", None, {ADMIN: 200}),
    ("audit", "GET", "/v1/admin/audit", None, {ADMIN: 200}),
    ("caps", "GET", "/v1/admin/caps?agent_id=A", None, {ADMIN: 200}),
    ("set caps", "PUT", "/v1/admin/caps", {"agent_id": "A", "caps": {"day": {"hard_usd": 5}}}, {ADMIN: 200}),
    ("forget user", "POST", "/v1/admin/forget-user", {"user_id": "u1", "agent_id": "A"}, {ADMIN: 202}),
    ("export user", "GET", "/v1/admin/export-user?user_id=u1", None, {ADMIN: 200}),
    ("webhook subscribe", "POST", "/v1/agents/A/webhooks", {"url": "https://hooks.example/b", "events": ["fact.created"]},
     {ADMIN: 201, CURATOR_A: 201}),
    ("webhooks", "GET", "/v1/agents/A/webhooks", None, {ADMIN: 200, CURATOR_A: 200}),
    ("webhook rotate", "POST", "/v1/agents/A/webhooks/whsub_a/rotate", {}, {ADMIN: 200, CURATOR_A: 200}),
    ("webhook enable", "POST", "/v1/agents/A/webhooks/whsub_a/enable", None, {ADMIN: 200, CURATOR_A: 200}),
    ("webhook deliveries", "GET", "/v1/agents/A/webhook-deliveries", None, {ADMIN: 200, CURATOR_A: 200}),
    ("webhook redeliver", "POST", "/v1/agents/A/webhook-deliveries/redeliver", {"failed": True}, {ADMIN: 200, CURATOR_A: 200}),
    ("webhook delete", "DELETE", "/v1/agents/A/webhooks/whsub_a", None, {ADMIN: 200, CURATOR_A: 200}),
    ("instructions", "GET", "/v1/agents/A/instructions", None, {ADMIN: 200, CURATOR_A: 200}),
    ("set instruction", "PUT", "/v1/agents/A/instructions/extraction/all", {"text": "focus: budget"},
     {ADMIN: 200, CURATOR_A: 200}),
    ("clear instruction", "DELETE", "/v1/agents/A/instructions/extraction/user", None, {ADMIN: 200, CURATOR_A: 200}),
    ("rollback instruction", "POST", "/v1/agents/A/instructions/extraction/user/rollback", {"version": 1},
     {ADMIN: 200, CURATOR_A: 200}),
    ("categories", "GET", "/v1/agents/A/categories", None, {ADMIN: 200, CURATOR_A: 200}),
    ("set categories", "PUT", "/v1/agents/A/categories", {"categories": ["projects", "venues"]},
     {ADMIN: 200, CURATOR_A: 200}),
    ("rollback categories", "POST", "/v1/agents/A/categories/rollback", {"version": 1}, {ADMIN: 200, CURATOR_A: 200}),
    ("metadata keys", "GET", "/v1/agents/A/metadata-keys", None, {ADMIN: 200, CURATOR_A: 200}),
    ("set metadata keys", "PUT", "/v1/agents/A/metadata-keys", {"metadata_keys": ["project"]},
     {ADMIN: 200, CURATOR_A: 200}),
    ("pauses", "GET", "/v1/agents/A/pauses", None, {ADMIN: 200, CURATOR_A: 200}),
    ("pause", "POST", "/v1/agents/A/pause", {"target": "agent"}, {ADMIN: 200, CURATOR_A: 200}),
    ("resume", "POST", "/v1/agents/A/resume", {"target": "session", "session_id": "s-paused"},
     {ADMIN: 200, CURATOR_A: 200}),
    ("agent facts", "GET", "/v1/agents/A/memory/facts", None, {ADMIN: 200, CURATOR_A: 200}),
    ("edit agent fact", "PATCH", "/v1/agents/A/memory/facts/f-agent-both", {"content": "The Mars budget is $60,000"},
     {ADMIN: 200, CURATOR_A: 200}),
    ("delete agent fact", "DELETE", "/v1/agents/A/memory/facts/f-agent-u1", None, {ADMIN: 200, CURATOR_A: 200}),
    ("agent reflections", "GET", "/v1/agents/A/memory/reflections", None, {ADMIN: 200, CURATOR_A: 200}),
    ("edit agent reflection", "PATCH", "/v1/agents/A/memory/reflections/r-agent-u1", {"content": "The team meets Mondays"},
     {ADMIN: 200, CURATOR_A: 200}),
    ("edit my reflection", "PATCH", f"{U}/memory/reflections/r-u1", {"content": "Alice likes long answers"},
     {ADMIN: 200, U1: 200}),
    ("delete agent reflection", "DELETE", "/v1/agents/A/memory/reflections/r-agent-u1", None,
     {ADMIN: 200, CURATOR_A: 200}),
    ("edit blob section", "PUT", "/v1/agents/A/memory/blob/sections/projects", {"bullets": ["Launch in March"]},
     {ADMIN: 200, CURATOR_A: 200}),
    ("replace user blob", "PUT", f"{U}/memory/blob", {"content": "- Alice likes long answers"},
     {ADMIN: 200, CURATOR_A: 200}),
    ("edit my blob section", "PUT", f"{U}/memory/blob/sections/preferences", {"bullets": ["Alice likes long answers"]},
     {ADMIN: 200, U1: 200}),
    ("add agent fact", "POST", "/v1/agents/A/memory/facts", {"content": "The venue has a roof terrace"},
     {ADMIN: 201, CURATOR_A: 201}),
    ("add agent reflection", "POST", "/v1/agents/A/memory/reflections", {"content": "The team likes recaps"},
     {ADMIN: 201, CURATOR_A: 201}),
    ("add user fact", "POST", f"{U}/memory/facts", {"content": "Alice is vegetarian"},
     {ADMIN: 201, CURATOR_A: 201, U1: 201}),
    ("add user reflection", "POST", f"{U}/memory/reflections", {"content": "Alice likes recaps"},
     {ADMIN: 201, CURATOR_A: 201, U1: 201}),
    ("import", "POST", "/v1/agents/A/import", {"user_id": "u1", "text": "Alice renews her contract in June"},
     {ADMIN: 200, CURATOR_A: 200}),
]


def _header(api, credential: str) -> dict[str, str]:
    now = int(time.time())
    token = {
        ADMIN: api.keys["admin"], AGENT_A: api.keys["agent_a"], AGENT_B: api.keys["agent_b"],
        CURATOR_A: api.keys["curator_a"], CURATOR_B: api.keys["curator_b"],
        U1: api.token(user="u1"), U2: api.token(user="u2"),
        "wrong key": "mk_0000000000000000_" + "x" * 43, "revoked key": api.keys["revoked"],
        "expired token": api.token(now=now - 7200, lifetime_s=600),
        "bad signature": api.token(secret="b" * 40),
        "alg none": jwt.encode({"agent": "A", "user": "u1", "iat": now, "exp": now + 60}, None, algorithm="none",
                               headers={"kid": "k1"}),
        "unknown kid": api.token(kid="nope"),
        "too long-lived token": api.token(lifetime_s=48 * 3600),
    }.get(credential)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _job(api):
    api.deps.store.access.put_job(Job(job_id="job-u1", kind="forget_user", agent_id="A", user_id=None,
                               subject=subject_digest("A", "u1"), created_at=api.deps.clock.now()))


def _check(response, expected, name, credential):
    assert response.status_code == expected, (name, credential, response.text)
    if expected >= 400:
        assert set(response.json()) == {"what", "where", "why"}
        assert "alice@example.com" not in response.text and "Bob" not in response.text


def _owner_state(api):
    """What the owner's changing routes act on: a user-scope extraction instruction (set, then
    cleared: version 1 to roll back to, version 2 to clear), a paused session to resume, a
    category list to roll back to, and a fact and a pending reflection shared by u1 and u2 whose
    texts came from an edit (u1 may withdraw from them)."""
    from pipeline.formation.screening import guard_for
    from pipeline.owner import controls
    from schemas.documents import Reflection, ReflectionEdit
    from testkit.documents import fact
    from usecases import categories

    store, now = api.deps.store, api.deps.clock.now()
    store.facts.insert_fact(fact("f-withdrawable", "The Mars crew is six", agent="A").model_copy(update={
        "source_user_ids": ["u1", "u2"], "source_run_id": "edit:seed", "formed_at": now}))
    store.reflections.insert_reflections([Reflection(
        reflection_id="r-withdrawable", agent_id="A", scope="agent", scope_key="agent", content="The crew trains",
        source_user_ids=["u1", "u2"], formed_at=now,
        history=[ReflectionEdit(content="u1 and u2 train", changed_at=now, changed_by="test")])])
    controls.set_instruction(store.ingest, guard_for(api.deps.settings), "A", "extraction", "user", "focus: venue",
                             by="test", now=now)
    controls.pause(store.ingest, "A", "session", session_id="s-paused", by="test", now=now)
    categories.set_list(store.ingest, "A", ["projects"], by="test", now=now)   # version 1 to roll back to


# an edit or deletion by one credential changes what the next one finds: each credential is a test of its own
STATEFUL = {"edit fact", "delete fact", "delete shared", "delete reflection", "withdraw fact", "withdraw reflection",
            "clear instruction",
            "rollback instruction", "resume", "edit agent fact", "delete agent fact", "delete agent reflection",
            "edit blob section", "replace user blob", "edit my blob section",
            "edit agent reflection", "edit my reflection", "webhook delete", "rollback categories",
            # a write succeeds once; the same text again is a 409
            "add agent fact", "add agent reflection", "add user fact", "add user reflection"}


@pytest.mark.parametrize("credential", REACHING)
@pytest.mark.parametrize("route", [r for r in ROUTES if r[0] in STATEFUL], ids=sorted(STATEFUL, key=[r[0] for r in ROUTES].index))
def test_each_credential_reaches_only_what_it_should_on_a_changing_route(api, client, route, credential):
    name, method, path, body, allowed = route
    _owner_state(api)
    response = client.request(method, path, json=body, headers=_header(api, credential))
    _check(response, allowed.get(credential, 403), name, credential)


@pytest.mark.parametrize("route", [r for r in ROUTES if r[0] not in STATEFUL], ids=[r[0] for r in ROUTES if r[0] not in STATEFUL])
def test_each_credential_reaches_only_what_it_should(api, client, route):
    name, method, path, body, allowed = route
    _job(api)
    for credential in REACHING:
        _check(client.request(method, path, json=body, headers=_header(api, credential)),
               allowed.get(credential, 403), name, credential)


@pytest.mark.parametrize("route", ROUTES, ids=[r[0] for r in ROUTES])
def test_no_invalid_credential_reaches_anything(api, client, route):
    name, method, path, body, _ = route
    _job(api)
    _owner_state(api)
    for credential in INVALID:
        _check(client.request(method, path, json=body, headers=_header(api, credential)), 401, name, credential)
    assert api.publisher.events == [] and api.jobs == []


def test_an_invalid_credential_is_never_echoed_and_says_why(api, client):
    token = api.token(secret="b" * 40)
    response = client.get("/v1/agents/A/stats", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json()["why"] == "token refused: bad signature" and token not in response.text


def test_a_token_signed_with_a_retired_but_configured_kid_still_works_so_secrets_rotate(api, client):
    from tests.api.harness import OLD_SECRET

    token = api.token(kid="old", secret=OLD_SECRET)
    assert client.get("/v1/agents/A/stats", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    # the same claims under the new kid but the old secret: refused
    forged = api.token(kid="k1", secret=OLD_SECRET)
    assert client.get("/v1/agents/A/stats", headers={"Authorization": f"Bearer {forged}"}).status_code == 401
    assert SECRET != OLD_SECRET


def test_a_session_bound_token_reaches_its_session_only(api, client):
    headers = {"Authorization": f"Bearer {api.token(session='s1')}"}
    assert client.get("/v1/agents/A/sessions/s1/context", headers=headers).status_code == 200
    other = client.get("/v1/agents/A/sessions/s2/context", headers=headers)
    assert other.status_code == 403 and other.json()["where"] == "path session_id"


def test_a_user_token_publishes_only_its_users_own_messages(api, client):
    headers = {"Authorization": f"Bearer {api.token(user='u1')}"}
    as_bob = {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u2", "content": "hi"}]}
    as_agent = {"messages": [{"message_id": "m2", "role": "assistant", "content": "hi"}]}
    declare = {**MESSAGE, "session_users": ["u1", "u2"]}
    for body in (as_bob, as_agent, declare):
        assert client.post("/v1/agents/A/sessions/s1/messages", json=body, headers=headers).status_code == 403
    assert api.publisher.events == []
    implicit = {"messages": [{"message_id": "m3", "role": "user", "content": "hi"}]}
    assert client.post("/v1/agents/A/sessions/s1/messages", json=implicit, headers=headers).status_code == 202
    assert api.publisher.events[0]["message"]["sender_id"] == "u1"


def test_a_user_token_cannot_read_or_join_another_users_session(api, client):
    from datetime import timedelta

    from schemas.documents import Reflection

    store = api.deps.store
    store.ingest.declare_session_users("s-bob", "A", ["u2"])
    store.reflections.insert_reflections([Reflection(reflection_id="r-bob", agent_id="A", scope="session", session_id="s-bob",
                                         scope_key="session:s-bob", content="Bob is worried about his diagnosis",
                                         source_user_ids=["u2"], formed_at=api.deps.clock.now() - timedelta(hours=1))])
    alice = {"Authorization": f"Bearer {api.token(user='u1')}"}
    for method, path, body in (("GET", "/v1/agents/A/sessions/s-bob/context", None),
                               ("GET", "/v1/agents/A/stats?session_id=s-bob", None),
                               ("POST", "/v1/agents/A/sessions/s-bob/search", {"query": "diagnosis"}),
                               ("POST", "/v1/agents/A/sessions/s-bob/messages", MESSAGE)):
        response = client.request(method, path, json=body, headers=alice)
        assert response.status_code == 403 and "diagnosis" not in response.text, (path, response.text)
    assert api.publisher.events == []
    bob = {"Authorization": f"Bearer {api.token(user='u2')}"}
    assert "diagnosis" in client.get("/v1/agents/A/sessions/s-bob/context", headers=bob).text
    # a new session is the user's to start talking in
    assert client.get("/v1/agents/A/sessions/s-new/context", headers=alice).status_code == 200
