"""Every error has one shape: what, where, why. Never a traceback, never a 500 for bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.service import MemoryService


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
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "content": "hi"}]}}, "body messages[0].sender_id"),
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "x" * 40_000}]}},
     "body messages[0].content"),
    ("POST", "/v1/agents/A/sessions/s1/messages", {"json": {"messages": []}}, "body messages"),
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi",
                             "metadata": {"tier": 1.5}}]}}, "body messages[0].metadata.tier"),
    ("POST", "/v1/agents/A/sessions/s1/messages",
     {"json": {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi",
                             "metadata": {"project": ["a", "b"]}}]}}, "body messages[0].metadata.project"),
])
def test_bad_input_is_a_422_naming_where_and_why(client, agent, method, path, kwargs, where):
    headers = {**agent, **kwargs.pop("headers", {})}
    response = client.request(method, path, headers=headers, **kwargs)
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"what", "where", "why"} and body["what"] == "invalid request"
    assert body["where"] == where, body
    assert body["why"] and "Traceback" not in response.text


def test_an_oversized_message_publishes_nothing(api, client, agent):
    ok = {"message_id": "m0", "role": "user", "sender_id": "u1", "content": "fine"}
    big = {"message_id": "m1", "role": "user", "sender_id": "u1", "content": "x" * 40_000}
    response = client.post("/v1/agents/A/sessions/s1/messages", json={"messages": [ok, big]}, headers=agent)
    assert response.status_code == 422 and api.publisher.events == []


def test_published_metadata_reaches_the_event_of_its_message(api, client, agent):
    body = {"messages": [{"message_id": "m0", "role": "user", "sender_id": "u1", "content": "fine",
                          "metadata": {"project": "apollo", "tier": 2, "beta": True}},
                         {"message_id": "m1", "role": "assistant", "content": "ok"}]}
    response = client.post("/v1/agents/A/sessions/s1/messages", json=body, headers=agent)
    assert response.status_code == 202, response.text
    assert [e.get("metadata") for e in api.publisher.events] == [{"project": "apollo", "tier": 2, "beta": True}, {}]


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
    assert response.status_code == 422 and response.json()["where"] == "query user"
    assert "user_id" in response.json()["why"]
    assert client.get("/v1/agents/A/sessions/s1/context", params={"user_id": "u1"}, headers=agent).status_code == 200


# ------------------------------------------------------------ the documented status table ----
DOCS_API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_errors() -> list[tuple[int, str, str]]:
    """(status, what, header or "") of each row of the status table in docs/api.md#errors."""
    section = DOCS_API.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d{3}) \| `([^`]+)` \| [^|]+ \|\s*([^|]*?)\s*\|$", section, re.M)
    return [(int(status), what, (re.findall(r"`([A-Za-z-]+)", header) or [""])[0]) for status, what, header in rows]


