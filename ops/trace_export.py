"""Spans kept in memory and written out as JSON, one file per formation run (``make demo``'s
``--trace``, the formation bench and the tests).

Each run keeps the trace context it was claimed under (``FormationRun.trace_context``); its
file holds every span of that trace, oldest first: the ingest that claimed the run, the
``claim_run`` span and, under it, every stage with its LLM and embedding calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline import tracing
from pipeline.errors import ConfigurationError

INSTALL_HINT = "pip install 'memory-pipeline[otel]'"


def install_memory_exporter():
    """A tracer provider that keeps every finished span in memory, installed process-wide
    (the OpenTelemetry API takes one provider per process); returns its exporter."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        raise ConfigurationError(f"--trace needs the OpenTelemetry SDK: {INSTALL_HINT}") from None
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def span_dict(span) -> dict[str, Any]:
    """One finished span as plain data: ids in hex, times in ns, attributes and events."""
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
    }


def spans_of_trace(exporter, trace_id: str) -> list[dict[str, Any]]:
    spans = [span_dict(s) for s in exporter.get_finished_spans()]
    return sorted((s for s in spans if s["trace_id"] == trace_id), key=lambda s: s["start_ns"])


def write_run_traces(store, exporter, folder: Path, agent_id: str | None = None) -> list[Path]:
    """``<folder>/<run id>.json`` per run of the store that has a trace: ``{run_id, trace_id,
    spans}``. Returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for run in store.runs.list_runs(agent_id=agent_id, limit=10_000):
        trace_id = tracing.trace_id(run.trace_context)
        if trace_id is None:
            continue
        path = folder / f"{run.run_id}.json"
        path.write_text(json.dumps({"run_id": run.run_id, "session_id": run.session_id, "trace_id": trace_id,
                                    "spans": spans_of_trace(exporter, trace_id)}, indent=1, default=str),
                        encoding="utf-8")
        written.append(path)
    return written
