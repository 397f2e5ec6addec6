"""decide_facts: prompt builder and answer model (design §5.3). The model sees integer aliases only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.errors import InvalidInput
from pipeline.llm.port import LLMRequest


class FactDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    new: int = Field(description="Alias of the new fact this decision is about.")
    action: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    existing: int | None = Field(
        default=None, description="Alias of the existing fact updated or contradicted (UPDATE, DELETE)."
    )
    text: str | None = Field(default=None, description="The merged text, for UPDATE only.")


class DecisionsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[FactDecision]


# --- prompt builder ---------------------------------------------------------------------------

OPERATION = "decide_facts"

_SYSTEM = """\
You keep a chat agent's store of facts free of duplicates and contradictions.

You get NEW facts, each numbered by an integer alias, and under each the EXISTING facts
(with their own integer aliases) that look similar. An existing fact may be a new fact said
earlier in the same conversation: decide about it in the same way (the later fact is the newer
information). Decide, for every new fact, exactly one:
- "NONE": the new fact is already known: an existing fact says the same thing (maybe in
  other words) or says more. Nothing changes.
- "UPDATE": the new fact and one existing fact are about the same subject and the new one
  adds to it or refreshes its value. Give "existing" = that fact's alias and "text" = one
  merged fact that keeps everything still true from both, newer information winning, at most
  {word_limit} words.
- "DELETE": the new fact contradicts one existing fact, which is now outdated (a changed
  address, a cancelled plan). Give "existing" = the contradicted fact's alias; the new fact
  is then added as it is.
- "ADD": the new fact is new information; no existing fact is replaced.

Rules:
- Return one decision per new fact, with "new" = its alias, in the order given.
- "existing" must be one of the aliases listed under that same new fact; never invent one.
- Leave "existing" and "text" null for ADD and NONE; leave "text" null for DELETE.
- Invent nothing: a merged text only holds what the two facts say.
"""


def build_dedup_request(
    new_facts: Sequence[str],
    candidates: Mapping[int, Sequence[tuple[int, str]]],
    *,
    model: str,
    word_limit: int = 30,
) -> LLMRequest[DecisionsAnswer]:
    """The one batched ``decide_facts`` call (design §5.3).

    A new fact's alias is its index in ``new_facts`` (0-based). ``candidates`` maps a new
    fact's alias to its ``(candidate alias, existing text)`` pairs. Candidate aliases are ints
    of one alias space across the batch (the same existing fact keeps the same alias under
    several new facts); the caller maps them back to real ids and rejects any decision naming
    an alias outside that new fact's candidates. Only new facts with at least one candidate
    belong here (the others are ADDed without a call): every index of ``new_facts`` must have
    a non-empty candidate list. Raises ``InvalidInput`` otherwise.

    ``inputs``: ``items`` = ``[{"new": alias, "text": str, "candidates": [{"alias": int,
    "text": str}, ...]}, ...]`` in alias order, and ``word_limit``.
    """
    if not new_facts:
        raise InvalidInput("new_facts", "no new fact to decide on; skip the decide_facts call")
    unknown = sorted(set(candidates) - set(range(len(new_facts))))
    if unknown:
        raise InvalidInput("candidates", f"keys {unknown} are not aliases of new_facts (0..{len(new_facts) - 1})")
    known: dict[int, str] = {}
    items = []
    for alias, text in enumerate(new_facts):
        pairs = list(candidates.get(alias, ()))
        if not pairs:
            raise InvalidInput(f"candidates[{alias}]", "a new fact without candidates is ADDed without the LLM")
        for existing, existing_text in pairs:
            if known.setdefault(existing, existing_text) != existing_text:
                raise InvalidInput(f"candidates[{alias}]", f"alias {existing} stands for two different texts")
        items.append({
            "new": alias,
            "text": text,
            "candidates": [{"alias": a, "text": t} for a, t in pairs],
        })
    blocks = []
    for item in items:
        lines = [f'NEW {item["new"]}: {_quote(item["text"])}']
        lines += [f'    existing {c["alias"]}: {_quote(c["text"])}' for c in item["candidates"]]
        blocks.append("\n".join(lines))
    prompt = (
        "New facts and the existing facts they may duplicate:\n\n"
        + "\n\n".join(blocks)
        + f"\n\nReturn exactly {len(items)} decision(s), one per new fact alias "
        + f"({', '.join(str(i['new']) for i in items)})."
    )
    return LLMRequest(
        operation=OPERATION,
        model=model,
        system=_SYSTEM.format(word_limit=word_limit),
        prompt=prompt,
        response_model=DecisionsAnswer,
        inputs={"items": items, "word_limit": word_limit},
    )


def _quote(text: str) -> str:
    return '"' + " ".join(text.split()).replace('"', "'") + '"'
