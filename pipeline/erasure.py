"""The erasure of one user (design §9 ``forget-user``, §11 provenance), planned. Pure: plain
documents in, a plan out; the stores only execute it.

``forget_plan`` (``Store.forget_user``): the user's own scope and their one-to-one sessions go
whole; which runs go and which stay emptied (failed, or ``erased`` while in flight), which
rejected events, stamps and leases go. The store reads ``UserData`` (in its transaction,
where it has one) and executes the ``ForgetPlan``.

``plan`` and ``plan_blobs`` (``Store.erase_memory``): what goes *by provenance*, in any scope,
from what the store's provenance queries return (``pipeline.footprint.Resting``: never a dump
of the store); ``pipeline.formation.rebuild`` re-consolidates the blobs it names. The sources
of a fact or reflection are the humans whose messages it came from:

- its ``source_user_ids`` (set at formation, ``pipeline.sources``: a fact's source message's
  sender, a reflection's cited messages' senders);
- a record stored before provenance has none: it is attributed by its source run's range while
  that run record and its messages still exist (the senders of its ``source_message_ids``
  there, or else every human sender of the range); an item of a user's own scope is theirs;
  anything else is *unattributed*: left, listed and counted;
- an item whose sources are only the user goes, with its history. An item that other users
  share cannot be split (one text), so it goes too and is counted as ``shared``.

A consolidated blob that absorbed a removed reflection (``consolidated_into`` on the
reflection, ``absorbing_ids`` on the blob) is rebuilt from the absorbed reflections that
remain; a blob with none left is deleted. Blobs of the user's own scope and of their
one-to-one sessions are removed whole by ``Store.forget_user``, never rebuilt.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.footprint import Resting
from pipeline.sources import message_sources, range_sources
from pipeline.user_ids import LEASE_PREFIX, lease_names_user, raw_names_user
from schemas.documents import (
    ACTIVE_RUN_STATUSES, ConsolidatedBlob, Fact, FormationRun, Reflection, StoredMessage, UsageRecord, scope_key,
)

FACTS, REFLECTIONS, BLOBS = "facts", "reflections", "consolidated"


def sole_human(user_id: str, humans: Iterable[str | None]) -> bool:
    """Whether ``user_id`` is the only human a session ever had (a one-to-one chat): then every
    message of it, replies included, is about that user."""
    return {h for h in humans if h} <= {user_id}


# ---------------------------------------------------------------- the user's own data -------
FORGOTTEN_RUN_ERROR = "a user of this group session was forgotten: the range is formed again without them"
ERASED_RUN_ERROR = "the only user of this session was erased while the run was in flight: nothing applied"


def forgotten_from_run(run: FormationRun, user_id: str, *, solo: bool = False) -> FormationRun:
    """An unfinished run after one of its users is forgotten: the stage outputs (which quote
    that user) are dropped. In a group session the run fails, so that the retry sweep (or a
    replay, if it was dead) forms its range again from the messages that remain; the run of a
    one-to-one session (``solo``) has nothing left to form and ends ``erased``: a stage still
    in flight sees that and applies nothing (``pipeline.formation.runner``)."""
    if solo:
        status, error = "erased", ERASED_RUN_ERROR
    else:
        status, error = ("dead" if run.status == "dead" else "failed"), FORGOTTEN_RUN_ERROR
    return run.model_copy(update={
        "user_ids": [u for u in run.user_ids if u != user_id], "stages": {}, "totals": {},
        "status": status, "error": error, "lease_expires_at": None,
    })


@dataclass(frozen=True)
class UserData:
    """What a store reads (in its erasure transaction, where it has one) for ``forget_plan``."""

    sessions: Mapping[str, str]                      # every session the user was in -> its agent
    humans: Mapping[str, Iterable[str | None]]       # session -> its user list and user senders
    runs: Sequence[FormationRun]                     # at least those naming the user or of those sessions
    rejected: Sequence[tuple[str, str | None, str]]  # (rejection id, agent id, raw payload)
    stamped: Iterable[str] = ()                      # agents holding a stamp of the user's scope key
    leases: Iterable[str] = ()                       # lease names


@dataclass
class ForgetPlan:
    """What ``Store.forget_user`` removes or rewrites; the stores execute it as it says."""

    user_key: str
    solo: dict[str, str]        # one-to-one sessions (-> agent): they go whole
    group: list[str]            # group sessions: the user's messages and id go, the rest stays
    delete_runs: list[str]
    rewrite_runs: list[FormationRun]  # emptied runs that stay: failed (group) or erased (in flight)
    rejected_ids: list[str]
    stamps: dict[str, list[str]]  # agent -> scope keys whose stamps move (caches go stale)
    leases: list[str]
    usage: list[UsageRecord] = field(default_factory=list)  # what the deleted or emptied runs spent

    @property
    def session_ids(self) -> list[str]:
        return [*self.solo, *self.group]


def forget_plan(user_id: str, agent_id: str | None, data: UserData) -> ForgetPlan:
    """The scope-wide part of erasing ``user_id`` under ``agent_id`` (None: every agent).

    One-to-one sessions go whole (messages, session memory, finished runs); a run in flight
    there ends ``erased``. Group sessions keep what the others said and formed: their finished
    runs that name the user go, an unfinished one is emptied and failed. Rejected events whose
    payload names the user go. The user's stamp goes, and the agent and session stamps move."""
    solo = {sid: agent for sid, agent in data.sessions.items() if sole_human(user_id, data.humans.get(sid, ()))}
    delete_runs, rewrite_runs = [], []
    for run in data.runs:
        if agent_id is not None and run.agent_id != agent_id:
            continue
        in_flight = run.status in ACTIVE_RUN_STATUSES
        if (run.session_id in solo and not in_flight) or (user_id in run.user_ids and run.status == "done"):
            delete_runs.append(run.run_id)
        elif user_id in run.user_ids or run.session_id in solo:
            rewrite_runs.append(forgotten_from_run(run, user_id, solo=run.session_id in solo))
    rejected = [rid for rid, owner, raw in data.rejected
                if (agent_id is None or owner in (None, agent_id)) and raw_names_user(raw, user_id)]
    agents = {agent_id} if agent_id else set(data.stamped) | set(data.sessions.values())
    stamps = {agent: ["agent"] + [scope_key("session", session_id=s) for s, a in data.sessions.items() if a == agent]
              for agent in agents}
    leases = [name for name in data.leases if lease_names_user(name, user_id)
              and (not agent_id or name.startswith(f"{LEASE_PREFIX}{agent_id}:"))]
    gone = set(delete_runs) | {r.run_id for r in rewrite_runs}
    usage = [record for run in data.runs if run.run_id in gone for record in anonymous_usage(run)]
    return ForgetPlan(scope_key("user", user_id=user_id), solo, [s for s in data.sessions if s not in solo],
                      delete_runs, rewrite_runs, rejected, stamps, leases, usage)


