"""Switch tracing on in a worker when the standard ``OTEL_*`` variables ask for it.

Off unless configured: with none of them set, the OpenTelemetry API stays a no-op and
nothing is exported. Any of these switches it on:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): OTLP over HTTP
  to that collector, e.g. ``http://jaeger:4318`` (``docker compose --profile tracing up``);
- ``OTEL_TRACES_EXPORTER=otlp`` and/or ``console`` (``none`` keeps it off).

``OTEL_SDK_DISABLED=true`` keeps it off whatever else is set. ``OTEL_SERVICE_NAME`` names the
service (default ``memory-pipeline``); the exporter reads its other ``OTEL_EXPORTER_OTLP_*``
variables itself. The SDK and exporter are the ``otel`` extra:
``pip install 'memory-pipeline[otel]'``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from celery.signals import worker_process_shutdown, worker_shutdown

log = logging.getLogger("memory.telemetry")

DEFAULT_SERVICE_NAME = "memory-pipeline"
_EXPORTERS = ("otlp", "console")
_provider = None


def wanted_exporters(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The span exporters the environment asks for; empty: tracing stays off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if named:
        unknown = [e for e in named if e not in (*_EXPORTERS, "none")]
        if unknown:
            log.warning("OTEL_TRACES_EXPORTER: %s not supported here (otlp, console or none); ignored",
                        ", ".join(unknown))
        return [e for e in named if e in _EXPORTERS]
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def configure(environ: Mapping[str, str] = os.environ) -> bool:
    """Install a tracer provider exporting to what ``environ`` names; False when tracing stays
    off (nothing asked for it, or the ``otel`` extra is not installed: said in the log)."""
    global _provider
    exporters = wanted_exporters(environ)
    if not exporters or _provider is not None:
        return _provider is not None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.error("OTEL_* asks for traces but the OpenTelemetry SDK is not installed: "
                  "pip install 'memory-pipeline[otel]'; tracing stays off")
        return False
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    for kind in exporters:
        if kind == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
            continue
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.error("OTEL_* asks for OTLP but opentelemetry-exporter-otlp-proto-http is not installed: "
                      "pip install 'memory-pipeline[otel]'")
            continue
        # a batch processor: spans leave on a background thread, never on the task's time
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    log.info("tracing on: exporting spans to %s", ", ".join(exporters))
    return True


@worker_process_shutdown.connect
@worker_shutdown.connect
def _flush(**_: object) -> None:
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)
