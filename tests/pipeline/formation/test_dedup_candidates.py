"""Dedup candidates compare content with content: a shortlist through the search port (the
semantic branch with the new fact's content vector, the text branch on its content), scored
after one batched embedding of the shortlisted contents, stored on the run before effects.

The stage tests run twice: on SQLite with the local search, and on the Mongo store searched
through the Atlas adapter over the strict emulation with index lag on (a write becomes
searchable only a minute later), as Atlas's eventually consistent indexes behave."""

from __future__ import annotations

import pytest

from pipeline.embeddings.local import LocalEmbedder
from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.formation import candidates, dedup, stages
from pipeline.formation.facts import NewFact
from pipeline.search.port import FactSearch, Hit

from testkit.formation import decisions, facts, make_atlas_env, make_env

#: longer than any test's runs are apart (the env's clock moves 1 s per message)
INDEX_LAG_S = 60.0

LISBON = "Maya Chen lives in Lisbon"
PORTO = "Maya Chen moved from Lisbon to Porto last weekend"
FIRST_SESSION = [
    ("user", "u-1", "Hi, I'm Maya Chen, product manager at Lumen Labs."),
    ("assistant", None, "Nice to meet you, Maya. What are you planning?"),
    ("user", "u-1", "Lumen Beam, our new smart desk lamp. The launch event is on March 14."),
    ("assistant", None, "Got it. Do you have a guest count in mind?"),
    ("user", "u-1", "I live in Lisbon, so I can visit venues in person this week."),
    ("assistant", None, "Great. I can shortlist venues close to the city centre."),
    ("user", "u-1", "My work email is maya.chen@lumenlabs.example if you need to send me anything."),
    ("assistant", None, "Thanks, I'll use maya.chen@lumenlabs.example for summaries."),
]
LATER_SESSION = [
    ("user", "u-1", "Morning. Quick update about me: I moved from Lisbon to Porto last weekend."),
    ("assistant", None, "Thanks for telling me. Will you still attend the launch?"),
]


