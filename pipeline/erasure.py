"""The erasure of one user (design §9 ``forget-user``, §11 provenance), planned. Pure: plain
documents in, a plan out; the stores only execute it.

``forget_plan`` (``Store.forget_user``): the user's own scope and their one-to-one sessions go
whole; which runs go and which stay emptied (failed, or ``erased`` while in flight), which
rejected events, stamps and leases go. The store reads ``UserData`` (in its transaction,
where it has one) and executes the ``ForgetPlan``.

``plan`` (``Store.erase_memory``): what goes *by provenance*, in any scope, from
``Store.dump_all`` rows; ``pipeline.formation.rebuild`` re-consolidates the blobs it names.
The sources of a fact or reflection are the humans whose messages it came from:

- its ``source_user_ids`` (set at formation, ``pipeline.sources``: a fact's source message's
  sender, a reflection's human senders of its scope's messages in the run's range);
- a record stored before provenance has none: it is attributed by its source run's range while
  that run record and its messages still exist (the senders of its ``source_message_ids``
  there, or else every human sender of the range); an item of a user's own scope is theirs;
  anything else is *unattributed*: left, and counted;
- an item whose sources are only the user goes, with its history. An item that other users
  share cannot be split (one text), so it goes too and is counted as ``shared``.

A consolidated blob that absorbed a removed reflection (``consolidated_into`` on the
reflection, ``absorbing_ids`` on the blob) is rebuilt from the absorbed reflections that
remain; a blob with none left is deleted. Blobs of the user's own scope and of their
one-to-one sessions are removed whole, never rebuilt. ``provenance_traces`` is the audit.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.sources import message_sources, range_sources
from pipeline.user_ids import LEASE_PREFIX, lease_names_user, raw_names_user
from schemas.documents import ACTIVE_RUN_STATUSES, FormationRun, StoredMessage, scope_key

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
    return ForgetPlan(scope_key("user", user_id=user_id), solo, [s for s in data.sessions if s not in solo],
                      delete_runs, rewrite_runs, rejected, stamps, leases)


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
    whole_keys: set[str] = field(default_factory=set)  # the user's scope and one-to-one sessions'

    def lease_keys(self) -> set[tuple[str, str]]:
        """(agent id, scope key) of every blob or buffer the plan changes, outside the scope keys
        ``Store.forget_user`` removes whole: no consolidation may merge them meanwhile."""
        keys = {(agent, key) for agent, found in self.stamps.items() for key in found}
        keys |= {(r.agent_id, r.scope_key) for r in self.rebuild} | set(self.drop_blobs)
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


def solo_sessions(user_id: str, dump: Mapping[str, Sequence[dict]]) -> set[str]:
    """The sessions whose only human is ``user_id`` (removed whole by ``Store.forget_user``)."""
    humans: dict[str, set] = {}
    for s in dump.get("sessions", []):
        humans.setdefault(s.get("session_id") or s.get("_id"), set()).update(s.get("users") or [])
    for m in dump.get("messages", []):
        if m.get("role") == "user":
            humans.setdefault(m.get("session_id"), set()).add(m.get("sender_id"))
    return {sid for sid, people in humans.items() if user_id in people and sole_human(user_id, people)}


def _run_messages(dump: Mapping[str, Sequence[dict]]) -> dict[str, list[StoredMessage]]:
    """run id -> the messages of its range, for the runs still stored."""
    by_session: dict[str, list[dict]] = {}
    for m in dump.get("messages", []):
        by_session.setdefault(m.get("session_id"), []).append(m)
    out = {}
    for run in dump.get("runs", []):
        if "run_id" not in run:
            continue
        rows = [m for m in by_session.get(run.get("session_id"), [])
                if m.get("seq") is not None and run["seq_from"] <= m["seq"] <= run["seq_to"]]
        out[run["run_id"]] = [StoredMessage.model_validate(m) for m in rows]
    return out


def sources(row: dict, run_messages: Mapping[str, Sequence[StoredMessage]]) -> set[str] | None:
    """The humans ``row`` (a fact or reflection) came from; None when it cannot be told."""
    if row.get("source_user_ids"):
        return set(row["source_user_ids"])
    key = row.get("scope_key") or ""
    if key.startswith("user:"):
        return {key.split(":", 1)[1]}
    messages = run_messages.get(row.get("source_run_id") or "")
    if not messages:
        return None
    found = message_sources(row.get("source_message_ids") or [], messages) or range_sources(messages)[1]
    return set(found) or None


def _in_scope(row: dict, agent_id: str | None) -> bool:
    return agent_id is None or row.get("agent_id") == agent_id


def plan(
    user_id: str, dump: Mapping[str, Sequence[dict]], agent_id: str | None = None,
    before: Mapping[str, Sequence[dict]] | None = None,
) -> Plan:
    """What erasing ``user_id`` (under ``agent_id``, or every agent) removes by provenance, from
    the facts, reflections and blobs of ``dump``. Sessions, messages and runs are read from
    ``before`` (a dump taken before ``Store.forget_user`` removed the user's messages and runs;
    default ``dump``): the one-to-one sessions and the ranges of old records' runs."""
    out = Plan()
    before = dump if before is None else before
    run_messages = _run_messages(before)
    whole = {scope_key("session", session_id=s) for s in solo_sessions(user_id, before)}
    whole.add(scope_key("user", user_id=user_id))
    out.whole_keys = whole
    removed_reflections: dict[tuple[str, str], set[str]] = {}
    for kind, id_field, ids in ((FACTS, "fact_id", out.fact_ids), (REFLECTIONS, "reflection_id", out.reflection_ids)):
        for row in dump.get(kind, []):
            if not _in_scope(row, agent_id):
                continue
            found = sources(row, run_messages)
            if found is None:
                out.unattributed += 1
                continue
            if user_id not in found:
                continue
            ids.append(row[id_field])
            out.shared += len(found) > 1
            out.stamps.setdefault(row["agent_id"], []).append(row["scope_key"])
            if kind == REFLECTIONS and row.get("absorbed"):
                removed_reflections.setdefault((row["agent_id"], row["scope_key"]), set()).add(row[id_field])
    gone = set(out.reflection_ids)
    for blob in dump.get(BLOBS, []):
        key = (blob["agent_id"], blob["scope_key"])
        if blob["scope_key"] in whole or not _in_scope(blob, agent_id):
            continue
        if not (removed_reflections.get(key) or gone & set(blob.get("absorbing_ids") or [])):
            continue
        keep = tuple(r["reflection_id"] for r in dump.get(REFLECTIONS, [])
                     if (r["agent_id"], r["scope_key"]) == key and r.get("absorbed") and r["reflection_id"] not in gone)
        if keep:
            out.rebuild.append(Rebuild(blob["agent_id"], blob["scope_key"], keep))
        else:
            out.drop_blobs.append(key)
    return out


