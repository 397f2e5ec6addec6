"""``search_memory`` and ``get_memory_context`` narrowed by category and metadata (design §13
"Categories and metadata"), through ``memoryctl mcp`` spawned by the SDK's own client: the
filters are declared in the tool schemas, narrow what the connection's user reads and never
widen it, and a misspelt one is a tool error naming the argument."""

from __future__ import annotations

from datetime import timedelta

from pipeline.embeddings import open_embedder
from pipeline.store import open_store
from pipeline.text import text_hash
from schemas.documents import Fact
from schemas.settings import Settings
from tests.mcp.client import run_http, run_stdio
from tests.mcp.test_mcp_stdio import as_user
from testkit.demo_store import AGENT, MAYA

TOM = "user-tom"
TAGGED = {  # the same project on Maya's, Tom's and the agent's fact
    MAYA: "Maya Chen chose the Lumen launch venue seating plan",
    TOM: "Tom Okafor runs the Lumen launch venue stream",
    None: "The Lumen launch venue seats 300 people",
}


def _tag_the_launch(store_url: str) -> None:
    settings = Settings(_env_file=None, store_url=store_url, embedding_provider="hashing")
    store, embedder = open_store(settings), open_embedder(settings)
    try:
        agent = store.ingest.get_agent_settings(AGENT)
        store.ingest.put_agent_settings(agent.model_copy(update={"metadata_keys": ["project"]}))
        now = store.facts.list_facts(AGENT)[0].formed_at + timedelta(minutes=1)
        for i, (user, text) in enumerate(TAGGED.items()):
            key = f"user:{user}" if user else "agent"
            store.facts.insert_fact(Fact(
                fact_id=f"tagged-{i}", agent_id=AGENT, scope="user" if user else "agent", user_id=user, scope_key=key,
                content=text, hash=text_hash(text), embedding=embedder.embed([text]).vectors[0],
                embedding_model=embedder.model, formed_at=now, metadata={"project": "lumen"}))
            store.leases.bump_scope_versions(AGENT, [key])
    finally:
        store.close()


def test_the_filters_are_declared_for_a_model_and_name_no_identity(demo_store_url):
    talk = run_stdio(as_user(demo_store_url, TOM), [])
    for name in ("search_memory", "get_memory_context"):
        properties = talk.tools[name]["properties"]
        assert {"categories", "metadata"} <= set(properties), name
        assert properties["categories"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}, "maxItems": 50}
        assert properties["metadata"]["type"] == "object" and "project" in properties["metadata"]["description"]
        assert not {"user_id", "user", "session_id", "agent_id"} & set(properties)


def test_a_filter_narrows_the_bound_users_memory_and_never_reaches_another_users(store_copy):
    _tag_the_launch(store_copy)
    talk = run_stdio(as_user(store_copy, TOM), [
        ("search_memory", {"query": "Lumen launch venue"}),
        ("search_memory", {"query": "Lumen launch venue", "metadata": {"project": "lumen"}}),
        ("search_memory", {"query": "Maya Chen work email, AV engineer", "categories": ["personal_details", "professional_details"]}),
        ("get_memory_context", {"categories": ["professional_details"]}),
        ("get_memory_context", {"metadata": {"project": ["lumen", "zeus"]}}),
    ])
    whole, lumen, details, context, tagged_context = talk.answers
    contents = {f["content"] for f in lumen.facts}
    assert contents == {TAGGED[TOM], TAGGED[None]}
    assert contents <= {f["content"] for f in whole.facts}
    assert all(f["metadata"] == {"project": "lumen"} for f in lumen.facts)
    # Maya's details are filed under these categories too: Tom's own are all he gets
    assert [(f["content"], f["categories"]) for f in details.facts] == [
        ("Tom Okafor is an AV engineer", ["professional_details"])]
    assert "Tom Okafor is an AV engineer" in context.text
    assert "12,000 euros" not in context.text and "maya.chen" not in context.text
    assert TAGGED[TOM] in tagged_context.text and TAGGED[None] in tagged_context.text
    assert TAGGED[MAYA] not in tagged_context.text and "Tom Okafor is an AV engineer" not in tagged_context.text


def test_a_bad_filter_is_a_tool_error_naming_the_argument(store_copy):
    _tag_the_launch(store_copy)
    talk = run_stdio(as_user(store_copy, TOM), [
        ("search_memory", {"query": "venue", "categories": ["travle"]}),
        ("get_memory_context", {"metadata": {"colour": "red"}}),
        ("search_memory", {"query": "venue", "metadata": {"user_id": MAYA}}),
        ("search_memory", {"query": "venue", "metadata": {"project": 2.5}}),
    ])
    category, key, identity, fraction = talk.answers
    assert category.is_error and "categories[0]: 'travle' is not a category of agent" in category.text
    assert "professional_details" in category.text  # the names it may use
    assert key.is_error and "metadata.colour:" in key.text and "its filterable keys: project" in key.text
    assert identity.is_error and "metadata.user_id:" in identity.text
    assert fraction.is_error and "metadata.project: 2.5 is a fraction" in fraction.text


def test_over_http_a_user_tokens_filter_reads_that_users_memory_only(api_server):
    token = api_server.user_token(AGENT, TOM)
    talk = run_http(f"{api_server.url}/mcp", {"Authorization": f"Bearer {token}"}, [
        ("search_memory", {"query": "Maya Chen work email, AV engineer",
                           "categories": ["personal_details", "professional_details"]}),
        ("get_memory_context", {"categories": ["personal_details", "professional_details"]}),
    ])
    found, context = talk.answers
    assert [f["content"] for f in found.facts] == ["Tom Okafor is an AV engineer"]
    assert "Tom Okafor is an AV engineer" in context.text and "maya.chen" not in context.text