def _not_configured(api, client, agent):
    api.app.state.ctx.service_factory = lambda agent_id: MemoryService(
        agent_id, settings=api.deps.settings, store=api.deps.store, embedder=api.deps.embedder)  # no publisher
    api.app.state.ctx._services.clear()
    body = {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi"}]}
    return client.post("/v1/agents/A/sessions/s1/messages", json=body, headers=agent)


def _broken(api, client, agent, monkeypatch):
    monkeypatch.setattr(MemoryService, "get_memory_stats", lambda self, **kw: 1 / 0)
    return client.get("/v1/agents/A/stats", headers=agent)


#: (status, what) -> a request the app must answer with it
TRIGGERS = {
    (400, "bad request"): lambda api, c, h, mp: c.post("/v1/agents/A/sessions/s1/search", content=b"{not json",
                                                        headers={**h, "content-type": "application/json"}),
    (401, "unauthenticated"): lambda api, c, h, mp: c.get("/v1/agents/A/stats"),
    (403, "forbidden"): lambda api, c, h, mp: c.get("/v1/agents/B/stats", headers=h),
    (404, "not found"): lambda api, c, h, mp: c.get("/v1/jobs/no-such-job", headers=h),
    (405, "method not allowed"): lambda api, c, h, mp: c.delete("/v1/agents/A/users/u1/memory-setting", headers=h),
    (409, "conflict"): lambda api, c, h, mp: _duplicate_edit(api, c),
    (409, "duplicate"): lambda api, c, h, mp: c.post(
        "/v1/agents/A/memory/facts", json={"content": "The Mars launch is on 12 March"},
        headers={"Authorization": f"Bearer {api.keys['curator_a']}"}),
    (413, "request too large"): lambda api, c, h, mp: c.post("/v1/agents/A/sessions/s1/search", headers=h,
                                                              content=b"x" * (1024 * 1024 + 1)),
    (422, "invalid request"): lambda api, c, h, mp: c.post("/v1/agents/A/sessions/s1/search", json={"query": "x", "top_k": 0},
                                                            headers=h),
    (422, "refused"): lambda api, c, h, mp: c.patch(
        "/v1/agents/A/users/u1/memory/facts/f-u1", json={"content": "my password is hunter2hunter2"},
        headers={"Authorization": f"Bearer {api.token(user='u1')}"}),
    (429, "rate limited"): None,  # needs a Redis: tests/api/test_served.py holds it across workers
    (503, "unavailable"): lambda api, c, h, mp: _unreachable_limiter(api, c, h),
    (503, "not configured"): lambda api, c, h, mp: _not_configured(api, c, h),
    (503, "store missing"): lambda api, c, h, mp: _store_file_deleted(api, c, h),
    (500, "internal error"): lambda api, c, h, mp: _broken(api, c, h, mp),
}


def _duplicate_edit(api, client):
    """An edit to the text of another of the user's facts."""
    from tests.api.harness import EMB
    from testkit.documents import fact

    text = "Alice likes green tea"
    api.deps.store.facts.insert_fact(fact("f-u1-tea", text, agent="A", user="u1", embedding=EMB.embed([text]).vectors[0],
                                    model=EMB.model).model_copy(update={"source_user_ids": ["u1"]}))
    return client.patch("/v1/agents/A/users/u1/memory/facts/f-u1", json={"content": text},
                        headers={"Authorization": f"Bearer {api.token(user='u1')}"})


def _store_file_deleted(api, client, agent):
    """The SQLite file deleted under the running app (as ``make demo`` does under ``memoryctl ui``)."""
    import time
    from pathlib import Path

    from pipeline.store.sqlite.file_watch import CHECK_INTERVAL_S

    path = api.deps.store.db.path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    time.sleep(CHECK_INTERVAL_S + 0.1)   # the path is looked at once a second
    return client.get("/v1/agents/A/stats", headers=agent)


def _unreachable_limiter(api, client, agent):
    from api.limits import RateLimiter
    from testkit.procs import free_port

    api.app.state.ctx.rate_limiter = RateLimiter(f"redis://127.0.0.1:{free_port()}/0", 10)
    return client.get("/v1/agents/A/stats", headers=agent)


def test_the_status_table_lists_every_error_the_openapi_document_declares():
    from schemas.api import ERRORS

    documented = {status for status, _, _ in documented_errors()}
    assert len(documented_errors()) >= 10, documented_errors()
    assert set(ERRORS) <= documented, sorted(set(ERRORS) - documented)
    assert set(TRIGGERS) == {(s, w) for s, w, _ in documented_errors()}, "a row without a trigger, or the reverse"


@pytest.mark.parametrize("status, what, header", documented_errors())
def test_each_documented_error_is_what_the_app_answers(api, status, what, header, monkeypatch):
    trigger = TRIGGERS.get((status, what))
    if trigger is None:
        pytest.skip("answered in tests/api/test_served.py, which needs a Redis")
    agent = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    with api.client() as client:
        answer = trigger(api, client, agent, monkeypatch)
    assert (answer.status_code, answer.json()["what"]) == (status, what), answer.text
    assert set(answer.json()) == {"what", "where", "why"} and answer.json()["where"] and answer.json()["why"]
    if header:
        assert answer.headers.get(header), f"{status} {what} lacks its documented {header} header"
    if header == "Allow":
        assert answer.headers["Allow"] == "GET, PUT", answer.headers["Allow"]


def test_a_broken_limit_is_named_and_the_others_are_placed(client, agent):
    answer = client.post("/v1/agents/A/sessions/s1/search", json={"query": ["a", "b", "c", "d"], "top_k": 0},
                         headers=agent)
    assert answer.status_code == 422
    assert answer.json()["where"] == "body query" and "at most 3 items" in answer.json()["why"]
    assert "(and 1 more, at body top_k)" in answer.json()["why"]
    # one broken id is one error, however many parts of the route read it
    once = client.get("/v1/agents/" + "x" * 200 + "/stats", headers=agent)
    assert once.status_code == 422 and once.json()["why"] == "String should have at most 128 characters"


def test_a_refused_user_id_is_named_as_the_client_spelled_it(api, client):
    token = {"Authorization": f"Bearer {api.token(user='u1')}"}
    answer = client.get("/v1/agents/A/sessions/s1/context", params={"user_id": "u2"}, headers=token)
    assert answer.status_code == 403 and answer.json()["where"] == "query user_id"


@pytest.mark.parametrize("body, why", [
    (b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}", "Exceeds the limit (4300 digits)"),
    (b'{"query": "x"' + b"\xff" + b"}", "not UTF-8"),
    (b'{"query": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nests deeper than this server reads"),
])
def test_a_body_that_cannot_be_read_is_a_400_saying_why(client, agent, body, why):
    answer = client.post("/v1/agents/A/sessions/s1/search", content=body,
                         headers={**agent, "content-type": "application/json"})
    assert answer.status_code == 400 and answer.json()["where"] == "body" and why in answer.json()["why"], answer.text
