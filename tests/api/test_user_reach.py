"""A user token cannot read or change another user's memory by passing another user id
anywhere: in the path, the query or the body (design §12). A property over user ids."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from tests.api.harness import build, seed_memory

IDS = st.one_of(st.sampled_from(["u2", "U1", "u1 ", " u1", "u10", "*", "u1,u2"]),
                st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="/?#%\x7f"),
                        min_size=1, max_size=12))


def _requests(other: str):
    q = {"user_id": other}
    return [
        ("GET", "/v1/agents/A/sessions/s1/context", q, None),
        ("GET", "/v1/agents/A/sessions/s1/context", {**q, "format": "json"}, None),
        ("POST", "/v1/agents/A/sessions/s1/search", None, {"query": "email phone", "user_id": other}),
        ("GET", "/v1/agents/A/stats", q, None),
        ("GET", "/v1/agents/A/status", q, None),
        ("GET", f"/v1/agents/A/users/{other}/memory", None, None),
        ("GET", f"/v1/agents/A/users/{other}/export", None, None),
        ("GET", f"/v1/agents/A/users/{other}/memory-setting", None, None),
        ("PUT", f"/v1/agents/A/users/{other}/memory-setting", None, {"enabled": False}),
        ("PATCH", f"/v1/agents/A/users/{other}/memory/facts/f-u2", None, {"content": "Bob moved"}),
        ("DELETE", f"/v1/agents/A/users/{other}/memory/facts/f-u2", None, None),
        ("POST", f"/v1/agents/A/users/{other}/forget", None, None),
        ("POST", "/v1/agents/A/sessions/s1/messages", None,
         {"messages": [{"message_id": "m9", "role": "user", "sender_id": other, "content": "hi"}]}),
    ]


def test_a_user_token_never_reaches_another_user(tmp_path_factory):
    from pipeline.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path_factory.mktemp("reach") / "memory.db"))
    store.create_indexes()
    api = build(store)
    seed_memory(store, api.deps.clock.now())
    headers = {"Authorization": f"Bearer {api.token(user='u1')}"}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(other=IDS)
    def check(other):
        if other == "u1":
            return
        with api.client() as client:
            for method, path, params, body in _requests(other):
                response = client.request(method, path, params=params, json=body, headers=headers)
                assert response.status_code in (403, 404, 422), (method, path, other, response.status_code)
                assert "Bob" not in response.text and "555 0100" not in response.text
        assert not store.access.user_memory_off("A", [other])
        assert api.publisher.events == [] and api.jobs == []
        assert [f.content for f in store.facts.get_facts(["f-u2"])] == ["Bob's phone is 555 0100"]

    check()
    store.close()
