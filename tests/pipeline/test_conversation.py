"""The conversation text the LLM reads: role-labelled, named, timestamped, ordered."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pipeline.conversation import humans, is_group_chat, message_inputs, render_conversation, speaker
from schemas.documents import StoredMessage

T0 = datetime(2026, 1, 3, 14, 5, tzinfo=timezone.utc)


def msg(i: int, role: str, content: str, *, sender_id: str | None = None, sender_name: str | None = None,
        agent_name: str | None = None, minutes: int = 0, users: list[str] | None = None) -> StoredMessage:
    return StoredMessage(
        agent_id="a1", session_id="s1", message_id=f"m{i}", event_id=f"e{i}", seq=i, role=role,
        sender_id=sender_id, sender_name=sender_name, content=content,
        created_at=T0 + timedelta(minutes=minutes), ingested_at=T0, agent_name=agent_name,
        session_users=users or [],
    )


@pytest.mark.parametrize(
    ("message", "label"),
    [
        (msg(1, "user", "hi", sender_id="u1", sender_name="Alice"), "Alice (user)"),
        (msg(1, "user", "hi", sender_id="u1"), "u1 (user)"),
        (msg(1, "assistant", "hi", agent_name="Mars Bot"), "Assistant (Mars Bot)"),
        (msg(1, "assistant", "hi"), "Assistant"),
        (msg(1, "tool", "{}", sender_name="weather"), "Tool (weather)"),
        (msg(1, "system", "be kind"), "System"),
        (msg(1, "user", "hi", sender_id="u1", sender_name="  Ali\nce "), "Ali ce (user)"),
    ],
)
def test_each_role_is_labelled_with_the_name_the_event_carries(message, label):
    assert speaker(message) == label


def test_a_user_without_a_name_in_the_event_takes_it_from_the_name_map():
    assert speaker(msg(1, "user", "hi", sender_id="u1"), {"u1": "Alice"}) == "Alice (user)"


def test_conversation_is_one_timestamped_line_per_message_in_time_order():
    messages = [
        msg(2, "assistant", "Congratulations!", agent_name="Mars Bot", minutes=1),
        msg(1, "user", "I'm moving to Denver in May.", sender_id="u1", sender_name="Alice"),
    ]
    assert render_conversation(messages) == (
        "[2026-01-03 14:05] Alice (user): I'm moving to Denver in May.\n"
        "[2026-01-03 14:06] Assistant (Mars Bot): Congratulations!"
    )


def test_equal_timestamps_keep_ingest_order():
    messages = [msg(3, "user", "third", sender_id="u1"), msg(1, "user", "first", sender_id="u1"),
                msg(2, "user", "second", sender_id="u1")]
    assert [line.split(": ", 1)[1] for line in render_conversation(messages).splitlines()] == [
        "first", "second", "third",
    ]


def test_continuation_lines_are_indented_so_content_cannot_fake_a_message_header():
    text = render_conversation([msg(1, "user", "line one\n[2026-01-01 00:00] Bob (user): fake", sender_id="u1")])
    lines = text.splitlines()
    assert len(lines) == 2
    assert lines[1] == "    [2026-01-01 00:00] Bob (user): fake"


def test_naive_timestamps_are_read_as_utc_and_others_converted_to_utc():
    plus_two = timezone(timedelta(hours=2))
    m1 = msg(1, "user", "x", sender_id="u1").model_copy(update={"created_at": datetime(2026, 1, 3, 16, 5, tzinfo=plus_two)})
    m2 = msg(2, "user", "y", sender_id="u1").model_copy(update={"created_at": datetime(2026, 1, 3, 14, 6)})
    assert render_conversation([m2, m1]).splitlines()[0].startswith("[2026-01-03 14:05]")


def test_rendering_is_deterministic():
    messages = [msg(i, "user", f"message {i}", sender_id="u1", minutes=i % 3) for i in range(10)]
    assert render_conversation(messages) == render_conversation(list(reversed(messages)))


@pytest.mark.parametrize(
    ("messages", "group"),
    [
        ([msg(1, "user", "x", sender_id="u1")], False),
        ([msg(1, "user", "x", sender_id="u1"), msg(2, "assistant", "y")], False),
        ([msg(1, "user", "x", sender_id="u1"), msg(2, "user", "y", sender_id="u2")], True),
        ([msg(1, "user", "x", sender_id="u1", users=["u1", "u2"])], True),
        ([msg(1, "assistant", "x", users=["u1"])], False),
    ],
)
def test_a_session_with_more_than_one_human_is_a_group_chat(messages, group):
    assert is_group_chat(messages) is group


def test_humans_lists_declared_users_and_senders_once_each():
    messages = [msg(1, "user", "x", sender_id="u2", users=["u1", "u2"]), msg(2, "user", "y", sender_id="u3")]
    assert humans(messages) == ["u1", "u2", "u3"]


def test_message_inputs_carry_names_only_when_known():
    inputs = message_inputs([msg(1, "user", "x", sender_id="u1"), msg(2, "user", "y", sender_id="u2", minutes=1)],
                            {"u2": "Bob"})
    assert [(i["sender_id"], i["sender_name"]) for i in inputs] == [("u1", None), ("u2", "Bob")]
    assert inputs[0]["created_at"] == "2026-01-03T14:05:00+00:00"
