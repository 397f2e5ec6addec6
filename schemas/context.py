"""The memory context as data (design §6): what one ``<MemoryContext>`` block shows, section by
section. ``pipeline.packing`` builds it, ``pipeline.context.render_xml`` writes the XML the
agent reads, the HTTP API and the inspector show the same model as JSON, and the session's
cache keeps it (``CachedContext.content``): both formats come from this one model, and
nothing is read back from the XML.

Texts are held as shown: a blob stripped, a reflection or a fact on one line, a fact's age
as the agent reads it (``5h ago``), escaped only when written as XML.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# ``ContextFact`` and ``ContextSection`` carry no docstring: the HTTP API's pinned OpenAPI
# document shows them, without a description


class ContextFact(BaseModel):
    scope: str
    text: str
    age: str


class ContextSection(BaseModel):
    consolidated: str | None = None
    recent_reflections: list[str] = Field(default_factory=list)


class Omitted(BaseModel):
    """What a token budget left out of the context, by kind: whole blobs, ``[SECTION]``s cut
    from the ends of the blobs shown, reflections, relevant facts and recent facts."""

    model_config = ConfigDict(frozen=True)

    blobs: int = 0
    reflections: int = 0
    facts: int = 0
    relevant: int = 0
    sections: int = 0

    def __bool__(self) -> bool:
        return bool(self.blobs or self.sections or self.reflections or self.facts or self.relevant)


class ContextBlock(BaseModel):
    """One memory context: the sections shown (agent, user, session, in that order), the facts
    relevant to the current message (best first), the recent facts, and what a budget left
    out. Empty (nothing shown, nothing left out): the context is ""."""

    sections: dict[Literal["agent", "user", "session"], ContextSection] = Field(default_factory=dict)
    relevant_facts: list[ContextFact] = Field(default_factory=list)
    facts: list[ContextFact] = Field(default_factory=list)
    omitted: Omitted = Omitted()
