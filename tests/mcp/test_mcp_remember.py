"""``remember`` goes through the normal chain: a real ingest and formation worker takes the
note from the broker, forms it, screens it (a secret is never stored) and search finds it."""

from __future__ import annotations

import json

from pipeline.store import open_store
from schemas.settings import Settings
from tests.mcp.client import run_stdio
from tests.mcp.test_mcp_stdio import as_user
from testkit.demo_store import MAYA
from testkit.flower import until

SECRET = "hunter2-Lumen-77"


def test_a_remembered_note_is_formed_screened_and_found(store_copy, broker_urls, celery_worker_process):
    worker = celery_worker_process(
        store_url=store_copy, queues=("ingest", "formation", "consolidation"), concurrency=2,
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"},
    )
    params = as_user(store_copy, MAYA, "mcp-notes")
    params.env.update({"MEMORY_BROKER_URL": broker_urls[0], "MEMORY_RESULT_BACKEND": broker_urls[1]})
    talk = run_stdio(params, [
        ("remember", {"text": "Maya Chen's dentist appointment is on April 9 at 10:30 in Porto."}),
        ("remember", {"text": f"My password for the Lumen launch portal is {SECRET}"}),
    ])
    for answer in talk.answers:
        assert not answer.is_error, answer.text
        assert json.loads(answer.text)["accepted"] is True

    store = open_store(Settings(store_url=store_copy))
    try:
        def formed():
            session = store.ingest.get_session("mcp-notes")
            return session is not None and session.last_seq == 2 and session.watermark == 2 \
                and session.active_run_id is None

        until(formed, "both notes formed", worker.log_file, timeout=120)
        facts = store.facts.list_facts("agent-juniper", include_retired=True)
        assert any("dentist appointment" in f.content and f.source_session_id == "mcp-notes" for f in facts)
        kept = [f.content for f in facts]
        for key in ("agent", "user:user-maya", "session:mcp-notes"):
            kept += [r.content for r in store.reflections.list_reflections("agent-juniper", key)]
            blob = store.blobs.get_blob("agent-juniper", key)
            kept.append(blob.consolidated_content if blob else "")
        assert not [text for text in kept if SECRET in text]
    finally:
        store.close()

    found = run_stdio(as_user(store_copy, MAYA), [("search_memory", {"query": "When is the dentist appointment?"})])
    assert any("dentist" in f["content"] for f in found.answers[0].facts)
