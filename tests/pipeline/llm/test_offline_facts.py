"""Offline extract_facts: specific, enduring statements become facts; the rest does not."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pipeline.conversation import render_conversation
from pipeline.llm.offline import OfflineLLM
from pipeline.owner.categories import DEFAULT_CATEGORIES
from pipeline.prompts.facts import FactsAnswer, build_facts_request
from schemas.documents import StoredMessage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def chat(*lines: tuple[str, str], users: dict[str, str] | None = None) -> list[StoredMessage]:
    """Messages from (sender, text); sender "bot" is the assistant, others are user ids."""
    users = users if users is not None else {"u1": "Alice"}
    return [
        StoredMessage(
            agent_id="a1", session_id="s1", message_id=f"m{i}", event_id=f"e{i}", seq=i,
            role="assistant" if sender == "bot" else "user",
            sender_id=None if sender == "bot" else sender,
            sender_name=None if sender == "bot" else users.get(sender),
            content=text, created_at=T0 + timedelta(minutes=i), ingested_at=T0,
            session_users=list(users), agent_name="Mars Bot" if sender == "bot" else None,
        )
        for i, (sender, text) in enumerate(lines)
    ]


def extract(messages, *, user_scope=True, agent_scope=True, user_names=None) -> list[tuple[str, str]]:
    request = build_facts_request(
        render_conversation(messages), messages, user_scope=user_scope, agent_scope=agent_scope,
        agent_name="Mars Bot", user_names=user_names or {}, model="fast",
    )
    response = OfflineLLM().complete(request)
    assert isinstance(response.parsed, FactsAnswer)
    return [(f.text, f.scope) for f in response.parsed.facts]


@pytest.mark.parametrize(
    ("line", "facts"),
    [
        ("My email is alice@example.com.", [("Alice's email is alice@example.com", "user")]),
        ("I'm Alice.", [("The user's name is Alice", "user")]),
        ("I live in Denver and my phone number is 555-0142.",
         [("Alice lives in Denver", "user"), ("Alice's phone number is 555-0142", "user")]),
        ("I work at NASA as a flight engineer since 2019.",
         [("Alice works at NASA as a flight engineer since 2019", "user")]),
        ("My daughter Emma was born on March 3, 2015.", [("Alice's daughter Emma was born on March 3, 2015", "user")]),
        ("The Mars Festival budget is $50,000.", [("The Mars Festival budget is $50,000", "agent")]),
        ("The festival takes place in Tucson on June 14.", [("The festival takes place in Tucson on June 14", "agent")]),
        # one-to-one: "we/our" is the speaker's affair (a group's "we" is shared: see below)
        ("Our website is https://marsfest.example.org.", [("Alice's website is https://marsfest.example.org", "user")]),
        ("Quick update about me: I moved from Lisbon to Porto in 2025.",
         [("Alice moved from Lisbon to Porto in 2025", "user")]),
        ("My work email is a@lumen.example if you need to send me anything.",
         [("Alice's work email is a@lumen.example", "user")]),
        ("I live in Lisbon, so I can visit venues in person this week.", [("Alice lives in Lisbon", "user")]),
        ("i’m Alice and i live in Porto.", [("The user's name is Alice", "user"), ("Alice lives in Porto", "user")]),
        ("Actually, my email is now alice@new.example.com.", [("Alice's email is now alice@new.example.com", "user")]),
        ("Just to confirm, my email is alice@example.com.", [("Alice's email is alice@example.com", "user")]),
        ("By the way, our total budget is 12,000 euros.", [("Alice's total budget is 12,000 euros", "user")]),
        ("We have two venue options in Lisbon.", [("Alice and others have two venue options in Lisbon", "user")]),
        ("Our studio opens at 9 on weekdays.", [("Alice's studio opens at 9 on weekdays", "user")]),
        # an introduction with a clause of its own is two statements
        ("Hi, I'm Alice, I manage the Riverside studio.",
         [("The user's name is Alice", "user"), ("Alice manages the Riverside studio", "user")]),
        ("I'm Alice, my studio is in Porto.", [("The user's name is Alice", "user"), ("Alice's studio is in Porto", "user")]),
        ("I'm Alice, the product manager at Lumen Labs.", [("Alice is the product manager at Lumen Labs", "user")]),
        ("The US office opens in May.", [("The US office opens in May", "agent")]),
        # not facts: fragments, imperatives, preferences and rules (reflections), requests, questions, chatter, opinions, ephemeral state
        ("Lumen Beam, our new smart desk lamp.", []),
        ("Send the draft to maya.chen@lumenlabs.example.", []),
        ("I prefer short answers in Spanish.", []),
        ("Please always call me Ali from now on.", []),
        ("I like Italian food.", []),
        ("Can you send the agenda to Bob?", []),
        ("Let's meet with Carla at 3pm.", []),
        ("What is the budget for 2026?", []),
        ("Hello! Thanks so much!", []),
        ("I think the venue in Tucson is too small.", []),
        ("I'm in Paris today for 2 days.", []),
        ("Sounds good to me.", []),
        ("the weather is nice and sunny", []),
    ],
)
def test_sentences_with_specific_entities_become_facts_and_the_rest_does_not(line, facts):
    assert extract(chat(("u1", line))) == facts


@pytest.mark.parametrize(
    ("line", "facts"),
    [
        # what the speaker did is a fact about them, with or without a name or a number
        ("I volunteered at the homeless shelter.", [("Alice volunteered at the homeless shelter", "user")]),
        ("I lost my job at the engineering company.", [("Alice lost their job at the engineering company", "user")]),
        ("Last week, I built a new website for my customers.",
         [("Last week, Alice built a new website for their customers", "user")]),
        ("Work was wild - I started a weekend yoga class with a colleague.",
         [("Work was wild - Alice started a weekend yoga class with a colleague", "user")]),
        ("We adopted a puppy.", [("Alice and others adopted a puppy", "user")]),  # one-to-one: "we" is hers
        # not events: feelings and thoughts, "had"/"got", a thing only pointed at, a clause
        # that does not start with the speaker, questions, and a state of the moment
        ("I felt so accepted at the group.", []),
        ("I realized the group helps a lot.", []),
        ("I had a similar experience.", []),
        ("I got a surge of energy.", []),
        ("I took it at the beach last month.", []),
        ("This is the cake I made for you.", []),
        ("Did I mention the shelter?", []),
        ("I volunteered at the shelter yesterday.", []),
    ],
)
def test_what_the_speaker_did_is_a_fact_about_them(line, facts):
    assert extract(chat(("u1", line))) == facts


def test_in_a_group_chat_what_someone_did_is_theirs_and_not_formed():
    messages = chat(
        ("u1", "I volunteered at the homeless shelter."),
        ("u2", "We adopted a puppy."),
        users={"u1": "Alice", "u2": "Bob"},
    )
    # "I" is user scope (none in a group chat); a group's "we" is no event of one speaker
    assert extract(messages) == []


def test_assistant_messages_are_not_read_as_facts():
    assert extract(chat(("bot", "The Mars Festival budget is $80,000."))) == []


def test_a_name_the_user_introduces_is_used_when_the_event_carries_none():
    messages = chat(("u1", "My name is Priya Raman. My email is priya@example.com."), users={"u1": ""})
    assert extract(messages) == [
        ("The user's name is Priya Raman", "user"), ("Priya Raman's email is priya@example.com", "user"),
    ]


def test_the_name_map_names_a_user_when_the_event_does_not():
    messages = chat(("u1", "My email is bo@example.com."), users={"u1": ""})
    assert extract(messages, user_names={"u1": "Bo"}) == [("Bo's email is bo@example.com", "user")]


def test_without_any_name_the_fact_is_about_the_user():
    messages = chat(("u1", "My email is x@example.com."), users={"u1": ""})
    assert extract(messages) == [("The user's email is x@example.com", "user")]


PLANTED = (
    ("u1", "Hi there! I'm Alice."),
    ("bot", "Hello Alice, welcome to the Mars Festival planning chat."),
    ("u1", "My email is alice@example.com. I prefer short answers."),
    ("u1", "The Mars Festival budget is $50,000."),
    ("u1", "Can you draft the sponsor letter?"),
)


@pytest.mark.parametrize(
    ("user_scope", "agent_scope", "scopes"),
    [(True, True, {"user", "agent"}), (False, True, {"agent"}), (True, False, {"user"})],
)
def test_only_enabled_scopes_are_extracted_and_nothing_is_rescoped(user_scope, agent_scope, scopes):
    facts = extract(chat(*PLANTED), user_scope=user_scope, agent_scope=agent_scope)
    expected = {
        ("The user's name is Alice", "user"), ("Alice's email is alice@example.com", "user"),
        ("The Mars Festival budget is $50,000", "agent"),
    }
    assert set(facts) == {f for f in expected if f[1] in scopes}


def test_a_group_chat_yields_no_user_facts():
    messages = chat(
        ("u1", "My email is alice@example.com."),
        ("u2", "I live in Boston."),
        ("u2", "The venue deposit of $5,000 is due on May 2."),
        users={"u1": "Alice", "u2": "Bob"},
    )
    assert extract(messages) == [("The venue deposit of $5,000 is due on May 2", "agent")]


def test_in_a_group_chat_we_and_our_are_the_groups_shared_affairs():
    messages = chat(
        ("u1", "Our website is https://marsfest.example.org."),
        ("u2", "We have two venue options in Tucson."),
        users={"u1": "Alice", "u2": "Bob"},
    )
    assert extract(messages) == [
        ("Our website is https://marsfest.example.org", "agent"), ("We have two venue options in Tucson", "agent"),
    ]


def test_a_name_said_to_its_owner_is_no_entity_but_another_name_still_is():
    messages = chat(
        ("u1", "Wow, Bob, that painting is amazing!"),
        ("u2", "That's so sweet, Ali."),
        ("u2", "Thanks Alice! The gallery on Main Street has it now, Alice."),
        ("u1", "That is really great Bob"),
        ("u1", "Bob, the venue deposit is due on May 2."),
        users={"u1": "Alice", "u2": "Bob"},
    )
    assert extract(messages) == [
        ("The gallery on Main Street has it now, Alice", "agent"),
        ("Bob, the venue deposit is due on May 2", "agent"),
    ]


def test_in_a_one_to_one_chat_we_sentences_are_dropped_when_user_memory_is_off():
    assert extract(chat(("u1", "Our studio opens at 9 on weekdays.")), user_scope=False) == []


def test_a_fact_over_the_word_limit_is_dropped_not_cut():
    long_line = ("The Mars Festival main stage will host the Tucson Youth Orchestra, the Phoenix Jazz Collective "
                 "and twelve further regional bands across three long evenings in the desert park north of town.")
    assert extract(chat(("u1", long_line))) == []


def test_a_fact_said_twice_is_returned_once():
    assert extract(chat(("u1", "My email is a@example.com."), ("u1", "my email is a@example.com"))) == [
        ("Alice's email is a@example.com", "user"),
    ]


@pytest.mark.parametrize(
    ("line", "expires"),
    [
        # said on 2026-03-01: "by" and "until" include the day, "before" does not
        ("The caterer needs the guest count by March 10.", "2026-03-11T00:00:00+00:00"),
        ("The venue is booked until 2 June.", "2026-06-03T00:00:00+00:00"),
        ("The Riverside hall closes before 2026-07-01.", "2026-07-01T00:00:00+00:00"),
        ("The deposit of $500 is due by the 5th of January.", "2027-01-06T00:00:00+00:00"),  # next January
        ("The permit for Tucson is valid until Feb 28, 2028.", "2028-02-29T00:00:00+00:00"),
        ("The festival takes place in Tucson on June 14.", None),
        ("The Tucson permit runs until February 30.", None),  # no such day: no deadline
    ],
)
def test_a_deadline_in_a_kept_sentence_becomes_its_expiry(line, expires):
    messages = chat(("u1", line))
    request = build_facts_request(render_conversation(messages), messages, user_scope=True, agent_scope=True,
                                  agent_name="Mars Bot", user_names={}, model="fast")
    [fact] = OfflineLLM().complete(request).parsed.facts
    assert fact.expires_at == expires


def _filed(line: str, categories) -> list[tuple[str, list[str]]]:
    messages = chat(("u1", line))
    request = build_facts_request(
        render_conversation(messages), messages, user_scope=True, agent_scope=True,
        agent_name="Mars Bot", user_names={}, model="fast", categories=categories,
    )
    return [(f.text, f.categories) for f in OfflineLLM().complete(request).parsed.facts]


@pytest.mark.parametrize(("line", "categories", "filed"), [
    ("The Mars Festival budget is $50,000.", DEFAULT_CATEGORIES, ["projects", "finance"]),
    ("My daughter Emma was born on March 3, 2015.", DEFAULT_CATEGORIES, ["personal_details", "family"]),
    # an owner's own category is matched on its name's words, lightly stemmed
    ("The caterer for the Mars Festival is Dune Kitchen.", ("catering", "venues"), ["catering"]),
    ("The Mars Festival venue is the Tucson Arena.", ("catering", "venues"), ["venues"]),
    ("The Mars Festival takes place in Tucson on June 14.", ("catering", "venues"), []),
])
def test_offline_rules_file_a_fact_under_the_listed_categories_its_words_say(line, categories, filed):
    assert [c for _, c in _filed(line, categories)] == [filed]
