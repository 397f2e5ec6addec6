"""The small amount of English the offline rules understand: sentences, markers, entities,
first -> third person, and a token similarity. Deterministic, standard library only.

Longer than the house's 400 lines on purpose: most of it is tables (patterns and word lists)
rather than logic, and they are tuned together against the golden answers
(``tests/pipeline/llm/test_offline_golden.py``): a change to one list moves what the others
catch, so the vocabulary is kept in one file where it can be read and changed in step."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from pipeline.text import normalize

# --- sentences ---------------------------------------------------------------------------------

_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening))(?:\s+[A-Z][\w-]*)?"
    r"|ok|okay|sure|great|yes|yeah|no|well|so|also|btw|by the way|oh|anyway|thanks|thank you|actually|sorry"
    r"|just to confirm|to confirm|as i said|as mentioned|again|fyi|(?:just a |quick )?reminder)\s*[,!.:;-]+\s*",
    re.IGNORECASE,
)
_SMALL_TALK = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|ok|okay|sure|great|cool|nice|sounds|yes|yeah|no|lol|bye|good (?:night|bye))\b",
    re.IGNORECASE,
)


_TYPOGRAPHIC = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})

# "Quick update about me: ...", "One correction: ..." (a short lead-in without a value)
_LEAD_IN = re.compile(r"^([A-Za-z' ]{1,40}):\s+(?=\S+(?:\s+\S+){3})")
# A leading connective ties a sentence to the one before it ("And I'm on catering", "But the
# venue is booked"); memory reads each alone. "So far", "so much", "so that" are no connective.
_CONNECTIVE = re.compile(
    r"^(?:and(?:\s+also)?|but(?:\s+also)?|plus|also|oh\s+and|so(?!\s+(?:far|much|many|long|that|to|what)\b))"
    r"\s*,?\s+(?=\S)",
    re.IGNORECASE,
)


def sentences(content: str) -> list[str]:
    """The sentences of a message, greetings, fillers, leading connectives ("And ...", "But
    ...") and short lead-ins stripped from their start."""
    out = []
    content = content.translate(_TYPOGRAPHIC)
    for piece in _SPLIT.split(content):
        text = " ".join(piece.split())
        previous = None
        while text and text != previous:
            previous = text
            text = _GREETING.sub("", text, count=1).strip()
            text = _CONNECTIVE.sub("", text, count=1)
            lead = _LEAD_IN.match(text)
            if lead and len(lead.group(1).split()) <= 4:
                text = text[lead.end():]
        if text:
            out.append(text[0].upper() + text[1:])
    return out


_AND_SUBJECT = re.compile(r",?\s+(?:and|but|so)\s+(?=(?i:I|I'm|I've|my|we|our|he|she|they|his|her|their)\b)")
_IF_YOU = re.compile(r",?\s+if (?:you|we)\b.*$", re.IGNORECASE)


# "I'm Sam, I manage the studio": the introduction is a clause of its own.
_INTRO_THEN_CLAUSE = re.compile(
    r"^((?:my name is|i am|i'm|this is)\s+[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)\s*,\s+"
    r"(?=(?i:I|I'm|I've|I'll|I'd|my|we|we're|we've|we'll|our)\b)",
    re.IGNORECASE,
)


def clauses(sentence: str) -> list[str]:
    """Split "X and I live in Y" style compounds where a new subject starts a clause, an
    introduction from the clause after it ("I'm Sam, I manage ..."), and drop a trailing
    "if you need ..." that only addresses the assistant."""
    parts = []
    for part in _AND_SUBJECT.split(sentence):
        intro = _INTRO_THEN_CLAUSE.match(part)
        parts += [intro.group(1), part[intro.end():]] if intro and intro.group(1).split()[-1][:1].isupper() else [part]
    parts = [_IF_YOU.sub("", p).strip() for p in parts]
    return [p[0].upper() + p[1:] for p in parts if p]


def strip_end(text: str) -> str:
    return text.rstrip(" .!;,:")


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


# Introducing someone to the room ("Team, meet Juniper, our planning assistant", "Everyone, say
# hi to Tom", "Please welcome Priya to the team"): a greeting, not a statement about the
# project. Without a "Team," it must name someone and stop there, so that "Meet Tom at the
# venue at 10" and "Welcome packs are ready" stay what they are.
_INTRO_VERB = r"(?i:(?:please\s+)?(?:meet|welcome|say (?:hi|hello) to)|let me introduce|introducing)"
_INTRODUCING = re.compile(
    rf"^(?i:team|everyone|everybody|all|folks|guys|y'all|people)\s*[,:!-]+\s*{_INTRO_VERB}\b"
    rf"|^{_INTRO_VERB}\s+[A-Z][\w-]*(?:\s+[A-Z][\w-]*)?\s*(?:[,!.]|$|(?i:to (?:the|our)|who)\b)"
)


def is_small_talk(sentence: str) -> bool:
    return bool(_SMALL_TALK.match(sentence) or _INTRODUCING.match(sentence)) or len(sentence.split()) < 3


# --- markers (lower-cased, word-bounded) ---------------------------------------------------------


def _markers(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(patterns) + r")\b", re.IGNORECASE)


RULE = _markers(
    r"always", r"never", r"prefers?", r"preferred", r"favou?rite", r"i (?:really )?(?:like|love|enjoy|hate|dislike)",
    r"don't ever", r"do not ever", r"from now on", r"call me", r"i'd rather", r"i would rather",
)
WANT = _markers(r"i want(?! to)", r"i'd like(?! to)", r"i would like(?! to)")
# An imperative at the start of a sentence ("Send the draft to ...") is a request too.
IMPERATIVE = re.compile(
    r"^(?:send|make|book|add|remind|check|draft|write|call|email|tell|ask|keep|use|put|give|share|schedule|"
    r"order|prepare|update|create|find|note|list|plan|move|set|don't|do not)\b",
    re.IGNORECASE,
)
REQUEST = _markers(
    r"can you", r"could you", r"would you", r"will you", r"let's", r"let us", r"i need", r"we need", r"help me",
    r"i want to", r"i'd like to", r"i would like to", r"please", r"remind me", r"i'm looking for",
    r"i am looking for",
)
PROJECT = _markers(
    r"projects?", r"plans?", r"planned", r"planning", r"milestones?", r"launch(?:es|ed|ing)?", r"deadlines?",
    r"releases?", r"roadmap", r"budget", r"schedule[sd]?", r"decided", r"agreed", r"we'll", r"we will",
    r"our team", r"the team", r"festival", r"conference", r"events?", r"meetings?", r"sprints?", r"venue",
    r"kick-?off", r"phase",
)
OPINION = _markers(r"i think", r"i feel", r"i felt", r"i believe", r"in my opinion", r"i guess", r"maybe",
                   r"probably", r"i hope", r"i wonder")
EPHEMERAL = _markers(r"here is", r"here's", r"here are", r"this week", r"next week", r"tomorrow", r"yesterday",
                     r"today", r"tonight", r"right now", r"at the moment", r"this morning", r"this afternoon",
                     r"this evening", r"just now", r"i'm tired", r"i am tired", r"i'm hungry", r"on my way")
# Something that reads as a verb: a fact is a statement, not a fragment ("Lumen Beam, our lamp").
VERB = _markers(
    r"is", r"are", r"was", r"were", r"am", r"be", r"been", r"has", r"have", r"had", r"will", r"would", r"can",
    r"could", r"should", r"must", r"may", r"might", r"shall", r"does", r"do", r"did", r"i", r"we", r"\w+'s",
    r"\w+'re", r"\w+ed", r"\w+es", r"needs", r"takes", r"lives", r"works", r"ships", r"starts", r"ends", r"costs",
    r"opens", r"runs", r"holds", r"gets", r"owns", r"uses", r"wants", r"leads", r"joins", r"hosts", r"includes",
    r"begins", r"arrives", r"pays", r"seats", r"fits", r"comes", r"sits", r"speaks", r"knows", r"plays",
    r"sells", r"builds", r"helps", r"meets", r"brings", r"keeps", r"makes",
)
NEGATION = _markers(r"not", r"no longer", r"isn't", r"aren't", r"wasn't", r"doesn't", r"don't", r"never",
                    r"cancell?ed", r"called off")
FIRST_PERSON = _markers(r"i", r"i'm", r"i've", r"i'll", r"i'd", r"my", r"me", r"mine", r"myself")
# "we", "our", "us" (not "US"): in a one-to-one chat, the speaker's own affairs.
FIRST_PERSON_PLURAL = re.compile(
    r"\b(?:[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'll|[Ww]e'd|[Oo]ur|[Oo]urs|[Oo]urselves|[Uu]s)\b"
)


def about_speaker(sentence: str, *, one_to_one: bool) -> bool:
    """The sentence is about its speaker: first person, or "we/our" in a one-to-one chat (a
    group's "we" is the group, whose affairs are shared)."""
    return bool(FIRST_PERSON.search(sentence) or (one_to_one and FIRST_PERSON_PLURAL.search(sentence)))


# --- events -------------------------------------------------------------------------------------

# What its speaker did, told in the first person at the start of a clause ("I volunteered at
# the homeless shelter", "Last week, I built a new website", "... - we adopted a puppy"): a
# fact about them with or without a name or number. Not a feeling or a thought ("I felt",
# "I realized", "I wish"), not "had"/"got" (a feeling as often as a thing: "I had a similar
# experience", "I got a surge of energy"), and not about a thing only pointed at ("I took it
# at the beach", "I made this for you").
_EVENT_LEAD = (r"(?:^|,\s+|\s[-\u2013\u2014:]\s+)(?:(?:last|this|on|in|over|at|early|later)\s+\w+,?\s+"
               r"|(?:recently|finally|then|also|and|so|well|actually|anyway),?\s+)?")
_ADVERB = r"(?:just\s+|recently\s+|finally\s+|also\s+|even\s+|actually\s+|already\s+)?"
_NOT_EVENTS = (
    r"felt|thought|loved|liked|enjoyed|hated|wished|hoped|guessed|wondered|meant|realized|realised|noticed|"
    r"missed|needed|wanted|tried|used|ended|decided|appreciated|imagined|figured|remembered|forgot|expected|"
    r"believed|supposed|seemed|managed|happened|learned|learnt|mentioned|said|asked|talked|chatted|laughed|"
    r"cried|smiled|worried|struggled|considered|dreamed|dreamt|agreed|called|named|kept|stayed|waited"
)
_IRREGULAR_ACTIONS = (
    r"went|made|took|saw|met|found|bought|began|started|joined|won|lost|ran|gave|built|wrote|drew|painted|"
    r"taught|left|sold|became|flew|drove|rode|swam|grew|held|caught|spent|sent|read|sang|fed|fixed|moved"
)
_POINTED = r"(?:it|that|this|these|those|them|him|her|you|me|so|really|something|anything|everything|up|out|back)"


def _event(subject: str) -> re.Pattern[str]:
    return re.compile(
        rf"{_EVENT_LEAD}{subject}\s+{_ADVERB}(?!(?:{_NOT_EVENTS})\b)(?:{_IRREGULAR_ACTIONS}|[a-z]{{3,}}ed)\b"
        rf"\s+(?!{_POINTED}\b)(?:(?:a|an)\s+)?[\w']{{2,}}",
        re.IGNORECASE,
    )


_EVENT_I = _event(r"(?-i:I)")
_EVENT_WE = _event(r"(?:we)")


def personal_event(sentence: str, *, plural: bool) -> bool:
    """Whether the sentence tells what its speaker did; "we" counts when ``plural`` (in a
    one-to-one chat, where "we" is the speaker's own affairs)."""
    return bool(_EVENT_I.search(sentence) or (plural and _EVENT_WE.search(sentence)))


# --- entities -----------------------------------------------------------------------------------

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_MONTH_WORD = re.compile(rf"^{_MONTH}$", re.IGNORECASE)
_DATE = re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}\b|\b\d{{1,2}}\s+{_MONTH}\b|\b(?:in|since|until|by)\s+"
                   rf"(?:january|february|march|april|june|july|august|september|october|november|december)\b",
                   re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_NOT_PROPER = {"I", "I'm", "I've", "I'll", "I'd", "OK"}


