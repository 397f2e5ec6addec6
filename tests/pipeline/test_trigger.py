"""The formation trigger rules of design §4, table-driven."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from pipeline import trigger
from schemas.settings import Settings

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SETTINGS = Settings()


@dataclass
class Counters:
    messages_since: int
    tokens_since: float


@dataclass
class Msg:
    role: str
    content: str


@pytest.mark.parametrize(
    ("role", "chars", "expected"),
    [
        ("user", 450, 100.0),
        ("tool", 450, 50.0),
        ("assistant", 450, 20.0),
        ("system", 450, 50.0),
        ("narrator", 450, 50.0),  # any other role weighs 0.5
        ("user", 0, 0.0),
        ("user", 9, 2.0),
    ],
)
def test_weighted_tokens_are_characters_over_4_5_times_the_role_weight(role, chars, expected):
    assert trigger.weighted_tokens(Msg(role, "x" * chars)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("messages", "tokens", "forms"),
    [
        (44, 0.0, False),       # one short of the message interval
        (45, 0.0, True),        # 45 messages
        (46, 10.0, True),
        (3, 1500.0, False),     # enough tokens but fewer than 4 messages
        (4, 1499.9, False),     # 4 messages, tokens just under
        (4, 1500.0, True),      # 1500 weighted tokens with 4 messages
        (10, 2000.0, True),
        (0, 0.0, False),
        (3, 0.0, False),
    ],
)
def test_threshold_rule_needs_45_messages_or_1500_tokens_and_at_least_4_messages(messages, tokens, forms):
    assert trigger.should_form(Counters(messages, tokens), SETTINGS) is forms


def _tokens(role: str, count: int, chars: int) -> float:
    return sum(trigger.weighted_tokens(Msg(role, "y" * chars)) for _ in range(count))


@pytest.mark.parametrize(
    ("role", "count", "chars", "forms"),
    [
        # 4 user messages of 1688 chars: 4 * 375.1 = 1500.4 weighted tokens
        ("user", 4, 1688, True),
        ("user", 4, 1687, False),
        # the same text from the assistant weighs 0.2: far from 1500
        ("assistant", 4, 1688, False),
        # assistant needs 5x the characters: 4 * 8438 / 4.5 * 0.2 = 1500.1
        ("assistant", 4, 8438, True),
        ("tool", 4, 3375, True),
        ("tool", 4, 3374, False),
    ],
)
def test_weighted_tokens_by_role_decide_the_token_threshold(role, count, chars, forms):
    counters = Counters(count, _tokens(role, count, chars))
    assert trigger.should_form(counters, SETTINGS) is forms


def test_settings_move_the_thresholds():
    settings = Settings(formation_message_interval=10, formation_token_interval=100, min_messages_to_form=2)
    assert trigger.should_form(Counters(10, 0), settings)
    assert trigger.should_form(Counters(2, 100), settings)
    assert not trigger.should_form(Counters(1, 1000), settings)


@pytest.mark.parametrize(
    ("messages", "idle", "cold"),
    [
        (4, timedelta(minutes=10), True),
        (4, timedelta(minutes=9, seconds=59), False),
        (3, timedelta(hours=5), False),
        (40, timedelta(minutes=11), True),
        (1, timedelta(minutes=30), False),
    ],
)
def test_cold_rule_needs_10_idle_minutes_and_at_least_4_unformed_messages(messages, idle, cold):
    last_activity = NOW - idle
    assert trigger.is_cold(Counters(messages, 0.0), last_activity, SETTINGS, NOW) is cold


def test_cold_rule_for_the_store_sets_idle_before_to_now_minus_cold_after():
    rule = trigger.cold_rule(SETTINGS, NOW)
    assert rule.idle_before == NOW - timedelta(minutes=10)
    assert rule.min_messages == 4
    assert rule.message_interval is None and rule.token_interval is None


def test_session_without_activity_is_never_cold():
    assert not trigger.is_cold(Counters(10, 0.0), None, SETTINGS, NOW)


@pytest.mark.parametrize(("messages", "forms"), [(0, False), (1, True), (3, True), (100, True)])
def test_session_end_forms_whatever_is_unformed_from_one_message(messages, forms):
    assert trigger.should_form_at_session_end(Counters(messages, 0.0)) is forms
    rule = trigger.session_end_rule()
    assert rule.min_messages == 1
    assert rule.message_interval is None and rule.token_interval is None and rule.idle_before is None


def test_threshold_rule_for_the_store_carries_every_threshold():
    rule = trigger.threshold_rule(SETTINGS)
    assert (rule.min_messages, rule.message_interval, rule.token_interval, rule.idle_before) == (4, 45, 1500, None)