def holder(user_id: str) -> str:
    """The lease holder and ``last_run_id`` of an erasure's rebuilds: a hash, never the id."""
    return "erasure:" + hashlib.sha256(user_id.encode()).hexdigest()[:16]


def provenance_traces(dump: Mapping[str, Sequence[dict]], user_id: str, agent_id: str | None = None) -> list[str]:
    """What still rests on ``user_id`` by provenance: a fact or reflection (any scope) among
    whose sources they are, and a blob whose last merge counts a reflection that is gone. A
    ``source_user_ids`` or user scope key naming them is an id field: ``pipeline.user_ids``
    reports it, so only a record attributed through its run's messages is reported here."""
    found = []
    run_messages = _run_messages(dump)
    for kind in (FACTS, REFLECTIONS):
        for i, row in enumerate(dump.get(kind, [])):
            if row.get("source_user_ids") or str(row.get("scope_key") or "").startswith("user:"):
                continue
            if _in_scope(row, agent_id) and user_id in (sources(row, run_messages) or ()):
                found.append(f"{kind}[{i}]: sources include the user")
    present = {r.get("reflection_id") for r in dump.get(REFLECTIONS, [])}
    for i, blob in enumerate(dump.get(BLOBS, [])):
        missing = [r for r in blob.get("absorbing_ids") or [] if r not in present]
        if _in_scope(blob, agent_id) and missing:
            found.append(f"{BLOBS}[{i}]: counts {len(missing)} removed reflection(s)")
    return found