def _word(token: str) -> str:
    return token.strip("\"'()[]{}.,!?;:")


_INTERJECTION = (r"(?i:wow|woah|whoa|hey|hi|hello|oh|ah|aw+|yay|yeah|yep|yup|yes|no|ok|okay|thanks|thank you|congrats|"
                 r"congratulations|haha|omg|gosh|hmm|sorry|well|dear|good (?:morning|night)|morning)")
_NAME_WORD = r"([A-Z][\w'-]*)"
# a name set off as the one spoken to: "Wow, Caroline, ...", "Caroline, ...", "Thanks Mel!",
# "..., Mel." or "... great Jon!" at the end, and ", Mel," inside
_ADDRESS = (
    re.compile(rf"^(?:{_INTERJECTION}\s*[,!]?\s+)?{_NAME_WORD}\s*[,!]+\s*"),
    re.compile(rf"(?:,\s*|\s+){_NAME_WORD}\s*(?=[,.!?]*$)"),
    re.compile(rf",\s*{_NAME_WORD}\s*,"),
)


def _one_of(word: str, names: Iterable[str]) -> bool:
    """``word`` is one of ``names``, or a short form of one ("Mel" of "Melanie", 3+ letters)."""
    folded = word.casefold()
    return any(folded == n or (len(folded) >= 3 and n.startswith(folded)) for n in names)


