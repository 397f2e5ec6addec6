"""The inspector's log-in, CSRF and reach, in process (``api.app.create_app`` over a real
SQLite store): what a browser would get, answer by answer. The browser itself drives the
same pages in tests/ui/test_browser.py."""

from __future__ import annotations

import re

import pytest

from usecases.keys import revoke_key
from api.ui.sessions import COOKIE
from tests.api.harness import ui_sign_in
# one app for the module, its store put back as seeded (agent A's memory) before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


def _client(api, base_url="http://testserver"):
    from fastapi.testclient import TestClient

    return TestClient(api.app, raise_server_exceptions=False, base_url=base_url)


def _sign_in(client, credential: str) -> str:
    """Signs in through the form; returns the page's CSRF token."""
    ui_sign_in(client, credential)
    return _csrf(client.get("/ui/search" if "eyJ" not in credential else "/ui/", follow_redirects=True).text)


def _login(client, credential: str, **headers):
    """The log-in form fetched, then posted with its token (as a browser on this site does)."""
    token = _csrf(client.get("/ui/login").text)
    return client.post("/ui/login", data={"credential": credential, "csrf": token}, headers=headers,
                       follow_redirects=False)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def test_a_one_time_link_signs_in_once_with_a_strict_httponly_cookie(api):
    code = api.app.state.ui_sessions.issue_code(api.keys["admin"])
    with _client(api, "https://testserver") as client:
        first = client.get(f"/ui/login/{code}", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/ui/"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" in cookie and "Path=/ui" in cookie
        assert api.keys["admin"] not in cookie
        assert client.get("/ui/").status_code == 200
    with _client(api) as other:
        again = other.get(f"/ui/login/{code}", follow_redirects=False)
        assert again.status_code == 401 and "used already" in again.text
        assert other.get("/ui/", follow_redirects=False).headers["location"] == "/ui/login"


def test_the_cookie_is_not_secure_over_plain_http_and_a_bad_credential_is_refused_on_the_page(api):
    with _client(api) as client:
        answer = _login(client, api.keys["admin"])
        assert "Secure" not in answer.headers["set-cookie"]
        refused = _login(client, "mk_nope_nope")
        assert refused.status_code == 401 and "unknown key" in refused.text and "Traceback" not in refused.text


@pytest.mark.parametrize("headers", [
    {"Origin": "https://evil.example"}, {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {},
])
def test_a_log_in_posted_from_another_site_or_without_the_forms_token_signs_nobody_in(api, headers):
    """Log-in CSRF: a page elsewhere posts the attacker's own credential, so that the victim's
    browser works in the attacker's account. No cookie may come of it."""
    with _client(api) as client:
        for data in ({"credential": api.keys["admin"]}, {"credential": api.keys["admin"], "csrf": "forged"}):
            refused = client.post("/ui/login", data=data, headers=headers, follow_redirects=False)
            assert refused.status_code == 403 and COOKIE not in refused.headers.get("set-cookie", ""), refused.text
        if headers:  # with the form's own token, from another site, still refused
            refused = _login(client, api.keys["admin"], **headers)
            assert refused.status_code == 403 and COOKIE + "=" not in refused.headers.get("set-cookie", "")
        assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui/login"
        assert _login(client, api.keys["admin"], Origin="http://testserver", **{"Sec-Fetch-Site": "same-origin"}
                      ).status_code == 303


def test_every_post_route_of_the_inspector_refuses_another_sites_form(api):
    from api.ui import routes, routes_ops

    posts = sorted(r.path for router in (routes.router, routes_ops.router) for r in router.routes if "POST" in r.methods)
    assert "/ui/login" in posts and len(posts) == 10
    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        for path in posts:
            answer = client.post(path.replace("{", "").replace("}", ""), headers={"Origin": "https://evil.example"},
                                 data={"csrf": token, "credential": api.keys["admin"], "user_id": "u1",
                                       "agent_id": "A", "confirm": "u1", "content": "x y"})
            assert answer.status_code == 403 and "header Origin" in answer.text, path
        assert api.deps.store.facts.get_facts(["f-u1"])


def test_every_mutating_form_refuses_a_post_without_the_sessions_csrf_token(api):
    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        edit = "/ui/agents/A/users/u1/facts/f-u1/edit"
        for sent in ({}, {"csrf": "forged"}):
            answer = client.post(edit, data={"content": "Alice's email is eve@example.com", **sent})
            assert answer.status_code == 403 and "CSRF" in answer.text
        assert api.deps.store.facts.get_facts(["f-u1"])[0].content == "Alice's email is alice@example.com"
        for path in ("/ui/agents/A/users/u1/facts/f-u1/delete", "/ui/runs/r1/replay", "/ui/search",
                     "/ui/erasure/plan", "/ui/erasure/forget", "/ui/erasure/export", "/ui/logout"):
            assert client.post(path, data={"user_id": "u1", "confirm": "u1"}).status_code == 403, path
        assert api.deps.store.facts.get_facts(["f-u1"]), "a refused delete deleted"
        done = client.post(edit, data={"content": "Alice's email is alice@work.example", "csrf": token})
        assert done.status_code == 200 and "alice@work.example" in done.text
        assert api.deps.store.facts.get_facts(["f-u1"])[0].version == 2


def test_a_user_token_sees_and_edits_its_own_memory_only(api):
    with _client(api) as client:
        token = _sign_in(client, api.token(user="u1"))
        mine = client.get("/ui/")
        assert mine.status_code == 200 and "Alice&#39;s email" in mine.text and "Bob" not in mine.text
        # shared memory that rests on others too shows only where they can take their part out of
        # it (as their export holds it), never as a link into the operator's pages
        with_others = mine.text.split('id="with-others"', 1)[1].split("</ul>", 1)[0]
        assert "The Mars budget" in with_others and "The Mars budget" not in mine.text.replace(with_others, "")
        assert '/ui/facts/f-agent-both"' not in mine.text
        other = client.get("/ui/agents/A/users/u2")
        assert other.status_code == 403 and "its own user only" in other.text
        assert client.get("/ui/facts/f-u2").status_code == 404
        for page in ("/ui/runs", "/ui/erasure", "/ui/cost?agent=A", "/ui/agents/A/facts"):
            assert client.get(page).status_code == 403, page
        assert client.post("/ui/agents/A/users/u2/facts/f-u2/delete", data={"csrf": token}).status_code == 403
        assert api.deps.store.facts.get_facts(["f-u2"])
        gone = client.post("/ui/agents/A/users/u1/facts/f-agent-u1/delete", data={"csrf": token})
        assert gone.status_code == 200 and not api.deps.store.facts.get_facts(["f-agent-u1"])


def test_an_item_the_user_may_delete_is_never_called_read_only_and_each_change_is_confirmed(api):
    with _client(api) as client:
        token = _sign_in(client, api.token(user="u1"))
        page = client.get("/ui/agents/A/users/u1").text
        shared = re.search(r'<h2 id="shared">.*?</table>', page, re.S).group(0)
        row = re.search(r"<tr><td>The Mars launch is on 12 March</td>.*?</tr>", shared, re.S).group(0)
        assert 'class="danger"' in row and "read-only" not in row and "<textarea" not in row
        saved = client.post("/ui/agents/A/users/u1/facts/f-u1/edit",
                            data={"content": "Alice's email is alice@work.example", "csrf": token})
        assert saved.status_code == 200 and 'id="done"' in saved.text and "Saved" in saved.text
        gone = client.post("/ui/agents/A/users/u1/facts/f-agent-u1/delete", data={"csrf": token})
        assert "Removed" in gone.text and not api.deps.store.facts.get_facts(["f-agent-u1"])


def test_an_agent_key_reads_its_agent_but_edits_nothing(api):
    with _client(api) as client:
        token = _sign_in(client, api.keys["agent_a"])
        assert client.get("/ui/agents/A/users/u1").status_code == 200
        assert client.get("/ui/agents/B/users/u1").status_code == 403
        refused = client.post("/ui/agents/A/users/u1/facts/f-u1/edit", data={"content": "x y", "csrf": token})
        assert refused.status_code == 403 and "agent key reads" in refused.text


def test_a_revoked_key_ends_its_session_at_the_next_page(api):
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        [key] = [k for k in api.deps.store.access.list_api_keys() if k.kind == "admin"]
        revoke_key(api.deps.store.access, key.key_id, api.deps.clock.now())
        answer = client.get("/ui/", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"


def test_bad_input_reads_as_what_where_and_why(api):
    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        bad = client.get("/ui/agents/A/users/u1?as_of=yesterday")
        assert bad.status_code == 422 and "query as_of" in bad.text and "Traceback" not in bad.text
        assert client.get("/ui/agents/A/facts?page=0").status_code == 422
        wrong = client.get("/ui/agents/A/facts?scope=everything")
        assert wrong.status_code == 422 and "query scope" in wrong.text
        blank = client.post("/ui/search", data={"csrf": token, "agent_id": "A", "session_id": "s", "query": "  "})
        assert blank.status_code == 422 and "blank" in blank.text
        typo = client.post("/ui/erasure/forget", data={"csrf": token, "user_id": "u1", "agent_id": "A", "confirm": "u2"})
        assert typo.status_code == 422 and "nothing was erased" in typo.text
        assert api.deps.store.facts.get_facts(["f-u1"])


def test_an_address_or_method_the_inspector_does_not_serve_reads_as_a_page(api):
    """The inspector's errors are drawn by the one error mapping: under /ui a mistyped address or
    a wrong method is a page saying what, where and why, not the API's JSON."""
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        missing = client.get("/ui/agents-typo")
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
        assert "path /ui/agents-typo" in missing.text and "Back to the start" in missing.text
        wrong = client.put("/ui/search")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, POST"
        assert "PUT is not served here" in wrong.text and wrong.headers["content-type"].startswith("text/html")


def test_every_wrong_field_of_a_form_is_named(api):
    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        bad = client.post("/ui/search", data={"csrf": token, "agent_id": "A", "session_id": "s", "top_k": "0"})
        assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
        assert "form query" in bad.text and "and 1 more, at form top_k" in bad.text


def test_searches_travel_in_the_body_and_the_cookie_never_holds_the_credential(api):
    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        form = client.get("/ui/search").text
        assert re.search(r'<form method="post" action="/ui/search"', form)
        answer = client.post("/ui/search", data={"csrf": token, "agent_id": "A", "session_id": "s1", "user_id": "u1",
                                                 "query": "Alice email"})
        assert answer.status_code == 200 and "Semantic score" in answer.text and "Alice&#39;s email" in answer.text
        assert api.keys["admin"] not in client.cookies.get(COOKIE, "")


def test_the_fact_list_shows_one_scope_a_page_at_a_time(api, monkeypatch):
    from api.ui import views

    monkeypatch.setattr(views, "PAGE_SIZE", 1)
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        first = client.get("/ui/agents/A/facts?scope=agent")
        second = client.get("/ui/agents/A/facts?scope=agent&page=2")
        assert 'rel="next"' in first.text and 'rel="next"' not in second.text
        shown = [re.findall(r'/ui/facts/([^"]+)"', page.text) for page in (first, second)]
        assert sorted(shown[0] + shown[1]) == ["f-agent-both", "f-agent-u1"]
        assert "f-u1" not in first.text + second.text


def test_an_export_downloads_everything_about_the_user_under_a_pseudonymous_name(api):
    import json

    with _client(api) as client:
        token = _sign_in(client, api.keys["admin"])
        answer = client.post("/ui/erasure/export", data={"csrf": token, "user_id": "u1", "agent_id": "A"})
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
        disposition = answer.headers["content-disposition"]
        assert disposition.startswith("attachment;") and "u1" not in disposition
        rows = [json.loads(line) for line in answer.text.splitlines()]
        ids = {r["fact_id"] for r in rows if r["kind"] == "fact"}
        assert {"f-u1", "f-agent-u1", "f-agent-both"} <= ids and "f-u2" not in ids
        assert [e.action for e in api.deps.store.access.list_audit(action="export_user")]


def test_memory_as_of_a_date_shows_the_blob_and_facts_as_they_stood_then(api):
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        now = client.get("/ui/agents/A/users/u1")
        assert "Alice likes short answers" in now.text
        then = client.get("/ui/agents/A/users/u1?as_of=2000-01-01T00:00")
        assert then.status_code == 200 and "Facts valid at 2000-01-01T00:00" in then.text
        consolidated = then.text.split("Consolidated memory")[1].split("Facts live now")[0]
        assert "Alice likes short answers" not in consolidated and "no consolidated memory yet" in consolidated


def test_the_agents_page_shows_what_is_paused_and_which_instructions_are_set(api):
    from pipeline.formation.screening import guard_for
    from pipeline.owner import controls
    from schemas.documents import FormationRun

    store, now = api.deps.store, api.deps.clock.now()
    store.runs.insert_run(FormationRun(run_id="r1", agent_id="A", session_id="s1", seq_from=1, seq_to=2, reason="threshold",
                                  status="done", created_at=now, finished_at=now, user_ids=["u1"]))
    controls.pause(store.ingest, "A", "session", session_id="s1", by="owner", now=now)
    controls.set_instruction(store.ingest, guard_for(api.deps.settings), "A", "extraction", "all", "ignore: catering",
                             by="owner", now=now)
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        page = client.get("/ui/").text
    assert "session:s1</span>" in page and "extraction/all v1" in page and "catering" not in page


def _expire(api, fact_id, when):
    from pipeline.store.port import FactUpdate

    f = api.deps.store.facts.get_facts([fact_id])[0]
    api.deps.store.facts.update_fact(fact_id, FactUpdate(
        content=f.content, hash=f.hash, embedding=f.embedding, embedding_model=f.embedding_model,
        run_id=f"edit:{when.isoformat()}", now=api.deps.clock.now(), valid_from=f.valid_from, expires_at=when))


def test_a_fact_page_says_when_it_expires_and_an_expired_fact_leaves_the_live_listings(api):
    from datetime import timedelta

    now = api.deps.clock.now()
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        _expire(api, "f-agent-u1", now + timedelta(days=2))
        page = client.get("/ui/facts/f-agent-u1").text
        assert f"expires {(now + timedelta(days=2)):%Y-%m-%d %H:%M} UTC" in page
        assert "/ui/facts/f-agent-u1\"" in client.get("/ui/agents/A/facts?scope=agent").text
        _expire(api, "f-agent-u1", now - timedelta(seconds=1))   # past it now; beat has not stamped it
        page = client.get("/ui/facts/f-agent-u1").text
        assert f"expired {(now - timedelta(seconds=1)):%Y-%m-%d %H:%M} UTC" in page
        assert "/ui/facts/f-agent-u1\"" not in client.get("/ui/agents/A/facts?scope=agent").text
        live = client.get("/ui/agents/A/users/u1").text.split("Facts live now")[1]
        assert "/ui/facts/f-agent-u1\"" not in live
        before = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
        then = client.get(f"/ui/agents/A/users/u1?as_of={before}").text
        assert "/ui/facts/f-agent-u1\"" in then.split(f"Facts valid at {before}")[1]


def test_the_cost_page_shows_the_spend_caps_against_the_spend(api):
    from schemas.caps import SpendCaps, WindowCaps

    api.deps.store.caps.put_spend_caps("A", SpendCaps(day=WindowCaps(soft_usd=4, hard_usd=5)), api.deps.clock.now())
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        shown = client.get("/ui/cost?agent=A")
    assert shown.status_code == 200
    section = shown.text[shown.text.index('id="caps"'):]
    assert "<td>A <span class=\"muted\">(set)</span></td><td>day</td><td>0.0000</td>" in section
    assert "<td>4.00</td>\n<td>5.00</td>" in section and "only priced spend counts" in section


def test_a_fact_page_and_a_message_page_show_their_metadata(api):
    from testkit.documents import fact, message

    store, now = api.deps.store, api.deps.clock.now()
    store.ingest.ingest_message(message(1, agent="A", session="s1", user="u1", content="Ship it").model_copy(
        update={"metadata": {"project": "apollo", "tier": 2, "note": "<b>bold</b>"}}), now)
    store.facts.insert_fact(fact("f-meta", "Apollo ships on Friday", agent="A").model_copy(update={
        "source_session_id": "s1", "source_message_ids": ["m1"], "source_user_ids": ["u1"],
        "metadata": {"project": ["apollo", "zeus"], "urgent": True}}))
    with _client(api) as client:
        _sign_in(client, api.keys["admin"])
        shown = client.get("/ui/facts/f-meta").text.split("Metadata kept from its messages")[1]
        assert "<td>project</td><td>\"apollo\", \"zeus\"</td>" in shown
        assert "<td>urgent</td><td>true</td>" in shown
        said = client.get("/ui/messages/s1/m1").text.split("Its metadata")[1]
        assert "<td>project</td><td>\"apollo\"</td>" in said and "<td>tier</td><td>2</td>" in said
        assert "<b>bold</b>" not in said  # a producer's value is text, never markup
        assert "Its metadata" not in client.get("/ui/facts/f-agent-u1").text
