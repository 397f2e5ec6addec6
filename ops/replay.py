"""``memoryctl replay FILE.jsonl``: validate, de-duplicate and publish a file of events.

Every line is validated locally first: a bad line is reported with its number and each of its
reasons (field and why), and never stops the replay. A blank line is skipped and reported
apart (how many, and where): it is not an event, and not an error either. A line is a full event (``message.added``
or ``session.ended``) or the short form that ``publish_messages`` takes (the keyword fields of
``publish_message``: ``agent_id``, ``session_id``, ``content``, ``role``, ``sender_id``, ...),
which must carry ``message_id`` or ``event_id`` so that replaying the file again finds the
same events. Events repeated inside the file (same ``event_id``, or same session and
``message_id``) are dropped, the rest published in batches. Without ``--wait``, "accepted"
means the broker holds the event. Ctrl-C stops after what was sent so far; the workers ignore
duplicates, so re-running the whole file is safe.

With ``--wait`` it then watches the store until every published event has an outcome:
per session of the file, the growth of its stored messages (accepted) plus the growth of its
``duplicates`` counter (already stored: a store-level duplicate) must reach the number of
messages published for it, and each session the file ends must show the end; rejections the
worker recorded for the published event ids count as rejected. Formation goes on after that:
``memoryctl runs --wait`` waits for it. Other producers writing the same sessions at the same time blur these counts.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import InvalidInput
from schemas.events import FieldError, MessageAdded, Rejection, parse_event
from schemas.settings import get_settings

RERUN_IS_SAFE = "re-running the file is safe (duplicates are ignored)"
SHORT_FORM_NEEDS_ID = (
    "a short-form line (the keyword fields of publish_message) needs message_id or event_id, so "
    "that replaying the file again finds the same events; or write the full event "
    '{"type": "message.added", "event_id": ..., "agent_id": ..., "session_id": ..., "message": {...}}'
)


@dataclass
class RejectedLine:
    line: int
    reasons: list[tuple[str, str]]  # (field, reason)


@dataclass
class ReplayReport:
    lines: int = 0
    published: int = 0
    accepted: int = 0
    duplicates_in_file: int = 0
    duplicates_in_store: int = 0
    rejected: list[RejectedLine] = field(default_factory=list)
    blank: list[int] = field(default_factory=list)  # numbers of the lines holding nothing (skipped)
    waited: bool = False
    missing: int = 0  # published events with no outcome in the store when --wait gave up
    interrupted: bool = False

    @property
    def duplicates(self) -> int:
        return self.duplicates_in_file + self.duplicates_in_store

    def reject(self, line: int, reasons: list[tuple[str, str]]) -> None:
        for entry in self.rejected:
            if entry.line == line:
                entry.reasons.extend(reasons)
                return
        self.rejected.append(RejectedLine(line, list(reasons)))
        self.rejected.sort(key=lambda r: r.line)

    def render(self) -> str:
        dup = f"duplicate: {self.duplicates} ({self.duplicates_in_file} in the file"
        dup += f", {self.duplicates_in_store} already stored)" if self.waited else ")"
        head = f"{self.lines} lines read, {self.published} events published"
        lines = [
            head + (" before Ctrl-C; " + RERUN_IS_SAFE if self.interrupted else ""),
            f"accepted: {self.accepted}   {dup}   rejected lines: {len(self.rejected)}",
        ]
        if self.blank:
            shown = ", ".join(map(str, self.blank[:10])) + (", ..." if len(self.blank) > 10 else "")
            lines.append(f"blank lines: {len(self.blank)} (skipped; line{'s' if len(self.blank) > 1 else ''} {shown})")
        if not self.waited and not self.interrupted:
            lines.append("(accepted = held by the broker; --wait counts what the store shows)")
        if self.missing:
            lines.append(f"NOT YET INGESTED: {self.missing} published events had no outcome in the store")
        for entry in self.rejected:
            lines.append(f"  line {entry.line}:")
            lines.extend(f"    {f}: {reason}" for f, reason in entry.reasons)
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["rejected"] = [
            {"line": r.line, "reasons": [{"field": f, "reason": why} for f, why in r.reasons]} for r in self.rejected
        ]
        out["duplicates"] = self.duplicates
        return out


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def read_line(line: bytes, max_message_bytes: int) -> tuple[dict | None, Any]:
    """(the event dict to publish, its parsed model) or (None, a ``Rejection``)."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None, parse_event(line, max_message_bytes=max_message_bytes)  # says why
    if isinstance(raw, dict):
        from workers.producer import as_event, is_short_form

        if is_short_form(raw):
            if not raw.get("message_id") and not raw.get("event_id"):
                return None, Rejection(errors=[FieldError(field="<event>", reason=SHORT_FORM_NEEDS_ID)])
            try:
                raw = as_event(raw)
            except InvalidInput as exc:
                return None, Rejection(errors=[FieldError(field=exc.field, reason=exc.reason)])
    event = parse_event(raw, max_message_bytes=max_message_bytes)
    return (None, event) if isinstance(event, Rejection) else (raw, event)


