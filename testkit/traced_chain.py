"""One formation run on the real tasks, traced, in its own process (the tracer provider is
process-wide): ``python -m testkit.traced_chain <folder> <canary>``.

An in-process Celery worker (``memory://`` broker, as ``make demo``) runs ingest and the whole
chain with the scripted LLM (answers that carry ``canary``, as the messages do: a user and a
session reflection, so two scopes are consolidated in parallel) and the hashing embedder; the
first ``extract_reflections`` call fails once with a transient error, so Celery retries the
stage. Then a second session, never ended, goes cold and is formed by the cold sweep, as
beat would start it. Writes ``<folder>/spans.json`` (every finished span) and ``<folder>/runs.json``
(the run ids with their trace ids and what the store holds of the canary).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

AGENT, SESSION, COLD = "agent-t", "s-traced", "s-cold"


class FailsOnce:
    """The offline LLM, except that one operation fails once, as a provider's 503 does."""

    def __init__(self, inner, operation: str) -> None:
        self.inner, self.operation, self.failed = inner, operation, False
        self.provider = inner.provider

    def timeout_for(self, request):
        return self.inner.timeout_for(request)

    def complete(self, request):
        from pipeline.errors import TransientError

        if request.operation == self.operation and not self.failed:
            self.failed = True
            raise TransientError("provider answered 503")
        return self.inner.complete(request)


def main(folder: Path, canary: str) -> int:
    db = folder / "memory.db"
    os.environ.update({"MEMORY_STORE_URL": f"sqlite:///{db}", "MEMORY_BROKER_URL": "memory://localhost/",
                       "MEMORY_RESULT_BACKEND": "cache+memory://", "MEMORY_EMBEDDING_PROVIDER": "hashing",
                       "MEMORY_LLM_PROVIDER": "offline", "MEMORY_TASK_RETRY_BACKOFF_MAX_S": "1",
                       "MEMORY_COLD_AFTER_S": "1"})
    from ops.trace_export import install_memory_exporter

    exporter = install_memory_exporter()

    from celery.contrib.testing.worker import start_worker

    from workers.in_process import wait_until_idle
    from pipeline import names
    from schemas.settings import get_settings
    from workers.app import app
    from workers.deps import Deps, set_deps
    from workers.dispatch import send
    from workers.producer import CeleryPublisher, end_session, message_event

    scripted = _scripted(canary)
    deps = Deps(get_settings())
    deps.__dict__["llm"] = FailsOnce(scripted, "extract_reflections")
    deps.store.create_indexes()
    app.conf.broker_transport_options = {"polling_interval": 0.01}
    lines = [
        ("user", f"Hi, I'm Dana. My locker code word is {canary} and I live in Lisbon."),
        ("assistant", "Nice to meet you, Dana."),
        ("user", f"Remember that I prefer tea over coffee, {canary} again."),
        ("assistant", "Noted: tea."),
        ("user", "I work as a nurse at the city hospital."),
    ]
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING",
                      queues=list(names.QUEUES), shutdown_timeout=30):
        set_deps(deps)  # after the worker started: its process-init signal drops injected clients
        publisher = CeleryPublisher(app)
        for i, (role, text) in enumerate(lines):
            publisher.publish_one(message_event(
                agent_id=AGENT, session_id=SESSION, content=text, role=role, message_id=f"m{i}",
                sender_id="u-dana" if role == "user" else None, session_users=["u-dana"]))
        end_session(AGENT, SESSION, publisher=publisher)
        settled = wait_until_idle(app, deps.store, [SESSION], 60)
        for i, (role, text) in enumerate(lines[:4]):
            publisher.publish_one(message_event(
                agent_id=AGENT, session_id=COLD, content=text, role=role, message_id=f"c{i}",
                sender_id="u-dana" if role == "user" else None, session_users=["u-dana"]))
        while (deps.store.ingest.get_session(COLD) is None or deps.store.ingest.get_session(COLD).last_seq < 4):
            time.sleep(0.05)
        time.sleep(1.2)  # idle past MEMORY_COLD_AFTER_S
        send(names.TASK_SWEEP_COLD, {}, app=app)
        settled = wait_until_idle(app, deps.store, [SESSION, COLD], 60) and settled
        publisher.close()
    _write_results(folder, deps.store, exporter, settled, canary)
    deps.store.close()
    return 0



def _scripted(canary: str):
    """Answers that carry the canary through every stage: a fact, two reflections, a merge."""
    from pipeline.llm.scripted import ScriptedLLM
    from pipeline.prompts.consolidation import BlobSection, ConsolidationAnswer
    from pipeline.prompts.facts import ExtractedFact, FactsAnswer
    from pipeline.prompts.reflections import ReflectionItem, ReflectionsAnswer

    def merge(request):
        bullets = [b for s in request.inputs["current_sections"] for b in s["bullets"]]
        return ConsolidationAnswer(sections=[BlobSection(name="NOTES", bullets=[*bullets, *request.inputs["reflections"]])])

    scripted = ScriptedLLM()
    scripted.on("extract_facts", FactsAnswer(facts=[ExtractedFact(scope="user", text=f"Dana's code word is {canary}")]))
    scripted.on("extract_reflections", ReflectionsAnswer(
        agent=[], user=[ReflectionItem(text=f"Dana guards the word {canary}", sources=[0])],
        session=[ReflectionItem(text=f"The session mentioned {canary}", sources=[0])]))
    scripted.on("consolidate", merge)
    return scripted


def _write_results(folder: Path, store, exporter, settled: bool, canary: str) -> None:
    """``spans.json`` (every finished span) and ``runs.json`` (each run's trace id, whether the
    chain settled, whether the canary is still in the store)."""
    from ops.trace_export import span_dict
    from pipeline import tracing

    runs = store.runs.list_runs(limit=100)
    dump = json.dumps(store.admin.dump_all(), default=str)
    (folder / "spans.json").write_text(json.dumps([span_dict(s) for s in exporter.get_finished_spans()],
                                                  default=str), encoding="utf-8")
    (folder / "runs.json").write_text(json.dumps({
        "settled": settled,
        "runs": [{"run_id": r.run_id, "session_id": r.session_id, "reason": r.reason, "status": r.status,
                  "trace_id": tracing.trace_id(r.trace_context)} for r in runs],
        "canary_in_store": canary in dump,
    }), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
