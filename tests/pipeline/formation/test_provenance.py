"""A new fact's provenance (source message, excerpt, date) and the retrieval text it is
embedded as; dedup still finds restatements while comparing the bare content."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from pipeline.embeddings.local import LocalEmbedder
from pipeline.formation import stages
from pipeline.formation.provenance import format_date, provenance, provenances, source_index
from pipeline.retrieval import retrieval_text
from schemas.documents import StoredMessage

from testkit.formation import decisions, facts


def _msg(n: int, role: str, content: str, sender: str | None = "u-1", minute: int | None = None) -> StoredMessage:
    at = datetime(2026, 3, 2, 9, minute if minute is not None else n, tzinfo=timezone.utc)
    return StoredMessage(
        agent_id="agent-1", session_id="s-1", message_id=f"m{n}", event_id=f"e{n}", role=role,
        sender_id=sender if role == "user" else None, sender_name="Alice" if role == "user" else None,
        agent_name="Mars Bot" if role == "assistant" else None, content=content, created_at=at,
        ingested_at=at, weighted_tokens=1.0, seq=n,
    )


CHAT = [
    _msg(1, "user", "Hi, I am Alice and I work at Nordwind."),
    _msg(2, "assistant", "Nice to meet you, Alice."),
    _msg(3, "user", "My email address is alice@nordwind.example."),
    _msg(4, "assistant", "Noted."),
    _msg(5, "user", "My daughter Lena was born on 14 March 2019."),
]


@pytest.mark.parametrize(("fact", "source"), [
    ("Alice's email address is alice@nordwind.example", "m3"),
    ("Alice's daughter Lena was born on 14 March 2019", "m5"),
    ("Alice works at Nordwind", "m1"),
    ("Something nobody said", "m5"),  # no overlap anywhere: a tie of all, the latest wins
])
def test_the_source_is_the_message_overlapping_the_fact_best(fact, source):
    assert CHAT[source_index(fact, CHAT)].message_id == source


def test_a_first_person_message_outweighs_a_reply_that_only_repeats_the_speakers_name():
    # "I live in Lisbon" is where "Alice Moreau lives in Lisbon" came from, not the later reply
    # that only repeats her name (on words alone the two tie, and a tie goes to the latest)
    chat = [
        _msg(1, "user", "I live in Lisbon."),
        _msg(2, "assistant", "Thanks Alice Moreau, saved."),
    ]
    assert source_index("Alice Moreau lives in Lisbon", chat, {"u-1": "Alice Moreau"}) == 0


def test_the_facts_rare_words_name_its_message_over_a_short_reply_sharing_its_common_ones():
    # the reply repeats "felt accepted" and the name; only the first message holds "LGBTQ
    # conference" (a plain overlap ratio took the reply: it is short)
    chat = [
        _msg(1, "user", "I went to an LGBTQ conference two days ago and it was really special. I met people "
                        "who have gone through similar journeys and I felt totally accepted there."),
        _msg(2, "user", "Wow, Alice, so glad you felt accepted and supported!", sender="u-2"),
    ]
    names = {"u-1": "Alice", "u-2": "Bob"}
    assert source_index("Alice attended an LGBTQ conference and felt accepted", chat, names) == 0


def test_a_tie_in_overlap_goes_to_the_latest_message():
    chat = [_msg(1, "user", "I like tea."), _msg(2, "assistant", "Ok."), _msg(3, "user", "I like tea.")]
    assert source_index("Alice likes tea", chat) == 2


def test_the_excerpt_is_the_two_messages_before_the_source_and_the_source_itself():
    found = provenance("Alice's email address is alice@nordwind.example", CHAT)
    assert found.message_id == "m3"
    assert found.excerpt == (
        "Alice: Hi, I am Alice and I work at Nordwind.",
        "Assistant (Mars Bot): Nice to meet you, Alice.",
        "Alice: My email address is alice@nordwind.example.",
    )
    assert found.date == "9:03 am on 2 March, 2026"
    assert found.text("Alice's email address is alice@nordwind.example") == retrieval_text(
        "Alice's email address is alice@nordwind.example", excerpt=found.excerpt, date=found.date)


def test_the_excerpt_reaches_back_before_the_claimed_range_but_the_source_stays_inside():
    outside = provenance("Alice works at Nordwind", CHAT[3:], before=CHAT[:3])
    assert outside.message_id == "m5"  # m1 overlaps best, but it is not in the claimed range
    early = provenance("Alice's daughter Lena was born on 14 March 2019", CHAT[3:], before=CHAT[:3])
    assert early.message_id == "m5"
    assert early.excerpt[0] == "Alice: My email address is alice@nordwind.example."


def test_the_facts_of_a_run_get_the_provenance_each_would_get_alone():
    facts = ["Alice works at Nordwind", "Alice's email address is alice@nordwind.example",
             "Alice's daughter Lena was born on 14 March 2019", "Alice likes tea"]
    for claimed, before in ((CHAT, []), (CHAT[3:], CHAT[:3])):
        assert provenances(facts, claimed, before) == [provenance(f, claimed, before) for f in facts]
    assert [p.message_id for p in provenances(facts[:3], CHAT)] == ["m1", "m3", "m5"]


@pytest.mark.parametrize(("at", "text"), [
    (datetime(2026, 3, 2, 0, 5, tzinfo=timezone.utc), "12:05 am on 2 March, 2026"),
    (datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc), "1:56 pm on 8 May, 2023"),
    (datetime(2026, 7, 1, 12, 0), "12:00 pm on 1 July, 2026"),
])
def test_dates_take_the_form_of_the_locomo_session_dates(at, text):
    assert format_date(at) == text


def test_a_new_fact_is_embedded_with_its_provenance_and_keeps_its_content(env):
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")), times=1)
    run_id = env.new_run([
        ("user", "u-1", "Hello there."), ("assistant", None, "Hi, how can I help?"),
        ("user", "u-1", "My email is alice@example.com."), ("assistant", None, "Noted."),
    ])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    [fact] = env.live_facts()
    source = env.store.ingest.get_messages(fact.source_session_id, 1, 10)[2]
    assert fact.content == "Alice's email is alice@example.com"
    assert fact.source_message_ids == [source.message_id]
    expected = retrieval_text(
        fact.content, date=format_date(source.created_at),
        excerpt=["U-1: Hello there.", "Assistant: Hi, how can I help?", "U-1: My email is alice@example.com."],
        embedder=env.embedder,  # within the embedder's token budget
    )
    assert np.allclose(fact.embedding, env.embedder.embed([expected]).vectors[0], atol=1e-6)


def test_an_update_is_embedded_with_the_provenance_of_the_fact_that_caused_it(env):
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")), times=1)
    first = env.new_run([("user", "u-1", "My email is alice@example.com."), ("assistant", None, "Noted.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(first, env)
    merged = "Alice's email is alice@example.org"
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.org now")), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, merged)), times=1)
    second = env.new_run([("user", "u-1", "My email is alice@example.org now."), ("assistant", None, "Updated.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(second, env)
    [fact] = env.live_facts()
    source = env.store.ingest.get_messages(f"s-{2}", 1, 10)[0]
    assert fact.content == merged and fact.version == 2
    expected = retrieval_text(merged, excerpt=["U-1: My email is alice@example.org now."],
                              date=format_date(source.created_at), embedder=env.embedder)
    assert np.allclose(fact.embedding, env.embedder.embed([expected]).vectors[0], atol=1e-6)


# (fact, its excerpt, its date) pairs said in different sessions: the dedup query is the new
# fact's content, the stored side is the old fact's retrieval text.
_OLD_EMAIL = ("Alice's email address is alice.moreau@nordwind.example",
              ["Assistant: Nice to meet you, Alice. How can I help today?",
               "Alice: My email address is alice.moreau@nordwind.example."], "9:02 am on 2 March, 2026")
RESTATED = [
    (_OLD_EMAIL, ("Alice's email address is now alice.moreau@moreau.example",
                  ["Alice: My email address is now alice.moreau@moreau.example."], "9:00 am on 3 March, 2026")),
    (("Alice's daughter Lena was born on 14 March 2019",
      ["Alice: My email address is alice.moreau@nordwind.example.", "Assistant: Noted.",
       "Alice: My daughter Lena was born on 14 March 2019."], "9:04 am on 2 March, 2026"),
     ("Lena, Alice's daughter, was born on 14 March 2019",
      ["Alice: My email address is now alice.moreau@moreau.example.", "Assistant: Updated.",
       "Alice: My daughter Lena was born on 14 March 2019."], "9:02 am on 3 March, 2026")),
    (("Carol prefers tea over coffee",
      ["Assistant: Anything to drink?", "Carol: Tea please.", "Carol: I always prefer tea over coffee."],
      "8:00 am on 1 April, 2026"),
     ("Carol likes tea more than coffee",
      ["Carol: Morning!", "Assistant: Good morning Carol, coffee?", "Carol: No thanks, I like tea more than coffee."],
      "9:30 am on 9 April, 2026")),
]
# unrelated facts of one conversation: their excerpts and dates overlap, their contents do not
UNRELATED = [
    (("The team uses Postgres 16 for billing",
      ["Alice: About the database.", "Assistant: Which one?", "Alice: The team uses Postgres 16 for billing."],
      "9:00 am on 2 March, 2026"),
     ("Alice's cat is called Miso", ["Alice: Off topic.", "Assistant: Sure.", "Alice: My cat is called Miso."],
      "9:10 am on 2 March, 2026")),
    (("Dan works at Acme as a nurse", ["Assistant: What do you do?", "Dan: Healthcare.", "Dan: I work at Acme as a nurse."],
      "1:00 pm on 2 May, 2026"),
     ("Dan's favourite band is Muse", ["Assistant: Music?", "Dan: Rock mostly.", "Dan: My favourite band is Muse."],
      "1:05 pm on 2 May, 2026")),
]
DEDUP_MIN_SCORE = 0.7


def _scores(embedder, pairs, *, query_with_provenance: bool) -> list[float]:
    old = [retrieval_text(f, excerpt=e, date=d) for (f, e, d), _ in pairs]
    new = [retrieval_text(f, excerpt=e, date=d) if query_with_provenance else f for _, (f, e, d) in pairs]
    a, b = np.asarray(embedder.embed(old).vectors), np.asarray(embedder.embed(new).vectors)
    cos = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return [float((1 + c) / 2) for c in cos]


@pytest.fixture(scope="module")
def local_model():
    return LocalEmbedder()


def test_dedup_by_content_finds_restatements_said_in_other_sessions_and_skips_unrelated_facts(local_model):
    assert min(_scores(local_model, RESTATED, query_with_provenance=False)) >= DEDUP_MIN_SCORE
    assert max(_scores(local_model, UNRELATED, query_with_provenance=False)) < DEDUP_MIN_SCORE


def test_provenance_on_both_sides_would_make_unrelated_facts_of_one_conversation_candidates(local_model):
    # why the dedup query is the bare content: shared excerpt lines and dates lift unrelated pairs
    assert max(_scores(local_model, UNRELATED, query_with_provenance=True)) >= DEDUP_MIN_SCORE
