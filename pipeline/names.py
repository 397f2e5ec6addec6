"""Names used in more than one place: queues, collections, task names."""

from __future__ import annotations

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

# Celery task names: stable, because Flower, routing and replays refer to them.
TASK_INGEST_EVENT = "memory.ingest_event"
TASK_INGEST_BATCH = "memory.ingest_batch"
TASK_EXTRACT_FACTS = "memory.extract_facts"
TASK_EMBED_FACTS = "memory.embed_facts"
TASK_DECIDE_FACTS = "memory.decide_facts"
TASK_EXTRACT_REFLECTIONS = "memory.extract_reflections"
TASK_CONSOLIDATE = "memory.consolidate"
TASK_CONSOLIDATE_SCOPE = "memory.consolidate_scope"
TASK_FINISH = "memory.finish"
# consolidates the leftover buffers of an ended session that has nothing left to form
TASK_CONSOLIDATE_SESSION = "memory.consolidate_session"
TASK_SWEEP_COLD = "memory.sweep_cold_sessions"
TASK_RETRY_STALE = "memory.retry_stale_runs"
TASK_NOOP = "memory.noop"
