"""Who a derived memory item came from (design §11 provenance): the humans whose messages a fact
or reflection rests on. Pure; used when an item is formed (``pipeline.formation.stages``) and
when an old record without provenance is attributed (``pipeline.erasure``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schemas.documents import StoredMessage


def range_sources(messages: Sequence[StoredMessage], user_id: str | None = None) -> tuple[list[str], list[str]]:
    """The human messages of a run's range a reflection came from (of ``user_id`` only, for a
    reflection of that user's scope) and their senders: ``(message ids, user ids)``. An
    offline rule or an LLM answer does not say which message a reflection rests on, so the
    whole range of its scope is recorded. A range where no human spoke (the assistant's turns
    only) came from the humans it was addressed to: the messages' declared session users."""
    ids, users = [], []
    for m in messages:
        if m.role != "user" or not m.sender_id or (user_id is not None and m.sender_id != user_id):
            continue
        ids.append(m.message_id)
        if m.sender_id not in users:
            users.append(m.sender_id)
    if not ids:
        declared = dict.fromkeys(u for m in messages for u in m.session_users)
        users = [u for u in declared if user_id is None or u == user_id]
    return ids, users


def message_sources(message_ids: Iterable[str], messages: Sequence[StoredMessage]) -> list[str]:
    """The senders of ``message_ids`` among ``messages``; an assistant turn (or a message no
    longer found) stands for every human sender of ``messages``: it answered them."""
    by_id = {m.message_id: m for m in messages}
    everyone = range_sources(messages)[1]
    users: list[str] = []
    for mid in message_ids:
        m = by_id.get(mid)
        found = [m.sender_id] if m is not None and m.role == "user" and m.sender_id else everyone
        users.extend(u for u in found if u not in users)
    return users
