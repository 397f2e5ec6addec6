"""What ingest reports (design §3, §4): one ``IngestResult`` per event, a ``BatchResult`` per
batch, and what happens next for each event (``IngestResult.then``), decided by ingest:
``workers/ingest.py`` only dispatches it (starts the claimed run, asks for the consolidation
of an ended session's leftovers, delivers an early ``session.ended`` again) or fails visibly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.errors import TransientError
from schemas.documents import FormationRun

Status = Literal["accepted", "duplicate", "rejected"]


#: A ``session.ended`` that arrives before any message of its session is delivered again after
#: 5, 10, 20, 40 and 80 s, then accepted as is.
MAX_END_DEFERRALS = 5
END_DEFERRAL_BASE_S = 5.0


@dataclass(frozen=True)
class Done:
    """Nothing follows. ``warning``: why an event was accepted as it is (for the log)."""

    warning: str | None = None


@dataclass(frozen=True)
class StartRun:
    """Start formation with the run this event claimed."""

    run_id: str


@dataclass(frozen=True)
class ConsolidateSession:
    """A session ended with nothing left to form and no live run: consolidate its leftover
    reflection buffers now (a live run of the session does it at its own end)."""

    agent_id: str
    session_id: str


@dataclass(frozen=True)
class DeliverAgain:
    """A session end came before its session's messages: deliver it again after
    ``countdown_s``, as delivery number ``deferrals``."""

    deferrals: int
    countdown_s: float


Next = Done | StartRun | ConsolidateSession | DeliverAgain


def early_end(event_id: str | None, session_id: str | None, deferrals: int) -> Next:
    """What follows a session end whose session has no message yet, delivered ``deferrals``
    times before: deliver it again later, with growing delays, until the last deferral."""
    if deferrals < MAX_END_DEFERRALS:
        return DeliverAgain(deferrals + 1, END_DEFERRAL_BASE_S * 2 ** deferrals)
    return Done(f"session.ended {event_id}: session {session_id} never had a message")


@dataclass(frozen=True)
class IngestResult:
    status: Status
    event_id: str | None = None
    kind: str | None = None  # "message.added" | "session.ended" | None when rejected
    session_id: str | None = None
    seq: int | None = None
    run: FormationRun | None = None  # the run this event claimed, if any
    errors: list[dict[str, str]] = field(default_factory=list)  # [{field, reason}] when rejected
    # session.ended for a session the store does not know: its messages may still be on the
    # way (out of order), so the caller may deliver the event again later
    session_unknown: bool = False
    #: what happens next, decided by ingest; the worker only dispatches it
    then: Next = Done()



@dataclass
class BatchResult:
    """Results of a batch, in order. Processing stops at the first transient error (the store
    or broker is unavailable): ``error`` holds it and ``events[next_index:]`` are still to do.
    ``failures`` holds (index, error) of each event that failed on an unexpected error; it
    was recorded for replay (``record_failure``) and the batch went on."""

    results: list[IngestResult]
    error: TransientError | None = None
    next_index: int = 0
    failures: list[tuple[int, Exception]] = field(default_factory=list)

    @property
    def runs(self) -> list[FormationRun]:
        return [r.run for r in self.results if r.run is not None]

    def counts(self) -> dict[str, int]:
        out = {"accepted": 0, "duplicate": 0, "rejected": 0}
        for r in self.results:
            out[r.status] += 1
        return out
