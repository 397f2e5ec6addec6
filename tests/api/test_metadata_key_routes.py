"""An agent's filterable metadata keys over HTTP (design §13 "Categories and metadata"), as an
owner's program sees them: none by default, a change audited, a clear 422 naming a bad key."""

from __future__ import annotations

import pytest


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def test_an_agent_keeps_no_metadata_until_its_owner_marks_keys(api, client, owner):
    assert client.get("/v1/agents/A/metadata-keys", headers=owner).json() == {"agent_id": "A", "metadata_keys": []}
    put = client.put("/v1/agents/A/metadata-keys", json={"metadata_keys": ["project", "tier"]}, headers=owner)
    assert put.status_code == 200 and put.json()["metadata_keys"] == ["project", "tier"]
    assert client.get("/v1/agents/A/metadata-keys", headers=owner).json()["metadata_keys"] == ["project", "tier"]
    assert api.deps.store.ingest.get_agent_settings("A").metadata_keys == ["project", "tier"]
    cleared = client.put("/v1/agents/A/metadata-keys", json={"metadata_keys": []}, headers=owner)
    assert cleared.json()["metadata_keys"] == []
    admin = {"Authorization": f"Bearer {api.keys['admin']}"}
    entries = client.get("/v1/admin/audit", headers=admin).json()["entries"]
    assert [e["action"] for e in entries].count("metadata_keys.set") == 2


@pytest.mark.parametrize("keys, where, why", [
    (["project", "has space"], "metadata_keys[1]", "is not a metadata key"),
    (["project", "project"], "metadata_keys[1]", "is given twice"),
    ([f"k{i}" for i in range(17)], "metadata_keys", "at most 16"),
])
def test_a_bad_key_is_a_422_naming_it_and_stores_nothing(client, owner, keys, where, why):
    response = client.put("/v1/agents/A/metadata-keys", json={"metadata_keys": keys}, headers=owner)
    assert response.status_code == 422 and response.json()["where"].endswith(where), response.json()
    assert why in response.json()["why"]
    assert client.get("/v1/agents/A/metadata-keys", headers=owner).json()["metadata_keys"] == []
