"""What is never stored (design §11), as a property over every write path.

A generated secret (a password or passphrase in one of the phrasings people use, an API key
or token of a known shape, a card number that passes Luhn, an IBAN whose check digits hold,
sign-in credentials as a ``user:password`` pair, a URL or a username with a password, a
social security, passport or national id number, a door, gate, alarm or safe code) is placed
in a message of a one-to-one or group conversation, alone or inside an ordinary sentence, in
a record of the previous system's collections migrated before the conversation, in an MCP
``remember`` call (the tool itself, as a model calls it), and in the user's edit of one of
their facts (``api.user_memory.edit_fact``, what ``PATCH .../memory/facts/{id}`` and the
inspector call), which must be refused as a secret. The whole pipeline runs
(``tests/properties/stack.py``: the real SQLite store, ingest, every formation stage,
consolidation, the session-end sweep) with either the offline rules or a scripted model that
answers with the secret at every step it can: a fact in each scope, a reflection at each
level, an UPDATE's merged text and a line of every consolidated blob. ``migrate-v1`` runs for
real over the Mongo emulation into the same store. In a group chat the other person is then
erased (``forget-user``), so the blobs resting on them are rebuilt through the same model.

Then, after every user's context was read (so cached contexts are stored too), no stored
document holds the secret: facts (history included), reflections, blobs, run records (their
stage outputs and source excerpts), cached contexts, usage records. Messages are kept as sent
(design §11: only what is derived from them is screened), so they are the one collection not
checked; the secret is asserted to be there, so the check cannot pass by never saying it.

Budget: ``MEMORY_SECRET_PROPERTY_EXAMPLES`` (default 40) examples of 0.1-0.3 s each, about
15 s on a shared 2-core machine. With ``CI`` set the run is derandomized.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from datetime import timezone
from pathlib import Path

import pytest
from bson import ObjectId
from hypothesis import HealthCheck, given, settings, strategies as st

from api.identity import Identity, default_session
from pipeline.errors import Refused
from api.mcp import build_server, connection_identity
from api.user_memory import edit_fact
from ops.migrate_v1 import migrate
from pipeline.llm.offline import OfflineLLM
from pipeline.llm.scripted import ScriptedLLM
from pipeline.prompts.consolidation import BlobSection
from pipeline.prompts.facts import ExtractedFact
from pipeline.prompts.reflections import ReflectionItem
from schemas.settings import Settings
from tests.properties.stack import AGENT, Stack
from testkit.mongo_emulation import emulated_database

EXAMPLES = int(os.environ.get("MEMORY_SECRET_PROPERTY_EXAMPLES", "40"))
USERS = {"user-ana": "Ana", "user-ben": "Ben"}
ORDINARY = ("I prefer short answers.", "The caterer is Luna Foods.", "The budget is fixed at 40k.",
            "Tom handles the audio and video.", "I live in Lisbon.", "Please send the agenda on Fridays.")
# plain words a passphrase is made of (none a word that describes a password or goes on a sentence)
PASS_WORDS = ("horse", "battery", "staple", "orchid", "river", "copper", "lantern", "meadow", "violet", "anchor")


# --- secrets ---------------------------------------------------------------------------------

def _luhn(body: str) -> str:
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


def _iban(bban: str) -> str:
    """A German IBAN of ``bban`` (18 digits) with ISO 13616 check digits."""
    check = 98 - int("".join(str(int(c, 36)) for c in bban + "DE00")) % 97
    return f"DE{check:02d}{bban}"


_VALUE = st.from_regex(r"[A-Za-z]{6,9}[0-9]{2,4}[!#%]", fullmatch=True)
_PHRASE = st.lists(st.sampled_from(PASS_WORDS), min_size=3, max_size=4, unique=True).map(" ".join)
_PASSWORDS = st.one_of(
    _VALUE.flatmap(lambda v: st.sampled_from([
        (f"my password is {v}", v), (f"Password for the shared drive: {v}", v), (f"the wifi password is now {v}", v),
        (f"pw: {v}", v), (f"The passcode for the vault = {v}", v)])),
    _PHRASE.flatmap(lambda p: st.sampled_from([
        (f"my passphrase is {p}", p), (f"The vault passphrase is correct {p}", f"correct {p}"),
        (f"our wifi passphrase: {p}", p)])),
)
_KEYS = st.one_of(
    st.from_regex(r"sk-proj-[A-Za-z0-9]{24,32}", fullmatch=True),
    st.from_regex(r"ghp_[A-Za-z0-9]{36}", fullmatch=True),
    st.from_regex(r"glpat-[A-Za-z0-9]{20}", fullmatch=True),
    st.from_regex(r"AKIA[A-Z0-9]{16}", fullmatch=True),
).flatmap(lambda k: st.sampled_from([(f"Use {k} for the staging deploys", k), (f"the API key is {k}", k)]))
_CARDS = st.tuples(st.sampled_from("45"), st.from_regex(r"[0-9]{14}", fullmatch=True), st.booleans()).map(
    lambda t: _luhn(t[0] + t[1])).flatmap(
    lambda card: st.sampled_from([" ".join(card[i:i + 4] for i in range(0, 16, 4)), card])).flatmap(
    lambda card: st.sampled_from([(f"my card number is {card}", card), (f"Pay with {card} please", card)]))
_IBANS = st.from_regex(r"[0-9]{18}", fullmatch=True).map(_iban).map(
    lambda iban: (f"Transfer the deposit to {iban} by Friday", iban))
_LOGINS = st.tuples(st.sampled_from(("admin", "maya", "deploy", "root", "ops-team")), _VALUE).flatmap(
    lambda t: st.sampled_from([
        (f"Use credentials {t[0]}:{t[1]} for the office router", t[1]),
        (f"The app connects to postgres://{t[0]}:{t[1]}@db.internal:5432/app", t[1]),
        (f"Login for the CMS: {t[0]} / {t[1]}", t[1]), (f"username {t[0]}, pass {t[1]}", t[1])]))
_SSN = st.tuples(st.integers(100, 665), st.integers(10, 99), st.integers(1000, 9999)).map(
    lambda t: f"{t[0]}-{t[1]}-{t[2]}")
_GOVERNMENT_IDS = st.one_of(
    _SSN.flatmap(lambda n: st.sampled_from([(f"my social security number is {n}", n), (f"SSN: {n}", n)])),
    st.from_regex(r"[A-Z][0-9]{8}", fullmatch=True).map(lambda n: (f"my passport number is {n}", n)),
    st.from_regex(r"[0-9]{8}[A-Z]", fullmatch=True).map(lambda n: (f"my national ID is {n}", n)),
)
# an access code's digits alone could be part of a timestamp: the value checked is the code as
# said ("code is 4821"), or a combination whose dashes no timestamp or id has
_ACCESS_CODES = st.one_of(
    st.tuples(st.sampled_from(("door", "gate", "alarm", "garage")), st.from_regex(r"[0-9]{4,6}", fullmatch=True)).map(
        lambda t: (f"The {t[0]} code is {t[1]}", f"code is {t[1]}")),
    st.from_regex(r"[0-9]{2}-[0-9]{2}-[0-9]{2}", fullmatch=True).map(lambda n: (f"The safe combination is {n}", n)),
)
SECRETS = st.one_of(_PASSWORDS, _KEYS, _CARDS, _IBANS, _LOGINS, _GOVERNMENT_IDS,
                    _ACCESS_CODES)   # (sentence, the value never to store)


# --- a model that answers with the secret ------------------------------------------------------

def _leaky(settings: Settings, sentence: str) -> ScriptedLLM:
    """The offline rules' answer to every call, with the secret added wherever the answer can
    carry text: what a model that repeats what it read would write."""
    offline = OfflineLLM(settings)

    def answer(request):
        parsed = offline.complete(request).parsed
        if request.operation == "extract_facts":
            parsed.facts += [ExtractedFact(scope="agent", text=sentence), ExtractedFact(scope="user", text=sentence)]
        elif request.operation == "extract_reflections":
            for level in ("agent", "user", "session"):
                getattr(parsed, level).append(ReflectionItem(text=sentence, sources=[0]))
        elif request.operation == "decide_facts":
            for decision in parsed.decisions:
                if decision.action == "UPDATE":
                    decision.text = f"{decision.text} {sentence}"
        elif request.operation == "consolidate":
            parsed.sections = [*parsed.sections, BlobSection(name="NOTES", bullets=[sentence])]
        return parsed

    return ScriptedLLM().on("*", answer)


# --- the v1 source ------------------------------------------------------------------------

V1_PLACES = ("fact", "directive", "suggestion", "memory_user", "shard", "shard_fact")


def _v1_source(place: str, sentence: str):
    db = emulated_database("v1")
    users = list(USERS)

    def mem(kind, content, related):
        return {"_id": ObjectId(), "agent_id": AGENT, "source_session_id": "v1-s", "memory_type": kind,
                "content": content, "source_message_ids": ["v1-m"], "related_users": related, "shard_id": None}

    said = {p: (sentence if p == place else "") for p in V1_PLACES}
    db["memory_sessions"].insert_many([
        mem("fact", f"Ana runs the design reviews. {said['fact']}".strip(), users[:1]),
        mem("directive", f"Answer Ana in Portuguese. {said['directive']}".strip(), users[:1]),
        mem("suggestion", f"Offer a summary after long threads. {said['suggestion']}".strip(), users),
    ])
    db["memory_user"].insert_one({"_id": ObjectId(), "agent_id": AGENT, "user_id": users[1], "unabsorbed_memory_ids": [],
                                  "content": f"[PREFERENCES]\nBen likes tea. {said['memory_user']}".strip()})
    db["memory_agent"].insert_one({"_id": ObjectId(), "agent_id": AGENT, "shard_name": "OPS", "is_active": True,
                                   "unabsorbed_memory_ids": [],
                                   "content": f"Releases go out on Tuesdays. {said['shard']}".strip(),
                                   "facts": ["The office opens at 9 am.", *([sentence] if said["shard_fact"] else [])]})
    return db


# --- the doors besides a conversation ----------------------------------------------------------

def _settle(stack: Stack) -> None:
    for _ in range(3):   # every run, its consolidations, the session end, and what beat finds
        for _ in range(500):
            if not stack.queue:
                break
            stack.run_task(0)
        stack.clock.advance(minutes=15)
        stack.beat()


def _remember(stack: Stack, user_id: str, sentence: str) -> None:
    """The MCP ``remember`` tool, called as a model calls it over the user's own connection."""
    server = build_server(lambda agent_id: stack.services[1],
                          connection_identity(Identity(AGENT, user_id, default_session(AGENT, user_id))))
    result = asyncio.run(server.call_tool("remember", {"text": sentence}))
    assert not result.is_error, result


