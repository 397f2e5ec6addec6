"""One OpenTelemetry trace per formation run (design §11), on the real tasks and an in-process
worker, in a process of its own (``testkit.traced_chain``: the tracer provider is
process-wide), read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testkit.procs import REPO_ROOT
from workers.telemetry import wanted_exporters

CANARY = "CANARY-QX7-5e1f"
STAGES = ["extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate",
          "consolidate_scope", "finish"]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traced")
    result = subprocess.run([sys.executable, "-m", "testkit.traced_chain", str(folder), CANARY],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    runs = json.loads((folder / "runs.json").read_text())
    spans = json.loads((folder / "spans.json").read_text())
    assert runs["settled"] and [r["status"] for r in runs["runs"]] == ["done", "done"]
    return runs, spans


def _run_trace(traced, reason="session_end"):
    runs, spans = traced
    [run] = [r for r in runs["runs"] if r["reason"] == reason]
    return run, sorted((s for s in spans if s["trace_id"] == run["trace_id"]), key=lambda s: s["start_ns"])


def test_one_formation_is_one_trace_from_the_ingest_that_claimed_it_to_finish(traced):
    run, spans = _run_trace(traced)
    names = [s["name"] for s in spans]
    # every span naming the run is in its trace, and nowhere else
    assert all(s["trace_id"] == run["trace_id"] for s in traced[1] if s["attributes"].get("memory.run_id") == run["run_id"])
    assert names[:3] == ["ingest_event", "ingest", "claim_run"]
    stage_order = [n for n in names if n in STAGES]
    first_seen = list(dict.fromkeys(stage_order))
    assert first_seen == STAGES, stage_order
    by_id = {s["span_id"]: s for s in spans}
    root = [s for s in spans if s["parent_id"] not in by_id]
    assert [s["name"] for s in root] == ["ingest_event"]  # one tree


def test_a_run_the_sweep_starts_is_one_trace_from_the_sweep_to_finish(traced):
    run, spans = _run_trace(traced, reason="cold")
    names = [s["name"] for s in spans]
    assert names[:3] == ["sweep_cold_sessions", "sweep_cold_sessions", "claim_run"]  # the task, then the sweep
    assert [n for n in names if n in STAGES][:4] == STAGES[:4] and names[-1] == "finish"
    by_id = {s["span_id"]: s for s in spans}
    [claim] = [s for s in spans if s["name"] == "claim_run"]
    [first] = [s for s in spans if s["name"] == "extract_facts"]
    # the first stage continues the context stored on the run at claim time
    assert first["parent_id"] == claim["span_id"] and claim["attributes"]["memory.run_id"] == run["run_id"]
    assert [s["name"] for s in spans if s["parent_id"] not in by_id] == ["sweep_cold_sessions"]


def test_the_fan_out_consolidations_are_siblings_under_consolidate(traced):
    _, spans = _run_trace(traced)
    [consolidate] = [s for s in spans if s["name"] == "consolidate"]
    scopes = [s for s in spans if s["name"] == "consolidate_scope"]
    assert len(scopes) == 2
    assert {s["parent_id"] for s in scopes} == {consolidate["span_id"]}
    # the fan-in: finish is sent by the last scope done, in the same trace
    [finish] = [s for s in spans if s["name"] == "finish"]
    assert finish["parent_id"] in {s["span_id"] for s in scopes}


def test_a_retried_stage_shows_its_retry_and_its_second_delivery_joins_the_trace(traced):
    _, spans = _run_trace(traced)
    tries = [s for s in spans if s["name"] == "extract_reflections"]
    assert len(tries) == 2
    [retry] = tries[0]["events"]
    assert retry["name"] == "retry" and retry["attributes"]["error.type"] == "TransientError"
    assert retry["attributes"]["memory.attempt"] == 1 and retry["attributes"]["memory.countdown_s"] > 0
    assert tries[1]["attributes"]["memory.retries"] == 1 and tries[1]["status"] != "ERROR"
    failed_call = [s for s in spans if s["parent_id"] == tries[0]["span_id"] and s["name"].startswith("chat ")]
    assert [s["status"] for s in failed_call] == ["ERROR"]
    assert failed_call[0]["attributes"]["error.type"] == "TransientError"


def test_llm_and_embedding_calls_are_child_spans_with_genai_attributes(traced):
    _, spans = _run_trace(traced)
    chats = [s for s in spans if s["name"].startswith("chat ") and s["status"] != "ERROR"]
    embeds = [s for s in spans if s["name"].startswith("embeddings ")]
    assert len(chats) == 4 and embeds  # facts, reflections (its failed try aside), 2 consolidations
    for span in chats:
        attrs = span["attributes"]
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "scripted"
        assert attrs["gen_ai.request.model"] and attrs["gen_ai.output.type"] == "json"
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    for span in embeds:
        assert span["attributes"]["gen_ai.operation.name"] == "embeddings"
        assert span["attributes"]["gen_ai.request.model"] == "hashing-384"
    stages = {s["span_id"]: s["name"] for s in spans if s["name"] in STAGES}
    assert {stages.get(s["parent_id"]) for s in chats} == {"extract_facts", "extract_reflections", "consolidate_scope"}
    assert all("memory.duration_ms" in s["attributes"] for s in spans)


def test_no_content_reaches_any_span(traced):
    runs, spans = traced
    assert runs["canary_in_store"], "the canary must reach the store for this test to mean anything"
    assert CANARY not in json.dumps(spans)
    assert CANARY.split("-")[1] not in json.dumps(spans)


@pytest.mark.parametrize("environ, exporters", [
    ({}, []),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, ["otlp"]),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/v1/traces"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, []),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, []),
])
def test_tracing_is_off_unless_the_otel_variables_ask_for_it(environ, exporters):
    assert wanted_exporters(environ) == exporters


def test_a_store_that_fails_while_a_task_looks_for_its_runs_trace_does_not_fail_the_task(monkeypatch, caplog):
    from types import SimpleNamespace

    from pipeline import names, tracing
    from workers import deps as worker_deps
    from workers.base import MemoryTask

    class DownRuns:
        def get_run(self, run_id):
            raise ConnectionError("store unreachable")

    monkeypatch.setattr(tracing, "enabled", lambda: True)
    worker_deps.set_deps(SimpleNamespace(store=SimpleNamespace(runs=DownRuns())))
    try:
        task = SimpleNamespace(name=names.TASK_EXTRACT_FACTS, request=SimpleNamespace(
            traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        parent = MemoryTask.trace_parent(task, {"run_id": "run-1"})
    finally:
        worker_deps.set_deps(None)
    # the header's context is kept; the stage meets the store itself, under the retry policy
    from opentelemetry import trace

    assert f"{trace.get_current_span(parent).get_span_context().trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert "its trace context was not read (ConnectionError" in caplog.text
