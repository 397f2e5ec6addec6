"""Sessions brought to a state through the real ingest and sweep, for tests that need a run."""

from __future__ import annotations

from pipeline import sweep
from pipeline.ingest import ingest_raw_event


def ingest_messages(store, settings, clock, session_id: str, *, content: str = "hello", count: int = 4) -> None:
    """``count`` messages of user u1 in ``session_id`` of agent a1, ingested as a producer sends them."""
    for i in range(count):
        ingest_raw_event({
            "type": "message.added", "event_id": f"{session_id}-{i}", "agent_id": "a1", "session_id": session_id,
            "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": content,
                        "created_at": clock.now().isoformat()},
        }, store, settings, clock)


def cold_run(store, settings, clock, session_id: str, *, content: str = "hello") -> str:
    """The run beat's cold sweep claims for a session of four messages, ten minutes later."""
    ingest_messages(store, settings, clock, session_id, content=content)
    clock.advance(minutes=10)
    [run_id] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    return run_id
