"""extract_facts by rule: user sentences that carry a specific entity become facts.

- Only what humans wrote is read (the assistant's own suggestions are not facts).
- A sentence is skipped when it is a question, small talk, an opinion, ephemeral ("today",
  "right now"), a preference or rule ("I prefer", "always", "please"), or a request
  ("can you", "let's", "I need"): those are reflections or nothing.
- Compounds are split where a new subject starts ("..., and my email is x").
- An imperative ("Send the draft to ...") is a request, not a fact.
- It must carry an entity (a number, date, email, URL, amount or a capitalised proper noun)
  and a verb: a fragment ("Lumen Beam, our new lamp") is not a statement. Or it tells what
  its speaker did, in the first person at the start of a clause, an action with an object
  ("I volunteered at the homeless shelter", "Last week, I built a new website"; "we" in a
  one-to-one chat only): not a feeling or a thought ("I felt", "I realized"), not
  "had"/"got", not a thing only pointed at ("I took it at the beach"). The name of
  someone in the conversation, said to them ("Wow, Caroline, that's so cool", "Thanks
  Mel!"), is no entity: the sentence is about nothing named (on LoCoMo dev, most of what
  the rules formed was such praise).
- First-person sentences are about the speaker: scope ``user``, rewritten in the third person
  with the speaker's name ("My email is x" -> "Alice's email is x"). In a one-to-one chat,
  "we/our/us" sentences are the speaker's affairs too ("Our studio opens at 9" -> "Alice's
  studio opens at 9"); in a group chat they are the group's, shared: scope ``agent``, as
  written. Other sentences are about the shared world: scope ``agent``. A sentence whose
  scope is not allowed is dropped, never re-scoped.
- An introduction with a clause after it ("I'm Sam, I manage the studio") is two statements:
  the name, and the clause about its speaker.
- Over the word limit: dropped, not cut.
- The owner's topic lists of its scope (``inputs["guidance"]``, ``offline_rules.topics``):
  a fact on an ignored topic, or on none of the focus topics, is left out.
- A deadline in the sentence ("by March 10", "until June 2", "before 2026-07-01") becomes the
  fact's ``expires_at`` (``offline_rules.expiry``), resolved against the message's date.
- Its categories are those of the listed ones (``inputs["categories"]``) whose words it says
  (``offline_rules.categories``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from datetime import datetime, timezone

from pipeline.llm.offline_rules import language as lang
from pipeline.llm.offline_rules.categories import categories_of
from pipeline.llm.offline_rules.expiry import deadline
from pipeline.llm.offline_rules.topics import kept
from pipeline.text import normalize, word_count


def fact_sentence(
    sentence: str, speaker: str | None = None, people: Iterable[str] = (), *, one_to_one: bool | None = None,
) -> bool:
    """Whether a sentence reads as a fact (entity-bearing, not a preference, request or
    chatter); ``people``: the names of those in the conversation, who may be spoken to. Given
    the chat's shape (``one_to_one``), what its speaker did counts too ("I volunteered at the
    homeless shelter"; "we" only in a one-to-one chat)."""
    if lang.is_question(sentence):
        return False
    if lang.introduced_name(sentence, speaker):
        return True
    if lang.is_small_talk(sentence) or lang.IMPERATIVE.match(sentence):
        return False
    for markers in (lang.RULE, lang.WANT, lang.REQUEST, lang.OPINION, lang.EPHEMERAL):
        if markers.search(sentence):
            return False
    if lang.has_entity(lang.without_address(sentence, people)) and lang.VERB.search(sentence):
        return True
    return one_to_one is not None and lang.personal_event(sentence, plural=one_to_one)


def extract(inputs: dict[str, Any], *, word_limit: int) -> dict[str, Any]:
    scopes = set(inputs.get("scopes") or ())
    one_to_one = not inputs.get("group_chat")
    limit = int(inputs.get("word_limit") or word_limit)
    facts: list[dict[str, str]] = []
    seen: set[str] = set()
    people = {m.get("sender_name") for m in inputs.get("messages") or () if m.get("sender_name")}
    people |= {n for n in [inputs.get("agent_name"), *(inputs.get("user_names") or {}).values()] if n}
    owner = inputs.get("guidance") or {}
    listed = list(inputs.get("categories") or ())
    for message in inputs.get("messages") or ():
        if message.get("role") != "user":
            continue
        name = message.get("sender_name")
        for sentence in (c for s in lang.sentences(message.get("content") or "") for c in lang.clauses(s)):
            name = name or lang.introduced_name(sentence)
            if not fact_sentence(sentence, name, people, one_to_one=one_to_one):
                continue
            about_speaker = lang.about_speaker(sentence, one_to_one=one_to_one)
            scope = "user" if about_speaker else "agent"
            if scope not in scopes:
                continue
            text = lang.strip_end(lang.third_person(sentence, name, plural=one_to_one) if about_speaker else sentence)
            key = normalize(text)
            if not text or key in seen or word_count(text) > limit or not kept(text, owner.get(scope)):
                continue
            seen.add(key)
            due = deadline(sentence, _said_at(message))
            filed = {"categories": categories_of(text, listed)} if listed else {}
            facts.append({"text": text, "scope": scope, **filed, **({"expires_at": due} if due else {})})
    return {"facts": facts}


def _said_at(message: dict[str, Any]) -> datetime:
    """The message's time (``conversation.message_inputs`` writes it in UTC)."""
    stamp = message.get("created_at")
    return datetime.fromisoformat(stamp) if isinstance(stamp, str) else datetime.now(timezone.utc)
