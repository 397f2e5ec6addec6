"""Spans of the pipeline, with the OpenTelemetry API only (design §11 "Observability and cost").

Without a configured SDK (``workers.telemetry`` sets one up when ``OTEL_*`` asks for it) every
call here is the API's no-op. The worker side carries the context between tasks in the task
headers (``workers.dispatch`` injects, ``workers.base`` extracts); a run keeps the context it
was claimed under (``FormationRun.trace_context``), so a run started later by the sweep or
delivered again joins the same trace.

Attributes hold ids, counts, model names and timings, never a message, fact or reflection
text: nothing here receives one.

LLM and embedding calls follow the OpenTelemetry GenAI semantic conventions as of
semantic-conventions 1.37+ (Python package ``opentelemetry-semantic-conventions`` 0.66b2):
``gen_ai.provider.name`` (which replaced the deprecated ``gen_ai.system``),
``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens`` and ``gen_ai.output.type``.
The structured-output mode (json_schema, json_object, prompt) has no convention yet and is
``memory.structured_output``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

if TYPE_CHECKING:
    from pipeline.embeddings.port import Embedder, Embeddings
    from pipeline.llm.port import LLM, LLMRequest, LLMResponse

TRACER_NAME = "memory_pipeline"

# gen_ai.provider.name per adapter: the convention's well-known values where one exists
_PROVIDER_NAMES = {"openai": "openai", "gemini": "gcp.gemini"}

Attributes = Mapping[str, Any]


def enabled() -> bool:
    """A tracer provider is installed (spans are recorded): only then is it worth reading a
    run's stored context."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def tracer() -> trace.Tracer:
    # looked up per use: a provider set after import (workers.telemetry, tests) is honoured
    return trace.get_tracer(TRACER_NAME)


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``); empty when
    nothing is traced."""
    out: dict[str, str] = {}
    propagate.inject(out)
    return out


def context_from(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The context carried by ``headers``; None when they carry none."""
    if not headers or "traceparent" not in headers:
        return None
    return propagate.extract(dict(headers))


def trace_id(headers: Mapping[str, str]) -> str | None:
    """The 32-hex trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``),
    e.g. of ``FormationRun.trace_context``: what a trace viewer looks a trace up by."""
    parts = (headers.get("traceparent") or "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def _clean(attributes: Attributes | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


@contextmanager
def span(
    name: str, attributes: Attributes | None = None, *, parent: otel_context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL, expected: tuple[type[BaseException], ...] = (), new_trace: bool = False,
) -> Iterator[Span]:
    """A span, current within the block, with ``memory.duration_ms`` set when it ends. An
    exception leaves the span with an error status and the exception's type (its message may
    quote content, so it is not recorded) and propagates; one of ``expected`` (a retry, say)
    only propagates. ``new_trace``: the span starts a trace of its own, linked to the current
    span."""
    started = time.perf_counter()
    links = ()
    if new_trace:
        linked = trace.get_current_span().get_span_context()
        links = (trace.Link(linked),) if linked.is_valid else ()
        parent = otel_context.Context()  # no parent: a new trace id
    with tracer().start_as_current_span(
        name, context=parent, kind=kind, attributes=_clean(attributes), links=links,
        record_exception=False, set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except expected:
            raise
        except BaseException as exc:
            current.set_status(Status(StatusCode.ERROR))
            current.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            current.set_attribute("memory.duration_ms", round((time.perf_counter() - started) * 1000, 3))


def set_attributes(attributes: Attributes) -> None:
    """Add attributes to the current span (ids, counts, timings only)."""
    trace.get_current_span().set_attributes(_clean(attributes))


def add_event(name: str, attributes: Attributes | None = None) -> None:
    """An event on the current span, e.g. ``retry``."""
    trace.get_current_span().add_event(name, _clean(attributes))


def provider_name(provider: str) -> str:
    return _PROVIDER_NAMES.get(provider, provider)


def complete(llm: LLM, request: LLMRequest[Any]) -> LLMResponse[Any]:
    """``llm.complete(request)`` as a client span ``chat <model>`` with GenAI attributes."""
    with span(f"chat {request.model}", {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(llm.provider),
        "gen_ai.request.model": request.model,
        "gen_ai.output.type": "json",
        "memory.operation": request.operation,
    }, kind=SpanKind.CLIENT) as current:
        response = llm.complete(request)
        current.set_attributes(_clean({
            "gen_ai.response.model": response.snapshot or response.model,
            "gen_ai.usage.input_tokens": response.input_tokens,
            "gen_ai.usage.output_tokens": response.output_tokens,
            "memory.structured_output": response.structured_output or None,
        }))
        return response


def embed(embedder: Embedder, texts: Sequence[str], purpose: str) -> Embeddings:
    """``embedder.embed(texts)`` (``embed_queries`` for a ``query``) as a client span ``embeddings <model>`` with GenAI attributes;
    ``purpose`` says what for (``facts``, ``candidates``, ``updates``, ``query``)."""
    with span(f"embeddings {embedder.model}", {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": provider_name(getattr(embedder, "provider", "unknown")),
        "gen_ai.request.model": embedder.model,
        "memory.embedding_purpose": purpose,
        "memory.texts": len(texts),
    }, kind=SpanKind.CLIENT) as current:
        # duck-typed embedders (test doubles, bench lookups) without embed_queries embed queries as any text
        call = getattr(embedder, "embed_queries", embedder.embed) if purpose == "query" else embedder.embed
        result = call(texts)
        current.set_attributes({"gen_ai.response.model": result.model,
                                "gen_ai.usage.input_tokens": result.input_tokens})
        return result
