from datetime import datetime, timedelta, timezone

import pytest

from pipeline import context
from schemas.documents import AgentSettings, CachedContext
from schemas.settings import Settings

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def _settings(**overrides) -> Settings:
    return Settings(_env_file=None, **overrides)


@pytest.mark.parametrize(
    ("toggles", "users", "shown", "facts", "fifo", "offered"),
    [
        ({}, [], ("agent", "user:u1", "session:s1"), ("agent", "user:u1"), True, True),
        ({}, ["u1"], ("agent", "user:u1", "session:s1"), ("agent", "user:u1"), True, True),
        ({}, ["u1", "u2"], ("agent", "session:s1"), ("agent",), True, True),           # group chat
        ({}, ["u2"], ("agent", "session:s1"), ("agent",), True, True),                 # another human's session
        ({"user_memory_enabled": False}, [], ("agent", "session:s1"), ("agent",), True, True),
        ({"agent_memory_enabled": False}, [], ("user:u1", "session:s1"), ("user:u1",), True, True),
        ({"agent_memory_enabled": False, "user_memory_enabled": False}, [], ("session:s1",), (), False, False),
        ({"agent_memory_enabled": False}, ["u1", "u2"], ("session:s1",), (), False, True),
    ],
)
def test_visibility_applies_agent_toggles_and_the_group_chat_rule(toggles, users, shown, facts, fifo, offered):
    agent = AgentSettings(agent_id="a", **toggles)
    view = context.visibility(_settings(), agent, session_id="s1", user_id="u1", session_users=users)
    assert view.context_scope_keys == shown
    assert view.fact_scope_keys == facts
    assert view.show_facts is fifo
    assert view.search_offered is offered


@pytest.mark.parametrize(
    ("globals_", "shown", "fifo", "offered"),
    [
        ({"always_in_context": False}, (), False, True),
        ({"facts_fifo": False}, ("agent", "user:u1", "session:s1"), False, True),
        ({"rag": False}, ("agent", "user:u1", "session:s1"), True, False),
    ],
)
def test_visibility_applies_global_toggles(globals_, shown, fifo, offered):
    view = context.visibility(_settings(**globals_), AgentSettings(agent_id="a"), session_id="s1", user_id="u1", session_users=[])
    assert view.context_scope_keys == shown
    assert view.show_facts is fifo
    assert view.search_offered is offered


def test_visibility_without_a_user_shows_no_user_scope():
    view = context.visibility(_settings(), AgentSettings(agent_id="a"), session_id="s1", user_id=None, session_users=[])
    assert view.fact_scope_keys == ("agent",)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=30), "0m ago"),
        (timedelta(minutes=12, seconds=59), "12m ago"),
        (timedelta(hours=5, minutes=59), "5h ago"),
        (timedelta(days=3, hours=23), "3d ago"),
        (timedelta(seconds=-40), "0m ago"),
    ],
)
def test_format_age_floors_to_minutes_hours_or_days(delta, text):
    assert context.format_age(NOW - delta, NOW) == text


def test_render_context_follows_the_spec_layout():
    xml = context.render_context(
        [
            context.ScopeMemory("agent", "Project Mars: budget approved.", ["Team prefers Fridays"]),
            context.ScopeMemory("user:u1", "", ["Alice wants short answers"]),
            context.ScopeMemory("session:s1", "Planning the festival", []),
        ],
        [
            context.FactLine("agent", "Mars Festival budget is $50,000", NOW - timedelta(days=3)),
            context.FactLine("user", "Alice's email is alice@example.com", NOW - timedelta(hours=1)),
        ],
        NOW,
    )
    assert xml == (
        "<MemoryContext>\n"
        "  <AgentMemory>\n"
        "    <Consolidated>Project Mars: budget approved.</Consolidated>\n"
        "    <RecentReflections>\n"
        "    - Team prefers Fridays\n"
        "    </RecentReflections>\n"
        "  </AgentMemory>\n"
        "  <UserMemory>\n"
        "    <RecentReflections>\n"
        "    - Alice wants short answers\n"
        "    </RecentReflections>\n"
        "  </UserMemory>\n"
        "  <SessionMemory>\n"
        "    <Consolidated>Planning the festival</Consolidated>\n"
        "  </SessionMemory>\n"
        "  <Facts>\n"
        "  - [agent] Mars Festival budget is $50,000 (3d ago)\n"
        "  - [user] Alice's email is alice@example.com (1h ago)\n"
        "  </Facts>\n"
        "</MemoryContext>"
    )


def test_render_context_escapes_xml_and_flattens_newlines():
    xml = context.render_context(
        [context.ScopeMemory("agent", "a < b & c", ["</AgentMemory><UserMemory>secret\nline"])],
        [context.FactLine("agent", "x > y", NOW)],
        NOW,
    )
    assert "a &lt; b &amp; c" in xml
    assert "- &lt;/AgentMemory&gt;&lt;UserMemory&gt;secret line" in xml
    assert "[agent] x &gt; y (0m ago)" in xml
    assert xml.count("<AgentMemory>") == 1 and "<UserMemory>" not in xml


def test_render_context_omits_empty_sections_and_is_empty_when_nothing_shows():
    assert context.render_context([context.ScopeMemory("agent", "  ", [" "])], [], NOW) == ""
    xml = context.render_context([context.ScopeMemory("agent", "", [])], [context.FactLine("user", "f", NOW)], NOW)
    assert "<AgentMemory>" not in xml and "<Facts>" in xml


def _view(**toggles):
    return context.visibility(_settings(), AgentSettings(agent_id="a", **toggles), session_id="s", user_id="u", session_users=[])


def _cached(versions, built_at=NOW):
    return CachedContext(session_id="s", user_id="u", agent_id="a", built_at=built_at, versions=versions)


def test_cache_versions_cover_every_shown_scope_and_the_view():
    versions = context.cache_versions(_view(), {"agent": 3, "user:u": 1}, 2000)
    assert versions == {
        "agent": 3, "session:s": 0, "user:u": 1, context.VIEW_KEY: _view().fingerprint(), context.BUDGET_KEY: 2000,
    }


def test_a_context_packed_for_another_budget_is_not_fresh():
    cached = _cached(context.cache_versions(_view(), {"agent": 3}, 2000))
    assert not context.is_fresh(cached, context.cache_versions(_view(), {"agent": 3}, 500), NOW, ttl_s=300)


@pytest.mark.parametrize(
    ("built_ago_s", "stamps_now", "view_toggles", "fresh"),
    [
        (10, {"agent": 3}, {}, True),
        (299, {"agent": 3}, {}, True),
        (300, {"agent": 3}, {}, False),                         # TTL of 5 minutes
        (10, {"agent": 4}, {}, False),                          # agent scope formed again
        (10, {"agent": 3, "session:s": 1}, {}, False),          # session consolidated
        (10, {"agent": 3}, {"user_memory_enabled": False}, False),  # toggle changed what shows
        (-5, {"agent": 3}, {}, False),                          # built in the future: distrust
    ],
)
def test_cached_context_is_fresh_only_within_ttl_and_while_no_stamp_moved(built_ago_s, stamps_now, view_toggles, fresh):
    cached = _cached(context.cache_versions(_view(), {"agent": 3}, 2000), NOW - timedelta(seconds=built_ago_s))
    current = context.cache_versions(_view(**view_toggles), stamps_now, 2000)
    assert context.is_fresh(cached, current, NOW, ttl_s=300) is fresh


def test_missing_cache_is_not_fresh():
    assert context.is_fresh(None, {}, NOW, 300) is False
