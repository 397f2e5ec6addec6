"""Two processes of one agent runtime share a store, and only the store: whatever one of them
is told about a session (its humans) the other applies at once (design §11, sessions and
visibility). Two ``MemoryService`` instances, each with its own connection to one SQLite file,
stand in for the two processes; one test runs a real second OS process."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import InvalidInput
from pipeline.ingest import ingest_raw_event
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import ConsolidatedBlob
from schemas.settings import Settings
from testkit.publishers import RecordingPublisher
from testkit.documents import T0, fact, reflection

EMB = HashingEmbedder(64)
NOW = T0 + timedelta(days=1)
ALICE_PRIVATE = ("Alice prefers short answers", "alice@example.com", "Alice wants Spanish replies")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def path(tmp_path) -> str:
    """A store with alice's private memory (blob, reflection, fact) and one agent fact."""
    db = str(tmp_path / "memory.db")
    store = SQLiteStore(db)
    store.create_indexes()
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="user", scope_key="user:alice", user_id="alice",
                                     consolidated_content="Alice prefers short answers.", word_limit=300,
                                     version=1), expected_version=0)
    store.reflections.insert_reflections([reflection("r1", "Alice wants Spanish replies", user="alice")])
    for fid, content, user in (("f1", "Alice's email is alice@example.com", "alice"),
                               ("f2", "The Mars Festival budget is $50,000", None)):
        store.facts.insert_fact(fact(fid, content, user=user, embedding=EMB.embed([content]).vectors[0],
                               model=EMB.model, formed=NOW - timedelta(hours=1)))
    store.leases.bump_scope_versions("a1", ["user:alice", "agent"])
    store.close()
    return db


def _process(path: str) -> tuple[MemoryService, RecordingPublisher]:
    """One process of the runtime: its own store connection, clock and publisher."""
    publisher = RecordingPublisher()
    service = MemoryService("a1", settings=Settings(_env_file=None), store=SQLiteStore(path), embedder=EMB,
                            publisher=publisher, clock=FrozenClock(NOW), run_starter=lambda run_id: None)
    return service, publisher


def _assert_group_view(service: MemoryService, session_id: str) -> None:
    xml = service.get_memory_context(session_id=session_id, user_id="alice")
    assert "Mars Festival budget" in xml
    assert not [text for text in ALICE_PRIVATE if text in xml], xml
    hits = service.search_facts("Alice email address", session_id=session_id, user_id="alice")
    assert all(hit["scope"] == "agent" for hit in hits), hits


def test_a_group_declared_in_one_process_hides_user_memory_in_another(path):
    first, _ = _process(path)
    second, _ = _process(path)
    assert "alice@example.com" in second.get_memory_context(session_id="s9", user_id="alice")  # one-to-one so far: cached
    first.on_session_start(session_id="s9", user_ids=["alice", "bob"])
    _assert_group_view(second, "s9")


def test_the_first_run_of_a_group_declared_elsewhere_is_a_group_run_before_bob_speaks(path):
    first, _ = _process(path)
    second, publisher = _process(path)
    first.on_session_start(session_id="s9", user_ids=["alice", "bob"])
    second.maybe_form_memories([
        {"message_id": f"m{n}", "role": "user", "sender_id": "alice", "content": f"long message {n} " * 200}
        for n in range(4)
    ], session_id="s9")
    store = SQLiteStore(path)  # the ingest worker: yet another process
    results = [ingest_raw_event(event, store, Settings(_env_file=None), FrozenClock(NOW)) for event in publisher.events]
    run = next(r.run for r in results if r.run is not None)
    assert run.group_chat and run.user_ids == ["alice", "bob"]


def test_declarations_from_two_processes_merge(path):
    first, _ = _process(path)
    second, _ = _process(path)
    first.on_session_start(session_id="s9", user_ids=["alice"])
    second.on_session_start(session_id="s9", user_ids=["bob"])
    assert SQLiteStore(path).ingest.get_session("s9").users == ["alice", "bob"]
    _assert_group_view(first, "s9")


def test_a_session_of_another_agent_cannot_be_declared_and_bad_ids_are_named(path):
    first, _ = _process(path)
    first.on_session_start(session_id="s9", user_ids=["alice"])
    other = MemoryService("a2", settings=Settings(_env_file=None), store=SQLiteStore(path), embedder=EMB,
                          publisher=RecordingPublisher(), clock=FrozenClock(NOW))
    with pytest.raises(InvalidInput, match="session_id: session s9 belongs to another agent"):
        other.on_session_start(session_id="s9", user_ids=["mallory"])
    with pytest.raises(InvalidInput, match=r"user_ids\[1\]"):
        first.on_session_start(session_id="s10", user_ids=["bob", ""])
    with pytest.raises(InvalidInput, match="user_ids: expected a list"):
        first.on_session_start(session_id="s10", user_ids="bob")
    assert SQLiteStore(path).ingest.get_session("s9").users == ["alice"]
    assert SQLiteStore(path).ingest.get_session("s10") is None


_SECOND_PROCESS = """
import sys
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings
from testkit.publishers import RecordingPublisher
from tests.pipeline.test_service_processes import EMB
MemoryService("a1", settings=Settings(_env_file=None), store=SQLiteStore(sys.argv[1]), embedder=EMB,
              publisher=RecordingPublisher()).on_session_start(session_id="s9", user_ids=["alice", "bob"])
"""


def test_a_group_declared_by_another_os_process_hides_user_memory_here(path):
    here, _ = _process(path)
    assert "alice@example.com" in here.get_memory_context(session_id="s9", user_id="alice")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, path], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _assert_group_view(here, "s9")
