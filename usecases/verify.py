"""Checking an erasure (design §9 ``forget-user --verify``): ``verify``, what still names a
user after a forget, read through the store's provenance queries only; and ``traces``, the
exhaustive audit over a whole-store dump.

``traces`` reads every document of a ``Store.dump_all()``: it is for tests and audits, never a
production path (it grows with the store, not with the user).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pipeline import forgetting
from pipeline.sources import message_sources, range_sources
from pipeline.user_ids import LEASE_PREFIX, id_paths, lease_names_user
from schemas.documents import StoredMessage


def verify(store: forgetting.ErasureReads, user_id: str, agent_id: str | None = None, *,
           blob_keys: Iterable[tuple[str, str]] = ()) -> forgetting.Verification:
    """What still names ``user_id`` under ``agent_id`` (None: any agent) after a forget
    (``pipeline.forgetting.verify_erasure``): ``traces`` attributed to them, and what nobody
    can attribute. ``blob_keys``: the blobs the forget rewrote (``Erased.blob_keys``)."""
    return forgetting.verify_erasure(store, user_id, agent_id, blob_keys=blob_keys)


# ---------------------------------------------------------------- the audit (dumps) ---------
def traces(dump: dict[str, list[dict]], user_id: str, agent_id: str | None = None) -> list[str]:
    """Where ``user_id`` is still named in a ``store.admin.dump_all()`` (under ``agent_id``, or any
    agent): ``collection[i].field`` paths of the id fields that hold it (``pipeline.user_ids``),
    never a match inside vectors or text; every item that rests on the user through its run's
    messages; and every blob that counts a reflection no longer stored."""
    found = _provenance_traces(dump, user_id, agent_id)
    for collection, rows in dump.items():
        for i, row in enumerate(rows):
            if agent_id is not None and not _under(row, agent_id):
                continue
            found.extend(f"{collection}[{i}].{path}" for path in id_paths(row, user_id))
            name = row.get("name") or row.get("_id") if collection == "leases" else None
            if isinstance(name, str) and lease_names_user(name, user_id):
                found.append(f"{collection}[{i}]:{name}")
    return found


def _under(row: dict, agent_id: str) -> bool:
    """Whether a row belongs to ``agent_id`` (rows without an agent, like leases and some
    rejected events, are checked under every agent)."""
    owner = row.get("agent_id")
    name = row.get("name") or row.get("_id")
    if owner is None and isinstance(name, str) and name.startswith(LEASE_PREFIX):
        return name.startswith(f"{LEASE_PREFIX}{agent_id}:")
    return owner in (None, agent_id)


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


def _sources(row: dict, run_messages: Mapping[str, Sequence[StoredMessage]]) -> set[str] | None:
    messages = run_messages.get(row.get("source_run_id") or "")
    if not messages:
        return None
    found = message_sources(row.get("source_message_ids") or [], messages) or range_sources(messages)[1]
    return set(found) or None


def _provenance_traces(dump: Mapping[str, Sequence[dict]], user_id: str, agent_id: str | None) -> list[str]:
    """Items without ``source_user_ids`` outside user scopes that rest on the user through
    their run's messages (an id field naming the user is reported by ``id_paths``), and blobs
    whose last merge counts a reflection that is gone."""
    found = []
    run_messages = _run_messages(dump)
    for kind in ("facts", "reflections"):
        for i, row in enumerate(dump.get(kind, [])):
            if row.get("source_user_ids") or str(row.get("scope_key") or "").startswith("user:"):
                continue
            if (agent_id is None or row.get("agent_id") == agent_id) and user_id in (_sources(row, run_messages) or ()):
                found.append(f"{kind}[{i}]: sources include the user")
    present = {r.get("reflection_id") for r in dump.get("reflections", [])}
    for i, blob in enumerate(dump.get("consolidated", [])):
        missing = [r for r in blob.get("absorbing_ids") or [] if r not in present]
        if (agent_id is None or blob.get("agent_id") == agent_id) and missing:
            found.append(f"consolidated[{i}]: counts {len(missing)} removed reflection(s)")
    return found
