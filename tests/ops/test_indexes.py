"""``memoryctl create-indexes``: idempotent, names every index, and creates Atlas search
indexes only on Mongo with the setting on (saying so clearly when that support is missing)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from ops import cli
from ops.commands import indexes as command
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.documents import fact
from testkit.mongo_emulation import emulated_database


def _use(monkeypatch, settings: Settings, store=None) -> None:
    monkeypatch.setattr(command, "get_settings", lambda: settings)
    if store is not None:
        monkeypatch.setattr(command, "open_store", lambda _settings: store)


def test_sqlite_indexes_are_created_and_a_second_run_changes_nothing(tmp_path, monkeypatch, capsys):
    _use(monkeypatch, Settings(store_url=f"sqlite:///{tmp_path / 'm.db'}"))
    assert cli.main(["create-indexes", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert cli.main(["create-indexes", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert first == second and first["store"] == "sqlite" and first["search_indexes"] is None
    assert "memory2_facts_scope_hash" in first["indexes"]


class _Unclosable(MongoStore):
    """The emulated database lives in memory only: keep it across the two runs."""

    def close(self) -> None:
        pass


def test_mongo_indexes_include_the_unique_keys_and_are_idempotent(monkeypatch, capsys):
    store = _Unclosable(emulated_database())
    _use(monkeypatch, Settings(store_url="mongodb://unused/db"), store)
    assert cli.main(["create-indexes"]) == 0
    text = capsys.readouterr().out
    assert "memory2_facts.agent_scope_hash_unique" in text and "memory2_consolidated.agent_scope_unique" in text
    assert cli.main(["create-indexes"]) == 0
    assert capsys.readouterr().out == text
    store.facts.insert_fact(fact("f1", "The launch is on March 3"))
    assert store.facts.insert_fact(fact("f2", "the launch is on march 3")) == (False, "f1")


def test_atlas_search_indexes_are_created_on_mongo_when_enabled(monkeypatch, capsys):
    calls = []
    fake = types.ModuleType("pipeline.search.atlas_indexes")
    fake.create_search_indexes = lambda store, settings, **kw: calls.append(store) or ["facts_vector", "facts_text"]
    monkeypatch.setitem(sys.modules, "pipeline.search.atlas_indexes", fake)
    store = _Unclosable(emulated_database())
    _use(monkeypatch, Settings(store_url="mongodb://unused/db", atlas_search=True), store)
    assert cli.main(["create-indexes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["search_indexes"] == ["facts_vector", "facts_text"] and calls == [store]


def test_missing_atlas_support_is_reported_and_fails_the_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pipeline.search.atlas_indexes", None)  # import fails
    _use(monkeypatch, Settings(store_url="mongodb://unused/db", atlas_search=True), _Unclosable(emulated_database()))
    assert cli.main(["create-indexes"]) == 2
    captured = capsys.readouterr()
    assert "memory2_facts.agent_scope_hash_unique" in captured.out
    assert "no Atlas search support" in captured.err


@pytest.mark.parametrize("atlas", [True, False])
def test_sqlite_never_creates_search_indexes(tmp_path, monkeypatch, capsys, atlas):
    _use(monkeypatch, Settings(store_url=f"sqlite:///{tmp_path / 'm.db'}", atlas_search=atlas))
    assert cli.main(["create-indexes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["search_indexes"] is None and (out["note"] is not None) is atlas
