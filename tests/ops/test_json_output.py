"""docs/operations.md says data commands accept ``--json``: every command does, and prints exactly one
JSON document on stdout (the store and broker it used go to stderr)."""

from __future__ import annotations

import argparse
import json

import pytest

from ops.cli import build_parser, main
from ops.commands import publish as publish_cmd
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import get_settings


def _leaf_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaf_commands(child, (*prefix, name))


LEAVES = list(_leaf_commands(build_parser()))


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[" ".join(n) for n, _ in LEAVES])
def test_every_command_accepts_json(name, parser):
    assert any("--json" in a.option_strings for a in parser._actions), f"memoryctl {' '.join(name)} has no --json"


class Recording:
    def __init__(self):
        self.sent = []

    def publish_one(self, event):
        self.sent.append(event)

    def publish_batch(self, events):
        self.sent.extend(events)
        return len(events)


@pytest.fixture
def store_env(tmp_path, monkeypatch):
    db = tmp_path / "memory.db"
    SQLiteStore(str(db)).close()
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setattr(publish_cmd, "_publisher", Recording)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


COMMANDS = [
    ["runs"], ["rejected"], ["replay-failed"], ["reembed"], ["forget-user", "--user", "u1", "--all-agents"],
    ["agent", "show", "a1"], ["agent", "set", "a1", "--name", "N"], ["create-indexes"],
    ["context", "--agent", "a1", "--session", "s1"], ["search", "--agent", "a1", "--session", "s1", "-q", "x"],
    ["stats", "--agent", "a1"], ["status", "--agent", "a1"],
    ["publish", "--agent", "a1", "--session", "s1", "--sender", "u1", "--content", "hi"],
    ["end-session", "--agent", "a1", "--session", "s1"],
    ["replay", "FILE", "--allow-rejected"],
    ["keys", "create", "--admin"], ["keys", "list"], ["audit"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] if c[0] != "agent" else " ".join(c[:2]))
def test_json_output_is_one_document_on_stdout(store_env, capsys, command):
    events = store_env / "events.jsonl"
    events.write_text('{"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "x", "message_id": "m1"}\n')
    command = [str(events) if c == "FILE" else c for c in command]
    assert main([*command, "--json"]) == 0
    out = capsys.readouterr().out
    json.loads(out)  # one document, nothing else on stdout
