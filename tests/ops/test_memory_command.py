"""``memoryctl memory``: the real command, in its own process, over a store formed by the demo."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from testkit.demo_store import AGENT, MAYA, demo_env, formed_demo_store
from testkit.procs import REPO_ROOT


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    return f"sqlite:///{formed_demo_store(tmp_path_factory)}"


def memoryctl(store_url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ops.cli", "memory", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, env=demo_env(MEMORY_STORE_URL=store_url), timeout=120)


def test_the_terminal_view_lists_blob_sections_reflections_and_facts_with_their_sources(store_url):
    result = memoryctl(store_url, "--agent", AGENT, "--user", MAYA, "--session", "s3-maya-followup")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    user = out.split("== user scope (user:user-maya)")[1].split("== session scope")[0]
    assert "[PREFERENCES]" in user and "Fridays" in user.split("[PREFERENCES]")[1]
    # the corrected fact, its version, and both messages it rests on
    moved = user.split("Maya Chen moved from Lisbon to Porto last weekend\n")[1].splitlines()[0]
    assert "v2" in moved and "session s1-maya-intro" in moved and "s3-maya-followup-m01" in moved
    session = out.split("== session scope (session:s3-maya-followup)")[1].split("== shared")[0]
    assert "press invitation" in session and "facts" not in session  # sessions hold no facts
    shared = out.split("== shared agent memory from user-maya's messages")[1]
    assert "budget for the event is 12,000 euros" in shared
    assert "AV and streaming needs" not in shared  # said by Tom, not by Maya


def test_json_lists_every_live_fact_with_its_source_and_only_this_persons_scopes(store_url):
    result = memoryctl(store_url, "--agent", AGENT, "--user", MAYA, "--json")
    assert result.returncode == 0, result.stderr
    view = json.loads(result.stdout)
    assert [s["scope_key"] for s in view["scopes"]] == ["user:user-maya"]
    [user] = view["scopes"]
    facts = {f["content"]: f for f in user["facts"]}
    assert "Maya Chen's work email is maya.chen@lumenlabs.example" in facts
    assert all(f["source_message_ids"] and f["source_session_id"] for f in user["facts"])
    assert not any("Tom Okafor" in text for text in facts)
    assert {r["absorbed"] for r in user["reflections"]} == {True}
    assert user["blob"]["version"] == max(r["blob_version"] for r in user["reflections"])

    tom = json.loads(memoryctl(store_url, "--agent", AGENT, "--user", "user-tom", "--json").stdout)
    assert not {f["id"] for f in tom["scopes"][0]["facts"]} & set(f["id"] for f in user["facts"])


def test_ages_are_counted_to_as_of_and_memory_not_yet_formed_then_is_not_shown(store_url):
    later = datetime.now(timezone.utc) + timedelta(days=3, hours=1)
    view = json.loads(memoryctl(store_url, "--agent", AGENT, "--user", MAYA, "--as-of", later.isoformat(),
                                "--json").stdout)
    [user] = view["scopes"]
    assert view["as_of"] == later.isoformat()
    assert user["facts"] and {f["age"] for f in user["facts"]} == {"3d ago"}
    assert user["blob"]["age"] == "3d ago"

    before = memoryctl(store_url, "--agent", AGENT, "--user", MAYA, "--as-of", "2020-01-01T00:00:00Z", "--json")
    empty = json.loads(before.stdout)
    assert empty["scopes"][0] == {"scope": "user", "scope_key": "user:user-maya", "blob": None, "reflections": [],
                                  "reflections_total": 0, "facts": []}
    assert empty["shared"]["facts"] == [] and empty["shared"]["reflections"] == []


def test_a_person_the_agent_never_met_gets_an_empty_view_not_an_error(store_url):
    result = memoryctl(store_url, "--agent", AGENT, "--user", "user-nobody")
    assert result.returncode == 0, result.stderr
    assert "blob: (none yet)" in result.stdout and "facts: (none)" in result.stdout
    assert result.stdout.rstrip().endswith("(none)")


def test_a_missing_store_and_a_bad_time_are_one_line_errors(tmp_path, store_url):
    missing = memoryctl(f"sqlite:///{tmp_path / 'nothing.db'}", "--agent", AGENT, "--user", MAYA)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"no store at {tmp_path / 'nothing.db'}" in missing.stderr
    bad = memoryctl(store_url, "--agent", AGENT, "--user", MAYA, "--as-of", "yesterday")
    assert bad.returncode == 2 and "--as-of: expected an ISO 8601 time" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_an_expired_fact_is_out_of_the_view_now_and_in_it_as_of_before_its_expiry(tmp_path):
    from ops.commands.memory import person_memory
    from pipeline.store.sqlite import SQLiteStore
    from testkit.documents import T0, fact

    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    try:
        due = fact("f1", "Ines must send the guest count by March 10", user="u1").model_copy(
            update={"expires_at": T0 + timedelta(days=2)})
        store.facts.insert_fact(due)
        store.facts.insert_fact(fact("f2", "Ines lives in Porto", user="u1"))

        def shown(as_of, now):
            view = person_memory(store, "a1", "u1", None, as_of, now)
            return sorted(f["id"] for f in view["scopes"][0]["facts"])

        assert shown(None, T0 + timedelta(days=1)) == ["f1", "f2"]
        assert shown(None, T0 + timedelta(days=2)) == ["f2"]   # beat has not stamped it
        assert shown(T0 + timedelta(days=1), T0 + timedelta(days=3)) == ["f1", "f2"]
    finally:
        store.close()
