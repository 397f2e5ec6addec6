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
    assert [(r.line, [f for f, _ in r.reasons]) for r in report.rejected] == [
        (2, ["<event>"]), (5, ["message.content"]), (8, ["message.role"])]
    rendered = report.render()
    assert "accepted: 4" in rendered and "duplicate: 2" in rendered and "rejected lines: 3" in rendered
    assert "  line 8:\n    message.role:" in rendered


def test_replay_reports_blank_lines_apart_and_keeps_every_good_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "events.jsonl"
    write_jsonl(path, [event(1), "", event(2), "   ", event(3)])
    monkeypatch.setattr(publish_cmd, "_publisher", RecordingPublisher)
    assert cli.main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "5 lines read, 3 events published" in out and "rejected lines: 0" in out
    assert "blank lines: 2 (skipped; lines 2, 4)" in out
    assert cli.main(["replay", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["blank"], report["published"], report["rejected"]) == ([2, 4], 3, [])


def test_replay_with_wait_counts_what_the_store_shows_including_store_level_duplicates(tmp_path, replay_file):
    path, _ = replay_file
    db = str(tmp_path / "memory.db")
    publisher = IngestingPublisher(db)
    already = parse_event(event(6), max_message_bytes=32768)  # line 9 was ingested before
    publisher.store.ingest.ingest_message(to_stored_message(already, T0), T0)
    report = publish_cmd.replay(
        path, batch=3, wait=True, timeout=10, publisher=publisher,
        store_factory=lambda: SQLiteStore(db), progress=False,
    )
    # lines 1 and 3 stored; line 9 was a store-level duplicate; the session end is accepted
    assert (report.accepted, report.duplicates_in_file, report.duplicates_in_store) == (3, 2, 1)
    assert report.missing == 0
    assert publisher.store.ingest.count_messages("s1") == 3
    publisher.store.close()


def test_replay_with_wait_says_how_many_events_the_store_never_showed(tmp_path, replay_file):
    path, _ = replay_file
    db = str(tmp_path / "memory.db")
    report = publish_cmd.replay(
        path, batch=100, wait=True, timeout=0.3, publisher=RecordingPublisher(),
        store_factory=lambda: SQLiteStore(db), progress=False,
    )
    assert report.missing == 4   # three messages and the session end
    assert "NOT YET INGESTED: 4" in report.render()


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


def test_publish_command_sends_the_metadata_given_with_meta(monkeypatch, capsys):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    code = cli.main(["publish", "--agent", "a1", "--session", "s1", "--sender", "u1", "--content", "hi",
                     "--meta", "project=apollo", "--meta", "tier=2", "--meta", "beta=true", "--meta", 'zip="02134"',
                     "--meta", 'version="1.5"', "--meta", "code=02134"])
    assert code == 0
    parsed = parse_event(publisher.singles[0], max_message_bytes=32768)
    assert parsed.metadata == {"project": "apollo", "tier": 2, "beta": True, "zip": "02134", "version": "1.5",
                               "code": "02134"}


@pytest.mark.parametrize(("meta", "field"), [
    (["--meta", "2fast=x"], "--meta (metadata.2fast)"),
    (["--meta", "tier=1", "--meta", "tier=2"], "--meta tier"),
    (["--meta", f"note={'x' * 201}"], "--meta (metadata.note)"),
    # read as memoryctl search --meta reads it: a fraction, which no metadata value is
    (["--meta", "version=1.5"], "--meta (metadata.version)"),
])
def test_publish_refuses_bad_metadata_naming_the_option_and_sends_nothing(monkeypatch, capsys, meta, field):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["publish", "--agent", "a1", "--session", "s1", "--sender", "u1", "--content", "hi", *meta]) == 2
    assert f"memoryctl publish: {field}:" in capsys.readouterr().err
    assert publisher.singles == []


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
    [rejection] = SQLiteStore(db).ingest.list_rejections()
    assert f"rejection={rejection.rejection_id} agent=a1 session=s1 event=e1" in out
    assert "message.role:" in out and '"narrator"' in out and out.rstrip().endswith("1 rejected event")
    assert cli.main(["rejected", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["rejection_id"], listed["agent_id"]) == (rejection.rejection_id, "a1")


def test_rejected_says_when_there_is_none(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "memory.db")
    SQLiteStore(db).close()
    monkeypatch.setattr(publish_cmd, "_store", lambda: SQLiteStore(db))
    assert cli.main(["rejected"]) == 0
    assert capsys.readouterr().out == "0 rejected events\n"
    assert cli.main(["rejected", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# ---------------------------------------------------------------- what the worker would reject
@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--role", "wizard", "--sender", "u1"], "--role (message.role)"),
        (["--role", "user"], "--sender (message.sender_id)"),    # a user message needs --sender
        (["--sender", "u1", "--tier", "-1"], "--tier (user_tier)"),
        (["--sender", "u1", "--created-at", "yesterday"], "--created-at (message.created_at)"),
        (["--sender", "u1", "--users", "u2"], "--sender (<event>)"),  # not one of the session's users
        (["--sender", "u1", "--content", "a\x00b"], "--content (message.content)"),
        (["--sender", "u1", "--content", "a\udcff"], "--content (message.content)"),  # an undecodable argv byte
        (["--sender", "u1", "--created-at", "0001-01-01T00:00:00+14:00"], "--created-at (message.created_at)"),
        (["--sender", "u1", "--session", "s\x01"], "--session (session_id)"),
    ],
)
def test_publish_refuses_what_the_worker_would_reject_and_sends_nothing(monkeypatch, capsys, extra, field):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["publish", "--agent", "a1", "--session", "s1", "--content", "hi", *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"memoryctl publish: {field}:" in captured.err
    assert publisher.singles == [] and publisher.batches == []


def test_publish_json_prints_the_event_id(monkeypatch, capsys):
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["publish", "--agent", "a1", "--session", "s1", "--sender", "u1", "--content", "hi",
                     "--event-id", "e-9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"event_id": "e-9", "type": "message.added"}


@pytest.mark.parametrize("command", [
    ["publish", "--agent", "a1", "--session", "s1", "--sender", "u1", "--content", "hi"],
    ["end-session", "--agent", "a1", "--session", "s1"],
    ["replay", "FILE"],
])
def test_the_in_process_demo_broker_is_refused(tmp_path, monkeypatch, capsys, replay_file, command):
    from schemas.settings import get_settings

    monkeypatch.setenv("MEMORY_BROKER_URL", "memory://localhost/")
    monkeypatch.setattr(publish_cmd, "get_settings", lambda: Settings(broker_url="memory://localhost/"))
    command = [str(replay_file[0]) if c == "FILE" else c for c in command]
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert "MEMORY_BROKER_URL='memory://localhost/' is the in-process broker of `make demo`" in err
    get_settings.cache_clear()


# ---------------------------------------------------------------- replay reporting
def test_a_line_with_several_reasons_counts_once_and_lists_each_reason(tmp_path, monkeypatch, capsys):
    bad = event(1, role="narrator")
    del bad["message"]["content"]
    path = tmp_path / "two-reasons.jsonl"
    write_jsonl(path, [event(2), bad])
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert "rejected lines: 1" in out
    assert "  line 2:\n    message.role: " in out and "\n    message.content: Field required" in out
    assert [e["event_id"] for b in publisher.batches for e in b] == ["e2"]
    assert cli.main(["replay", str(path), "--allow-rejected"]) == 0
    capsys.readouterr()
    assert cli.main(["replay", str(path), "--allow-rejected", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rejected"] == [{"line": 2, "reasons": [
        {"field": "message.role", "reason": report["rejected"][0]["reasons"][0]["reason"]},
        {"field": "message.content", "reason": "Field required"}]}]


def test_a_clean_file_exits_0(tmp_path, monkeypatch, capsys):
    path = tmp_path / "clean.jsonl"
    write_jsonl(path, [event(1), event(2)])
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: RecordingPublisher())
    assert cli.main(["replay", str(path)]) == 0


class InterruptedPublisher(RecordingPublisher):
    """Ctrl-C arrives while the second batch is being sent."""

    def publish_batch(self, events):
        if self.batches:
            raise KeyboardInterrupt
        return super().publish_batch(events)


def test_ctrl_c_reports_what_was_published_and_that_rerunning_is_safe(tmp_path, monkeypatch, capsys):
    path = tmp_path / "long.jsonl"
    write_jsonl(path, [event(n) for n in range(1, 8)])
    publisher = InterruptedPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["replay", str(path), "--batch", "3"]) == 130
    out = capsys.readouterr().out
    assert "6 lines read, 3 events published before Ctrl-C; re-running the file is safe (duplicates are ignored)" in out
    assert [e["event_id"] for e in publisher.batches[0]] == ["e1", "e2", "e3"]


def test_replay_takes_the_short_form_of_publish_messages(tmp_path, monkeypatch, capsys):
    path = tmp_path / "short.jsonl"
    short = {"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "short form", "message_id": "m-s"}
    no_ids = {"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "no ids"}
    bad_role = {**short, "message_id": "m-r", "role": "wizard"}
    write_jsonl(path, [short, no_ids, bad_role, short])
    publisher = RecordingPublisher()
    monkeypatch.setattr(publish_cmd, "_publisher", lambda: publisher)
    assert cli.main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    [sent] = [e for b in publisher.batches for e in b]
    parsed = parse_event(sent, max_message_bytes=32768)
    assert isinstance(parsed, MessageAdded) and (parsed.message.message_id, parsed.message.content) == ("m-s", "short form")
    assert "line 2:\n    <event>: a short-form line (the keyword fields of publish_message) needs message_id or event_id" in out
    assert "line 3:\n    message.role: Input should be" in out
    assert "duplicate: 1 (1 in the file)" in out
