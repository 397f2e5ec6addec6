"""``memoryctl publish | end-session | replay`` against hand-written publishers."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ops import cli
from ops.commands import publish as publish_cmd
from pipeline.clock import FrozenClock
from pipeline.ingest import ingest_raw_events, to_stored_message
from pipeline.store.sqlite import SQLiteStore
from schemas.events import MessageAdded, SessionEnded, parse_event
from schemas.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


class RecordingPublisher:
    """Holds what a broker would hold."""

    def __init__(self):
        self.batches: list[list[dict]] = []
        self.singles: list[dict] = []

    def publish_batch(self, events):
        self.batches.append(list(events))
        return len(events)

    def publish_one(self, event):
        self.singles.append(event)


class IngestingPublisher(RecordingPublisher):
    """A broker with a worker behind it: every batch is ingested into the store at once."""

    def __init__(self, path):
        super().__init__()
        self.store = SQLiteStore(path)

    def publish_batch(self, events):
        ingest_raw_events(events, self.store, Settings(), FrozenClock(T0))
        return super().publish_batch(events)


def event(n: int, *, session="s1", event_id=None, message_id=None, role="user") -> dict:
    msg = {"message_id": message_id or f"m{n}", "role": role, "sender_id": "u1", "content": f"line {n}",
           "created_at": T0.isoformat()}
    return {"type": "message.added", "event_id": event_id or f"e{n}", "agent_id": "a1", "session_id": session,
            "message": msg}


def write_jsonl(path, lines) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


@pytest.fixture
def replay_file(tmp_path):
    missing = event(5)
    del missing["message"]["content"]
    lines = [
        event(1),                                         # 1
        '{"type": "message.added", "event_id": ',         # 2 malformed
        event(2),                                         # 3
        "",                                               # 4 blank: skipped
        missing,                                          # 5 missing field
        event(1),                                         # 6 same event id as line 1
        event(3, event_id="other", message_id="m2"),      # 7 same message as line 3
        event(4, role="narrator"),                        # 8 unknown role
        event(6),                                         # 9
        {"type": "session.ended", "event_id": "end-1", "agent_id": "a1", "session_id": "s1"},  # 10
    ]
    path = tmp_path / "events.jsonl"
    write_jsonl(path, lines)
    return path, lines


def test_replay_publishes_valid_lines_in_batches_and_reports_every_rejected_line(replay_file):
    path, lines = replay_file
    publisher = RecordingPublisher()
    report = publish_cmd.replay(path, batch=2, wait=False, timeout=5, publisher=publisher, progress=False)
    assert [len(b) for b in publisher.batches] == [2, 2]
    published = [e for b in publisher.batches for e in b]
    assert published == [lines[0], lines[2], lines[8], lines[9]]  # the file's own payloads
    assert (report.lines, report.published, report.accepted, report.duplicates_in_file) == (10, 4, 4, 2)
    assert [(n, f) for n, f, _ in report.rejected] == [(2, "<event>"), (5, "message.content"), (8, "message.role")]
    rendered = report.render()
    assert "accepted: 4" in rendered and "duplicate: 2" in rendered and "rejected: 3" in rendered
    assert "line 8: message.role:" in rendered


def test_replay_with_wait_counts_what_the_store_shows_including_store_level_duplicates(tmp_path, replay_file):
    path, _ = replay_file
    db = str(tmp_path / "memory.db")
    publisher = IngestingPublisher(db)
    already = parse_event(event(6), max_message_bytes=32768)  # line 9 was ingested before
    publisher.store.ingest_message(to_stored_message(already, T0), T0)
    report = publish_cmd.replay(
        path, batch=3, wait=True, timeout=10, publisher=publisher,
        store_factory=lambda: SQLiteStore(db), progress=False,
    )
    # lines 1 and 3 stored; line 9 was a store-level duplicate; the session end is accepted
    assert (report.accepted, report.duplicates_in_file, report.duplicates_in_store) == (3, 2, 1)
    assert report.missing == 0
    assert publisher.store.count_messages("s1") == 3
    publisher.store.close()


def test_replay_with_wait_says_how_many_events_the_store_never_showed(tmp_path, replay_file):
    path, _ = replay_file
    db = str(tmp_path / "memory.db")
    report = publish_cmd.replay(
        path, batch=100, wait=True, timeout=0.3, publisher=RecordingPublisher(),
        store_factory=lambda: SQLiteStore(db), progress=False,
    )
    assert report.missing == 3
    assert "NOT YET INGESTED: 3" in report.render()


def test_publish_command_sends_one_valid_event(monkeypatch, capsys):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    code = cli.main([
        "publish", "--agent", "a1", "--session", "s1", "--role", "user", "--sender", "u1",
        "--content", "My email is alice@example.com", "--message-id", "m-1", "--created-at", "2026-03-01T12:00:00Z",
    ])
    assert code == 0
    [sent] = publisher.singles
    parsed = parse_event(sent, max_message_bytes=32768)
    assert isinstance(parsed, MessageAdded)
    assert (parsed.message.message_id, parsed.message.sender_id, parsed.message.created_at) == ("m-1", "u1", T0)
    assert capsys.readouterr().out.strip() == parsed.event_id


def test_end_session_command_sends_a_session_ended_event(monkeypatch, capsys):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["end-session", "--agent", "a1", "--session", "s1", "--event-id", "end-7"]) == 0
    parsed = parse_event(publisher.singles[0], max_message_bytes=32768)
    assert isinstance(parsed, SessionEnded)
    assert (parsed.event_id, parsed.session_id) == ("end-7", "s1")
    assert capsys.readouterr().out.strip() == "end-7"


def test_replay_of_a_missing_file_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    assert "is not a readable file" in capsys.readouterr().err


def test_rejected_command_lists_rejections_with_field_and_reason(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "memory.db")
    store = SQLiteStore(db)
    ingest_raw_events([event(1, role="narrator")], store, Settings(), FrozenClock(T0))
    store.close()
    monkeypatch.setattr(publish_cmd, "_store", lambda: SQLiteStore(db))
    assert cli.main(["rejected"]) == 0
    out = capsys.readouterr().out
    assert "event=e1 session=s1" in out and "message.role:" in out and '"narrator"' in out
