"""The context as data shows exactly what the XML shows, section by section: both are written
from one model, and an XML parser reading the block finds the very items the JSON carries."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from api.context_view import structured
from pipeline.context import FactLine, Omitted, ScopeMemory, render_context, shape_context

NOW = datetime(2026, 5, 2, 12, tzinfo=timezone.utc)
_SCOPES = {"AgentMemory": "agent", "UserMemory": "user", "SessionMemory": "session"}
_FACT = re.compile(r"^- \[(?P<scope>[^\]]*)\] (?P<text>.*) \((?P<age>\d+[mhd] ago)\)$")


def _read_xml(xml: str) -> dict:
    """What an XML parser finds in the block, in the JSON's shape (the test's reader only:
    the product never reads its XML back)."""
    found: dict = {"sections": {}, "relevant_facts": [], "facts": [], "omitted": {}}
    for child in ET.fromstring(xml) if xml else ():
        if child.tag in _SCOPES:
            reflections = getattr(child.find("RecentReflections"), "text", None) or ""
            found["sections"][_SCOPES[child.tag]] = {
                "consolidated": getattr(child.find("Consolidated"), "text", None),
                "recent_reflections": [line.strip()[2:] for line in reflections.splitlines() if line.strip()],
            }
        elif child.tag in ("RelevantFacts", "Facts"):
            key = "relevant_facts" if child.tag == "RelevantFacts" else "facts"
            found[key] = [_FACT.match(line.strip()).groupdict() for line in child.text.splitlines() if line.strip()]
        elif child.tag == "Omitted":
            found["omitted"] = {k: int(v) for k, v in child.attrib.items()}
    return found


def test_every_section_fact_and_omission_of_the_xml_is_in_the_data():
    block = shape_context(
        [ScopeMemory("agent", "VERSION: 1\n[TEAM]\n- Tom & Ana <leads>", ["plans a launch"]),
         ScopeMemory("user:u1", "", ["likes short answers"])],
        [FactLine("user", "Alice's email is a@b.org (work)", NOW - timedelta(hours=5))], NOW,
        Omitted(facts=3, reflections=1, sections=2), relevant=[FactLine("agent", "Budget is $5", NOW - timedelta(days=2))],
    )
    data = structured(block, agent_id="A", session_id="s1", user_id="u1")
    assert data.sections["agent"].consolidated == "VERSION: 1\n[TEAM]\n- Tom & Ana <leads>"
    assert data.sections["agent"].recent_reflections == ["plans a launch"]
    assert data.sections["user"].consolidated is None and data.sections["user"].recent_reflections == ["likes short answers"]
    assert [(f.scope, f.text, f.age) for f in data.facts] == [("user", "Alice's email is a@b.org (work)", "5h ago")]
    assert [(f.scope, f.text, f.age) for f in data.relevant_facts] == [("agent", "Budget is $5", "2d ago")]
    assert (data.omitted.facts, data.omitted.reflections) == (3, 1)
    assert '<Omitted sections="2" reflections="1" facts="3"/>' in data.xml
    assert data.xml == render_context(
        [ScopeMemory("agent", "VERSION: 1\n[TEAM]\n- Tom & Ana <leads>", ["plans a launch"]),
         ScopeMemory("user:u1", "", ["likes short answers"])],
        [FactLine("user", "Alice's email is a@b.org (work)", NOW - timedelta(hours=5))], NOW,
        Omitted(facts=3, reflections=1, sections=2), relevant=[FactLine("agent", "Budget is $5", NOW - timedelta(days=2))],
    )


def test_an_empty_context_is_empty_data_and_a_control_character_is_kept_as_said():
    empty = structured(shape_context([], [], NOW), agent_id="A", session_id="s1", user_id=None)
    assert (empty.sections, empty.facts, empty.xml) == ({}, [], "")
    block = shape_context([ScopeMemory("session:s1", "pasted a\x01b", [])], [], NOW)
    # the data carries the text as stored; XML 1.0 cannot (https://www.w3.org/TR/xml/#charsets)
    assert structured(block, agent_id="A", session_id="s1", user_id=None).sections["session"].consolidated == "pasted a\x01b"


# any text XML 1.0 can carry (no C0 controls but tab and newline, no surrogates), with its
# special characters and markup-looking runs made likely; no carriage return in a blob: XML
# parsers turn it into a newline (XML 1.0 §2.11), which is the parser's reading, not a loss
_TEXT = st.text(st.one_of(st.sampled_from("<>&\"' \n\t]]>x-[]()"), st.characters(
    blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff")), max_size=40)
_SCOPE_MEMORY = st.builds(ScopeMemory, st.sampled_from(["agent", "user:u1", "session:s1"]), _TEXT,
                          st.lists(_TEXT, max_size=3))
_FACT_LINE = st.builds(FactLine, st.sampled_from(["agent", "user"]), _TEXT,
                       st.integers(0, 10**7).map(lambda s: NOW - timedelta(seconds=s)))
_OMITTED = st.builds(Omitted, blobs=st.integers(0, 3), reflections=st.integers(0, 3), facts=st.integers(0, 3),
                     relevant=st.integers(0, 3), sections=st.integers(0, 3))


@hsettings(max_examples=120, deadline=None)
@given(scopes=st.lists(_SCOPE_MEMORY, max_size=3, unique_by=lambda m: m.scope_key), facts=st.lists(_FACT_LINE, max_size=4),
       relevant=st.lists(_FACT_LINE, max_size=3), omitted=_OMITTED)
def test_the_json_and_the_xml_of_any_context_carry_the_same_items(scopes, facts, relevant, omitted):
    block = shape_context(scopes, facts, NOW, omitted, relevant)
    data = json.loads(structured(block, agent_id="A", session_id="s1", user_id="u1").model_dump_json())
    read = _read_xml(data["xml"])
    assert read["sections"] == data["sections"]
    assert read["relevant_facts"] == data["relevant_facts"] and read["facts"] == data["facts"]
    named = {"blobs": "blobs", "reflections": "reflections", "relevant_facts": "relevant_facts", "facts": "facts"}
    assert {k: read["omitted"].get(v, 0) for k, v in named.items()} == data["omitted"]
    assert read["omitted"].get("sections", 0) == omitted.sections
    # what was said reads back as said, special characters and all, one line per item
    for memory in scopes:
        shown = data["sections"].get(memory.scope_key.split(":")[0])
        if memory.consolidated.strip():
            assert shown["consolidated"] == memory.consolidated.strip()
    assert [f["text"] for f in data["facts"]] == [" ".join(f.content.split()) for f in facts]
