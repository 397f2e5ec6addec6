"""A filter never widens what a caller reads, as a property (design §13 "Categories and
metadata"): over the HTTP app, a user token's search and context with any filter of the
agent's categories and filterable keys show only facts that caller reaches without one, each
matching the filter, and never a fact of another user, however alike their labels."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline.store.sqlite import SQLiteStore
from tests.api.harness import EMB, build
from testkit.documents import fact

CATEGORIES = ("travel", "finance", "food")
PROJECTS = ("apollo", "zeus")
OWNERS = ("u1", "u2", None)
SEARCH = "/v1/agents/A/sessions/s1/search"
CONTEXT = "/v1/agents/A/sessions/s1/context"


def _labels(i: int) -> tuple[list[str], dict]:
    """Fact ``i``'s categories and metadata: every combination turns up for every owner."""
    cats = [c for bit, c in enumerate(CATEGORIES) if (i >> bit) & 1]
    return cats, {"project": PROJECTS[i % 2], "tier": 1 + (i // 3) % 2}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    store = SQLiteStore(str(tmp_path_factory.mktemp("filters") / "memory.db"))
    store.create_indexes()
    api = build(store)
    now = api.deps.clock.now()
    store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(
        update={"metadata_keys": ["project", "tier"]}))
    store.ingest.declare_session_users("s1", "A", ["u1"])
    facts = {}
    for n, (i, owner) in enumerate(itertools.product(range(8), OWNERS)):
        text = f"venue note {n} zq{n}k of {owner or 'the team'}"
        cats, meta = _labels(i)
        f = fact(f"f{n}", text, agent="A", user=owner, embedding=EMB.embed([text]).vectors[0], model=EMB.model,
                 formed=now - timedelta(minutes=n))
        store.facts.insert_fact(f.model_copy(update={"categories": cats, "metadata": meta}))
        store.leases.bump_scope_versions("A", [f.scope_key])
        facts[f.fact_id] = (owner, cats, meta, text)
    with api.client() as client:
        yield client, {"Authorization": f"Bearer {api.token(user='u1', session='s1')}"}, facts
    store.close()


def _matches(cats, meta, where) -> bool:
    if where.get("categories") and not set(cats) & set(where["categories"]):
        return False
    return all(meta[k] in (v if isinstance(v, list) else [v]) for k, v in where.get("metadata", {}).items())


filters = st.fixed_dictionaries({}, optional={
    "categories": st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=3, unique=True),
    "metadata": st.fixed_dictionaries({}, optional={
        "project": st.one_of(st.sampled_from(PROJECTS), st.lists(st.sampled_from(PROJECTS), min_size=1, unique=True)),
        "tier": st.one_of(st.sampled_from([1, 2]), st.lists(st.sampled_from([1, 2]), min_size=1, unique=True)),
    }),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=filters)
def test_any_filter_shows_a_user_token_a_matching_part_of_its_own_view(world, where):
    client, headers, facts = world
    ask = {"query": "venue note", "top_k": 50}
    narrowed = client.post(SEARCH, json={**ask, **where}, headers=headers)
    assert narrowed.status_code == 200, narrowed.text
    found = {h["id"] for h in narrowed.json()["results"]}
    # the facts u1 reaches: theirs and the agent's (an unfiltered search shows its best few of
    # them; a filter may bring up one ranked below that cut, never one beyond u1's reach)
    reached = {i for i, (owner, *_) in facts.items() if owner in ("u1", None)}
    assert found <= reached, (where, found - reached)
    assert all(_matches(facts[i][1], facts[i][2], where) for i in found), (where, found)
    assert found or not any(_matches(facts[i][1], facts[i][2], where) for i in reached), where
    params = [("category", c) for c in where.get("categories", [])]
    params += [("metadata", json.dumps(where["metadata"]))] if where.get("metadata") else []
    context = client.get(CONTEXT, params=params, headers=headers)
    assert context.status_code == 200, context.text
    for fid, (owner, cats, meta, text) in facts.items():
        if text in context.text:
            assert owner in ("u1", None) and _matches(cats, meta, where), (fid, where)
