"""extract_reflections by rule: each user sentence goes to at most one level.

Checked in this order, on what humans wrote:
1. rules and preferences ("I prefer", "always", "never", "I like", "I want", "call me") -> user;
2. requests and intents ("can you", "let's", "I need", "help me", "please", "I want to", an
   imperative such as "Send the draft ...") -> session;
3. statements about projects, plans, milestones and shared decisions ("we decided", "launch",
   "budget", "deadline") that are not already a fact sentence -> agent; in a one-to-one chat,
   such a statement in the first person, "we/our" included, is the speaker's affair -> user;
and every URL a human shares outside a request is pinned at session level. Greetings and
introductions to the room ("Team, meet Juniper, our planning assistant") are small talk.
A reflection is dropped when its level is not formed (never re-scoped), when it has more words
than the limit, or when it repeats a new fact, a buffered reflection or a blob line of its
level. The most recent ones are kept: at most ``_KEEP`` per level. Each cites the message its
sentence came from (its alias: the index in ``inputs["messages"]``), so it rests on whoever
said it, never on everyone in the room. The owner's topic lists of a level
(``inputs["guidance"]``, ``offline_rules.topics``) leave out what is ignored or off focus.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.llm.offline_rules import language as lang
from pipeline.llm.offline_rules.facts import fact_sentence
from pipeline.llm.offline_rules.topics import kept as owner_keeps
from pipeline.prompts.consolidation import parse_blob
from pipeline.text import word_count

_KEEP = {"agent": 8, "user": 8, "session": 5}
_FIRST_PERSON_START = re.compile(r"^(?:i|i'm|i've|i'll|i'd|my)\b", re.IGNORECASE)
# "Please always answer in Spanish" is kept as the rule itself: "Always answer in Spanish"
_PLEASE = re.compile(r"^please\s*,?\s+|,?\s+please(?=[.!]?$)", re.IGNORECASE)


def _level(sentence: str, one_to_one: bool) -> str | None:
    if lang.is_small_talk(sentence):
        return None
    if lang.RULE.search(sentence) or lang.WANT.search(sentence):
        return "user"
    if lang.REQUEST.search(sentence) or lang.IMPERATIVE.match(sentence):
        return "session"
    if lang.PROJECT.search(sentence) and not lang.is_question(sentence) and not fact_sentence(sentence):
        return "user" if lang.about_speaker(sentence, one_to_one=one_to_one) and one_to_one else "agent"
    return None


def _phrase(level: str, sentence: str, name: str | None, one_to_one: bool, agent: str | None) -> str:
    """A session request keeps who requested it, quoted; anything else is memory in its own
    words: the speaker in the third person, no reporting frame ("Alice asks: ..."), no
    "please", and "you" (the agent, in a one-to-one chat or where the agent is named) turned
    to the agent's name."""
    if level == "session" and not _FIRST_PERSON_START.match(sentence):
        return f"{name or 'The user'} requested: {lang.strip_end(sentence)}"
    sentence = _PLEASE.sub("", sentence)
    if lang.about_speaker(sentence, one_to_one=one_to_one):
        sentence = lang.third_person(sentence, name, plural=one_to_one)
    if one_to_one or (agent and re.search(rf"\b{re.escape(agent)}\b", sentence)):
        sentence = lang.agent_person(sentence, agent)
    return lang.strip_end(sentence[:1].upper() + sentence[1:])


def _agent_name(inputs: dict[str, Any]) -> str | None:
    """The agent's name: the one its settings or events give (``inputs["agent_name"]``), else
    the name its own messages carry."""
    return inputs.get("agent_name") or next(
        (m.get("sender_name") for m in inputs.get("messages") or () if m.get("role") == "assistant"
         and m.get("sender_name")), None)


def _known(inputs: dict[str, Any], level: str) -> list[str]:
    known = list(inputs.get("new_facts") or ())
    known += list((inputs.get("unabsorbed") or {}).get(level) or ())
    blob = (inputs.get("blobs") or {}).get(level) or ""
    for section in parse_blob(blob)[1]:
        known += section.bullets
    return known


def extract(inputs: dict[str, Any], *, word_limit: int) -> dict[str, Any]:
    levels = set(inputs.get("scopes") or ())
    one_to_one = not inputs.get("group_chat")
    limit = int(inputs.get("word_limit") or word_limit)
    agent = _agent_name(inputs)
    found: dict[str, list[tuple[str, int]]] = {"agent": [], "user": [], "session": []}
    for alias, message in enumerate(inputs.get("messages") or ()):
        if message.get("role") != "user":
            continue
        name = message.get("sender_name")
        for sentence in lang.sentences(message.get("content") or ""):
            name = name or lang.introduced_name(sentence)
            level = _level(sentence, one_to_one)
            if level is not None:
                found[level].append((_phrase(level, sentence, name, one_to_one, agent), alias))
            if level == "session":
                continue  # the request itself already carries its links
            for url in lang.URL.findall(sentence):
                found["session"].append((f"Pinned link shared by {name or 'the user'}: {lang.strip_end(url)}", alias))
    answer: dict[str, list[dict[str, Any]]] = {}
    owner = inputs.get("guidance") or {}
    for level, items in found.items():
        kept: list[tuple[str, int]] = []
        if level in levels:
            known = _known(inputs, level)
            for text, alias in items:
                if not owner_keeps(text, owner.get(level)):
                    continue
                if word_count(text) <= limit and not lang.repeats(text, known + [t for t, _ in kept]):
                    kept.append((text, alias))
        answer[level] = [{"text": text, "sources": [alias]} for text, alias in kept[-_KEEP[level]:]]
    return answer
