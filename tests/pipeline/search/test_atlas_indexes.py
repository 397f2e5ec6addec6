"""Atlas search index management: created when missing, updated only when the definition
changed (each update makes Atlas rebuild the index), then waited for until READY."""

from __future__ import annotations

import json

import pytest

from ops import cli
from ops.commands import indexes as command
from pipeline.clock import FrozenClock
from pipeline.errors import ConfigurationError
from pipeline.search import atlas, atlas_indexes
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database


class _Unclosable(MongoStore):
    """The emulated database lives in memory only: keep it across runs."""

    def close(self) -> None:
        pass


def _settings(dim=64, **kw):
    return Settings(_env_file=None, store_url="mongodb://unused/db", atlas_search=True,
                    embedding_provider="hashing", hashing_embedding_dim=dim, **kw)


def _cli(monkeypatch, capsys, store, settings, *args):
    monkeypatch.setattr(command, "get_settings", lambda: settings)
    monkeypatch.setattr(command, "open_store", lambda _settings: store)
    code = cli.main(["create-indexes", "--json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_a_second_run_reports_the_search_indexes_unchanged_and_rebuilds_nothing(monkeypatch, capsys):
    store = _Unclosable(emulated_database())
    code, first, _ = _cli(monkeypatch, capsys, store, _settings())
    assert code == 0
    assert first["search_indexes"] == ["memory2_facts.memory_facts_vector (created, READY)",
                                       "memory2_facts.memory_facts_text (created, READY)"]
    code, second, _ = _cli(monkeypatch, capsys, store, _settings())
    assert code == 0
    assert second["search_indexes"] == ["memory2_facts.memory_facts_vector (unchanged, READY)",
                                        "memory2_facts.memory_facts_text (unchanged, READY)"]
    assert store.col("facts").search_catalog.rebuilds == 0


def test_the_vector_index_takes_the_embedder_dimension_and_a_new_dimension_updates_it(monkeypatch, capsys):
    store = _Unclosable(emulated_database())
    _cli(monkeypatch, capsys, store, _settings(dim=64))
    _, out, _ = _cli(monkeypatch, capsys, store, _settings(dim=128))
    assert out["search_indexes"][0] == "memory2_facts.memory_facts_vector (updated, READY)"
    assert out["search_indexes"][1] == "memory2_facts.memory_facts_text (unchanged, READY)"
    [vector] = store.col("facts").list_search_indexes(atlas.VECTOR_INDEX)
    assert vector["latestDefinition"]["fields"][0]["numDimensions"] == 128
    assert store.col("facts").search_catalog.rebuilds == 1


def test_waiting_prints_progress_until_the_indexes_are_ready():
    clock = FrozenClock()
    facts = emulated_database(clock=clock, build_s=7)["memory2_facts"]
    lines = []
    outcomes = atlas_indexes.ensure_search_indexes(
        facts, 8, wait_s=60, progress=lines.append,
        sleep=lambda s: clock.advance(seconds=s), monotonic=lambda: clock.now().timestamp())
    assert [(o.action, o.status, o.queryable) for o in outcomes] == [("created", "READY", True)] * 2
    assert len(lines) == 4 and "memory2_facts.memory_facts_vector BUILDING" in lines[0]
    assert lines[0].endswith("(0 s of 60 s)")


def test_past_the_bound_it_says_clearly_that_the_index_is_still_building(monkeypatch, capsys):
    clock = FrozenClock()
    store = _Unclosable(emulated_database(clock=clock, build_s=600))
    code, out, _ = _cli(monkeypatch, capsys, store, _settings(), "--wait", "0")
    assert code == 0
    assert out["search_indexes"][0] == ("memory2_facts.memory_facts_vector (created, still BUILDING after 0 s: "
                                        "not queryable yet, searches find nothing until it is READY)")
    clock.advance(seconds=600)
    _cli(monkeypatch, capsys, store, _settings())
    store.col("facts").update_search_index(atlas.SEARCH_INDEX, {"mappings": {"dynamic": True}})
    _, out, _ = _cli(monkeypatch, capsys, store, _settings(), "--wait", "0")
    assert "(updated, still BUILDING after 0 s: queries use the previous definition until it is READY)" in \
        out["search_indexes"][1]


def test_a_failed_build_ends_the_wait_and_is_said_plainly():
    class FailingFacts:
        name = "memory2_facts"

        def list_search_indexes(self):
            return [{"name": n, "type": t, "status": "FAILED", "queryable": False, "latestDefinition": {}}
                    for n, t in ((atlas.VECTOR_INDEX, "vectorSearch"), (atlas.SEARCH_INDEX, "search"))]

        def update_search_index(self, name, definition):
            pass

    lines = []
    outcomes = atlas_indexes.ensure_search_indexes(FailingFacts(), 8, wait_s=600, progress=lines.append,
                                                   sleep=lambda s: pytest.fail("waited on a failed build"))
    assert lines == [] and "FAILED: Atlas could not build it" in outcomes[0].describe()


def test_an_index_of_the_other_type_under_our_name_is_a_clear_error():
    facts = emulated_database()["memory2_facts"]
    from pymongo.operations import SearchIndexModel

    facts.create_search_index(SearchIndexModel(name=atlas.VECTOR_INDEX, type="search",
                                               definition={"mappings": {"dynamic": True}}))
    with pytest.raises(ConfigurationError, match="exists as a 'search' index"):
        atlas_indexes.ensure_search_indexes(facts, 8, wait_s=0, progress=print)


@pytest.mark.parametrize(("actual", "wanted", "same"), [
    ({"a": 1, "server_default": True}, {"a": 1}, True),          # a default the server filled in
    ({"a": 1}, {"a": 2}, False),
    ({"fields": [{"p": "y"}, {"p": "x"}]}, {"fields": [{"p": "x"}, {"p": "y"}]}, True),
    ({"fields": [{"p": "x"}]}, {"fields": [{"p": "x"}, {"p": "y"}]}, False),
    ({"b": 1}, {"b": True}, False),
    (None, {"a": 1}, False),
])
def test_a_definition_is_unchanged_when_the_server_holds_everything_we_ask_for(actual, wanted, same):
    assert atlas_indexes.covers(actual, wanted) is same
