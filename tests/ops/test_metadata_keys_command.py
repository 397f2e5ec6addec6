"""``memoryctl metadata-keys`` (design §13 "Categories and metadata"): an owner reads and sets
the event metadata keys an agent's facts keep; a bad key is one line naming it."""

from __future__ import annotations

import json

import pytest

from ops import cli
# a fresh SQLite store named by MEMORY_STORE_URL, as the categories commands' tests use it
from tests.ops.test_categories_command import store_url  # noqa: F401


def _shown(capsys) -> list[str]:
    capsys.readouterr()
    assert cli.main(["metadata-keys", "show", "A", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["metadata_keys"]


def test_an_owner_sets_and_clears_the_filterable_keys_and_each_change_is_audited(store_url, capsys):
    assert _shown(capsys) == []
    assert cli.main(["metadata-keys", "set", "A", "project", "deal.stage"]) == 0
    assert "keep the metadata keys: project, deal.stage" in capsys.readouterr().out
    assert _shown(capsys) == ["project", "deal.stage"]
    assert cli.main(["metadata-keys", "set", "A", "--none"]) == 0
    assert "none (facts keep no metadata)" in capsys.readouterr().out
    assert _shown(capsys) == []
    assert cli.main(["audit", "--json"]) == 0
    assert [e["action"] for e in json.loads(capsys.readouterr().out)].count("metadata_keys.set") == 2


@pytest.mark.parametrize("args, said", [
    (["project", "2fast"], "KEY[1]: '2fast' is not a metadata key"),
    (["project", "project"], "KEY[1]: 'project' is given twice"),
    ([f"k{i}" for i in range(17)], "KEY: has 17 keys; an agent marks at most 16"),
    ([], "give the keys facts keep, or --none"),
    (["project", "--none"], "give the keys facts keep, or --none"),
])
def test_a_bad_key_is_refused_with_one_line_naming_it_and_nothing_changes(store_url, capsys, args, said):
    assert cli.main(["metadata-keys", "set", "A", *args]) == 2
    assert said in capsys.readouterr().err
    assert _shown(capsys) == []