class CountingEmbedder(Embedder):
    """The wrapped embedder, with every call's texts recorded."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls = inner, []
        self.model, self.dim = inner.model, inner.dim

    def embed(self, texts) -> Embeddings:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def local_model():
    return LocalEmbedder()


@pytest.fixture(params=["local", "atlas-lagged"])
def env(request, tmp_path):
    e = make_env(tmp_path) if request.param == "local" else make_atlas_env(tmp_path, index_lag_s=INDEX_LAG_S)
    yield e
    e.store.close()


def _use_embedder(env, embedder) -> None:
    env.embedder = embedder
    if env.settings.atlas_search:  # the vector index follows the embedder's dimension
        from pipeline.search.atlas_indexes import ensure_search_indexes

        ensure_search_indexes(env.store.col("facts"), embedder.dim, wait_s=0, progress=lambda line: None)


def _form(env, rows, fact_text, answer=None) -> str:
    env.llm.on("extract_facts", facts(("user", fact_text)), times=1)
    if answer is not None:
        env.llm.on("decide_facts", answer, times=1)
    run_id = env.new_run(rows)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None
    return run_id


def test_a_correction_said_in_another_session_is_a_candidate_and_becomes_an_update(env, local_model):
    _use_embedder(env, local_model)
    _form(env, FIRST_SESSION, LISBON)
    [old] = env.live_facts()
    run_id = _form(env, LATER_SESSION, PORTO, decisions((0, "UPDATE", 0, PORTO)))
    # the stored vector carries an excerpt of the first session and its date (at most twice
    # the fact's tokens); candidates are scored content to content, whatever that excerpt was
    [call] = [c for c in env.llm.calls if c.operation == "decide_facts"]
    assert call.inputs["items"][0]["candidates"] == [{"alias": 0, "text": LISBON}]
    [[fid, score]] = env.store.runs.get_run(run_id).stages["decide_facts"].output["candidates"]["0"]
    assert fid == old.fact_id and score >= 0.7
    [fact] = env.all_facts()
    assert fact.fact_id == old.fact_id and fact.content == PORTO and fact.version == 2
    assert [h.content for h in fact.history] == [LISBON]


def test_shortlisted_contents_are_embedded_in_one_call_and_a_rerun_makes_no_new_call(env):
    _use_embedder(env, CountingEmbedder(env.embedder))
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com"),
                                      ("user", "Alice's phone is 555 0100")), times=1)
    env.llm.on("decide_facts", decisions((0, "ADD")), times=1)  # the phone is compared with the email
    first = env.new_run([("user", "u-1", "My email is alice@example.com, my phone 555 0100.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(first, env)
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.org now"),
                                      ("user", "Alice's phone is 555 0199 now")), times=1)
    env.llm.on("decide_facts", decisions((0, "ADD"), (1, "ADD")), times=1)
    second = env.new_run([("user", "u-1", "Email is alice@example.org now, phone 555 0199.")])
    stages.extract_facts(second, env)
    stages.embed_facts(second, env)
    before = len(env.embedder.calls)
    stages.decide_facts(second, env)
    assert len(env.embedder.calls) == before + 1  # every shortlisted content of the stage at once
    assert sorted(env.embedder.calls[-1]) == sorted(f.content for f in env.live_facts()
                                                    if f.source_run_id == first)
    output = env.store.runs.get_run(second).stages["decide_facts"].output
    calls, llm_calls = len(env.embedder.calls), env.llm.call_count
    rerun = stages.decide_facts(second, env)
    assert rerun.reused and rerun.output["candidates"] == output["candidates"]
    assert len(env.embedder.calls) == calls and env.llm.call_count == llm_calls
    assert len(env.live_facts()) == 4


def test_a_fact_whose_shortlist_scores_below_the_threshold_is_added_without_the_llm(env):
    _form(env, [("user", "u-1", "My email is alice@example.com.")], "Alice's email is alice@example.com")
    run_id = _form(env, [("user", "u-1", "The venue seats 300 people.")], "The venue seats 300 people")
    output = env.store.runs.get_run(run_id).stages["decide_facts"].output
    assert output["candidates"] == {} and output["llm_items"] == 0
    assert env.llm.count("decide_facts") == 0
    assert len(env.live_facts()) == 2


EMAIL = "Alice's email is alice@example.com"
EMAIL_AGAIN = "Alice's email address is alice@example.com"


def test_a_near_duplicate_formed_seconds_later_is_a_candidate_even_before_the_index_shows_it(env):
    first = _form(env, [("user", "u-1", "My email is alice@example.com.")], EMAIL)
    second = _form(env, [("user", "u-1", "Again, my email address is alice@example.com.")], EMAIL_AGAIN,
                   decisions((0, "NONE")))
    [call] = [c for c in env.llm.calls if c.operation == "decide_facts"]
    assert call.inputs["items"][0]["candidates"] == [{"alias": 0, "text": EMAIL}]
    assert [f.content for f in env.live_facts()] == [EMAIL]
    assert env.store.runs.get_run(second).stages["decide_facts"].output["counts"]["none"] == 1
    assert env.store.runs.get_run(first).stages["decide_facts"].output["counts"]["added"] == 1


def test_without_the_recent_facts_a_lagging_index_lets_the_near_duplicate_through(tmp_path):
    env = make_atlas_env(tmp_path, index_lag_s=INDEX_LAG_S)
    env.settings = env.settings.model_copy(update={"dedup_recent_window_s": 0})
    _form(env, [("user", "u-1", "My email is alice@example.com.")], EMAIL)
    _form(env, [("user", "u-1", "Again, my email address is alice@example.com.")], EMAIL_AGAIN)
    assert env.llm.count("decide_facts") == 0
    assert sorted(f.content for f in env.live_facts()) == sorted([EMAIL, EMAIL_AGAIN])
    env.clock.advance(seconds=INDEX_LAG_S)  # once the index caught up, search finds it again
    _form(env, [("user", "u-1", "Once more: alice@example.com is my email.")], "Alice's email is still alice@example.com",
          decisions((0, "NONE")))
    [call] = [c for c in env.llm.calls if c.operation == "decide_facts"]
    assert {c["text"] for c in call.inputs["items"][0]["candidates"]} == {EMAIL, EMAIL_AGAIN}


def test_the_recent_facts_are_merged_after_the_search_hits_without_duplicates():
    merged = candidates.with_recent({0: ["f1", "f2"], 1: []}, [_fact(0), _fact(1, key="agent")],
                               {"user:u-1": ["f3", "f1"], "agent": ["f9"]})
    assert merged == {0: ["f1", "f2", "f3"], 1: ["f9"]}


class RecordingSearch(FactSearch):
    """Fixed hits per branch, every call's arguments recorded."""

    def __init__(self, semantic_ids, text_ids) -> None:
        self.semantic_ids, self.text_ids, self.calls = semantic_ids, text_ids, []

    def semantic(self, agent_id, scope_keys, embedding_model, vector, limit, min_score, *, having=()):
        self.calls.append(("semantic", agent_id, list(scope_keys), embedding_model, limit, min_score))
        return [Hit(f, 0.5) for f in self.semantic_ids][:limit]

    def text(self, agent_id, scope_keys, query, limit, min_score, *, having=()):
        self.calls.append(("text", agent_id, list(scope_keys), query, limit, min_score))
        return [Hit(f, 2.0) for f in self.text_ids][:limit]


