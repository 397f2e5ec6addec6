"""Withdrawing one person's part of a shared item (design §13 "Owner controls"): a fact or a
pending reflection that rests on their messages and on other people's loses what came from
them, and stays for the others. Pure: the item and the messages of the runs that wrote its
texts in, a ``Withdrawal`` (or a refusal) out; the stores apply it with ``withdrawn``.

It follows erasure (``pipeline.erasure``): a later ``forget-user`` of the person must find
nothing of theirs, so nothing that may quote them stays without their id:

- their id leaves ``source_user_ids``, their messages leave ``source_message_ids`` (whose a
  message is, is decided as erasure attributes one: ``pipeline.sources.message_sources``);
- a fact's older version (a history entry) whose writing run's range holds one of their
  source messages goes; so does one whose run is no longer stored (it cannot be told);
- ``source_text`` (the source message as said, one line, with no message id) goes: it may be
  theirs;
- a fact's metadata loses each value their source messages gave and no other source message
  of it did (a value is the message's, as its text is: the person's email as a metadata value
  must not stay on the others' fact);
- refused when nobody else rests on the item (then it is theirs to remove, not to withdraw
  from), and when the current text may itself be theirs (its writing run's range holds one of
  their source messages, or that run is gone): the others' part cannot stay without theirs, so
  the owner's curation or the person's erasure removes it.

A reflection's text is formed from its whole range (no rule says which message it came from),
so a pending reflection can be withdrawn from only once someone edited it: the formed text,
first in its history, goes, and the edited text stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.sources import message_sources
from schemas.documents import Fact, Reflection, StoredMessage
from schemas.metadata import merged, metadata_label, values_of

#: the run id prefix of a person's edit (``pipeline.owner.curation``): its text came from the
#: person editing, not from a message
EDIT_RUN_PREFIX = "edit:"
REMOVE_INSTEAD = "remove it instead: it is yours alone to delete"
#: what a person can do about a shared item they cannot withdraw from: the others' part cannot
#: be kept without theirs; the owner curates shared memory, and an erasure removes it whole
ASK_OWNER = "ask the agent's owner to rewrite or remove it, or ask to be forgotten (it goes with your data)"


class WithdrawRefused(Exception):
    """The person cannot withdraw from the item: ``reason`` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Withdrawal:
    """What ``withdrawn`` applies; ``version``/``history_len`` are the state it was planned on
    (a store applies it only to that state: a change meanwhile makes it plan again)."""

    kind: str                       # "facts" or "reflections"
    item_id: str
    user_id: str
    message_ids: tuple[str, ...]    # their source messages: out of source_message_ids
    drop_history: tuple[int, ...]   # indexes into history of the texts that may quote them
    version: int                    # a fact's version (0 for a reflection)
    history_len: int
    metadata: Mapping[str, Any] | None = None   # a fact's metadata without their values; None: unchanged


def writers(item: Fact) -> list[str | None]:
    """The run that wrote each of the fact's texts, oldest first (history, then the current
    text): the first its forming run, each later one the run that replaced the one before."""
    return [item.source_run_id, *(h.run_id for h in item.history)]


def _theirs(user_id: str, message_ids: Sequence[str], run_messages: Mapping[str, Sequence[StoredMessage]]) -> set[str]:
    """Which of ``message_ids`` are the person's, in the ranges that hold them."""
    found = set()
    for messages in run_messages.values():
        here = {m.message_id for m in messages}
        found |= {mid for mid in message_ids if mid in here and user_id in message_sources([mid], messages)}
    return found


def _quotes(run_id: str | None, theirs: set[str], run_messages: Mapping[str, Sequence[StoredMessage]]) -> bool:
    """Whether the text run ``run_id`` wrote may quote the person."""
    if run_id and run_id.startswith(EDIT_RUN_PREFIX):
        return False
    messages = run_messages.get(run_id or "")
    if not messages:
        return True
    return any(m.message_id in theirs for m in messages)


def plan(item: Fact | Reflection, user_id: str, run_messages: Mapping[str, Sequence[StoredMessage]]) -> Withdrawal:
    """The withdrawal of ``user_id`` from ``item`` (``run_messages``: run id -> its range, for the
    runs of ``writers`` or the reflection's ``source_run_id`` that are stored); ``WithdrawRefused``
    when it cannot be withdrawn from (see the module doc)."""
    others = [u for u in item.source_user_ids if u != user_id]
    if not others:
        raise WithdrawRefused(f"this item rests on your messages alone: {REMOVE_INSTEAD}")
    theirs = _theirs(user_id, item.source_message_ids, run_messages)
    if isinstance(item, Reflection):
        if not item.history:
            raise WithdrawRefused("this note was written from a stretch of conversation that holds your "
                                  f"messages, so it cannot stay without you: {ASK_OWNER}")
        return Withdrawal("reflections", item.reflection_id, user_id, tuple(sorted(theirs)), (0,), 0,
                          len(item.history))
    runs = writers(item)
    if _quotes(runs[-1], theirs, run_messages):
        raise WithdrawRefused("the current text of this fact came (or may have come) from your message, so it "
                              f"cannot stay without you: {ASK_OWNER}")
    drop = tuple(i for i, run in enumerate(runs[:-1]) if _quotes(run, theirs, run_messages))
    return Withdrawal("facts", item.fact_id, user_id, tuple(sorted(theirs)), drop, item.version, len(item.history),
                      _metadata_without(item, theirs, run_messages))


def _metadata_without(item: Fact, theirs: set[str], run_messages: Mapping[str, Sequence[StoredMessage]]):
    """The fact's metadata less each value the person's source messages gave and no other source
    message did; None when nothing changes."""
    if not item.metadata or not theirs:
        return None
    given: dict[bool, dict[str, Any]] = {True: {}, False: {}}   # by theirs or not
    sources = set(item.source_message_ids)
    for messages in run_messages.values():
        for m in messages:
            if m.message_id in sources and m.metadata:
                mine = m.message_id in theirs
                given[mine] = merged(given[mine], m.metadata, item.metadata)
    only_theirs = {metadata_label(k, v) for k, held in given[True].items() for v in values_of(held)} - {
        metadata_label(k, v) for k, held in given[False].items() for v in values_of(held)}
    if not only_theirs:
        return None
    kept = {k: [v for v in values_of(held) if metadata_label(k, v) not in only_theirs]
            for k, held in item.metadata.items()}
    return {k: (values[0] if len(values) == 1 else values) for k, values in kept.items() if values}


def applies(item: Fact | Reflection, w: Withdrawal) -> bool:
    """Whether ``item`` is still in the state ``w`` was planned on."""
    if w.user_id not in item.source_user_ids or len(item.history) != w.history_len:
        return False
    if isinstance(item, Reflection):
        return not item.absorbed
    return item.version == w.version and item.retired_at is None


def withdrawn(item: Fact | Reflection, w: Withdrawal):
    """``item`` without the person (``applies`` checked first): what the store writes."""
    gone = set(w.message_ids)
    update = {
        "source_user_ids": [u for u in item.source_user_ids if u != w.user_id],
        "source_message_ids": [m for m in item.source_message_ids if m not in gone],
        "history": [h for i, h in enumerate(item.history) if i not in w.drop_history],
    }
    if isinstance(item, Fact):
        update["source_text"] = None
        if w.metadata is not None:
            update["metadata"] = dict(w.metadata)
    return item.model_copy(update=update)
