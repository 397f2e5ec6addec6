"""An agent's category list over HTTP (design §13 "Categories and metadata"), as an owner's
program sees it: the default list, a new version, a clear 422 naming the bad name, a rollback,
each change audited."""

from __future__ import annotations

import pytest

from pipeline.owner.categories import DEFAULT_CATEGORIES


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def test_an_agent_starts_with_the_default_list_and_its_owner_sets_and_rolls_it_back(api, client, owner):
    first = client.get("/v1/agents/A/categories", headers=owner).json()
    assert (first["categories"], first["version"], first["history"]) == (list(DEFAULT_CATEGORIES), 0, [])
    set_ = client.put("/v1/agents/A/categories", json={"categories": ["projects", "venues", "projects"]},
                      headers=owner)
    assert set_.status_code == 200 and (set_.json()["categories"], set_.json()["version"]) == (["projects", "venues"], 1)
    client.put("/v1/agents/A/categories", json={"categories": []}, headers=owner)
    back = client.post("/v1/agents/A/categories/rollback", json={"version": 1}, headers=owner).json()
    assert (back["categories"], back["version"], back["history"][-1]["rolled_back_to"]) == (["projects", "venues"], 3, 1)
    admin = {"Authorization": f"Bearer {api.keys['admin']}"}
    actions = [e["action"] for e in client.get("/v1/admin/audit", headers=admin).json()["entries"]]
    assert actions.count("categories.set") == 2 and actions.count("categories.rollback") == 1


@pytest.mark.parametrize("names, where", [
    (["projects", "Venues"], "categories[1]"),
    (["budget plans"], "categories[0]"),
    (["x" * 41], "categories[0]"),
])
def test_a_bad_category_name_is_a_422_naming_it_and_stores_nothing(client, owner, names, where):
    response = client.put("/v1/agents/A/categories", json={"categories": names}, headers=owner)
    assert response.status_code == 422 and response.json()["where"].endswith(where), response.json()
    assert "lower-case letters" in response.json()["why"]
    assert client.get("/v1/agents/A/categories", headers=owner).json()["version"] == 0


def test_too_many_categories_or_an_unknown_version_is_a_clear_422(client, owner):
    many = client.put("/v1/agents/A/categories", json={"categories": [f"c{i}" for i in range(51)]}, headers=owner)
    assert many.status_code == 422 and "categories" in many.json()["where"]
    missing = client.post("/v1/agents/A/categories/rollback", json={"version": 4}, headers=owner)
    assert missing.status_code == 422 and "no version 4" in missing.json()["why"]
