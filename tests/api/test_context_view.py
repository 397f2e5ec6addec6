"""The context as data shows exactly what the XML shows, section by section."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from api.context_view import structured
from pipeline.context import FactLine, Omitted, ScopeMemory, render_context

NOW = datetime(2026, 5, 2, 12, tzinfo=timezone.utc)


def test_every_section_fact_and_omission_of_the_xml_is_in_the_data():
    xml = render_context(
        [ScopeMemory("agent", "VERSION: 1\n[TEAM]\n- Tom & Ana <leads>", ["plans a launch"]),
         ScopeMemory("user:u1", "", ["likes short answers"])],
        [FactLine("user", "Alice's email is a@b.org (work)", NOW - timedelta(hours=5))], NOW,
        Omitted(facts=3, reflections=1), relevant=[FactLine("agent", "Budget is $5", NOW - timedelta(days=2))],
    )
    data = structured(xml, agent_id="A", session_id="s1", user_id="u1")
    assert data.sections["agent"].consolidated == "VERSION: 1\n[TEAM]\n- Tom & Ana <leads>"
    assert data.sections["agent"].recent_reflections == ["plans a launch"]
    assert data.sections["user"].consolidated is None and data.sections["user"].recent_reflections == ["likes short answers"]
    assert [(f.scope, f.text, f.age) for f in data.facts] == [("user", "Alice's email is a@b.org (work)", "5h ago")]
    assert [(f.scope, f.text, f.age) for f in data.relevant_facts] == [("agent", "Budget is $5", "2d ago")]
    assert (data.omitted.facts, data.omitted.reflections) == (3, 1)
    assert data.xml == xml


def test_an_empty_context_and_one_with_a_control_character_both_read():
    assert structured("", agent_id="A", session_id="s1", user_id=None).sections == {}
    xml = render_context([ScopeMemory("session:s1", "pasted a\x01b", [])], [], NOW)
    data = structured(xml, agent_id="A", session_id="s1", user_id=None)
    assert data.sections["session"].consolidated == "pasted a\ufffdb"
