"""Schemathesis runs the committed OpenAPI document against the live app, served by uvicorn
over HTTP, with an admin key (it reaches every route): no 500, no status, content type, header
or body outside the document, and no request outside it accepted. Bounded examples per
operation, so ``make test`` stays short.

Left out: the check that every schema-valid request is accepted. Rules the document cannot
state refuse some (a session belongs to the agent that first used it; an edit must not carry a
secret), with a 4xx in the one error shape, which the other checks still hold to."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
import schemathesis
from schemathesis.checks import positive_data_acceptance
from hypothesis import HealthCheck, settings

from tests.api.harness import build, seed_memory
from tests.support.procs import free_port

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
schema = schemathesis.openapi.from_dict(DOCUMENT)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import uvicorn

    from pipeline.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path_factory.mktemp("fuzz") / "memory.db"))
    store.create_indexes()
    api = build(store)
    seed_memory(store, api.deps.clock.now())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api.app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    yield f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {api.keys['admin']}"}
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_500_and_no_answer_outside_the_document(case, served):
    base_url, headers = served
    case.call_and_validate(base_url=base_url, headers=headers, excluded_checks=[positive_data_acceptance])
