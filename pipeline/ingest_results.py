"""What ingest reports (design §3, §4): one ``IngestResult`` per event, a ``BatchResult`` per
batch. ``workers/ingest.py`` reads them to hand a claimed run on, to deliver an early
``session.ended`` again, or to fail visibly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.errors import TransientError
from schemas.documents import FormationRun

Status = Literal["accepted", "duplicate", "rejected"]


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

    @property
    def ended_without_run(self) -> bool:
        """A session ended with nothing unformed: only leftovers may need consolidating."""
        return (
            # a repeated end too: the delivery that ended it may have stopped before asking
            self.status in ("accepted", "duplicate") and self.kind == "session.ended" and self.run is None
            and not self.session_unknown
        )


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
