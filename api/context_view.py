"""The memory context as JSON (``format=json``, the inspector): the model ``get_memory_context``
renders as XML, with the XML beside it, so that both formats always show exactly the same
memory (the packing, budgets and ``<Omitted/>`` stay in one place, ``pipeline.packing``)."""

from __future__ import annotations

from pipeline.context import render_xml
from schemas import api as m
from schemas.context import ContextBlock


def structured(block: ContextBlock, *, agent_id: str, session_id: str, user_id: str | None) -> m.MemoryContext:
    """``block`` in the API's shape. The documented ``omitted`` has no count of blob sections
    cut (the XML's ``sections``): the pinned OpenAPI document does not name one."""
    left = block.omitted
    return m.MemoryContext(
        agent_id=agent_id, session_id=session_id, user_id=user_id, sections=block.sections,
        relevant_facts=block.relevant_facts, facts=block.facts, xml=render_xml(block),
        omitted=m.Omitted(blobs=left.blobs, relevant_facts=left.relevant, reflections=left.reflections,
                          facts=left.facts),
    )
