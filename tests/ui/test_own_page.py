"""A user's own page (design §12, §13): signed in with their token, a person reads what the
agent remembers about them and where it came from, in plain words with no internal name, sees
only their own memory, and corrects (text and end date) or removes an item."""

from __future__ import annotations

import html as markup
import re

import pytest

from tests.api.harness import ui_sign_in
from tests.ui.test_pages import _client
# one app for the module, its store put back as seeded (agent A's memory) before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

#: names from the code, the store and the API that mean nothing to the person reading
INTERNAL = ["scope_key", "scope key", "scope:", "user:", "session:", "agent:", "rrf", "blobs_deleted", "blob",
            "run_id", "fact_id", "reflection", "consolidat", "embedding", "provenance", "as_of", "version",
            "source_user_ids", "expires_at", "retired", "unabsorbed", "f-u1", "r-u1", "edit:"]


@pytest.fixture
def named(api):
    """Agent A named Juniper, its notes in words a person could have said (the seed's read
    "reflection r-…")."""
    store, now = api.deps.store, api.deps.clock.now()
    store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(update={"name": "Juniper"}))
    store.reflections.edit_reflection("r-u1", "Alice prefers calls in the morning", now, "test")
    store.reflections.edit_reflection("r-agent-u1", "The team meets on Mondays", now, "test")
    return api


def _me(api):
    client = _client(api)
    ui_sign_in(client, api.token(user="u1"))
    return client


def _seen(page: str) -> str:
    """What a person reads or hears: the text between the tags and the labels a screen reader
    speaks (aria-label, title, alt, placeholder), not the links' addresses."""
    spoken = " ".join(re.findall(r'(?:aria-label|title|alt|placeholder)="([^"]*)"', page))
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return markup.unescape(re.sub(r"<[^>]+>", " ", body) + " " + spoken)


def test_the_own_page_says_in_plain_words_what_is_remembered_and_where_it_came_from(named):
    with _me(named) as client:
        answer = client.get("/ui/", follow_redirects=True)
    assert answer.status_code == 200
    page = answer.text
    seen = _seen(page)
    assert "What Juniper remembers about you, and where it came from" in seen
    assert "Alice's email is alice@example.com" in seen and "The Mars launch is on 12 March" in seen
    assert "Alice likes short answers." in seen and "Alice prefers calls in the morning" in seen
    assert "The team meets on Mondays" in seen  # a shared note resting only on her
    assert "From what you said on" in seen
    leaked = [name for name in INTERNAL if name.lower() in seen.lower()]
    assert leaked == [], leaked
    # someone else's memory is not there; the fact shared with another person is only where she
    # can take her part out of it (her export holds it too)
    assert "555 0100" not in page
    shared = page.split('id="with-others"', 1)[1].split("</ul>", 1)[0]
    assert "Mars budget" in shared and "Mars budget" not in page.replace(shared, "")
    assert re.findall(r'<a href="[^"]+" aria-current="page">([^<]+)</a>', page) == ["My memory"]


def test_the_internal_name_scan_catches_the_operators_view_of_the_same_memory(named):
    """The scan is not blind: the admin's memory page of the same person names scope keys and
    versions, which the own page must not."""
    with _client(named) as client:
        ui_sign_in(client, named.keys["admin"])
        seen = _seen(client.get("/ui/agents/A/users/u1").text)
    assert [name for name in INTERNAL if name.lower() in seen.lower()]


def test_a_person_corrects_a_fact_with_an_end_date_removes_the_date_and_then_the_fact(api):
    store = api.deps.store
    with _me(api) as client:
        page = client.get("/ui/agents/A/users/u1").text
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        url = "/ui/agents/A/users/u1/facts/f-u1"
        saved = client.post(f"{url}/edit", data={"csrf": token, "content": "Alice's email is a@b.org",
                                                 "expires": "2999-03-10"}, follow_redirects=True)
        assert saved.status_code == 200 and "Saved: it now reads as you wrote it." in saved.text
        assert "until 11 March 2999, 00:00 UTC" in _seen(saved.text) and "corrected 1 time since" in _seen(saved.text)
        assert store.facts.get_facts(["f-u1"])[0].expires_at.year == 2999
        past = client.post(f"{url}/edit", data={"csrf": token, "content": "Alice's email is a@b.org",
                                                "expires": "2001-01-01"}, follow_redirects=True)
        assert past.status_code == 422 and "form expires" in past.text and "not in the future" in past.text
        cleared = client.post(f"{url}/edit", data={"csrf": token, "content": "Alice's email is a@b.org",
                                                   "no_expiry": "true"}, follow_redirects=True)
        assert cleared.status_code == 200 and store.facts.get_facts(["f-u1"])[0].expires_at is None
        removed = client.post(f"{url}/delete", data={"csrf": token}, follow_redirects=True)
        assert removed.status_code == 200 and "Removed: it is forgotten." in removed.text
        assert store.facts.get_facts(["f-u1"]) == [] and "a@b.org" not in removed.text


def test_a_person_takes_their_part_out_of_a_fact_shared_with_someone_else(api):
    store = api.deps.store
    [seeded] = store.facts.get_facts(["f-agent-both"])  # Alice and Bob; its wording came from an edit
    store.facts.insert_fact(seeded.model_copy(update={"fact_id": "f-crew", "content": "The Mars crew is six",
                                                "hash": "crew", "source_run_id": "edit:owner"}))
    with _me(api) as client:
        page = client.get("/ui/agents/A/users/u1").text
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        assert "Take my part out: The Mars crew is six" in _seen(page)
        out = client.post("/ui/agents/A/users/u1/facts/f-crew/withdraw", data={"csrf": token}, follow_redirects=True)
        assert out.status_code == 200 and "Your part is out" in out.text
        assert "The Mars crew is six" not in out.text  # no longer resting on her
        assert store.facts.get_facts(["f-crew"])[0].source_user_ids == ["u2"]
        # the seeded one may hold her words (no record of how it was written): the page says so
        # instead of offering the form, and a post anyway is refused, saying why
        assert "Take my part out: The Mars budget" not in _seen(page)
        assert "You cannot take your part out: the current text of this fact came" in _seen(page)
        refused = client.post("/ui/agents/A/users/u1/facts/f-agent-both/withdraw", data={"csrf": token})
        assert refused.status_code == 409 and "ask the agent&#39;s owner" in refused.text
        forged = client.post("/ui/agents/A/users/u1/facts/f-crew/withdraw", data={"csrf": "nope"})
        assert forged.status_code in (400, 403)
    assert store.facts.get_facts(["f-agent-both"])[0].source_user_ids == ["u1", "u2"]


def test_a_user_token_cannot_open_another_persons_page(api):
    with _me(api) as client:
        answer = client.get("/ui/agents/A/users/u2")
    assert answer.status_code == 403 and "555 0100" not in answer.text
