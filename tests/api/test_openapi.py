"""The OpenAPI document (3.1) is generated from ``schemas/api.py`` and pinned by
``docs/openapi.json``: a change of the API's shape is a reviewed diff. To accept one:

    .venv/bin/memoryctl serve --openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from pathlib import Path

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_served_document_is_the_committed_one(client):
    served = client.get("/openapi.json").json()
    committed = json.loads(DOCUMENT.read_text())
    assert served == committed, "the API's shape changed: review it, then: memoryctl serve --openapi > docs/openapi.json"


def test_it_is_openapi_3_1_with_versioned_paths_and_a_credential_on_every_route_but_health():
    doc = json.loads(DOCUMENT.read_text())
    assert doc["openapi"].startswith("3.1")
    assert {path.split("/")[1] for path in doc["paths"]} == {"v1", "healthz"}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if path == "/healthz":
                assert "security" not in operation
                continue
            assert operation["security"] == [{"HTTPBearer": []}], (method, path)
            problem = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert problem == {"$ref": "#/components/schemas/Problem"}, (method, path)
