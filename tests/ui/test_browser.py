"""The inspector in a real browser (issue "See the memory"): headless Chromium, driven by
Selenium, against ``memoryctl ui`` as ``make demo`` prints it (it runs a worker over the demo's
broker) over a store that ``make demo`` formed, with one dead run added the way a worker leaves
one. Every page is opened (and checked by axe-core when it is installed); a fact is followed to
its source message and run; a search shows its branch scores; the dead run is replayed and
formed (by that worker); a user token is kept to its own page; a person is erased and the
verify result read. Screenshots: .runtime/screenshots/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ui import browser

# skipped where Chromium is missing; under CI (which installs it with make test) that fails instead
pytestmark = pytest.mark.skipif(browser.missing() is not None and not os.environ.get("CI"),
                                reason=str(browser.missing()))

AGENT, MAYA, TOM, PRIYA = "agent-juniper", "user-maya", "user-tom", "user-priya"
TOKEN_SECRET = "t" * 48


@pytest.fixture(scope="module")
def formed(tmp_path_factory):
    """The demo's store, as ``make demo`` forms it, plus a dead run of another agent."""
    from usecases.keys import create_key
    from usecases.tokens import issue_user_token
    from pipeline.clock import Clock, FrozenClock
    from pipeline.store import open_store
    from schemas.settings import Settings
    from testkit.sessions import cold_run

    if browser.missing():
        pytest.fail(browser.missing())
    db = tmp_path_factory.mktemp("ui") / "demo.db"
    demo = subprocess.run([sys.executable, "-m", "ops.demo", "--db", str(db)], cwd=browser.ROOT, capture_output=True,
                          text=True, timeout=180, env={k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")})
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    settings = Settings(_env_file=None, store_url=f"sqlite:///{db}")
    store = open_store(settings)
    clock = FrozenClock()
    dead = cold_run(store, settings, clock, "s-dead", content="I moved to Berlin and I work at Acme as a designer")
    store.runs.start_stage(dead, "extract_facts", clock.now())
    store.runs.fail_stage(dead, "extract_facts", "LLM provider unavailable: connection refused", clock.now())
    store.runs.fail_run(dead, "exhausted 5 attempts: LLM provider unavailable", clock.now(), dead=True)
    admin, _ = create_key(store.access, "admin", Clock().now(), label="browser test")
    token = issue_user_token(TOKEN_SECRET, "t1", agent_id=AGENT, user_id=TOM, lifetime_s=3600)
    store.close()
    return {"db": db, "dead": dead, "admin": admin, "tom": token, "last_lines": demo.stdout.rstrip().splitlines()[-3:]}


@pytest.fixture(scope="module")
def served(formed):
    """The command ``make demo`` prints last, run as printed (on a free port), with the
    platform's token secret set so that a user token can sign in too."""
    *_, url_line, command = formed["last_lines"]
    assert "/ui/login/" in url_line and f"sqlite:///{formed['db']}" in command
    port = browser.free_port()
    printed, argv = browser.printed_command(command, port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(printed, MEMORY_API_TOKEN_SECRETS=json.dumps({"t1": TOKEN_SECRET}))
    server = browser.Served(env, argv, port)
    yield server
    server.stop()
    # the admin key behind the link dies with the server
    from pipeline.store import open_store
    from schemas.settings import Settings

    store = open_store(Settings(_env_file=None, store_url=f"sqlite:///{formed['db']}"))
    try:
        [key] = [k for k in store.access.list_api_keys() if k.label == "inspector (memoryctl ui)"]
        assert key.revoked_at is not None, "memoryctl ui left its admin key alive"
    finally:
        store.close()


@pytest.fixture(scope="module")
def driver(served):
    d = browser.chrome()
    yield d
    browser.close(d)


def _open(driver, served, path: str):
    driver.get(served.base + path)
    return driver


def _h1(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "h1").text


def _sign_in(driver, served, credential: str) -> None:
    from selenium.webdriver.common.by import By

    _open(driver, served, "/ui/login")
    driver.find_element(By.ID, "credential").send_keys(credential)
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/login'] button").click()
    browser.wait_until(lambda: "/ui/login" not in driver.current_url, 10)


def _sign_out(driver) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/logout'] button").click()
    browser.wait_until(lambda: driver.current_url.endswith("/ui/login"), 10)


def test_the_printed_link_signs_in_once(driver, served):
    _open(driver, served, served.link.replace(served.base, ""))
    assert _h1(driver) == "Agents" and AGENT in driver.page_source
    browser.shot(driver, "agents")
    _open(driver, served, served.link.replace(served.base, ""))
    assert "used already" in driver.page_source


PAGES = [
    ("agents", "/ui/", "Agents"),
    ("memory", f"/ui/agents/{AGENT}/users/{MAYA}", MAYA),
    ("memory-as-of", f"/ui/agents/{AGENT}/users/{MAYA}?as_of=2020-01-01T00:00", MAYA),
    ("session", f"/ui/agents/{AGENT}/sessions/s2-launch-team", "Session s2-launch-team"),
    ("facts", f"/ui/agents/{AGENT}/facts", f"Facts of {AGENT}"),
    ("facts-user", f"/ui/agents/{AGENT}/facts?scope=user:{MAYA}", f"in user:{MAYA}"),
    ("search", "/ui/search", "Search playground"),
    ("runs", "/ui/runs", "Formation runs"),
    ("cost", f"/ui/cost?agent={AGENT}", "Cost of model calls"),
    ("erasure", "/ui/erasure", "Erase or export a person"),
    ("overview", f"/ui/agents/{AGENT}/overview", f"Overview of {AGENT}"),
    ("curate", f"/ui/agents/{AGENT}/curate", f"Curate {AGENT}"),
]


@pytest.mark.parametrize("name,path,title", PAGES, ids=[p[0] for p in PAGES])
def test_each_page_opens_labelled_and_keyboard_reachable(driver, served, name, path, title):
    _open(driver, served, path)
    assert title in _h1(driver), driver.page_source[:2000]
    browser.shot(driver, name)
    _check_accessible(driver)


def _check_accessible(driver) -> None:
    """The page's first Tab stop, labels and axe-core's verdict."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # the first Tab reaches the skip link, which moves the focus past the navigation
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    assert driver.switch_to.active_element.text == "Skip to content"
    unlabelled = driver.execute_script(
        "return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]"
        ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.name)")
    assert unlabelled == []
    violations = browser.axe_violations(driver)
    if violations is not None:
        assert violations == [], [(v["id"], v["help"], [n["target"] for n in v["nodes"][:3]]) for v in violations]


def test_a_fact_leads_to_its_source_message_and_the_run_that_formed_it(driver, served):
    from selenium.webdriver.common.by import By

    _open(driver, served, f"/ui/agents/{AGENT}/users/{MAYA}")
    link = next(a for a in driver.find_elements(By.CSS_SELECTOR, "table a") if "Porto" in a.text)
    link.click()
    browser.wait_until(lambda: "/ui/facts/" in driver.current_url, 10)
    assert "Porto" in _h1(driver) and "valid" in driver.page_source
    browser.shot(driver, "fact")
    # each version with the message it came from: v1 said Lisbon (s1), the UPDATE to Porto came in s3
    versions = driver.find_elements(By.CSS_SELECTOR, "ol.versions > li")
    assert len(versions) == 2 and "Lisbon" in versions[0].find_element(By.CSS_SELECTOR, "ul.sources").text
    versions[1].find_element(By.CSS_SELECTOR, "ul.sources a").click()
    browser.wait_until(lambda: driver.find_elements(By.ID, "source"), 10)
    assert "/ui/messages/s3-maya-followup/" in driver.current_url
    source = driver.find_element(By.ID, "source")
    assert "Porto" in source.text
    browser.shot(driver, "message")
    driver.find_element(By.PARTIAL_LINK_TEXT, "run ").click()
    browser.wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "table.stages"), 10)
    stages = driver.find_elements(By.CSS_SELECTOR, "table.stages tbody tr")
    assert {"extract_facts", "embed_facts"} <= {row.find_element(By.TAG_NAME, "td").text for row in stages}
    assert "Porto" in driver.page_source  # the run's range holds the source message
    browser.shot(driver, "run")


def test_a_search_shows_each_branchs_rank_and_score_against_the_cut(driver, served):
    from selenium.webdriver.common.by import By

    _open(driver, served, "/ui/search")
    for field, value in (("agent_id", AGENT), ("session_id", "s3-maya-followup"), ("user_id", MAYA),
                         ("query", "Where does Maya live now?")):
        box = driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/search'] button").click()
    browser.wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "table.branches tbody tr"), 15)
    rows = driver.find_elements(By.CSS_SELECTOR, "table.branches tbody tr")
    first = [cell.text for cell in rows[0].find_elements(By.TAG_NAME, "td")]
    assert "Porto" in first[0]
    assert first[1] == "1" and float(first[2]) > 0 and float(first[5]) > 0 and first[6] == "kept"
    assert "Stage timings" in driver.page_source and "embed" in driver.page_source
    assert "Where does Maya" not in driver.current_url
    browser.shot(driver, "search-result")


def test_a_search_narrowed_to_a_category_shows_only_facts_filed_under_it(driver, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(driver, served, f"/ui/search?agent_id={AGENT}")
    for field, value in (("session_id", "s3-maya-followup"), ("user_id", MAYA), ("query", "event budget euros")):
        driver.find_element(By.ID, field).send_keys(value)
    choices = Select(driver.find_element(By.ID, "s_categories"))
    assert {"finance", "projects", "travel"} <= {o.text for o in choices.options}
    choices.select_by_visible_text("finance")
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/search'] button").click()
    browser.wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "table#results tbody tr"), 15)
    rows = [[c.text for c in row.find_elements(By.TAG_NAME, "td")]
            for row in driver.find_elements(By.CSS_SELECTOR, "table#results tbody tr")]
    assert any("12,000 euros" in row[1] for row in rows), rows
    assert all("finance" in row[3].split(", ") for row in rows), rows
    # the filter stays chosen on the answer, and a key the agent does not mark is named
    assert [o.text for o in Select(driver.find_element(By.ID, "s_categories")).all_selected_options] == ["finance"]
    driver.find_element(By.ID, "s_metadata").send_keys("colour=red")
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/search'] button").click()
    alert = browser.wait_until(lambda: driver.find_element(By.CSS_SELECTOR, "[role=alert]").text, 10)
    assert "form metadata.colour" in alert and "not a filterable metadata key" in alert, alert
    browser.shot(driver, "search-filtered")


def test_hostile_values_in_the_forms_get_an_error_page_naming_the_field(driver, served):
    """``testkit.hostile``'s values put into the search form (set by script: a keyboard cannot
    type a control character) and into the memory page's as-of: an error page naming the field
    and the rule, and the server logs no exception."""
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    from testkit import hostile

    for value in hostile.URL_TEXT:
        _open(driver, served, "/ui/search")
        for field, text in (("agent_id", AGENT), ("session_id", "s3-maya-followup" + value), ("query", "Porto")):
            driver.execute_script("document.getElementById(arguments[0]).value = arguments[1]", field, text)
        driver.find_element(By.CSS_SELECTOR, "form[action='/ui/search'] button").click()
        alert = browser.wait_until(lambda: driver.find_element(By.CSS_SELECTOR, "[role=alert]").text, 10)
        assert alert and "form session_id" in alert and "an id is printable text" in alert, (value, alert)
    for when in hostile.FORM_TIMES:
        _open(driver, served, f"/ui/agents/{AGENT}/users/{MAYA}?as_of={quote(when)}")
        alert = driver.find_element(By.CSS_SELECTOR, "[role=alert]").text
        assert "query as_of" in alert and "from 1900-01-01T00:00:00Z" in alert, (when, alert)
    browser.shot(driver, "hostile-as-of")
    log = Path(served.log.name).read_text()
    assert "Exception in ASGI application" not in log and "Traceback" not in log, log[-3000:]


def test_a_facts_quoted_source_names_the_session_it_was_said_in(driver, served):
    from selenium.webdriver.common.by import By

    _open(driver, served, f"/ui/agents/{AGENT}/users/{MAYA}")
    next(a for a in driver.find_elements(By.CSS_SELECTOR, "table a") if "Porto" in a.text).click()
    browser.wait_until(lambda: "/ui/facts/" in driver.current_url, 10)
    quoted = driver.find_element(By.XPATH, "//p[starts-with(normalize-space(.), 'As said')]").text
    # v1 (Lisbon) was said in s1; the quote is v2's message, said in s3
    assert "Porto" in quoted and "in session s3-maya-followup" in quoted, quoted
    assert "First said in session s1-maya-intro" in driver.page_source


def test_the_memory_table_reads_newest_valid_first(driver, served):
    from datetime import datetime

    from selenium.webdriver.common.by import By

    _open(driver, served, f"/ui/agents/{AGENT}/users/{MAYA}")
    cells = driver.find_elements(
        By.XPATH, "//h2[starts-with(normalize-space(.), 'Facts live now')]/following-sibling::table[1]/tbody/tr/td[4]")
    shown = [datetime.strptime(c.text, "%Y-%m-%d %H:%M") for c in cells]
    assert len(shown) > 2 and shown == sorted(shown, reverse=True), [c.text for c in cells]


def test_a_runs_total_counts_every_call_its_table_lists(driver, served):
    import re

    from selenium.webdriver.common.by import By

    _open(driver, served, "/ui/runs?status=done")
    runs = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "table tbody a[href*='/ui/runs/']")]
    assert runs
    checked = 0
    for href in runs[:4]:
        driver.get(href)
        listed = [int(n) for n in re.findall(r"(\d+) calls,", driver.find_element(By.CSS_SELECTOR, "table.stages").text)]
        total = re.search(r"Total: tokens in/out (\d+)/(\d+) in (\d+) calls", driver.page_source)
        assert total, driver.page_source[:2000]
        assert int(total.group(3)) == sum(listed), (href, listed, total.group(0))
        checked += bool(listed)
    assert checked


def test_the_cost_page_shows_the_agent_its_select_shows(driver, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    _open(driver, served, "/ui/cost")
    selected = Select(driver.find_element(By.ID, "agent")).first_selected_option.text
    assert "Choose an agent" not in driver.page_source
    assert driver.find_element(By.ID, "total").text.startswith(f"Total of {selected}:")
    assert driver.find_element(By.ID, "by-model").text == "By model"
    browser.shot(driver, "cost-default")


def test_a_dead_run_is_replayed_and_formed(driver, served, formed):
    from selenium.webdriver.common.by import By

    from selenium.webdriver.support.select import Select

    _open(driver, served, "/ui/runs")
    Select(driver.find_element(By.ID, "status")).select_by_value("dead")
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/runs'] button").click()
    browser.wait_until(lambda: "status=dead" in driver.current_url, 10)
    statuses = {e.text for e in driver.find_elements(By.CSS_SELECTOR, "table tbody .pill")}
    assert statuses == {"dead"}
    driver.find_element(By.LINK_TEXT, formed["dead"][:12]).click()
    browser.wait_until(lambda: "/ui/runs/" in driver.current_url, 10)
    assert "LLM provider unavailable" in driver.page_source
    browser.shot(driver, "run-dead")
    driver.find_element(By.XPATH, "//button[text()='Replay this run']").click()
    browser.wait_until(lambda: "Replay of run" in driver.page_source, 10)
    assert f"Replayed: {formed['dead']}" in driver.page_source

    def status() -> str:
        _open(driver, served, f"/ui/runs/{formed['dead']}")
        return driver.find_element(By.CSS_SELECTOR, "h1 .pill").text

    assert browser.wait_until(lambda: status() == "done", 60, 1.0), status()


def test_a_user_token_opens_its_own_page_only(driver, served, formed):
    from selenium.webdriver.common.by import By

    _sign_out(driver)
    _sign_in(driver, served, formed["tom"])
    assert "remembers about you, and where it came from" in _h1(driver)
    browser.shot(driver, "user-own-page")
    assert [a.text for a in driver.find_elements(By.CSS_SELECTOR, "nav a")] == ["My memory"]
    assert driver.find_element(By.CSS_SELECTOR, "nav a[aria-current='page']").text == "My memory"
    _check_accessible(driver)
    # edit one of their facts, then delete another, through the page's forms
    box = driver.find_element(By.ID, "edit-1")
    box.clear()
    box.send_keys("Tom Okafor prefers a wireless lapel microphone")
    box.find_element(By.XPATH, "following-sibling::button").click()
    browser.wait_until(lambda: "wireless lapel" in driver.find_element(By.TAG_NAME, "main").text, 10)
    before = len(driver.find_elements(By.CSS_SELECTOR, "button.danger"))
    driver.find_elements(By.CSS_SELECTOR, "button.danger")[-1].click()
    browser.wait_until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "button.danger")) == before - 1, 10)
    assert "wireless lapel" in driver.page_source
    _open(driver, served, f"/ui/agents/{AGENT}/users/{MAYA}")
    assert "Forbidden" in _h1(driver) and "its own user only" in driver.page_source
    assert "Porto" not in driver.page_source
    _open(driver, served, "/ui/runs")
    assert "needs an admin key" in driver.page_source


def test_the_memory_pages_controls_say_and_keep_what_they_do(driver, served, formed):
    from selenium.webdriver.common.by import By

    _open(driver, served, f"/ui/agents/{AGENT}/users/{TOM}")  # still signed in as Tom
    rows = driver.find_elements(By.XPATH, "//h2[starts-with(normalize-space(.), 'Things it remembers')]"
                                          "/following-sibling::table[1]/tbody/tr")
    assert rows
    for row in rows:  # a row offering Delete never says it is read-only
        if row.find_elements(By.CSS_SELECTOR, "button.danger"):
            assert "read-only" not in row.text, row.text
    boxes = driver.find_elements(By.CSS_SELECTOR, "[id^='edit-']")
    assert boxes
    for box in boxes:  # each box shows its whole text: nothing scrolled out of sight
        width, seen, height, tall = driver.execute_script(
            "const e = arguments[0]; return [e.scrollWidth, e.clientWidth, e.scrollHeight, e.clientHeight]", box)
        assert width <= seen + 1 and height <= tall + 1, (box.get_attribute("value"), width, seen, height, tall)
    box = driver.find_element(By.ID, "edit-1")
    box.clear()
    box.send_keys("Tom Okafor prefers a cardioid podium microphone for the keynote")
    box.find_element(By.XPATH, "following-sibling::button").click()
    browser.wait_until(lambda: driver.find_elements(By.ID, "done"), 10)
    assert "Saved" in driver.find_element(By.ID, "done").text
    assert "cardioid podium" in driver.find_element(By.TAG_NAME, "main").text
    browser.shot(driver, "memory-saved")


def test_an_erasure_shows_its_plan_asks_for_the_id_and_reports_the_verify(driver, served, formed):
    from selenium.webdriver.common.by import By

    _sign_out(driver)
    _sign_in(driver, served, formed["admin"])
    _open(driver, served, "/ui/erasure")
    driver.find_element(By.ID, "plan-user").send_keys(PRIYA)
    driver.find_element(By.ID, "plan-agent").send_keys(AGENT)
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/erasure/plan'] button").click()
    browser.wait_until(lambda: "The plan for" in driver.page_source, 15)
    assert "messages" in driver.find_element(By.ID, "goes").find_element(By.XPATH, "..").text
    planned = _counts(driver)
    assert planned.get("messages_deleted") and planned.get("messages_rewritten"), planned
    browser.shot(driver, "erasure-plan")
    driver.find_element(By.ID, "confirm").send_keys("user-pria")
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/erasure/forget'] button").click()
    browser.wait_until(lambda: "nothing was erased" in driver.page_source, 10)
    driver.find_element(By.ID, "confirm").send_keys(PRIYA)
    driver.find_element(By.CSS_SELECTOR, "form[action='/ui/erasure/forget'] button").click()
    browser.wait_until(lambda: driver.find_elements(By.ID, "verify"), 60)
    verify = driver.find_element(By.ID, "verify").text
    assert "no trace of user-priya is left" in verify
    assert _counts(driver) == planned, "the erasure did not do what its plan said"
    browser.shot(driver, "erasure-verified")
    _open(driver, served, "/ui/")
    assert PRIYA not in driver.page_source
    # the group chat's runs named Priya and went; Maya, Tom and the chat's memory stay, and are listed
    people = [a.text for a in driver.find_elements(By.CSS_SELECTOR, f"a[href^='/ui/agents/{AGENT}/users/']")]
    sessions = [a.text for a in driver.find_elements(By.CSS_SELECTOR, f"a[href^='/ui/agents/{AGENT}/sessions/']")]
    assert {MAYA, TOM} <= set(people) and "s2-launch-team" in sessions, (people, sessions)
    browser.shot(driver, "agents-after-erasure")


def test_an_owner_curates_a_shared_fact_and_pauses_and_resumes_with_an_explicit_choice(driver, served):
    from selenium.webdriver.common.by import By

    _open(driver, served, f"/ui/agents/{AGENT}/overview")  # still signed in as the admin
    assert driver.find_element(By.CSS_SELECTOR, "nav.subnav a[aria-current='page']").text == "Overview"
    driver.find_element(By.LINK_TEXT, "Curate").click()
    browser.wait_until(lambda: _h1(driver).startswith("Curate"), 10)
    box = driver.find_element(By.ID, "fact-1")
    text = box.get_attribute("value")
    box.clear()
    box.send_keys(text + " (confirmed by the owner)")
    # a date input's typing order follows the locale: set its value as the date picker does
    driver.execute_script("arguments[0].value = '2999-03-10'", driver.find_element(By.ID, "expires-1"))
    box.find_element(By.XPATH, "ancestor::form").find_element(By.XPATH, ".//button[text()='Save']").click()
    browser.wait_until(lambda: driver.find_elements(By.ID, "done"), 10)
    assert "Saved" in driver.find_element(By.ID, "done").text
    assert "(confirmed by the owner)" in driver.page_source and "until 2999-03-11" in driver.page_source
    driver.find_element(By.CSS_SELECTOR, "form[action$='/pause'] button").click()  # agent memory, the first choice
    browser.wait_until(lambda: "Paused" in driver.find_element(By.ID, "done").text, 10)
    resume = driver.find_element(By.CSS_SELECTOR, "form[action$='/resume']")
    resume.find_element(By.TAG_NAME, "button").click()  # no choice made: the browser keeps the form
    assert driver.find_elements(By.CSS_SELECTOR, "form[action$='/resume']")
    assert "Paused" in driver.find_element(By.ID, "done").text
    resume.find_element(By.CSS_SELECTOR, "input[name='backfill'][value='no']").click()
    resume.find_element(By.TAG_NAME, "button").click()
    browser.wait_until(lambda: "without backfill" in driver.find_element(By.ID, "done").text, 10)
    browser.shot(driver, "curate-done")
    _check_accessible(driver)


def _counts(driver) -> dict[str, int]:
    """The erasure page's table of counts (the plan's, or the result's)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "table.counts tbody tr")
    cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    return {c[0]: int(c[1]) for c in cells if len(c) == 2}