def without_address(sentence: str, names: Iterable[str]) -> str:
    """``sentence`` without the name of someone in the conversation it speaks to: "Wow,
    Caroline, that's great" is about nothing named, though it holds a name."""
    first_names = {part.casefold() for name in names if name for part in name.split()[:1]}
    if not first_names:
        return sentence
    for pattern in _ADDRESS:
        sentence = pattern.sub(lambda m: " " if _one_of(m.group(1), first_names) else m.group(0), sentence)
    return sentence.strip()


def has_entity(sentence: str) -> bool:
    """A name, number, date, email, URL, amount, or a capitalised proper noun after the first word."""
    if EMAIL.search(sentence) or URL.search(sentence) or _DIGIT.search(sentence) or _DATE.search(sentence):
        return True
    words = [_word(t) for t in sentence.split()[1:]]
    return any(w[:1].isupper() and w not in _NOT_PROPER for w in words if w)


# --- first -> third person -----------------------------------------------------------------------

_NAME_INTRO = re.compile(r"^(?:my name is|i am|i'm|this is)\s+([A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)(.*)$", re.IGNORECASE)
_MODALS = {"can", "could", "will", "would", "should", "must", "might", "may", "shall", "did", "was", "had",
           "can't", "couldn't", "won't", "wouldn't", "shouldn't", "didn't", "wasn't", "hadn't",
           # common irregular past forms stay as they are
           "got", "went", "met", "bought", "left", "began", "grew", "made", "took", "saw", "came", "became",
           "lost", "won", "ran", "said", "told", "found", "sold", "wrote", "spent", "built", "taught", "felt",
           "kept", "knew", "gave", "drove", "flew", "moved", "read", "put", "set", "cut", "let", "hurt", "quit"}
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "'m": "is",
              "are": "is", "be": "is"}
