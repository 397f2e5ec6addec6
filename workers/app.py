"""The Celery app: the broker from settings, one queue per kind of work, routing. No result
backend: every send ignores its result (``workers.dispatch``), so none is configured unless
``MEMORY_RESULT_BACKEND`` names one.

Start a worker the way a user would::

    celery -A workers.app worker -Q ingest -c 4 --pool prefork -E
    celery -A workers.app worker -Q formation,consolidation --pool threads -c 32 -E
    celery -A workers.app worker -Q maintenance -c 1 -E
    celery -A workers.app beat -s .runtime/celerybeat-schedule

For the embedded in-process worker (``make demo``) set ``MEMORY_BROKER_URL=memory://``.
"""

from __future__ import annotations

import sys

from celery import Celery
from kombu import Queue

from pipeline import names
from schemas.settings import get_settings
# imported for their signal handlers: redaction (monitoring shows no content), allocator (few
# malloc arenas, free pages handed back) and memtrace (heap snapshots when asked for)
from workers import allocator, memtrace, redaction, telemetry, transport  # noqa: F401

# ``redis://``, ``rediss://`` and ``sentinel://`` brokers use kombu's Redis transports closed
# against losing a popped message when Redis crashes (workers/transport.py), under the schemes
# Flower and every tool understands
transport.register()

TASK_MODULES = ["workers.ingest", "workers.formation", "workers.consolidation", "workers.maintenance",
                "workers.webhooks"]


def _route(prefix_queue: dict[str, str]):
    def route(name, args, kwargs, options, task=None, **kw):
        queue = prefix_queue.get(name)
        return {"queue": queue} if queue else None

    return route


ROUTES = {
    names.TASK_INGEST_EVENT: names.QUEUE_INGEST,
    names.TASK_INGEST_BATCH: names.QUEUE_INGEST,
    names.TASK_NOOP: names.QUEUE_INGEST,
    names.TASK_EXTRACT_FACTS: names.QUEUE_FORMATION,
    names.TASK_EMBED_FACTS: names.QUEUE_FORMATION,
    names.TASK_DECIDE_FACTS: names.QUEUE_FORMATION,
    names.TASK_EXTRACT_REFLECTIONS: names.QUEUE_FORMATION,
    names.TASK_CONSOLIDATE: names.QUEUE_FORMATION,
    names.TASK_FINISH: names.QUEUE_FORMATION,
    names.TASK_CONSOLIDATE_SCOPE: names.QUEUE_CONSOLIDATION,
    names.TASK_CONSOLIDATE_SESSION: names.QUEUE_CONSOLIDATION,
    names.TASK_SWEEP_COLD: names.QUEUE_MAINTENANCE,
    names.TASK_RETRY_STALE: names.QUEUE_MAINTENANCE,
    names.TASK_STAMP_EXPIRED: names.QUEUE_MAINTENANCE,
    names.TASK_RUN_JOB: names.QUEUE_MAINTENANCE,
    names.TASK_DELIVER_WEBHOOK: names.QUEUE_MAINTENANCE,
    names.TASK_SEND_DUE_WEBHOOKS: names.QUEUE_MAINTENANCE,
}


def create_app() -> Celery:
    """The app for the broker of the settings; ``transport.BrokerRefused`` for a broker URL
    the workers cannot serve with the reliable pop."""
    settings = get_settings()
    broker = transport.broker_options(settings.broker_url, sentinel_master=settings.broker_sentinel_master)
    # Task modules are imported by the worker (``include``); producers send tasks by name.
    app = Celery(
        "memory", broker=settings.broker_url, backend=settings.result_backend or None, include=TASK_MODULES
    )
    transport_options = {"visibility_timeout": settings.broker_visibility_timeout_s,
                         **broker.get("transport_options", {})}
    if settings.broker_url.startswith("memory://"):
        # the in-process broker polls; a short interval keeps a chain hop near 10 ms
        transport_options["polling_interval"] = 0.01
    app.conf.update(
        task_queues=[Queue(q) for q in names.QUEUES],
        task_default_queue=names.QUEUE_INGEST,
        task_routes=(_route(ROUTES),),
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # every task is idempotent, so a task is acked only after it ran, and a task whose
        # worker died is redelivered
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_time_limit_s,
        # task events for Flower; it learns of each task from the worker's task-received
        # event, so no task-sent event (one more broker publish on every hand-on)
        worker_send_task_events=True,
        task_send_sent_event=False,
        task_track_started=True,
        broker_transport_options=transport_options,
        broker_use_ssl=broker.get("broker_use_ssl"),
        result_backend_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        timezone="UTC",
        enable_utc=True,
    )
    try:
        import beat_schedule

        app.conf.beat_schedule = beat_schedule.build_schedule(settings)
    except ImportError:  # pragma: no cover - the module ships with the project
        pass
    return app


try:
    app = create_app()
except transport.BrokerRefused as exc:
    # one line naming the setting, before any worker, beat or producer connects
    raise SystemExit(f"memory pipeline: {exc}") from None
telemetry.configure()  # OTEL_* set: spans are exported (workers.telemetry); unset: a no-op

if "flower" in sys.argv[1:]:
    # `celery -A workers.app flower` gets the same /metrics behind auth as `-A workers.flower`
    from workers.flower_metrics import protect_metrics  # noqa: E402

    protect_metrics()
