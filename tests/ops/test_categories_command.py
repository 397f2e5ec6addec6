"""``memoryctl categories`` (design §13 "Categories and metadata"): an owner reads, sets, resets
and rolls back an agent's list from the command line; a bad name is one line naming it."""

from __future__ import annotations

import json

import pytest

from ops import cli
from pipeline.owner.categories import DEFAULT_CATEGORIES
from schemas.settings import get_settings


@pytest.fixture
def store_url(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    get_settings.cache_clear()
    assert cli.main(["create-indexes"]) == 0
    yield
    get_settings.cache_clear()


def _shown(capsys) -> dict:
    capsys.readouterr()
    assert cli.main(["categories", "show", "A", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_owner_sets_resets_and_rolls_back_the_category_list(store_url, capsys):
    assert _shown(capsys)["categories"] == list(DEFAULT_CATEGORIES)
    assert cli.main(["categories", "set", "A", "venues", "catering"]) == 0
    assert "files new facts under (version 1): venues, catering" in capsys.readouterr().out
    assert cli.main(["categories", "set", "A", "--default"]) == 0
    assert cli.main(["categories", "rollback", "A", "--version", "1"]) == 0
    shown = _shown(capsys)
    assert (shown["categories"], shown["version"], shown["history"][1]["names"]) == (
        ["venues", "catering"], 3, list(DEFAULT_CATEGORIES))
    assert cli.main(["audit", "--json"]) == 0
    actions = [e["action"] for e in json.loads(capsys.readouterr().out)]
    assert actions.count("categories.set") == 2 and actions.count("categories.rollback") == 1


def test_a_bad_name_is_refused_with_one_line_naming_it(store_url, capsys):
    assert cli.main(["categories", "set", "A", "venues", "Budget Plans"]) == 2
    assert "NAME[1]: 'Budget Plans' is not a category name" in capsys.readouterr().err
    assert cli.main(["categories", "set", "A"]) == 2
    assert "give the category names, --default for the default list, or --none" in capsys.readouterr().err
    assert cli.main(["categories", "set", "A", "venues", "--none"]) == 2
    assert "(one of the three)" in capsys.readouterr().err
    assert _shown(capsys)["version"] == 0


def test_none_sets_an_empty_list_and_new_facts_are_filed_under_no_category(store_url, capsys):
    assert cli.main(["categories", "set", "A", "--none"]) == 0
    assert "files new facts under (version 1): (no category)" in capsys.readouterr().out
    shown = _shown(capsys)
    assert (shown["categories"], shown["version"]) == ([], 1)
    assert cli.main(["curate", "add-fact", "A", "--text", "The venue is Riverside Park", "--category", "venues"]) == 2
    assert "--category[0]: 'venues' is not one of the agent's categories" in capsys.readouterr().err