def _edit_is_refused(stack: Stack, user_id: str, sentence: str) -> None:
    """A user's edit of one of their facts to the sentence (``PATCH .../memory/facts/{id}`` and
    the inspector's form call ``api.user_memory.edit_fact``) is refused, naming a secret."""
    for fact in stack.deps.store.facts.list_facts(AGENT, f"user:{user_id}", limit=1):
        with pytest.raises(Refused) as refused:   # the API answers it 422 "refused"
            edit_fact(stack.services[0], AGENT, user_id, fact.fact_id, sentence)
        assert refused.value.field == "content" and "a secret" in refused.value.reason, refused.value


# --- the property ----------------------------------------------------------------------------

def _forms(value: str) -> set[str]:
    """The value as written and without its spaces (a card or IBAN printed in groups)."""
    return {value, value.replace(" ", "")}


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(secret=SECRETS, leaky=st.booleans(), group=st.booleans(), v1_place=st.sampled_from(V1_PLACES),
       position=st.integers(0, 7), inside=st.booleans(), speaker=st.sampled_from(list(USERS)),
       lines=st.lists(st.sampled_from(ORDINARY), min_size=3, max_size=6))
def test_a_secret_in_any_message_or_v1_record_reaches_no_stored_document(
    secret, leaky, group, v1_place, position, inside, speaker, lines,
):
    sentence, value = secret
    tmp = Path(tempfile.mkdtemp(prefix="secrets-"))
    config = Settings(_env_file=None, store_url=f"sqlite:///{tmp / 'memory.db'}", llm_provider="offline",
                      embedding_provider="hashing", consolidation_threshold_agent=1, consolidation_threshold_user=1,
                      consolidation_threshold_session=1, formation_message_interval=4, min_messages_to_form=2)
    stack = Stack(tmp / "memory.db", config)
    try:
        if leaky:
            stack.deps.llm = _leaky(config, sentence)
        migrate(_v1_source(v1_place, sentence), stack.deps.store, stack.deps.embedder, config,
                stack.clock.now().astimezone(timezone.utc), apply=True)

        users = list(USERS) if group else [speaker]
        service = stack.services[0]
        service.on_session_start(session_id="s-1", user_ids=users)
        said = ["We booked Quokka Hall for the launch.", *lines]   # team knowledge: formed in any session
        said.insert(min(position, len(said)), f"{said[0]} {sentence}." if inside else f"{sentence}.")
        for n, text in enumerate(said):
            stack.clock.advance(minutes=1)
            service.maybe_form_memories([
                {"message_id": f"m{n}", "role": "user", "sender_id": speaker, "sender_name": USERS[speaker],
                 "content": text},
                {"message_id": f"m{n}r", "role": "assistant", "content": "Noted."},
            ], session_id="s-1")
        if group:   # the other person says something the team's memory then rests on
            other = next(u for u in USERS if u != speaker)
            stack.clock.advance(minutes=1)
            service.maybe_form_memories([{"message_id": "m-other", "role": "user", "sender_id": other,
                                          "sender_name": USERS[other], "content": "Tom handles the audio and video."}],
                                        session_id="s-1")
        stack.clock.advance(minutes=1)
        service.on_session_end(session_id="s-1")
        _remember(stack, speaker, sentence)
        _settle(stack)
        _edit_is_refused(stack, speaker, sentence)
        contexts = [s.get_memory_context(session_id="s-1", user_id=u) for s in stack.services for u in users]
        assert stack.deps.store.admin.dump_all()["contexts"], "no context was cached: the check of them checked nothing"
        if group:   # blobs that rested on the other person are rebuilt through the model
            stack.forget(other)

        dump = stack.deps.store.admin.dump_all()
        assert any(value in m["content"] for m in dump["messages"]), "the secret was never said"
        derived = json.dumps({name: rows for name, rows in dump.items() if name != "messages"}, default=str)
        for form in _forms(value):
            assert form not in derived, f"{value!r} ({sentence!r}) was stored"
            assert not any(form in context for context in contexts), f"{value!r} reached a context"
        # the conversation was formed, consolidations included: the check read their output
        assert [r for r in dump["runs"] if r["status"] == "done" and "consolidate" in r["stages"]]
        assert [x for x in [*dump["facts"], *dump["reflections"]] if x.get("source_session_id") == "s-1"]
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
