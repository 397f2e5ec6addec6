"""The memory context as structured JSON: the XML block that ``get_memory_context`` packed,
read back section by section, so that both formats always show exactly the same memory (the
packing, budgets and ``<Omitted/>`` stay in one place, ``pipeline.packing``)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from schemas import api as m

_SCOPES = {"AgentMemory": "agent", "UserMemory": "user", "SessionMemory": "session"}
# characters XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets): a message may carry one,
# and the parser refuses the whole block over it; they are shown as U+FFFD in the data
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FACT = re.compile(r"^- \[(?P<scope>[^\]]*)\] (?P<text>.*) \((?P<age>\d+[mhd] ago)\)$")


def _lines(text: str | None) -> list[str]:
    return [line.strip()[2:] for line in (text or "").splitlines() if line.strip().startswith("- ")]


def _facts(element: ET.Element | None) -> list[m.ContextFact]:
    out = []
    for line in (element.text or "").splitlines() if element is not None else ():
        found = _FACT.match(line.strip())
        if found:
            out.append(m.ContextFact(**found.groupdict()))
    return out


def structured(xml: str, *, agent_id: str, session_id: str, user_id: str | None) -> m.MemoryContext:
    sections: dict = {}
    relevant: list[m.ContextFact] = []
    facts: list[m.ContextFact] = []
    omitted = m.Omitted()
    if xml.strip():
        root = ET.fromstring(_NOT_XML.sub("\ufffd", xml))
        for child in root:
            if child.tag in _SCOPES:
                consolidated = child.find("Consolidated")
                sections[_SCOPES[child.tag]] = m.ContextSection(
                    consolidated=consolidated.text if consolidated is not None else None,
                    recent_reflections=_lines(getattr(child.find("RecentReflections"), "text", None)),
                )
            elif child.tag == "RelevantFacts":
                relevant = _facts(child)
            elif child.tag == "Facts":
                facts = _facts(child)
            elif child.tag == "Omitted":
                omitted = m.Omitted(**{k: int(v) for k, v in child.attrib.items() if k in m.Omitted.model_fields})
    return m.MemoryContext(agent_id=agent_id, session_id=session_id, user_id=user_id, sections=sections,
                           relevant_facts=relevant, facts=facts, omitted=omitted, xml=xml)
