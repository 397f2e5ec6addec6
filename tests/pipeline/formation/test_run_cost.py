"""Cost (design §11): every model call of a run is priced per model from the settings' table; an
unknown model is "unpriced", never 0; in-process providers are "offline"; UPDATE re-embeddings
and session-end consolidations count too."""

from __future__ import annotations

from pipeline.embeddings.port import Embeddings
from pipeline.formation import consolidate_stages as cs, stages
from pipeline.llm.offline import OfflineLLM
from schemas.documents import Reflection, scope_key

from testkit.formation import ALICE_CHAT, decisions, facts, merge_all, reflections


def scripted(env):
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    env.llm.on("extract_reflections", reflections(user=["Alice prefers short answers"]))
    env.llm.on("consolidate", merge_all)


def priced(env, table):
    env.settings = env.settings.model_copy(update={"prices": table})


def llm_models(run):
    return {m for record in run.stages.values() for m, r in record.usage.by_model.items() if r["kind"] == "llm"}


def test_a_run_records_its_cost_per_model_beside_its_tokens(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT)
    stages.extract_facts(run_id, env)
    (model,) = llm_models(env.store.runs.get_run(run_id))
    # a price set now holds for the calls recorded from now on: a call is priced when recorded
    priced(env, {model: {"input": 1.0, "output": 2.0}})
    env.whole_chain(run_id)
    run = env.store.runs.get_run(run_id)
    cost, tokens = run.totals["cost"], run.totals["tokens"]
    row = cost["by_model"][model]
    assert row["input_tokens"] == tokens["input"] and row["output_tokens"] == tokens["output"]
    assert row["calls"] == run.totals["llm_calls"] == 2
    # one call was recorded unpriced: the sum is unknown, and says so
    assert row["usd"] is None and cost["unpriced"] == [model]
    assert run.stages["extract_facts"].usage.by_model[model]["price"] == "unpriced"
    merged = run.stages["extract_reflections"].usage.by_model[model]
    assert merged["price"] == "priced"
    assert merged["usd"] == round((merged["input_tokens"] + 2 * merged["output_tokens"]) / 1e6, 9)


def test_a_model_missing_from_the_table_is_unpriced_never_zero(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    cost = env.store.runs.get_run(run_id).totals["cost"]
    for model in llm_models(env.store.runs.get_run(run_id)):
        assert cost["by_model"][model]["usd"] is None and cost["by_model"][model]["price"] == "unpriced"
        assert model in cost["unpriced"]


def test_a_priced_model_costs_its_tokens_at_the_table_price(env):
    scripted(env)
    # the scripted provider stands for a network one: its calls are priced by model
    priced(env, {"offline-rules-v1": {"input": 1.0, "output": 2.0}})
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    cost = env.store.runs.get_run(run_id).totals["cost"]
    row = cost["by_model"]["offline-rules-v1"]
    assert row["price"] == "priced" and row["calls"] == 2 and cost["unpriced"] == []
    assert row["usd"] == round((row["input_tokens"] * 1.0 + row["output_tokens"] * 2.0) / 1e6, 9) > 0
    assert cost["usd"] == row["usd"]  # the hashing embedder is offline: $0


def test_the_offline_providers_cost_nothing_and_say_so(env):
    env.llm = OfflineLLM()
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    cost = env.store.runs.get_run(run_id).totals["cost"]
    assert cost["by_model"], "the offline calls are counted"
    assert {r["price"] for r in cost["by_model"].values()} == {"offline"}
    assert cost["usd"] == 0 and cost["unpriced"] == []


class _TokenEmbedder:
    """The hashing embedder reporting one token per word, as a network embedder does."""

    def __init__(self, inner):
        self.inner, self.model, self.dim, self.provider = inner, "embed-x", inner.dim, "openai"

    def __getattr__(self, name):  # what else an embedder has (its window, its token count)
        return getattr(self.inner, name)

    def embed(self, texts):
        out = self.inner.embed(texts)
        return Embeddings(vectors=out.vectors, model=self.model, dim=out.dim,
                          input_tokens=sum(len(t.split()) for t in texts))


def test_update_re_embeddings_count_in_the_embedding_tokens_and_cost(env):
    env.embedder = _TokenEmbedder(env.embedder)
    priced(env, {"embed-x": {"input": 1000.0, "output": 0.0}})
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")), times=1)
    env.llm.on("extract_reflections", reflections())
    first = env.new_run(ALICE_CHAT)
    env.whole_chain(first)
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.org now")), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "Alice's email is alice@example.org")), times=1)
    second = env.new_run([("user", "u-1", "update"), ("assistant", None, "ok")])
    env.whole_chain(second)
    run = env.store.runs.get_run(second)
    assert run.totals["facts"].get("updated") == 1
    decide = run.stages["decide_facts"].usage.by_model["embed-x"]
    embedded = run.stages["embed_facts"].usage.by_model["embed-x"]
    # the re-embedding of the UPDATE (and the candidates) are counted, not only embed_facts
    assert decide["input_tokens"] > 0
    assert run.totals["tokens"]["embedding"] == decide["input_tokens"] + embedded["input_tokens"]
    assert run.totals["cost"]["by_model"]["embed-x"]["usd"] == round(
        run.totals["tokens"]["embedding"] * 1000.0 / 1e6, 9)


def test_a_session_end_consolidation_records_its_usage_in_the_store(env):
    env.add_messages([("user", "u-1", "hello")], session_id="s-9")
    key = scope_key("session", session_id="s-9")
    env.store.reflections.insert_reflections([Reflection(
        reflection_id="r-1", agent_id="agent-1", scope="session", session_id="s-9", scope_key=key,
        content="The session was short", source_session_id="s-9", formed_at=env.clock.now())])
    env.llm.on("consolidate", merge_all)
    results = cs.consolidate_session("agent-1", "s-9", env)
    assert [r["status"] for r in results] == ["merged"]
    records = env.store.stats.list_usage("agent-1")
    assert len(records) == 1 and records[0].stage == "consolidate_session" and records[0].session_id == "s-9"
    (row,) = records[0].by_model.values()
    assert row["calls"] == 1 and row["input_tokens"] > 0 and row["price"] == "unpriced"


def test_the_calls_of_a_stage_attempt_that_failed_after_them_are_kept(env):
    import pytest

    from pipeline.formation.consolidation import OverWordLimit
    from testkit.formation import blob_answer

    env.settings.word_limit_session = 5
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(session=["The session was about a long plan"]))
    env.llm.on("consolidate", blob_answer(("NOTES", ["far too many words for the limit of this scope"])))
    run_id = env.new_run(ALICE_CHAT, reason="session_end")
    env.through_reflections(run_id)
    assert cs.consolidate(run_id, env).output["due"]
    with pytest.raises(OverWordLimit):
        cs.consolidate_scope(run_id, 0, env)
    attempts = 1 + env.settings.consolidation_max_length_retries
    [record] = env.store.stats.list_usage("agent-1")
    assert record.run_id == run_id and record.stage == "consolidate_scope:0" and record.session_id == "s-1"
    (row,) = record.by_model.values()
    assert row["calls"] == attempts and row["input_tokens"] > 0
    assert env.store.runs.get_run(run_id).stages["consolidate_scope:0"].usage.calls == 0  # no record holds them
