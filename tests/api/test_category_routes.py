"""An agent's category list over HTTP (design §13 "Categories and metadata"), as an owner's
program sees it: the default list, a new version, a clear 422 naming the bad name, a rollback,
each change audited."""

from __future__ import annotations

import pytest

from pipeline.owner.categories import DEFAULT_CATEGORIES
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


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


def test_a_user_and_an_owner_file_a_fact_under_the_agents_categories_by_editing_it(api, client, owner):
    user = {"Authorization": f"Bearer {api.token(user='u1')}"}
    mine = client.get("/v1/agents/A/users/u1/memory", headers=user).json()["facts"]
    fact = next(f for f in mine if f["id"] == "f-u1")
    edited = client.patch("/v1/agents/A/users/u1/memory/facts/f-u1",
                          json={"content": fact["content"], "categories": ["personal_details", "family"]}, headers=user)
    assert edited.status_code == 200 and edited.json()["categories"] == ["personal_details", "family"]
    # omitted: the categories stay; []: none
    kept = client.patch("/v1/agents/A/users/u1/memory/facts/f-u1", json={"content": "Alice's email is a@example.org"},
                        headers=user)
    assert kept.json()["categories"] == ["personal_details", "family"]
    shared = client.patch("/v1/agents/A/memory/facts/f-agent-both",
                          json={"content": "The Mars budget is $60,000", "categories": ["finance"]}, headers=owner)
    assert shared.status_code == 200 and shared.json()["categories"] == ["finance"]
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].categories == ["finance"]


def test_a_category_outside_the_agents_list_is_a_422_naming_it_and_changes_nothing(api, client, owner):
    client.put("/v1/agents/A/categories", json={"categories": ["budgets"]}, headers=owner)
    refused = client.patch("/v1/agents/A/memory/facts/f-agent-both",
                           json={"content": "The Mars budget is $60,000", "categories": ["budgets", "finance"]},
                           headers=owner)
    assert refused.status_code == 422 and refused.json()["where"].endswith("categories[1]")
    assert "not one of the agent's categories: budgets" in refused.json()["why"]
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].version == 1
