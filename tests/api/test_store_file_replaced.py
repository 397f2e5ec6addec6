"""A server whose SQLite file is deleted, or deleted and written anew (``make demo`` does both
under a running ``memoryctl ui``), answers from the file at the path, or refuses: it never
goes on answering from the deleted copy. In process, over a real file, on the API and /ui."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from usecases.keys import create_key
from pipeline.store.sqlite import SQLiteStore
from pipeline.store.sqlite.file_watch import CHECK_INTERVAL_S
from tests.api.harness import build, seed_memory, ui_sign_in
from testkit.documents import fact


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "demo.db"
    store = SQLiteStore(str(path))
    api = build(store)
    seed_memory(store, api.deps.clock.now())
    yield api, path
    store.close()


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):  # as make demo does
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _recreate(path: Path, api) -> str:
    """A new store at the path, with one fact of u1 the old one never had; its admin key."""
    _delete(path)
    fresh = SQLiteStore(str(path))
    now = api.deps.clock.now()
    fresh.facts.insert_fact(fact("f-new", "Alice moved to Lisbon", agent="A", user="u1", formed=now))
    secret = create_key(fresh.access, "admin", now)[0]
    fresh.close()
    time.sleep(CHECK_INTERVAL_S + 0.1)  # the path is looked at once a second
    return secret


def _memory(client, key: str):
    return client.get("/v1/agents/A/users/u1/memory", headers={"Authorization": f"Bearer {key}"})


def test_the_api_answers_from_a_file_recreated_at_its_path_and_refuses_a_deleted_one(served):
    api, path = served
    with api.client() as client:
        before = _memory(client, api.keys["admin"])
        assert before.status_code == 200 and "alice@example.com" in before.text
        new_key = _recreate(path, api)
        assert _memory(client, api.keys["admin"]).status_code == 401, "a key of the deleted file still worked"
        after = _memory(client, new_key)
        assert after.status_code == 200, after.text
        assert "Alice moved to Lisbon" in after.text and "alice@example.com" not in after.text
        _delete(path)
        time.sleep(CHECK_INTERVAL_S + 0.1)
        gone = _memory(client, new_key)
        assert gone.status_code == 503, gone.text
        assert gone.json()["what"] == "store missing" and str(path) in gone.json()["why"]
        assert not path.exists(), "the refusal created an empty file at the path"


def test_the_inspector_shows_the_recreated_file_and_a_page_for_a_deleted_one(served):
    api, path = served
    with api.client() as client:
        ui_sign_in(client, api.keys["admin"])
        assert "alice@example.com" in client.get("/ui/agents/A/users/u1").text
        new_key = _recreate(path, api)
        assert client.get("/ui/agents/A/users/u1", follow_redirects=False).headers["location"] == "/ui/login"
        ui_sign_in(client, new_key)
        page = client.get("/ui/agents/A/users/u1")
        assert page.status_code == 200 and "Alice moved to Lisbon" in page.text and "alice@example.com" not in page.text
        _delete(path)
        time.sleep(CHECK_INTERVAL_S + 0.1)
        refused = client.get("/ui/agents/A/users/u1")
        assert refused.status_code == 503 and "text/html" in refused.headers["content-type"]
        assert "was deleted" in refused.text and str(path) in refused.text