def anonymous_usage(run: FormationRun) -> list[UsageRecord]:
    """What ``run``'s stages spent, one usage record per stage with calls: agent, stage, time,
    and per model the calls, tokens and dollars; no user, session, run id or text. An erasure
    keeps them when it deletes or empties the run, so the agent's ``memoryctl cost`` totals
    never fall (design §11). The id is a hash of the run id and stage: erasing again records
    nothing twice."""
    out = []
    for name, record in run.stages.items():
        if not record.usage.by_model:
            continue
        digest = hashlib.sha256(f"{run.run_id}\x00{name}".encode()).hexdigest()[:24]
        out.append(UsageRecord(usage_id=f"erased-run:{digest}", agent_id=run.agent_id, stage=name,
                               at=record.finished_at or record.started_at or run.created_at,
                               by_model=record.usage.by_model))
    return out


# ---------------------------------------------------------------- provenance ----------------
@dataclass(frozen=True)
class Rebuild:
    """A blob to re-consolidate from the absorbed reflections that remain (``keep_ids``)."""

    agent_id: str
    scope_key: str
    keep_ids: tuple[str, ...]


@dataclass
class Plan:
    fact_ids: list[str] = field(default_factory=list)
    reflection_ids: list[str] = field(default_factory=list)
    rebuild: list[Rebuild] = field(default_factory=list)
    drop_blobs: list[tuple[str, str]] = field(default_factory=list)  # (agent id, scope key)
    stamps: dict[str, list[str]] = field(default_factory=dict)       # agent id -> scope keys to move
    shared: int = 0        # removed items that other users shared too (not splittable)
    unattributed: int = 0  # items without provenance that could not be attributed: left
    unattributed_items: list[str] = field(default_factory=list)  # "facts:<id>", "reflections:<id>"
    whole_keys: set[str] = field(default_factory=set)  # the user's scope: removed whole
    #: (agent id, scope key) of the one-to-one sessions ``Store.forget_user`` removes whole
    #: (their reflections and blob): a plan made before it leaves them to it
    solo_keys: set[tuple[str, str]] = field(default_factory=set)
    blob_keys: set[tuple[str, str]] = field(default_factory=set)  # where removed reflections lived

    def removed_whole(self, agent_id: str, key: str) -> bool:
        """Whether ``Store.forget_user`` removes the scope key whole (not by provenance)."""
        return key in self.whole_keys or (agent_id, key) in self.solo_keys

    def lease_keys(self) -> set[tuple[str, str]]:
        """(agent id, scope key) of every blob or buffer the plan changes, outside the scope keys
        ``Store.forget_user`` removes whole: no consolidation may merge them meanwhile."""
        keys = {(agent, key) for agent, found in self.stamps.items() for key in found}
        keys |= {(r.agent_id, r.scope_key) for r in self.rebuild} | set(self.drop_blobs) | self.blob_keys
        return {(agent, key) for agent, key in keys if key not in self.whole_keys}

    def changed_keys(self) -> dict[str, list[str]]:
        """agent id -> the scope keys whose stamps the removal moves (cached contexts and search
        caches built over the removed items go stale)."""
        keys = {agent: set(found) for agent, found in self.stamps.items()}
        for agent, key in self.drop_blobs:
            keys.setdefault(agent, set()).add(key)
        return {agent: sorted(found) for agent, found in keys.items()}

    def counts(self) -> dict[str, int]:
        return {"facts_by_source": len(self.fact_ids), "reflections_by_source": len(self.reflection_ids),
                "shared_deleted": self.shared, "unattributed": self.unattributed,
                "blobs_rebuilt": len(self.rebuild), "blobs_deleted": len(self.drop_blobs)}