def replay(path: Path, *, batch: int, wait: bool, timeout: float, publisher, store_factory=None,
           progress: bool = True) -> ReplayReport:
    """Validate, de-duplicate and publish a JSONL file; see the module docstring. Ctrl-C
    returns the report so far, marked ``interrupted``."""
    if batch < 1:
        raise InvalidInput("--batch", "must be at least 1")
    report = ReplayReport()
    state = _Publishing(report, publisher, batch, wait, store_factory or _existing_store)
    try:
        state.read(path, get_settings().max_message_bytes, progress)
        if wait and not report.interrupted:
            try:
                state.wait(timeout)
            except KeyboardInterrupt:
                report.interrupted = True
        elif not wait:
            report.accepted = report.published
    finally:
        if state.store is not None:
            state.store.close()
    return report


def _existing_store():
    from ops.stores import open_existing

    return open_existing(get_settings())


class _Publishing:
    def __init__(self, report: ReplayReport, publisher, batch: int, wait: bool, store_factory) -> None:
        self.report, self.publisher, self.batch, self.waiting = report, publisher, batch, wait
        self.store_factory = store_factory
        self.store = None
        self.seen_events: set[str] = set()
        self.seen_messages: set[tuple[str, str]] = set()
        self.per_session: Counter[str] = Counter()  # messages published per session
        self.line_of: dict[str, int] = {}           # event id -> line, for worker-side rejections
        self.before: dict[str, tuple[int, int]] = {}
        # session ended in the file -> (its end times stored before, whether it was ended then)
        self.ends: dict[str, tuple[int, bool]] = {}
        self.pending: list[dict] = []

    def flush(self) -> None:
        if self.pending:
            self.publisher.publish_batch(list(self.pending))
            self.report.published += len(self.pending)
            self.pending.clear()

    def read(self, path: Path, max_message_bytes: int, progress: bool) -> None:
        from tqdm import tqdm

        report = self.report
        with path.open("rb") as fh, tqdm(total=_count_lines(path), unit="line", disable=not progress,
                                         file=sys.stderr) as bar:
            try:
                for number, line in enumerate(fh, 1):
                    bar.update(1)
                    report.lines = number
                    if line.strip():
                        self._take(number, line, max_message_bytes)
                    else:
                        report.blank.append(number)
                self.flush()
            except KeyboardInterrupt:
                report.interrupted = True
                report.accepted = report.published

    def _take(self, number: int, line: bytes, max_message_bytes: int) -> None:
        payload, event = read_line(line, max_message_bytes)
        if payload is None:
            self.report.reject(number, [(e.field, e.reason) for e in event.errors])
            return
        message_key = (event.session_id, event.message.message_id) if isinstance(event, MessageAdded) else None
        if event.event_id in self.seen_events or (message_key and message_key in self.seen_messages):
            self.report.duplicates_in_file += 1
            return
        self.seen_events.add(event.event_id)
        if message_key is None and self.waiting and event.session_id not in self.ends:
            self.store = self.store or self.store_factory()
            state = self.store.ingest.get_session(event.session_id)
            self.ends[event.session_id] = (len(state.ended_history) if state else 0,
                                           state is not None and state.ended_at is not None)
        if message_key:
            self.seen_messages.add(message_key)
            if self.waiting and event.session_id not in self.before:
                self.store = self.store or self.store_factory()
                state = self.store.ingest.get_session(event.session_id)
                self.before[event.session_id] = (
                    self.store.ingest.count_messages(event.session_id), state.duplicates if state else 0
                )
            self.per_session[event.session_id] += 1
        self.line_of[event.event_id] = number
        self.pending.append(payload)
        if len(self.pending) >= self.batch:
            self.flush()

    def _ended(self, session_id: str, before: tuple[int, bool]) -> str | None:
        """How a session end of the file came out: "accepted" when the session holds an end
        time it did not hold before, "duplicate" when it was ended already and still is (a
        repeated end changes nothing), None while neither shows."""
        state = self.store.ingest.get_session(session_id) if self.store else None
        if state is None:
            return None
        ends_before, was_ended = before
        if len(state.ended_history) > ends_before or (state.ended_at is not None and not was_ended):
            return "accepted"
        return "duplicate" if was_ended and state.ended_at is not None else None

    def wait(self, timeout: float) -> None:
        report, store = self.report, self.store
        report.waited = True
        expected = sum(self.per_session.values()) + len(self.ends)
        deadline = time.monotonic() + timeout
        while True:
            accepted = dups = 0
            for session_id in self.per_session:
                count0, dup0 = self.before[session_id]
                state = store.ingest.get_session(session_id) if store else None
                accepted += (store.ingest.count_messages(session_id) - count0) if store else 0
                dups += ((state.duplicates if state else 0) - dup0)
            ends = Counter(self._ended(session_id, before) for session_id, before in self.ends.items())
            remote = [r for r in store.ingest.list_rejections(limit=10_000) if r.event_id in self.line_of] if store else []
            outcomes = accepted + dups + ends["accepted"] + ends["duplicate"] + len(remote)
            if outcomes >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        report.accepted = accepted + ends["accepted"]
        report.duplicates_in_store = dups + ends["duplicate"]
        report.missing = max(0, expected - outcomes)
        for r in remote:
            report.reject(self.line_of[r.event_id], [
                (e.get("field", "?"), f"{e.get('reason')} (rejected by the worker)") for e in r.errors
            ])
