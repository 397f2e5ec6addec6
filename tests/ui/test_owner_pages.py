"""The inspector's owner pages (design §13 "Owner controls"), in process over a real SQLite
store: who may open them, what the overview counts, and that each curation form does what the
HTTP route does (same checks, same audit), refuses a cross-site post, and names the form's field
when it refuses a value. The browser drives them in tests/ui/test_browser.py."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from pipeline.store.port import FactUpdate
from tests.api.harness import ui_sign_in
from tests.ui.test_pages import _client
# one app for the module, its store put back as seeded (agent A's memory) before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


def _signed_in(api, credential: str):
    client = _client(api)
    ui_sign_in(client, credential)
    return client


def _csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def _post(client, path: str, data: dict, page: str = "/ui/agents/A/curate"):
    return client.post(path, data={"csrf": _csrf(client.get(page).text), **data}, follow_redirects=True)


@pytest.mark.parametrize("path", ["/ui/agents/A/overview", "/ui/agents/A/curate"])
@pytest.mark.parametrize("key, status", [("admin", 200), ("curator_a", 200), ("agent_a", 403), ("curator_b", 403)])
def test_the_owner_pages_open_for_a_curate_key_of_that_agent_or_an_admin_only(api, path, key, status):
    with _signed_in(api, api.keys[key]) as client:
        answer = client.get(path)
        assert answer.status_code == status, answer.text[:500]
        if status == 403:
            assert "Mars budget" not in answer.text and "Traceback" not in answer.text


def test_a_user_token_is_refused_the_owner_pages(api):
    with _signed_in(api, api.token(user="u1")) as client:
        answer = client.get("/ui/agents/A/overview")
        assert answer.status_code == 403 and "curate scope" in answer.text


def test_the_overview_counts_the_agents_memory_and_shows_pauses_instructions_and_changes(api):
    store, now = api.deps.store, api.deps.clock.now()
    with _signed_in(api, api.keys["curator_a"]) as client:
        assert _post(client, "/ui/agents/A/pause", {"target": "agent"}).status_code == 200
        assert _post(client, "/ui/agents/A/instructions",
                     {"stage": "extraction", "scope": "all", "action": "set", "text": "ignore: catering"}).status_code == 200
        store.facts.update_fact("f-agent-both", FactUpdate(content="The Mars budget is $61,000", hash="h61", embedding=None,
                                                     embedding_model=None, run_id="run-x", now=now))
        html = client.get("/ui/agents/A/overview").text
    counts = dict(re.findall(r'<th scope="row">([^<]+)</th><td>(\d+)</td>', html))
    assert counts == {"Live facts": "4", "Reflections waiting to be merged": "2", "People with memory": "2",
                      "Sessions with memory": "0"}, counts
    assert 'class="pill paused">agent<' in html and "ignore: catering" in html
    changes = re.search(r'<table id="changes">.*?</table>', html, re.S).group(0)
    assert re.search(r'edited</span></td><td>agent</td><td><a href="/ui/facts/f-agent-both">The Mars budget is \$61,000',
                     changes), changes
    assert "offline ($0)" in html or "$0" in html


def test_an_owner_edits_a_shared_fact_with_an_expiry_then_clears_it_and_the_audit_says_so(api):
    store = api.deps.store
    with _signed_in(api, api.keys["curator_a"]) as client:
        done = _post(client, "/ui/agents/A/curate/facts/f-agent-both/edit",
                     {"content": "The Mars budget is $60,000", "expires": "2999-03-10"})
        assert done.status_code == 200 and "Saved" in done.text and "until 2999-03-11 00:00" in done.text
        fact = store.facts.get_facts(["f-agent-both"])[0]
        assert (fact.content, fact.version, fact.expires_at.isoformat()) == (
            "The Mars budget is $60,000", 2, "2999-03-11T00:00:00+00:00")
        kept = _post(client, "/ui/agents/A/curate/facts/f-agent-both/edit", {"content": "The Mars budget is $60,000"})
        assert kept.status_code == 200 and store.facts.get_facts(["f-agent-both"])[0].expires_at is not None
        cleared = _post(client, "/ui/agents/A/curate/facts/f-agent-both/edit",
                        {"content": "The Mars budget is $60,000", "no_expiry": "true"})
        assert cleared.status_code == 200 and store.facts.get_facts(["f-agent-both"])[0].expires_at is None
    entries = [e for e in store.access.list_audit(action="item.edit")]
    assert len(entries) == 3 and all(e.credential_kind == "agent" for e in entries)
    assert "60,000" not in "".join(e.model_dump_json() for e in entries)


def test_an_owner_corrects_a_shared_facts_metadata_in_the_curation_form(api):
    store = api.deps.store
    store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(
        update={"metadata_keys": ["project", "code"]}))
    fact = store.facts.get_facts(["f-agent-both"])[0]
    store.facts.update_fact("f-agent-both", FactUpdate(content=fact.content, hash=fact.hash, embedding=None,
                                                       embedding_model=None, run_id="r-meta", now=api.deps.clock.now(),
                                                       metadata={"project": "apollo", "code": "2"}))
    edit, text = "/ui/agents/A/curate/facts/f-agent-both/edit", "The Mars budget is $50,000"
    with _signed_in(api, api.keys["curator_a"]) as client:
        html = client.get("/ui/agents/A/curate").text
        assert 'code=&#34;2&#34;\nproject=apollo</textarea>' in html and "keys: project, code" in html
        shown = 'code="2"\nproject=apollo'
        done = _post(client, edit, {"content": text, "metadata": "project=zeus\r\nproject=hera", "metadata_shown": shown})
        assert done.status_code == 200 and "Saved" in done.text
        assert store.facts.get_facts(["f-agent-both"])[0].metadata == {"project": ["zeus", "hera"]}
        assert store.facts.labelled_fact_ids("A", ["agent"], [['meta:project="apollo"']]) == set()
        # left as shown, the field keeps the fact's, even a key the agent no longer marks
        store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(update={"metadata_keys": []}))
        kept = _post(client, edit, {"content": text, "metadata": "project=zeus\nproject=hera",
                                    "metadata_shown": "project=zeus\nproject=hera"})
        assert kept.status_code == 200 and store.facts.get_facts(["f-agent-both"])[0].metadata == {
            "project": ["zeus", "hera"]}
        refused = _post(client, edit, {"content": text, "metadata": "project=zeus", "metadata_shown": "project=hera"})
        assert refused.status_code == 422 and "form metadata.project" in refused.text
        assert "(the agent has none; set them with metadata-keys)" in refused.text
        cleared = _post(client, edit, {"content": text, "metadata": "", "metadata_shown": "project=zeus"})
        assert cleared.status_code == 200 and store.facts.get_facts(["f-agent-both"])[0].metadata == {}


@pytest.mark.parametrize("data, where, why", [
    ({"content": "The Mars budget is $60,000", "metadata": "project apollo"}, "form metadata", "is not KEY=VALUE"),
    ({"content": "The Mars budget is $60,000", "expires": "2020-01-01"}, "form expires", "not in the future"),
    ({"content": "The Mars budget is $60,000", "expires": "soon"}, "form expires", "expected a date"),
    ({"content": "Write to alice@example.com for the budget"}, "form content", "email"),
    ({"content": "The Mars budget\u0000 is $1"}, "form content", "NUL"),
])
def test_a_refused_edit_is_a_page_naming_the_field_and_changes_nothing(api, data, where, why):
    with _signed_in(api, api.keys["curator_a"]) as client:
        answer = _post(client, "/ui/agents/A/curate/facts/f-agent-both/edit", data)
    assert answer.status_code == 422 and where in answer.text and why in answer.text, answer.text[-1500:]
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].version == 1


def test_a_fact_whose_expiry_passed_is_shown_as_expired_with_no_edit_form(api):
    store, now = api.deps.store, api.deps.clock.now()
    fact = store.facts.get_facts(["f-agent-u1"])[0]
    store.facts.update_fact("f-agent-u1", FactUpdate(content=fact.content, hash=fact.hash, embedding=None, embedding_model=None,
                                               run_id="edit:t", now=now, expires_at=now - timedelta(minutes=1)))
    with _signed_in(api, api.keys["admin"]) as client:
        html = client.get("/ui/agents/A/curate").text
        assert 'class="pill expired">expired' in html
        assert 'action="/ui/agents/A/curate/facts/f-agent-u1/edit"' not in html
        assert 'action="/ui/agents/A/curate/facts/f-agent-both/edit"' in html
        refused = _post(client, "/ui/agents/A/curate/facts/f-agent-u1/edit", {"content": "The Mars launch is in May"})
        assert refused.status_code == 409 and "expired at" in refused.text


def test_an_owner_edits_and_deletes_a_waiting_reflection_and_rewrites_a_section(api):
    store = api.deps.store
    with _signed_in(api, api.keys["curator_a"]) as client:
        assert _post(client, "/ui/agents/A/curate/reflections/r-agent-u1/edit",
                     {"content": "The team wants weekly recaps"}).status_code == 200
        assert store.reflections.unabsorbed_reflections("A", "agent")[0].content == "The team wants weekly recaps"
        section = _post(client, "/ui/agents/A/curate/section", {"section": "budget", "lines": "- 60,000 in all\nAV 3,500"})
        assert section.status_code == 200 and "60,000 in all" in section.text
        assert "[BUDGET]\n- 60,000 in all\n- AV 3,500" in store.blobs.get_blob("A", "agent").consolidated_content
        assert _post(client, "/ui/agents/A/curate/reflections/r-agent-u1/delete", {}).status_code == 200
        assert store.reflections.unabsorbed_reflections("A", "agent") == []
        assert _post(client, "/ui/agents/A/curate/facts/f-agent-u1/delete", {}).status_code == 200
        assert store.facts.get_facts(["f-agent-u1"]) == []
        user_fact = _post(client, "/ui/agents/A/curate/facts/f-u1/delete", {})
        assert user_fact.status_code == 404 and store.facts.get_facts(["f-u1"])  # a user's own fact is not the owner's
    assert {"item.edit", "item.delete", "blob.edit"} <= {e.action for e in store.access.list_audit()}


def test_instructions_are_set_cleared_and_rolled_back_as_new_versions(api):
    from pipeline.owner import controls

    with _signed_in(api, api.keys["curator_a"]) as client:
        base = {"stage": "extraction", "scope": "all"}
        _post(client, "/ui/agents/A/instructions", {**base, "action": "set", "text": "ignore: catering"})
        _post(client, "/ui/agents/A/instructions", {**base, "action": "clear"})
        html = _post(client, "/ui/agents/A/instructions", {**base, "action": "rollback", "version": "1"}).text
        assert "(rollback to v1)" in html
        too_long = _post(client, "/ui/agents/A/instructions", {**base, "action": "set", "text": "word " * 301})
        assert too_long.status_code == 422 and "form text" in too_long.text and "300 words" in too_long.text
    history = controls.list_instructions(api.deps.store.ingest, "A")
    assert [(i.version, i.text) for i in history] == [(1, "ignore: catering"), (2, ""), (3, "ignore: catering")]


def test_resume_asks_for_the_backfill_choice_and_a_missing_choice_is_refused(api):
    from pipeline.owner import controls

    with _signed_in(api, api.keys["curator_a"]) as client:
        _post(client, "/ui/agents/A/pause", {"target": "session", "session_id": "s1"})
        assert [p.scope_key for p in controls.list_pauses(api.deps.store.ingest, "A")] == ["session:s1"]
        html = client.get("/ui/agents/A/curate").text
        assert 'name="backfill" value="no" required' in html and 'name="backfill" value="yes" required' in html
        unchosen = _post(client, "/ui/agents/A/resume", {"target": "session", "session_id": "s1"})
        assert unchosen.status_code == 422 and "form backfill" in unchosen.text
        assert controls.list_pauses(api.deps.store.ingest, "A")
        resumed = _post(client, "/ui/agents/A/resume", {"target": "session", "session_id": "s1", "backfill": "no"})
        assert resumed.status_code == 200 and "without backfill" in resumed.text
    assert controls.list_pauses(api.deps.store.ingest, "A") == []


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}])
def test_a_curation_form_posted_from_another_site_changes_nothing(api, headers):
    with _signed_in(api, api.keys["curator_a"]) as client:
        token = _csrf(client.get("/ui/agents/A/curate").text)
        answer = client.post("/ui/agents/A/curate/facts/f-agent-both/delete", data={"csrf": token}, headers=headers)
        assert answer.status_code == 403
        forged = client.post("/ui/agents/A/pause", data={"csrf": "forged", "target": "all"})
        assert forged.status_code == 403 and "CSRF" in forged.text
    assert api.deps.store.facts.get_facts(["f-agent-both"]) and not api.deps.store.ingest.get_agent_settings("A").paused


def test_the_menu_marks_the_page_you_are_on(api):
    with _signed_in(api, api.keys["admin"]) as client:
        for path, label in [("/ui/", "Agents"), ("/ui/search", "Search"), ("/ui/agents/A/curate", "Curate"),
                            ("/ui/agents/A/overview", "Overview")]:
            html = client.get(path).text
            current = re.findall(r'<a href="[^"]+" aria-current="page">([^<]+)</a>', html)
            assert current == [label], (path, current)


def test_the_agent_menu_offers_the_fact_list_only_to_a_key_that_reads(api):
    with _signed_in(api, api.keys["curator_a"]) as client:
        assert "/ui/agents/A/facts" not in client.get("/ui/agents/A/curate").text
    with _signed_in(api, api.keys["admin"]) as client:
        assert 'href="/ui/agents/A/facts"' in client.get("/ui/agents/A/curate").text