def attribute(item: Fact | Reflection, run_messages: Mapping[str, Sequence[StoredMessage]]) -> set[str] | None:
    """The humans ``item`` came from; None when it cannot be told. Its ``source_user_ids``; an
    item of a user's own scope is theirs; a record stored before provenance is attributed by
    its source run's messages while they are stored (``run_messages``: run id -> its range)."""
    if item.source_user_ids:
        return set(item.source_user_ids)
    if item.scope_key.startswith("user:"):
        return {item.scope_key.split(":", 1)[1]}
    messages = run_messages.get(item.source_run_id or "")
    if not messages:
        return None
    found = message_sources(item.source_message_ids, messages) or range_sources(messages)[1]
    return set(found) or None


def plan(
    user_id: str, resting: Resting, unattributed: Resting, run_messages: Mapping[str, Sequence[StoredMessage]],
    solo_keys: Iterable[tuple[str, str]] = (),
) -> Plan:
    """What erasing ``user_id`` removes by provenance: of ``resting`` (``Store.resting_on``)
    and ``unattributed`` (``Store.unattributed``, attributed here through ``run_messages`` where
    their run's range is still stored), every item among whose sources the user is. The blobs
    come after, from what the store holds at the scope keys of the removed reflections
    (``plan_blobs``). Items of the user's scope, and reflections of ``solo_keys`` (their
    one-to-one sessions), are ``Store.forget_user``'s: a plan made before it runs leaves them out,
    so that it counts what the erasure will count."""
    out = Plan(whole_keys={scope_key("user", user_id=user_id)}, solo_keys=set(solo_keys))
    seen: set[str] = set()
    for kind, items in ((FACTS, [*resting.facts, *unattributed.facts]),
                        (REFLECTIONS, [*resting.reflections, *unattributed.reflections])):
        for item in items:
            ident = item.fact_id if isinstance(item, Fact) else item.reflection_id
            if (kind, ident) in seen or out.removed_whole(item.agent_id, item.scope_key):
                continue
            seen.add((kind, ident))
            found = attribute(item, run_messages)
            if found is None:
                out.unattributed += 1
                out.unattributed_items.append(f"{kind}:{ident}")
                continue
            if user_id not in found:
                continue
            (out.fact_ids if kind == FACTS else out.reflection_ids).append(ident)
            out.shared += len(found) > 1
            out.stamps.setdefault(item.agent_id, []).append(item.scope_key)
            if kind == REFLECTIONS:
                out.blob_keys.add((item.agent_id, item.scope_key))
    return out


def plan_blobs(
    out: Plan, blobs: Mapping[tuple[str, str], ConsolidatedBlob | None],
    absorbed: Mapping[tuple[str, str], Sequence[str]],
) -> Plan:
    """Fill ``out.rebuild`` and ``out.drop_blobs``: a blob (``blobs``: (agent id, scope key) ->
    the blob stored there) that absorbed a removed reflection is merged again from the absorbed
    reflections that remain (``absorbed``: the ids of the reflections absorbed at that key),
    or deleted when none remains. The user's own scope goes whole, never rebuilt."""
    gone = set(out.reflection_ids)
    for key in sorted(out.blob_keys):
        blob = blobs.get(key)
        if blob is None or out.removed_whole(*key):
            continue
        here = absorbed.get(key, ())
        if not (set(here) & gone or gone & set(blob.absorbing_ids)):
            continue
        keep = tuple(i for i in here if i not in gone)
        if keep:
            out.rebuild.append(Rebuild(key[0], key[1], keep))
        else:
            out.drop_blobs.append(key)
    return out


def holder(user_id: str) -> str:
    """The lease holder and ``last_run_id`` of an erasure's rebuilds: a hash, never the id."""
    return "erasure:" + hashlib.sha256(user_id.encode()).hexdigest()[:16]


