"""Every error has one shape: what, where, why. Never a traceback, never a 500 for bad input."""

from __future__ import annotations

import pytest


@pytest.fixture
def agent(api):
    return {"Authorization": f"Bearer {api.keys['agent_a']}"}


@pytest.mark.parametrize("method, path, kwargs, where", [
    ("GET", "/v1/agents/A/sessions/s1/context", {"params": {"max_tokens": "0"}}, "query max_tokens"),
    ("GET", "/v1/agents/A/sessions/s1/context", {"params": {"as_of": "2026-01-01T00:00:00"}}, "query as_of"),
    ("GET", "/v1/agents/A/sessions/s1/context", {"params": {"format": "yaml"}}, "query format"),
    ("POST", "/v1/agents/A/sessions/s1/search", {"json": {"query": "x", "top_k": 0}}, "body top_k"),
    ("POST", "/v1/agents/A/sessions/s1/search", {"json": {"query": "x", "user": "u1"}}, "body user"),
    ("POST", "/v1/agents/A/sessions/s1/search", {"json": {"query": ["a", "b", "c", "d"]}}, "body query"),
    ("POST", "/v1/agents/A/sessions/s1/search", {"json": {"query": "   "}}, "body query"),
    ("POST", "/v1/agents/A/sessions/s1/search", {"content": b"{not json", "headers": {"content-type": "application/json"}},
     "body"),
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "content": "hi"}]}}, "messages[0]"),
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "x" * 40_000}]}},
     "messages[0]"),
    ("POST", "/v1/agents/A/sessions/s1/messages", {"json": {"messages": []}}, "body messages"),
])
def test_bad_input_is_a_422_naming_where_and_why(client, agent, method, path, kwargs, where):
    headers = {**agent, **kwargs.pop("headers", {})}
    response = client.request(method, path, headers=headers, **kwargs)
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"what", "where", "why"} and body["what"] == "invalid request"
    assert body["where"].startswith(where), body
    assert body["why"] and "Traceback" not in response.text


def test_an_oversized_message_publishes_nothing(api, client, agent):
    ok = {"message_id": "m0", "role": "user", "sender_id": "u1", "content": "fine"}
    big = {"message_id": "m1", "role": "user", "sender_id": "u1", "content": "x" * 40_000}
    response = client.post("/v1/agents/A/sessions/s1/messages", json={"messages": [ok, big]}, headers=agent)
    assert response.status_code == 422 and api.publisher.events == []


def test_an_unknown_route_and_a_wrong_method_answer_in_the_same_shape(client, agent):
    missing = client.get("/v1/nothing", headers=agent)
    assert missing.status_code == 404 and set(missing.json()) == {"what", "where", "why"}
    wrong = client.delete("/v1/agents/A/stats", headers=agent)
    assert wrong.status_code == 405 and set(wrong.json()) == {"what", "where", "why"}


def test_a_body_over_the_limit_is_refused_before_it_is_read(store):
    from schemas.api_settings import ApiSettings
    from tests.api.harness import build

    api = build(store, api_settings=ApiSettings(_env_file=None, max_body_bytes=2048, rate_limit_per_minute=0))
    headers = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    body = {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "x" * 4000}]}
    with api.client() as client:
        response = client.post("/v1/agents/A/sessions/s1/messages", json=body, headers=headers)
        assert response.status_code == 413 and response.json()["where"] == "body"

        def chunks():  # no Content-Length: streamed
            for _ in range(4):
                yield b"x" * 1024

        streamed = client.post("/v1/agents/A/sessions/s1/messages", content=chunks(), headers=headers)
        assert streamed.status_code == 413
    assert api.publisher.events == []


def test_a_programming_error_is_a_500_in_the_same_shape_without_a_traceback(api, client, agent, monkeypatch):
    from pipeline.service import MemoryService

    def broken(self, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(MemoryService, "get_memory_stats", broken)
    response = client.get("/v1/agents/A/stats", headers=agent)
    assert response.status_code == 500 and set(response.json()) == {"what", "where", "why"}
    assert "secret internals" not in response.text and "Traceback" not in response.text


def test_cors_is_off_by_default(client, agent):
    response = client.options("/v1/agents/A/stats", headers={"Origin": "https://evil.example",
                                                              "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in response.headers
    plain = client.get("/v1/agents/A/stats", headers={**agent, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in plain.headers


def test_an_unknown_query_parameter_is_refused_by_name(client, agent):
    response = client.get("/v1/agents/A/sessions/s1/context", params={"user": "u1"}, headers=agent)
    assert response.status_code == 422 and response.json()["where"] == "query 'user'"
    assert "user_id" in response.json()["why"]
    assert client.get("/v1/agents/A/sessions/s1/context", params={"user_id": "u1"}, headers=agent).status_code == 200