def _fact(index=0, text="Alice's email is a@x.example", key="user:u-1") -> NewFact:
    return NewFact(index=index, scope="user", scope_key=key, text=text, hash=f"h{index}")


def test_the_shortlist_is_the_union_of_both_branches_under_the_same_prefilter_without_threshold():
    search = RecordingSearch(["f1", "f2"], ["f2", "f3"])
    found = candidates.shortlist(search, "agent-1", [_fact()], {0: [1.0, 0.0]}, "model-a", limit=20)
    assert found == {0: ["f1", "f2", "f3"]}
    assert search.calls == [
        ("semantic", "agent-1", ["user:u-1"], "model-a", 20, None),
        ("text", "agent-1", ["user:u-1"], "Alice's email is a@x.example", 20, None),
    ]


@pytest.mark.parametrize(("candidate_vectors", "min_score", "limit", "expected"), [
    # cos 1 -> 1.0, cos 0.6 -> 0.8, cos 0 -> 0.5; best first, threshold, limit
    ({"a": [0.6, 0.8], "b": [1.0, 0.0], "c": [0.0, 1.0]}, 0.7, 5, [("b", 1.0), ("a", 0.8)]),
    ({"a": [0.6, 0.8], "b": [1.0, 0.0], "c": [0.0, 1.0]}, 0.7, 1, [("b", 1.0)]),
    ({"a": [0.6, 0.8], "b": [1.0, 0.0], "c": [0.0, 1.0]}, 0.4, 5, [("b", 1.0), ("a", 0.8), ("c", 0.5)]),
    ({"b": [2.0, 0.0]}, 0.7, 5, [("b", 1.0)]),                     # norms do not matter
    ({"a": [0.6, 0.8]}, 0.7, 5, [("a", 0.8)]),                     # no content vector: no candidate
    ({"a": [0.6, 0.8, 0.0], "b": [0.0, 0.0]}, 0.0, 5, []),         # other dimension, zero vector
])
def test_candidates_are_scored_content_to_content(candidate_vectors, min_score, limit, expected):
    scored = candidates.score_candidates([_fact()], {0: ["a", "b", "c"]}, {0: [1.0, 0.0]}, candidate_vectors,
                                    min_score=min_score, limit=limit)
    assert [(f, round(s, 6)) for f, s in scored[0]] == expected


def test_stored_scores_become_candidates_only_while_the_fact_is_live():
    found = candidates.candidates_from({"0": [["a", 0.9], ["b", 0.8]], "1": [["b", 0.75]]}, {"a": "A"})
    assert found == {0: [candidates.Candidate("a", "A", 0.9)], 1: []}
