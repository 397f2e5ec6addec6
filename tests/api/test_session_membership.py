"""Sessions belong to their people (design §12 "Sessions belong to their people"), at each door: REST, MCP
over HTTP and the inspector. The app is the one ``memoryctl serve`` runs, over a real SQLite
store; what it publishes goes through the real ingest, as a worker would take it.

The leak these reproduce: Mallory (u2) names Ines's (u1) own MCP session before Ines uses it;
Ines then talks over MCP with no session header; Mallory reads Ines's note in the inspector.
"""

from __future__ import annotations

from pipeline.ingest import ingest_raw_event
from schemas import events
from tests.api.harness import ingest_published, mcp_call, ui_sign_in
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

INES, MALLORY = "u1", "u2"
INES_OWN = "mcp:A:u1"     # Ines's own MCP session with agent A
LEGACY_OWN = "mcp:u1"     # the id her own session had before it named the agent
NOTE = "My locker code is behind the blue door"


def _bearer(credential: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}", **headers}


def test_over_mcp_a_user_cannot_take_another_users_own_session_and_never_reads_their_note(api, client):
    mallory = api.token(user=MALLORY)
    for session in (INES_OWN, LEGACY_OWN):
        refused = mcp_call(client, _bearer(mallory, **{"X-Memory-Session": session}), "remember", {"text": "hi Ines"})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["data"]["where"] == "header X-Memory-Session"
    assert api.publisher.events == []

    ines = mcp_call(client, _bearer(api.token(user=INES)), "remember", {"text": NOTE})
    assert ines.status_code == 200 and not ines.json()["result"]["isError"], ines.text
    ingest_published(api)
    stored = api.deps.store.ingest.get_session(INES_OWN)
    assert stored is not None and stored.users == [INES]

    message_id = api.deps.store.ingest.get_messages(INES_OWN, 0, 10)[0].message_id
    ui_sign_in(client, mallory)
    for path in (f"/ui/messages/{INES_OWN}/{message_id}", f"/ui/agents/A/sessions/{INES_OWN}"):
        page = client.get(path)
        assert page.status_code == 403 and NOTE not in page.text, (path, page.status_code)
    context = client.get(f"/v1/agents/A/sessions/{INES_OWN}/context", headers=_bearer(api.token(user=INES)))
    assert context.status_code == 200


def test_over_rest_a_user_token_starts_only_its_own_session(api, client):
    mallory = _bearer(api.token(user=MALLORY))
    message = {"messages": [{"message_id": "m1", "role": "user", "content": "hello"}]}
    for session in (INES_OWN, "s-the-platform-starts-later"):
        refused = client.post(f"/v1/agents/A/sessions/{session}/messages", json=message, headers=mallory)
        assert refused.status_code == 403 and refused.json()["where"] == "path session_id", (session, refused.text)
    assert api.publisher.events == []
    # the platform starts the session it chose for Ines; Mallory never took it
    assert client.post("/v1/agents/A/sessions/s-the-platform-starts-later/start", json={"user_ids": [INES]},
                       headers=_bearer(api.keys["agent_a"])).status_code == 200
    assert api.deps.store.ingest.get_session("s-the-platform-starts-later").users == [INES]
    # and Ines's own REST call on her own session is hers
    ines = _bearer(api.token(user=INES))
    assert client.post(f"/v1/agents/A/sessions/{INES_OWN}/messages", json=message, headers=ines).status_code == 202
    ingest_published(api)
    assert client.get(f"/v1/agents/A/sessions/{INES_OWN}/context", headers=ines).status_code == 200


def test_no_key_puts_a_stranger_into_a_users_own_session(api, client):
    key = api.keys["agent_a"]
    start = client.post(f"/v1/agents/A/sessions/{INES_OWN}/start", json={"user_ids": [MALLORY]}, headers=_bearer(key))
    publish = client.post(f"/v1/agents/A/sessions/{INES_OWN}/messages", headers=_bearer(key), json={
        "messages": [{"message_id": "m1", "role": "user", "sender_id": MALLORY, "content": "hi"}]})
    connect = mcp_call(client, _bearer(key, **{"X-Memory-User": MALLORY, "X-Memory-Session": INES_OWN}),
                       "get_memory_context", {})
    assert [start.status_code, publish.status_code, connect.status_code] == [403, 403, 403]
    assert MALLORY in start.json()["why"] and start.json()["where"] == "path session_id"
    assert api.publisher.events == [] and api.deps.store.ingest.get_session(INES_OWN) is None
    own = client.post(f"/v1/agents/A/sessions/{INES_OWN}/start", json={"user_ids": [INES]}, headers=_bearer(key))
    assert own.status_code == 200


def test_in_the_inspector_an_own_session_merged_before_the_rule_stays_its_owners(api, client):
    """A store written before the rule may hold Ines's own session with Mallory merged into
    its humans: membership alone is not enough there, the id says whose it is."""
    store = api.deps.store
    store.ingest.declare_session_users(INES_OWN, "A", [INES, MALLORY])
    ingest_raw_event(events.message_added(
        event_id="e1", agent_id="A", session_id=INES_OWN, now=api.deps.clock.now(),
        message={"message_id": "m1", "role": "user", "sender_id": INES, "content": NOTE}), store, api.deps.settings,
        api.deps.clock)
    ui_sign_in(client, api.token(user=MALLORY))
    for path in (f"/ui/messages/{INES_OWN}/m1", f"/ui/agents/A/sessions/{INES_OWN}"):
        page = client.get(path)
        assert page.status_code == 403 and NOTE not in page.text, (path, page.status_code)
    with api.client() as own:
        ui_sign_in(own, api.token(user=INES))
        assert NOTE in own.get(f"/ui/messages/{INES_OWN}/m1").text
