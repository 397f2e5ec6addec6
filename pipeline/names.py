"""Names used in more than one place: queues, collections, task names."""

from __future__ import annotations

from schemas.documents import Stage

QUEUE_INGEST = "ingest"
QUEUE_FORMATION = "formation"
QUEUE_CONSOLIDATION = "consolidation"
QUEUE_MAINTENANCE = "maintenance"
QUEUES = (QUEUE_INGEST, QUEUE_FORMATION, QUEUE_CONSOLIDATION, QUEUE_MAINTENANCE)

# Collections (Mongo) and tables (SQLite), each prefixed by the collection_prefix setting.
COLLECTIONS = (
    "facts", "reflections", "consolidated", "sessions", "messages", "runs", "rejected",
    "agents", "scope_versions",
)

# Celery task names: stable, because Flower, routing and replays refer to them. A formation
# task is named after its stage.
TASK_INGEST_EVENT = "memory.ingest_event"
TASK_INGEST_BATCH = "memory.ingest_batch"
TASK_EXTRACT_FACTS = f"memory.{Stage.EXTRACT_FACTS}"
TASK_EMBED_FACTS = f"memory.{Stage.EMBED_FACTS}"
TASK_DECIDE_FACTS = f"memory.{Stage.DECIDE_FACTS}"
TASK_EXTRACT_REFLECTIONS = f"memory.{Stage.EXTRACT_REFLECTIONS}"
TASK_CONSOLIDATE = f"memory.{Stage.CONSOLIDATE}"
TASK_CONSOLIDATE_SCOPE = f"memory.{Stage.CONSOLIDATE_SCOPE}"
TASK_FINISH = f"memory.{Stage.FINISH}"
# consolidates the leftover buffers of an ended session that has nothing left to form
TASK_CONSOLIDATE_SESSION = f"memory.{Stage.CONSOLIDATE_SESSION}"
TASK_SWEEP_COLD = "memory.sweep_cold_sessions"
TASK_RETRY_STALE = "memory.retry_stale_runs"
TASK_STAMP_EXPIRED = "memory.stamp_expired_facts"
# a job queued by the HTTP API (a forget-user), whose status the caller polls
TASK_RUN_JOB = "memory.run_job"
# webhooks: one delivery attempt, and beat's send of every delivery that is due
TASK_DELIVER_WEBHOOK = "memory.deliver_webhook"
TASK_SEND_DUE_WEBHOOKS = "memory.send_due_webhooks"
TASK_NOOP = "memory.noop"