_ADVERB = r"(?:(also|still|just|recently|now|often|usually|really|currently|mostly|never|always|sometimes|rarely)\s+)?"
_I_VERB = re.compile(rf"\b[Ii]\s+{_ADVERB}([A-Za-z']+)")


def introduced_name(sentence: str, known: str | None = None) -> str | None:
    """``Alice`` from "My name is Alice" / "I'm Alice" (a capitalised name only).

    "I'm X" counts only when X is the speaker's known name or no name is known, so that
    "I'm Canadian" from Alice is not read as a name."""
    match = _NAME_INTRO.match(strip_end(sentence))
    if not match or not match.group(1)[:1].isupper():
        return None
    said = match.group(0).lower()
    if known and not said.startswith("my name is"):
        if match.group(1).split()[0].casefold() != known.split()[0].casefold():
            return None
    return match.group(1)


def _conjugate(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _MODALS or (lower.endswith("ed") and not lower.endswith("eed")):
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


def _plural_third_person(text: str, subject: str, possessive: str) -> str:
    """"we/us" -> "<name> and others" (a plural subject: its verbs stay as they are), "our" ->
    "<name>'s"."""
    group = f"{subject} and others"
    text = re.sub(r"\b[Ww]e('re|'ve|'ll|'d)\b", lambda m: group + {"'re": " are", "'ve": " have", "'ll": " will",
                                                                   "'d": " would"}[m.group(1)], text)
    text = re.sub(r"\b(?:[Ww]e|[Uu]s)\b", group, text)
    text = re.sub(r"\b[Oo]urs\b", possessive, text)
    text = re.sub(r"\b[Oo]urselves\b", "themselves", text)
    return re.sub(r"\b[Oo]ur\b", possessive, text)


def third_person(sentence: str, name: str | None, *, plural: bool = False) -> str:
    """First person -> third person, e.g. "My email is x" -> "Alice's email is x"; with
    ``plural`` (a one-to-one chat) "we/our/us" too: "Our studio is in Porto" -> "Alice's studio
    is in Porto"."""
    subject = name or "the user"
    possessive = f"{name}'s" if name else "the user's"
    if plural:
        sentence = _plural_third_person(sentence, subject, possessive)
    intro = _NAME_INTRO.match(strip_end(sentence))
    if intro and introduced_name(sentence, name):
        rest = intro.group(2)
        if not rest.strip():
            return f"The user's name is {intro.group(1)}"
        if re.match(r"^\s*,\s*(?:an?|the)\s", rest):
            return f"{intro.group(1)} is {rest.strip().lstrip(',').strip()}"
    # chat is often lower case: "i'm", "i live" are the pronoun too
    text = re.sub(r"\bI'm\b", f"{subject} is", sentence, flags=re.IGNORECASE)
    text = re.sub(r"\bI am\b", f"{subject} is", text, flags=re.IGNORECASE)
    text = re.sub(r"\bI've\b", f"{subject} has", text, flags=re.IGNORECASE)
    text = re.sub(r"\bI'll\b", f"{subject} will", text, flags=re.IGNORECASE)
    text = re.sub(r"\bI'd\b", f"{subject} would", text, flags=re.IGNORECASE)

    def verb(match: re.Match[str]) -> str:
        adverb = f"{match.group(1)} " if match.group(1) else ""
        return f"{subject} {adverb}{_conjugate(match.group(2))}"

    text = _I_VERB.sub(verb, text)
    text = re.sub(r"\bI\b", subject, text, flags=re.IGNORECASE)
    text = re.sub(r"\bmy\b", possessive, text, flags=re.IGNORECASE)
    text = re.sub(r"\bmine\b", possessive, text, flags=re.IGNORECASE)
    text = re.sub(r"\bmyself\b", "themselves", text, flags=re.IGNORECASE)
    text = re.sub(r"\bme\b", subject, text, flags=re.IGNORECASE)
    text = _named_once(text, subject, possessive)
    return text[0].upper() + text[1:] if text else text


_SECOND_PERSON = (
    (re.compile(r"\byou(?:'re|\s+are)\b", re.IGNORECASE), "{who} is"),
    (re.compile(r"\byou've\b", re.IGNORECASE), "{who} has"),
    (re.compile(r"\byou'll\b", re.IGNORECASE), "{who} will"),
    (re.compile(r"\byou'd\b", re.IGNORECASE), "{who} would"),
    (re.compile(r"\byour(?:s)?\b", re.IGNORECASE), "{who}'s"),
    (re.compile(r"\byou\b", re.IGNORECASE), "{who}"),
)


def agent_person(text: str, agent: str | None) -> str:
    """The second person, said to the agent, turned to the agent's name: "Maya will be using
    you to plan the launch" -> "Maya will be using Juniper to plan the launch", "your answers"
    -> "Juniper's answers" ("the assistant" when the agent has no name). Memory is read later,
    by the agent and by people, where "you" names no one."""
    who = agent or "the assistant"
    for pattern, replacement in _SECOND_PERSON:
        text = pattern.sub(lambda _, r=replacement.format(who=who): r, text)
    text = _named_once(text, who, f"{who}'s")
    return text[0].upper() + text[1:] if text else text


def _named_once(text: str, subject: str, possessive: str) -> str:
    """The speaker named once, then "their" and "them": "Maya Chen will plan Maya Chen's
    launch" reads as if two people were meant, "Maya Chen will plan their launch" does not.
    A later mention as the subject of a verb keeps the name (its verb is conjugated for it)."""
    first = re.search(re.escape(subject), text, flags=re.IGNORECASE)
    if first is None:
        return text
    head = first.end() + (2 if text[first.end():first.end() + 2] == "'s" else 0)
    rest = re.sub(rf"\b{re.escape(possessive)}(?!\w)", "their", text[head:], flags=re.IGNORECASE)
    rest = re.sub(rf"(\b(?:to|for|with|about|from|of|at|by|on|in|tell|told|give|gave|ask|asked|help|helps|"
                  rf"helped|call|called|let|lets|remind|reminds|using|use|uses|send|sends|message|email|ping|text)\s+){re.escape(subject)}"
                  rf"(?![\w'])", r"\1them", rest, flags=re.IGNORECASE)
    return text[:head] + rest


# --- similarity ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Similarity:
    jaccard: float        # token Jaccard over normalized words
    prefix: int           # leading words in common
    value_changed: bool   # the differing words hold a value (number, email, URL, date, name)
    negation_differs: bool  # one says "not"/"no longer"/"cancelled" and the other does not
    equal: bool           # equal once normalized
    nested: bool          # the words of one are all among the words of the other


# 2,048 texts: about 9 MB (a profile takes 4.6 kB); 8,192 would hold 37 MB in every worker that
# runs the offline provider, still filling after half an hour of bench.soak
@lru_cache(maxsize=2048)
def _profile(text: str) -> tuple[tuple[tuple[str, bool], ...], frozenset[str], bool, str]:
    """(tokens with their value flag, token set, negated, normalized) of a text, cached:
    consolidation compares every new line with every kept one."""
    tokens = []
    for position, raw in enumerate(text.split()):
        word = _word(raw)
        if not word:
            continue
        value = bool(
            _DIGIT.search(word) or "@" in word or URL.match(word) or _MONTH_WORD.match(word)
            or (position > 0 and word[:1].isupper() and word not in _NOT_PROPER)
        )
        tokens.append((word.casefold(), value))
    return tuple(tokens), frozenset(w for w, _ in tokens), bool(NEGATION.search(text)), normalize(text)


def similarity(a: str, b: str) -> Similarity:
    ta, sa, na, norm_a = _profile(a)
    tb, sb, nb, norm_b = _profile(b)
    union = sa | sb
    jaccard = len(sa & sb) / len(union) if union else 1.0
    prefix = 0
    for (wa, _), (wb, _) in zip(ta, tb):
        if wa != wb:
            break
        prefix += 1
    differing = sa ^ sb
    value_changed = any(v for w, v in ta + tb if w in differing)
    return Similarity(jaccard, prefix, value_changed, na != nb, norm_a == norm_b, sa <= sb or sb <= sa)


# Statements that fill one slot of their subject: a newer one replaces the older one.
_SLOTS = {
    "location": re.compile(r"\b(?:lives|lived|live|moved|moves|relocated|is based|resides|resided)\b", re.I),
    "employer": re.compile(r"\b(?:works|worked|work|joined|is employed)\b", re.I),
    "schedule": re.compile(
        r"\b(?:is on|takes place|moves from|moves to|moved from|moved to|is scheduled|was moved|"
        r"is postponed|was postponed|is rescheduled|was rescheduled)\b", re.I),
}


@lru_cache(maxsize=2048)
def _slot_subjects(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    found = []
    for slot, pattern in _SLOTS.items():
        match = pattern.search(text)
        if match:
            found.append((slot, tuple(normalize(text[: match.start()]).split())))
    return tuple(found)


def same_slot(a: str, b: str) -> bool:
    """Both say where/for whom/when the same subject is ("Maya lives in Lisbon", "Maya moved to
    Porto"): the subject is what precedes the slot's verb, equal or one extending the other."""
    slots_b = dict(_slot_subjects(b))
    for slot, sa in _slot_subjects(a):
        sb = slots_b.get(slot)
        if sb is None:
            continue
        short, long_ = sorted((sa, sb), key=len)
        if short and long_[: len(short)] == short and (len(short) >= 2 or short == long_):
            return True
    return False


def repeats(text: str, others: list[str], threshold: float = 0.8) -> bool:
    """``text`` says what one of ``others`` already says (equal, or nearly the same words)."""
    for other in others:
        sim = similarity(text, other)
        if sim.equal or (sim.jaccard >= threshold and not sim.value_changed):
            return True
    return False
