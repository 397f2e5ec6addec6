"""A claimed run keeps the trace context it was claimed under; a follow-up run, claimed as
another finishes, starts a trace of its own linked to the finishing one. Run in a process of
its own: the tracer provider is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from testkit.procs import REPO_ROOT

SCRIPT = textwrap.dedent("""
    import json, sys
    from opentelemetry import trace
    from ops.trace_export import install_memory_exporter, span_dict
    exporter = install_memory_exporter()
    from pipeline import trigger, tracing
    from pipeline.clock import FrozenClock
    from pipeline.ingest import claim_run
    from pipeline.store.sqlite import SQLiteStore
    from testkit.documents import message

    clock = FrozenClock()
    store = SQLiteStore(sys.argv[1]); store.create_indexes()
    for n in range(1, 5):
        store.ingest.ingest_message(message(n, session="s1"), clock.now())
        store.ingest.ingest_message(message(n, session="s2"), clock.now())
    rule = trigger.session_end_rule()
    with tracing.span("ingest"):
        first = claim_run(store.runs, trigger.new_run("s1", "a1", "threshold", clock.now()), rule, clock.now(), 60)
    with tracing.span("finish"):
        follow = claim_run(store.runs, trigger.new_run("s2", "a1", "threshold", clock.now()), rule, clock.now(), 60,
                           follow_up=True)
    spans = [span_dict(s) for s in exporter.get_finished_spans()]
    links = {s.name + ":" + s.attributes.get("memory.run_id", ""): [f"{l.context.span_id:016x}" for l in s.links]
             for s in exporter.get_finished_spans()}
    print(json.dumps({"spans": spans, "links": links,
                      "stored": {r.run_id: store.runs.get_run(r.run_id).trace_context for r in (first, follow)},
                      "first": first.run_id, "follow": follow.run_id}))
""")


def test_a_run_keeps_its_claim_context_and_a_follow_up_run_starts_a_linked_trace(tmp_path):
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    spans = {s["name"] + ":" + s["attributes"].get("memory.run_id", ""): s for s in out["spans"]}
    ingest, finish = spans["ingest:"], spans["finish:"]
    first, follow = spans[f"claim_run:{out['first']}"], spans[f"claim_run:{out['follow']}"]
    # the run claimed during ingest is in the ingest's trace, and keeps the claim span as parent
    assert first["trace_id"] == ingest["trace_id"] and first["parent_id"] == ingest["span_id"]
    assert out["stored"][out["first"]]["traceparent"].startswith(f"00-{first['trace_id']}-{first['span_id']}-")
    # the follow-up run is a trace of its own, linked to the run that was finishing
    assert follow["trace_id"] != finish["trace_id"] and follow["parent_id"] is None
    assert out["links"][f"claim_run:{out['follow']}"] == [finish["span_id"]]
    assert out["stored"][out["follow"]]["traceparent"].split("-")[1] == follow["trace_id"]
