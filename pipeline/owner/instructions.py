"""Memory Instructions (design §13): an owner's guidance to extraction and consolidation, per
agent, optionally refined per scope type. Pure functions over ``AgentSettings``.

A text is checked like any stored free text (no NUL or lone surrogate), is at most
``WORD_LIMIT`` words and never carries a secret (the screen of every write). Every change
appends a version (``schemas.owner.Instruction``); the current text of (stage, scope) is its
newest version's, "" when cleared.

Prompts carry the guidance that applies to them (``guidance``): the ``all`` text and the
refinements of the scope types the call forms, each once. Lines ``focus: a, b`` and
``ignore: c`` are also read as topic lists (``topics``), which the offline rules honour by
matching words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from pipeline.errors import InvalidInput
from pipeline.formation.secrets import SecretGuard
from pipeline.owner.curation import storable
from pipeline.prompts.guidance import Guidance
from pipeline.text import word_count
from schemas.documents import AgentSettings
from schemas.owner import INSTRUCTION_SCOPES, INSTRUCTION_STAGES, Instruction

WORD_LIMIT = 300
_TOPIC_LINE = re.compile(r"^\s*(focus|ignore)\s*(?:on)?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def check_text(text: str, guard: SecretGuard, where: str = "text") -> str:
    """The text as stored (line ends normalised, outer blanks trimmed), or ``InvalidInput``
    naming what is wrong: a NUL or lone surrogate, more than ``WORD_LIMIT`` words, a secret."""
    cleaned = "\n".join(line.rstrip() for line in storable(text, where).strip().splitlines())
    if not cleaned:
        raise InvalidInput(where, "is blank; clear the instruction instead")
    words = word_count(cleaned)
    if words > WORD_LIMIT:
        raise InvalidInput(where, f"has {words} words; an instruction is at most {WORD_LIMIT} words")
    kind = guard.kind(cleaned)
    if kind is not None:
        raise InvalidInput(where, f"carries a secret ({kind}); memory never stores one, instructions included")
    return cleaned


def _check_target(stage: str, scope: str) -> None:
    if stage not in INSTRUCTION_STAGES:
        raise InvalidInput("stage", f"unknown stage {stage!r}: choose among {', '.join(INSTRUCTION_STAGES)}")
    if scope not in INSTRUCTION_SCOPES:
        raise InvalidInput("scope", f"unknown scope {scope!r}: choose among {', '.join(INSTRUCTION_SCOPES)}")


def history(agent: AgentSettings, stage: str, scope: str = "all") -> list[Instruction]:
    """Every version of (stage, scope), oldest first."""
    _check_target(stage, scope)
    return sorted((i for i in agent.instructions if i.stage == stage and i.scope == scope), key=lambda i: i.version)


def current(agent: AgentSettings, stage: str, scope: str = "all") -> Instruction | None:
    """The newest version of (stage, scope), None when there is none."""
    versions = history(agent, stage, scope)
    return versions[-1] if versions else None


def current_text(agent: AgentSettings, stage: str, scope: str = "all") -> str:
    found = current(agent, stage, scope)
    return found.text if found else ""


def _append(agent: AgentSettings, stage: str, scope: str, text: str, by: str, now: datetime,
            rolled_back_to: int | None = None) -> AgentSettings:
    previous = current(agent, stage, scope)
    version = Instruction(stage=stage, scope=scope, version=(previous.version if previous else 0) + 1,  # type: ignore[arg-type]
                          text=text, set_by=by, set_at=now, rolled_back_to=rolled_back_to)
    return agent.model_copy(update={"instructions": [*agent.instructions, version], "updated_at": now})


def set_instruction(agent: AgentSettings, stage: str, scope: str, text: str, *, guard: SecretGuard, by: str,
                    now: datetime, where: str = "text") -> AgentSettings:
    """The settings with a new version of (stage, scope) holding ``text``, checked (an error
    names the text as ``where``, the caller's spelling of it)."""
    _check_target(stage, scope)
    return _append(agent, stage, scope, check_text(text, guard, where), by, now)


def clear_instruction(agent: AgentSettings, stage: str, scope: str, *, by: str, now: datetime) -> AgentSettings:
    """A new, empty version: the prompts carry nothing for (stage, scope) from now on."""
    _check_target(stage, scope)
    if not current_text(agent, stage, scope):
        raise InvalidInput("scope", f"no {stage} instruction is set for scope {scope!r}; nothing to clear")
    return _append(agent, stage, scope, "", by, now)


def rollback_instruction(agent: AgentSettings, stage: str, scope: str, version: int, *, guard: SecretGuard, by: str,
                         now: datetime) -> AgentSettings:
    """A new version carrying the text of an earlier ``version`` (checked again: the screen
    may have grown since)."""
    found = next((i for i in history(agent, stage, scope) if i.version == version), None)
    if found is None:
        raise InvalidInput("version", f"no version {version} of the {stage} instruction for scope {scope!r}")
    text = check_text(found.text, guard, "version") if found.text else ""
    return _append(agent, stage, scope, text, by, now, rolled_back_to=version)


def topics(text: str) -> dict[str, list[str]]:
    """The ``focus: a, b`` / ``ignore: c`` topics of a text, lower-cased, in order."""
    found: dict[str, list[str]] = {"focus": [], "ignore": []}
    for kind, items in _TOPIC_LINE.findall(text):
        found[kind.lower()] += [t.strip().lower() for t in re.split(r"[,;]", items) if t.strip()]
    return {kind: list(dict.fromkeys(items)) for kind, items in found.items()}


def guidance(agent: AgentSettings, stage: str, scopes: Sequence[str]) -> Guidance:
    """The guidance of one call of ``stage`` forming ``scopes`` (scope types): the ``all``
    text, then each formed scope type's refinement, labelled, each once."""
    general = current_text(agent, stage, "all")
    parts = [general] if general else []
    per_scope = {}
    for scope in dict.fromkeys(scopes):
        text = current_text(agent, stage, scope)
        if text:
            parts.append(f"For {scope} memory:\n{text}")
        per_scope[scope] = topics(f"{general}\n{text}")
    return Guidance("\n\n".join(parts), per_scope)
