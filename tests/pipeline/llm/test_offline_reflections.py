"""Offline extract_reflections: agent, user and session levels by rule, none repeating what is known."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pipeline.conversation import render_conversation
from pipeline.llm.offline import OfflineLLM
from pipeline.prompts.reflections import ReflectionsAnswer, build_reflections_request
from pipeline.text import word_count
from schemas.documents import StoredMessage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
ALL = ["agent", "user", "session"]


def chat(*lines: tuple[str, str], users: dict[str, str] | None = None) -> list[StoredMessage]:
    users = users if users is not None else {"u1": "Alice"}
    return [
        StoredMessage(
            agent_id="a1", session_id="s1", message_id=f"m{i}", event_id=f"e{i}", seq=i,
            role="assistant" if sender == "bot" else "user", sender_id=None if sender == "bot" else sender,
            sender_name=None if sender == "bot" else users.get(sender), content=text,
            created_at=T0 + timedelta(minutes=i), ingested_at=T0, session_users=list(users),
        )
        for i, (sender, text) in enumerate(lines)
    ]


def reflect(messages, scopes=ALL, *, blobs=None, unabsorbed=None, new_facts=(), agent_name=None) -> ReflectionsAnswer:
    request = build_reflections_request(
        messages, scopes=scopes, blobs=blobs or {}, unabsorbed=unabsorbed or {},
        new_facts=list(new_facts), model="tier", agent_name=agent_name,
    )
    parsed = OfflineLLM().complete(request).parsed
    assert isinstance(parsed, ReflectionsAnswer)
    return parsed


@pytest.mark.parametrize(
    ("line", "level", "text"),
    [
        ("I prefer short answers.", "user", "Alice prefers short answers"),
        ("Please always answer in Spanish.", "user", "Always answer in Spanish"),   # the rule, no frame
        ("I never want emojis in replies.", "user", "Alice never wants emojis in replies"),
        ("I like detailed budgets with sources.", "user", "Alice likes detailed budgets with sources"),
        ("Can you draft the sponsor letter?", "session", "Alice requested: Can you draft the sponsor letter?"),
        ("Let's focus on the catering plan first.", "session", "Alice requested: Let's focus on the catering plan first"),
        ("Today we need a checklist for the venue visit.", "session",
         "Alice requested: Today we need a checklist for the venue visit"),
        ("I need the venue shortlist by the end of this chat.", "session",
         "Alice needs the venue shortlist by the end of this chat"),
        ("Send the press kit to the partners.", "session", "Alice requested: Send the press kit to the partners"),
        ("I'm allergic to peanuts, please tell the caterer.", "session",
         "Alice is allergic to peanuts, please tell the caterer"),
        # one-to-one: a project statement in the first person, "we/our" included, is the speaker's
        ("We decided to move the launch online.", "user", "Alice and others decided to move the launch online"),
        ("I'll be using you to plan our product launch.", "user",   # an agent with no name
         "Alice will be using the assistant to plan their product launch"),
        ("The team agreed that volunteers get free passes.", "agent",
         "The team agreed that volunteers get free passes"),
    ],
)
def test_each_kind_of_statement_goes_to_its_level(line, level, text):
    answer = reflect(chat(("u1", line)))
    assert answer.texts(level) == [text]
    assert sum(len(getattr(answer, other)) for other in ALL if other != level) == 0


@pytest.mark.parametrize(("line", "text"), [
    # no leading connective: each reflection is read alone
    ("And I like jazz.", "Alice likes jazz"),
    ("But I prefer tea to coffee.", "Alice prefers tea to coffee"),
    ("So I never want meetings before ten.", "Alice never wants meetings before ten"),
    # no reporting frame ("Alice asks: ...")
    ("Maya prefers oat milk in her coffee.", "Maya prefers oat milk in her coffee"),
    ("Always answer in Spanish, please.", "Always answer in Spanish"),
    # "you" is the agent, named
    ("I'll be using you to plan our product launch.", "Alice will be using Juniper to plan their product launch"),
    ("I like your short answers.", "Alice likes Juniper's short answers"),
    ("I prefer that you answer in Spanish.", "Alice prefers that Juniper answer in Spanish"),
])
def test_a_user_reflection_reads_as_memory_not_as_a_reported_remark(line, text):
    assert reflect(chat(("u1", line)), agent_name="Juniper").texts("user") == [text]


def test_the_agent_is_named_from_its_own_messages_when_its_settings_give_no_name():
    messages = chat(("bot", "Hi, I'm here to help."), ("u1", "I'll be using you to plan the launch."))
    messages[0] = messages[0].model_copy(update={"agent_name": "Juniper"})
    assert reflect(messages).texts("user") == ["Alice will be using Juniper to plan the launch"]


@pytest.mark.parametrize(
    "line",
    ["Hello there!", "Thanks, that helps.", "The Mars Festival budget is $50,000.", "What is the plan?"],
)
def test_chatter_questions_and_plain_facts_are_not_reflections(line):
    assert reflect(chat(("u1", line))) .model_dump() == {"agent": [], "user": [], "session": []}


def test_in_a_group_chat_a_we_statement_is_agent_knowledge_as_written():
    messages = chat(("u1", "We decided to move the launch online."), ("u2", "Sounds good."),
                    users={"u1": "Alice", "u2": "Bob"})
    assert reflect(messages).texts("agent") == ["We decided to move the launch online"]


@pytest.mark.parametrize("line", [
    "Team, meet Juniper, our planning assistant.",
    "Everyone, say hi to Tom, he runs the launch stream.",
    "Please welcome Priya to the planning team.",
    "Hi all, meet Juniper, who will help with the launch.",
])
def test_introductions_to_the_room_are_not_reflections(line):
    messages = chat(("u1", line), ("u2", "Hello!"), users={"u1": "Alice", "u2": "Bob"})
    assert reflect(messages) .model_dump() == {"agent": [], "user": [], "session": []}


@pytest.mark.parametrize(("line", "agent"), [
    ("Welcome packs for the launch are ready.", ["Welcome packs for the launch are ready"]),
    ("Meet Tom at the venue before the launch.", ["Meet Tom at the venue before the launch"]),
])
def test_a_sentence_that_only_starts_like_an_introduction_is_kept(line, agent):
    messages = chat(("u1", line), ("u2", "Hello!"), users={"u1": "Alice", "u2": "Bob"})
    assert reflect(messages).texts("agent") == agent


def test_a_shared_link_is_pinned_for_the_session():
    answer = reflect(chat(("u1", "The sponsor deck is at https://example.com/deck.pdf.")))
    assert answer.texts("session") == ["Pinned link shared by Alice: https://example.com/deck.pdf"]


def test_a_link_inside_a_request_is_kept_once_with_the_request():
    answer = reflect(chat(("u1", "Please pin the venue map https://example.com/map for this chat.")))
    assert answer.texts("session") == ["Alice requested: Please pin the venue map https://example.com/map for this chat"]


MIXED = (
    ("u1", "The team decided to move the launch online."),
    ("u1", "I prefer short answers."),
    ("u1", "Can you draft the sponsor letter?"),
)


@pytest.mark.parametrize(
    ("scopes", "formed"),
    [(ALL, {"agent", "user", "session"}), (["user", "session"], {"user", "session"}),
     (["agent", "session"], {"agent", "session"}), ([], {"session"})],
)
def test_disabled_levels_stay_empty_and_session_is_always_formed(scopes, formed):
    answer = reflect(chat(*MIXED), scopes)
    assert {level for level in ALL if getattr(answer, level)} == formed


def test_a_group_chat_forms_no_user_reflections():
    messages = chat(*MIXED, ("u2", "I prefer long answers."), users={"u1": "Alice", "u2": "Bob"})
    answer = reflect(messages)
    assert answer.user == []
    assert answer.agent and answer.session


def test_nothing_repeats_a_new_fact_a_buffered_reflection_or_a_blob_line():
    messages = chat(*MIXED, ("u1", "I like detailed budgets."))
    answer = reflect(
        messages,
        blobs={"user": "VERSION: 1\n[PREFERENCES]\n- Alice prefers short answers"},
        unabsorbed={"session": ["Alice requested: can you draft the sponsor letter"]},
        new_facts=["The team decided to move the launch online"],
    )
    assert (answer.agent, answer.texts("user"), answer.session) == ([], ["Alice likes detailed budgets"], [])


def test_every_reflection_fits_the_word_limit():
    long_rule = "I prefer " + " ".join(["very"] * 40) + " short answers."
    answer = reflect(chat(("u1", long_rule), ("u1", "I prefer answers in French.")))
    assert answer.texts("user") == ["Alice prefers answers in French"]
    assert all(word_count(r) <= 35 for level in ALL for r in answer.texts(level))


def test_only_the_most_recent_session_intents_are_kept():
    messages = chat(*[("u1", f"Can you check the vendor number {i} quote?") for i in range(9)])
    assert reflect(messages).texts("session")[-1] == "Alice requested: Can you check the vendor number 8 quote?"
    assert len(reflect(messages).session) == 5


def test_each_reflection_cites_the_message_its_sentence_came_from():
    messages = chat(("u1", "Hello there."), ("bot", "Hi."), ("u2", "I prefer short answers."),
                    ("u1", "The team agreed that volunteers get free passes."), users={"u1": "Alice", "u2": "Bob"})
    request = build_reflections_request(messages, scopes=ALL, blobs={}, unabsorbed={}, new_facts=[], model="tier")
    answer = OfflineLLM().complete(request).parsed
    ids = [m["message_id"] for m in request.inputs["messages"]]
    assert [(item.text, [ids[a] for a in item.sources]) for item in answer.agent] == [
        ("The team agreed that volunteers get free passes", ["m3"])]
    assert "#3 [" in request.prompt and "#0 [" in request.prompt
