"""Every route of the committed OpenAPI document, each of its fields in turn given every hostile
value of ``testkit.hostile`` (lone surrogates, NUL and control characters, datetimes at the
edges of the range and ±14:00, huge numbers, JSON nested 10,000 deep), with an admin key: the
answer is never a 500, and an error is the one shape naming where. Stored free text refuses NUL
and lone surrogates, naming the field, and keeps what was there."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from testkit import hostile
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
PATH_VALUES = {"agent_id": "A", "session_id": "s1", "user_id": "u1", "item_id": "f-u1", "job_id": "j1",
               "subscription_id": "whsub_a", "stage": "extraction", "scope": "all", "section": "projects"}
QUERY_VALUES = {"agent_id": "A", "user_id": "u1"}
#: a valid body of each route that takes one (a new route fails the test until it has one)
BODIES = {
    ("put", "/v1/admin/caps"): {"agent_id": "a1", "caps": {"day": {"soft_usd": 4, "hard_usd": 5}}},
    ("post", "/v1/agents/{agent_id}/sessions/{session_id}/search"):
        {"query": "Mars launch", "user_id": "u1", "top_k": 5, "as_of": "2026-05-01T12:00:00Z"},
    ("post", "/v1/agents/{agent_id}/sessions/{session_id}/messages"):
        {"messages": [{"message_id": "m1", "role": "user", "sender_id": "u1", "sender_name": "Alice",
                       "content": "I moved to Porto", "created_at": "2026-05-01T12:00:00Z",
                       "metadata": {"project": "apollo", "tier": 2, "beta": True}}],
         "session_users": ["u1"], "user_tier": 1, "agent_name": "Juniper"},
    ("post", "/v1/agents/{agent_id}/sessions/{session_id}/start"): {"user_ids": ["u1"]},
    ("patch", "/v1/agents/{agent_id}/users/{user_id}/memory/facts/{item_id}"):
        {"content": "Alice likes tea", "categories": ["food"]},
    ("put", "/v1/agents/{agent_id}/users/{user_id}/memory-setting"): {"enabled": True},
    ("post", "/v1/admin/forget-user"): {"user_id": "u9", "agent_id": "A"},
    ("post", "/v1/admin/replay-failed"): {"agent_id": "A", "run_ids": ["r1"]},
    ("put", "/v1/agents/{agent_id}/instructions/{stage}/{scope}"): {"text": "focus: budget, venue"},
    ("post", "/v1/agents/{agent_id}/instructions/{stage}/{scope}/rollback"): {"version": 1},
    ("put", "/v1/agents/{agent_id}/memory/blob/sections/{section}"): {"bullets": ["Launch in March"]},
    ("patch", "/v1/agents/{agent_id}/memory/facts/{item_id}"):
        {"content": "The Mars budget is $60,000", "categories": ["finance"]},
    ("put", "/v1/agents/{agent_id}/categories"): {"categories": ["projects", "venues"]},
    ("post", "/v1/agents/{agent_id}/categories/rollback"): {"version": 1},
    ("put", "/v1/agents/{agent_id}/metadata-keys"): {"metadata_keys": ["project", "deal.stage"]},
    ("patch", "/v1/agents/{agent_id}/memory/reflections/{item_id}"): {"content": "The team meets Mondays"},
    ("post", "/v1/agents/{agent_id}/pause"): {"target": "agent"},
    ("post", "/v1/agents/{agent_id}/resume"): {"target": "session", "session_id": "s1"},
    ("put", "/v1/agents/{agent_id}/users/{user_id}/memory/blob"): {"content": "- Alice likes long answers"},
    ("put", "/v1/agents/{agent_id}/users/{user_id}/memory/blob/sections/{section}"):
        {"bullets": ["Alice likes long answers"]},
    ("patch", "/v1/agents/{agent_id}/users/{user_id}/memory/reflections/{item_id}"):
        {"content": "Alice likes long answers"},
    ("post", "/v1/agents/{agent_id}/webhooks"):
        {"url": "https://hooks.example/b", "events": ["fact.created"], "include_content": True},
    ("post", "/v1/agents/{agent_id}/webhooks/{subscription_id}/rotate"): {"drop_old": False},
    ("post", "/v1/agents/{agent_id}/webhook-deliveries/redeliver"): {"delivery_ids": ["msg_1"], "failed": False},
    ("post", "/v1/agents/{agent_id}/memory/facts"):
        {"content": "The venue has a roof terrace", "expires_at": "2027-01-01T00:00:00Z", "categories": ["events"]},
    ("post", "/v1/agents/{agent_id}/memory/reflections"): {"content": "The team likes recaps", "session_id": "s1"},
    ("post", "/v1/agents/{agent_id}/users/{user_id}/memory/facts"):
        {"content": "Alice is vegetarian", "expires_at": "2027-01-01T00:00:00Z", "categories": ["diet"]},
    ("post", "/v1/agents/{agent_id}/users/{user_id}/memory/reflections"): {"content": "Alice likes recaps"},
    # one JSON object is one line of JSON Lines
    ("post", "/v1/agents/{agent_id}/import"):
        {"user_id": "u1", "text": "Alice renews in June", "categories": ["billing"], "expires_at": "2027-01-01T00:00:00Z",
         "import_key": "crm-1"},
}


def _operations():
    for path, methods in DOCUMENT["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def _requests():
    """(id, method, url, body bytes or None) for every hostile variant of every route."""
    for method, path, operation in _operations():
        params = operation.get("parameters", [])
        path_values = {p["name"]: PATH_VALUES[p["name"]] for p in params if p["in"] == "path"}
        query = {p["name"]: QUERY_VALUES[p["name"]] for p in params if p["in"] == "query" and p.get("required")}
        body = BODIES.get((method, path)) if "requestBody" in operation else None
        assert body is not None or "requestBody" not in operation, f"no valid body for {method} {path}: add one"

        def url(paths=path_values, q=query):
            return path.format(**{k: quote(v, safe="") for k, v in paths.items()}), q

        for name in path_values:
            for value in hostile.URL_TEXT:
                yield f"{method} {path} path {name}={value!r}", method, url({**path_values, name: value}), body
        for p in (p for p in params if p["in"] == "query"):
            for value in hostile.for_parameter(p["schema"]):
                yield f"{method} {path} query {p['name']}={value!r}", method, url(q={**query, p["name"]: str(value)}), body
        if body is not None:
            times = [k for k in ("as_of",) if k in json.dumps(operation)]
            for where, changed in hostile.variants(body, times=tuple(times)):
                yield f"{method} {path} body {where}", method, url(), changed
            yield f"{method} {path} body nested {hostile.DEPTH} deep", method, url(), hostile.nested(body)


CASES = list(_requests())


@pytest.fixture
def admin(api):
    return {"Authorization": f"Bearer {api.keys['admin']}"}


def _send(client, headers, method, url, body):
    path, query = url
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()  # ASCII escapes: a lone surrogate travels as \udc00
    extra = {"content-type": "application/json"} if body is not None else {}
    return client.request(method.upper(), path, params=query, content=body, headers={**headers, **extra})


def test_the_sweep_reaches_every_route_and_every_kind_of_value():
    routes = {(m, p) for m, p, _ in _operations()}
    assert {(c[1], c[0].split(" ")[1]) for c in CASES} >= routes - {("get", "/healthz")}
    assert len(CASES) > 300


def test_no_hostile_input_answers_500_and_each_error_names_where(api, admin):
    failures = []
    with api.client() as client:
        for case_id, method, url, body in CASES:
            answer = _send(client, admin, method, url, body)
            if answer.status_code >= 500 and answer.status_code != 503:
                failures.append(f"{case_id}: {answer.status_code} {answer.text[:200]}")
            elif answer.status_code >= 400:
                problem = answer.json()
                if set(problem) != {"what", "where", "why"} or not problem["where"] or not problem["why"]:
                    failures.append(f"{case_id}: {answer.status_code} not in the error shape: {answer.text[:200]}")
    assert not failures, f"{len(failures)} of {len(CASES)}:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("value, named", [
    ("Alice\x00 likes tea", "U+0000, a NUL character, at character 5"),
    ("Alice \udc00 likes tea", "U+DC00, a lone surrogate"),
])
def test_an_edit_refuses_nul_and_surrogates_naming_the_field_and_keeps_the_fact(
        api, admin, value, named):
    with api.client() as client:
        answer = _send(client, admin, "patch", ("/v1/agents/A/users/u1/memory/facts/f-u1", {}), {"content": value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == "body content" and named in answer.json()["why"]
    assert api.deps.store.facts.get_facts(["f-u1"])[0].content == "Alice's email is alice@example.com"


@pytest.mark.parametrize("field", ["content", "sender_name"])
@pytest.mark.parametrize("value", ["hi \x00 there", "hi \udc00 there"])
def test_a_published_message_refuses_nul_and_surrogates_naming_the_field_and_publishes_nothing(
        api, admin, field, value):
    message = {"message_id": "m1", "role": "user", "sender_id": "u1", "content": "fine", field: value}
    ok = {"message_id": "m0", "role": "user", "sender_id": "u1", "content": "fine"}
    with api.client() as client:
        answer = _send(client, admin, "post", ("/v1/agents/A/sessions/s1/messages", {}), {"messages": [ok, message]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == f"body messages[1].{field}"
    assert api.publisher.events == []


@pytest.mark.parametrize("fmt", ["xml", "json"])
@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_context_as_of_outside_the_range_names_the_range(api, admin, fmt, as_of):
    with api.client() as client:
        answer = client.get("/v1/agents/A/sessions/s1/context", params={"as_of": as_of, "format": fmt, "user_id": "u1"},
                            headers=admin)
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == "query as_of" and "from 1900-01-01T00:00:00Z" in answer.json()["why"]


def test_an_as_of_at_plus_or_minus_14_hours_inside_the_range_is_read(api, admin):
    with api.client() as client:
        for as_of in ("2026-05-01T12:00:00+14:00", "2026-05-01T12:00:00-14:00"):
            answer = client.get("/v1/agents/A/sessions/s1/context", params={"as_of": as_of, "user_id": "u1"},
                                headers=admin)
            assert answer.status_code == 200, answer.text
