"""Every inspector form and filter, each field in turn given the hostile values of
``testkit.hostile`` (NUL and control characters, datetimes at the edges of the range and
±14:00, huge numbers), signed in with an admin key, in process: the answer is a page, never a
500, and a refusal is the error page naming the field. The browser drives the same forms in
tests/ui/test_browser.py."""

from __future__ import annotations

import re

import pytest

from testkit import hostile
from tests.ui.test_pages import _client, _sign_in
# one app for the module, its store put back as seeded (agent A's memory) before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

#: (method, path, valid fields, {field: kind}) of every form and filter; kind picks the values
FORMS = [
    ("post", "/ui/search", {"agent_id": "A", "session_id": "s1", "user_id": "u1", "query": "Mars", "top_k": "5"},
     {"agent_id": "id", "session_id": "id", "user_id": "id", "query": "text", "as_of": "time", "top_k": "number",
      "categories": "text", "metadata": "text"}),
    ("get", "/ui/search", {}, {"agent_id": "id"}),
    ("get", "/ui/agents/A/users/u1", {}, {"as_of": "time"}),
    ("get", "/ui/agents/A/sessions/s1", {}, {"as_of": "time"}),
    ("get", "/ui/agents/A/facts", {}, {"scope": "id", "page": "number"}),
    ("get", "/ui/runs", {}, {"agent": "id", "session": "id", "since": "time", "limit": "number"}),
    ("get", "/ui/cost", {"agent": "A"}, {"agent": "id", "since": "time"}),
    ("post", "/ui/erasure/plan", {"user_id": "u9", "agent_id": "A"}, {"user_id": "id", "agent_id": "id"}),
    ("post", "/ui/erasure/export", {"user_id": "u9", "agent_id": "A"}, {"user_id": "id", "agent_id": "id"}),
    ("post", "/ui/erasure/forget", {"user_id": "u9", "agent_id": "A", "confirm": "u8"},
     {"user_id": "id", "agent_id": "id", "confirm": "id"}),
    ("post", "/ui/agents/A/users/u1/facts/f-u1/edit", {"content": "Alice likes tea"},
     {"content": "text", "expires": "time"}),
    ("post", "/ui/agents/A/curate/facts/f-agent-both/edit", {"content": "The Mars budget is $1"},
     {"content": "text", "expires": "time"}),
    ("post", "/ui/agents/A/curate/reflections/r-agent-u1/edit", {"content": "The team meets"}, {"content": "text"}),
    ("post", "/ui/agents/A/curate/section", {"section": "budget", "lines": "one line"},
     {"section": "text", "lines": "text"}),
    ("post", "/ui/agents/A/instructions", {"stage": "extraction", "scope": "all", "action": "rollback", "version": "1"},
     {"stage": "id", "scope": "id", "action": "id", "text": "text", "version": "number"}),
    ("post", "/ui/agents/A/pause", {"target": "session", "session_id": "s1"}, {"target": "id", "session_id": "id"}),
    ("post", "/ui/agents/A/resume", {"target": "session", "session_id": "s1", "backfill": "no"},
     {"target": "id", "session_id": "id", "backfill": "id"}),
]
VALUES = {"id": hostile.URL_TEXT, "text": hostile.URL_TEXT, "time": hostile.FORM_TIMES + hostile.TIMES,
          "number": tuple(str(n) for n in hostile.NUMBERS)}


def test_no_form_answers_500_to_a_hostile_field_and_a_refusal_names_it(api):
    failures, tried = [], 0
    with _client(api) as client:
        csrf = _sign_in(client, api.keys["admin"])
        for method, path, valid, fields in FORMS:
            for field, kind in fields.items():
                for value in VALUES[kind]:
                    sent = {**valid, field: value}
                    answer = client.post(path, data={**sent, "csrf": csrf}) if method == "post" else \
                        client.get(path, params=sent)
                    tried += 1
                    if answer.status_code >= 500:
                        failures.append(f"{method} {path} {field}={value!r}: {answer.status_code}")
                    elif answer.status_code >= 400 and 'role="alert"' not in answer.text:
                        failures.append(f"{method} {path} {field}={value!r}: {answer.status_code} without an error page")
    assert tried > 100
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("value", ["Alice\x00 likes tea", "\x00"])
def test_an_edit_form_refuses_nul_on_a_page_naming_the_field(api, value):
    with _client(api) as client:
        csrf = _sign_in(client, api.keys["admin"])
        answer = client.post("/ui/agents/A/users/u1/facts/f-u1/edit", data={"content": value, "csrf": csrf})
    assert answer.status_code == 422
    assert re.search(r"<strong>Where:</strong>\s*form content", answer.text), answer.text
    assert api.deps.store.facts.get_facts(["f-u1"])[0].content == "Alice's email is alice@example.com"


def test_the_search_form_refuses_a_session_id_the_api_refuses(api):
    with _client(api) as client:
        csrf = _sign_in(client, api.keys["admin"])
        answer = client.post("/ui/search", data={"agent_id": "A", "session_id": "s1\x01", "query": "Mars", "csrf": csrf})
    assert answer.status_code == 422
    assert re.search(r"<strong>Where:</strong>\s*form session_id", answer.text)
    assert "U+0001, a control character" in answer.text
