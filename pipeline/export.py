"""Everything stored about one person, for their right of access and portability (design §11
"Provenance and erasure"): ``export_user`` yields JSON-ready records, one per line of
``memoryctl export-user``, read through the store's provenance queries only.

Records, in this order, each with its ``kind``:

- ``message``: every message the person sent, with its ``metadata`` (without the session's
  user list, which names other people);
- ``fact``: every fact, in any scope, resting on their messages (``source_user_ids``) or of
  their own scope, retired ones included, with its history, validity, categories and
  metadata; ``shared`` when it rests on other people's messages too;
- ``reflection``: the same for reflections, with ``absorbed`` and the blob version;
- ``blob``: the blob of their own scope, whatever wrote it (a consolidation, an owner's
  replace), and a consolidated blob all of whose absorbed reflections rest on the person alone
  (a one-to-one session), whole;
- ``blob_section``: in a blob shared with others, the bullets that absorbed one of their
  reflections (the bullet nearest each of them, by shared words), under their section name;
- ``run_cost``: what each formation run over their messages cost, per stage and model.

Every memory record names the person (``user_id``) and its ``scope_key`` (left ``null`` for a
user-scope item of someone else's memory, whose id is not theirs to have), and says how it was
written (``source``: null when formed from messages): ``memoryctl import`` reads these records
back (``usecases.imports``).

Left out: other people's messages in a shared chat, their facts and reflections, the rest of a
shared blob, embeddings, and the run records' stage outputs (derived copies). After
``forget-user`` the export of the same person is empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from pipeline.footprint import Resting
from pipeline.forgetting import check_ids
from pipeline.prompts.consolidation import parse_blob
from pipeline.search.scoring import tokenize
from pipeline.store.port import BlobStore, ProvenanceStore
from schemas.documents import FormationRun

#: the least share of a reflection's words a bullet must hold to count as where it went
MIN_OVERLAP = 0.5


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


class ExportReads(Protocol):
    """What an export reads: what rests on the user (the reflections a blob absorbed included),
    and the blobs of the scopes it touches."""

    provenance: ProvenanceStore
    blobs: BlobStore


def export_user(store: ExportReads, user_id: str, agent_id: str | None = None) -> Iterator[dict[str, Any]]:
    """The records of everything stored about ``user_id`` (under ``agent_id``, or every
    agent); see the module doc. Streamed: messages are read as they are written out."""
    check_ids(user_id, agent_id)
    for m in store.provenance.user_messages(user_id, agent_id):
        yield {"kind": "message", "agent_id": m.agent_id, "session_id": m.session_id, "message_id": m.message_id,
               "role": m.role, "sender_id": m.sender_id, "sender_name": m.sender_name, "content": m.content,
               "created_at": _iso(m.created_at), "metadata": m.metadata}
    resting = store.provenance.resting_on(user_id, agent_id)
    own = f"user:{user_id}"
    for f in resting.facts:
        yield {"kind": "fact", "agent_id": f.agent_id, "user_id": user_id, "fact_id": f.fact_id, "scope": f.scope,
               "scope_key": _key(f.scope_key, own), "source": f.source, "content": f.content,
               "shared": set(f.source_user_ids) - {user_id} != set(), "source_message_ids": f.source_message_ids,
               "formed_at": _iso(f.formed_at), "updated_at": _iso(f.updated_at), "valid_from": _iso(f.valid_from),
               "valid_to": _iso(f.valid_to), "retired_at": _iso(f.retired_at), "retired_reason": f.retired_reason,
               "expires_at": _iso(f.expires_at), "categories": f.categories, "metadata": f.metadata,
               "version": f.version,
               "history": [{"content": h.content, "version": h.version, "changed_at": _iso(h.changed_at),
                            "valid_from": _iso(h.valid_from), "valid_to": _iso(h.valid_to)} for h in f.history]}
    for r in resting.reflections:
        yield {"kind": "reflection", "agent_id": r.agent_id, "user_id": user_id, "reflection_id": r.reflection_id,
               "scope": r.scope, "scope_key": _key(r.scope_key, own), "source": r.source, "content": r.content,
               "shared": set(r.source_user_ids) - {user_id} != set(),
               "source_message_ids": r.source_message_ids, "formed_at": _iso(r.formed_at), "absorbed": r.absorbed,
               "consolidated_into": r.consolidated_into}
    yield from _blobs(store, user_id, resting, agent_id)
    for run in store.provenance.user_runs(user_id, agent_id):
        yield _run_cost(run)


def _key(key: str, own: str) -> str | None:
    """A record's scope key, unless it is another person's user scope (its id is theirs)."""
    return None if key.startswith("user:") and key != own else key


def _blobs(store: ExportReads, user_id: str, resting: Resting, agent_id: str | None) -> Iterator[dict[str, Any]]:
    """The user's own blobs whole, whatever wrote them (an owner's replace absorbs no
    reflection), then each blob of another scope that absorbed their reflections: whole when
    only theirs went in, else the sections that took theirs."""
    for blob in store.provenance.own_blobs(user_id, agent_id):
        if blob.consolidated_content.strip():
            yield {"kind": "blob", "agent_id": blob.agent_id, "user_id": user_id, "scope_key": blob.scope_key,
                   "version": blob.version, "content": blob.consolidated_content}
    mine: dict[tuple[str, str], list[str]] = {}
    for r in resting.reflections:
        if r.absorbed and not r.scope_key.startswith("user:"):
            mine.setdefault((r.agent_id, r.scope_key), []).append(r.content)
    for (agent, key), texts in sorted(mine.items()):
        blob = store.blobs.get_blob(agent, key)
        if blob is None or not blob.consolidated_content.strip():
            continue
        if not store.provenance.absorbed_from_others(agent, key, user_id):
            yield {"kind": "blob", "agent_id": agent, "user_id": user_id, "scope_key": key,
                   "version": blob.version, "content": blob.consolidated_content}
            continue
        for section, bullets in _sections_of(blob.consolidated_content, texts).items():
            yield {"kind": "blob_section", "agent_id": agent, "user_id": user_id, "scope_key": key,
                   "version": blob.version, "section": section, "bullets": bullets}


def _sections_of(content: str, texts: list[str]) -> dict[str, list[str]]:
    """section -> the bullets where ``texts`` went: per text, the bullet holding the largest
    share of its words, if at least ``MIN_OVERLAP``."""
    _, sections = parse_blob(content)
    bullets = [(s.name, b, set(tokenize(b))) for s in sections for b in s.bullets]
    found: dict[str, list[str]] = {}
    for text in texts:
        words = set(tokenize(text))
        if not words or not bullets:
            continue
        name, bullet, share = max(((n, b, len(words & w) / len(words)) for n, b, w in bullets), key=lambda x: x[2])
        if share >= MIN_OVERLAP and bullet not in found.get(name, []):
            found.setdefault(name, []).append(bullet)
    return found


def _run_cost(run: FormationRun) -> dict[str, Any]:
    stages = {name: record.usage.by_model for name, record in run.stages.items() if record.usage.by_model}
    return {"kind": "run_cost", "agent_id": run.agent_id, "run_id": run.run_id, "session_id": run.session_id,
            "created_at": _iso(run.created_at), "status": run.status, "people_in_run": len(run.user_ids),
            "by_stage": stages}
