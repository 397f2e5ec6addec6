"""Direct writes (design §13): verbatim, screened, embedded, deduplicated per scope, stamped
with their source; an owner's write to shared memory rests on nobody, and an erasure's check
does not count it as memory of unknown origin."""

from __future__ import annotations

import pytest

from pipeline.errors import Duplicate, InvalidInput, Refused
from pipeline.forgetting import verify_erasure
from testkit.formation import make_env
from usecases import metadata_keys
from usecases.writes import FactWrite, ReflectionWrite, add_fact, add_reflection


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path)
    yield e
    e.store.close()


def test_an_owner_write_is_stored_verbatim_and_is_not_memory_of_unknown_origin(env):
    fact = add_fact(env, FactWrite("agent-1", "The venue has a roof terrace", "owner"))
    reflection = add_reflection(env, ReflectionWrite("agent-1", "The team likes recaps", "owner"))
    assert (fact.source, fact.source_user_ids, fact.scope_key) == ("owner", [], "agent")
    assert env.store.facts.get_facts([fact.fact_id])[0].embedding == env.embedder.embed([fact.content]).vectors[0]
    assert reflection.source == "owner"
    check = verify_erasure(env.store, "u-1", "agent-1")
    assert check.unattributed == [] and check.passed(strict=True)


def test_a_duplicate_names_the_holder_and_a_secret_names_its_kind(env):
    first = add_fact(env, FactWrite("agent-1", "Maya lives in Porto", "user", user_id="u-1"))
    with pytest.raises(Duplicate) as dup:
        add_fact(env, FactWrite("agent-1", "maya  lives in PORTO", "owner", user_id="u-1"))
    assert dup.value.existing_id == first.fact_id
    # another scope may hold the same text
    assert add_fact(env, FactWrite("agent-1", "Maya lives in Porto", "owner", user_id="u-2")).scope_key == "user:u-2"
    with pytest.raises(Refused, match="password"):
        add_fact(env, FactWrite("agent-1", "Maya's password is Tr0ub4dor&3xq", "owner", user_id="u-1"))


def test_a_direct_write_keeps_metadata_of_the_agents_filterable_keys_and_names_any_other(env):
    metadata_keys.set_keys(env.store.ingest, "agent-1", ["project", "tier"], now=env.clock.now())
    fact = add_fact(env, FactWrite("agent-1", "The venue has a roof terrace", "owner",
                                   metadata={"project": "apollo", "tier": 2}))
    assert env.store.facts.get_facts([fact.fact_id])[0].metadata == {"project": "apollo", "tier": 2}
    with pytest.raises(InvalidInput) as other:
        add_fact(env, FactWrite("agent-1", "The venue has a lift", "owner", metadata={"channel": "web"}))
    assert other.value.field == "metadata.channel"
    assert other.value.reason == "is not one of the agent's filterable keys: project, tier"
    with pytest.raises(InvalidInput) as bad:
        add_fact(env, FactWrite("agent-1", "The venue has a lift", "owner", metadata={"tier": [1, 2]}))
    assert (bad.value.field, bad.value.reason) == ("metadata.tier", "is a list; a value is a string, a whole number "
                                                                    "or a boolean")
    assert len(env.live_facts()) == 1
