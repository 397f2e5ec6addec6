"""Read commands never invent a store, and every command says which store it used."""

from __future__ import annotations

import json
import os

import pytest

from ops import stores
from ops.cli import main
from pipeline.errors import ConfigurationError
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings, get_settings
from testkit.mongo_emulation import emulated_database

READ_COMMANDS = [
    ["runs"],
    ["runs", "--json"],
    ["rejected"],
    ["context", "--agent", "a1", "--session", "s1"],
    ["search", "--agent", "a1", "--session", "s1", "-q", "budget"],
    ["stats", "--agent", "a1"],
    ["status", "--agent", "a1"],
    ["agent", "show", "a1"],
    ["forget-user", "--user", "u1", "--all-agents"],
    ["replay-failed"],
    ["reembed"],
    ["replay-rejected"],
]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: " ".join(c))
def test_a_read_command_on_a_missing_sqlite_store_creates_nothing(in_tmp, monkeypatch, capsys, command):
    missing = in_tmp / "nonexistent" / "dir" / "m.db"
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{missing}")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"no store at {missing} (create it with memoryctl create-indexes, or set MEMORY_STORE_URL)" in err
    assert "0 run(s)" not in err and not (in_tmp / "nonexistent").exists()


def test_the_default_relative_store_is_reported_with_its_absolute_path(in_tmp, monkeypatch, capsys):
    monkeypatch.delenv("MEMORY_STORE_URL", raising=False)
    assert main(["runs"]) == 2
    assert f"no store at {in_tmp / 'memory.db'}" in capsys.readouterr().err
    assert not (in_tmp / "memory.db").exists()


def test_create_indexes_creates_the_store_then_reads_name_it_on_stderr(in_tmp, monkeypatch, capsys):
    db = in_tmp / "new" / "m.db"
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{db}")
    assert main(["create-indexes"]) == 0
    assert f"store: sqlite:///{db}" in capsys.readouterr().err and db.is_file()
    assert main(["runs", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and f"store: sqlite:///{db}" in err


def test_agent_set_creates_the_store_it_writes_to(in_tmp, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_STORE_URL", "sqlite:///fresh.db")
    assert main(["agent", "set", "a1", "--name", "Juniper"]) == 0
    assert f"store: sqlite:///{in_tmp / 'fresh.db'}" in capsys.readouterr().err
    assert main(["agent", "show", "a1"]) == 0
    assert "name=Juniper" in capsys.readouterr().out


def test_a_mongo_database_without_the_pipeline_collections_is_no_store(monkeypatch):
    empty = MongoStore(emulated_database(), prefix="memory2_")
    monkeypatch.setattr("pipeline.store.open_store", lambda settings: empty)
    with pytest.raises(ConfigurationError, match=r"no store at mongodb://admin:\*\*@db-host/memory: .*has no memory2_\* collections"):
        stores.open_existing(Settings(_env_file=None, store_url="mongodb://admin:pw@db-host/memory"))
    empty.create_indexes()
    assert stores.open_existing(Settings(_env_file=None, store_url="mongodb://db-host/memory")) is empty


def test_describe_hides_passwords_and_makes_sqlite_paths_absolute(in_tmp):
    assert stores.describe("sqlite:///rel/m.db") == f"sqlite:///{os.path.join(in_tmp, 'rel', 'm.db')}"
    assert "pw" not in stores.describe("mongodb://admin:pw@host:27017/memory")


def test_a_sqlite_file_of_another_application_is_not_taken_for_a_store(in_tmp, monkeypatch, capsys):
    import sqlite3

    other = in_tmp / "other_app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    before = other.read_bytes()
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{other}")
    assert main(["runs"]) == 2
    assert f"no store at {other}: the file holds no memory2_* tables" in capsys.readouterr().err
    assert other.read_bytes() == before  # looked at, not written
