"""An owner's edits of consolidated blobs (design §13): one section of a scope's blob, or a
user's whole blob replaced (as v1's ``POST /agents/{a}/memory``).

Each edit writes a new version by compare-and-set, with the editor as its source
(``ConsolidatedBlob.edited_by``), within the scope's word limit, every line screened like any
write (a secret anywhere; contact data in agent scope), and announces it to webhooks as a merge
does (``memory.consolidated``), naming who wrote it (``source``: owner, user, import). The reflections waiting in the buffer
stay there: the next consolidation merges them into the edited version, told that a person
wrote it (``prompts.consolidation``), and keeps those lines unless newer memory contradicts
them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pipeline.errors import InvalidInput
from pipeline.owner.curation import checked_line, storable
from pipeline.prompts.consolidation import SOURCE_SECTION, BlobSection, blob_words, parse_blob, render_blob, section_name
from pipeline.store.ports.blobs import BlobStore
from pipeline.store.ports.leases import LeaseStore
from pipeline.store.ports.webhooks import WebhookStore
from pipeline.webhooks import outbox
from schemas.documents import ConsolidatedBlob, scope_key


class BlobEdits(Protocol):
    """What an edit of a blob writes: the blob, under its version, its scope's stamp (so
    that a cached memory context is rebuilt), and the webhook outbox."""

    blobs: BlobStore
    leases: LeaseStore
    webhooks: WebhookStore


def _scope(key: str) -> tuple[str, str | None, str | None]:
    """(scope, user id, session id) of a scope key."""
    if key == "agent":
        return "agent", None, None
    kind, _, rest = key.partition(":")
    if kind not in ("user", "session") or not rest:
        raise InvalidInput("scope", f"expected agent, user:<id> or session:<id>, got {key!r}")
    return kind, (rest if kind == "user" else None), (rest if kind == "session" else None)


def _save(store: BlobEdits, settings, agent_id: str, key: str, sections: list[BlobSection], *, by: str, now: datetime,
          expected: ConsolidatedBlob | None, where: str, source: str) -> ConsolidatedBlob:
    scope, user_id, session_id = _scope(key)
    limit = settings.word_limit(scope)
    version = (expected.version if expected else 0) + 1
    words = blob_words(version, sections)
    if words > limit:
        raise InvalidInput(where, f"the blob would have {words} words; the {scope} blob holds at most {limit}")
    blob = ConsolidatedBlob(agent_id=agent_id, scope=scope, scope_key=key, user_id=user_id,  # type: ignore[arg-type]
                            session_id=session_id, consolidated_content=render_blob(version, sections),
                            word_limit=limit, version=version,
                            last_consolidated_at=expected.last_consolidated_at if expected else None,
                            last_run_id=f"edit:{uuid.uuid4().hex}", edited_by=by, edited_at=now)
    if not store.blobs.save_blob(blob, expected_version=expected.version if expected else 0):
        raise InvalidInput(where, "the blob changed meanwhile (a consolidation ran); read it again and retry")
    store.leases.bump_scope_versions(agent_id, [key])
    outbox.announce_blob(store.webhooks, blob, source, now)
    return blob


def _lines(bullets: Sequence[str], scope: str, settings, people: Sequence[str], where: str) -> list[str]:
    return [checked_line(b, scope, settings=settings, word_limit=settings.word_limit(scope), people=people,
                         where=f"{where}[{i}]") for i, b in enumerate(bullets)]


def edit_section(store: BlobEdits, settings, agent_id: str, key: str, name: str, bullets: Sequence[str], *, by: str,
                 now: datetime, people: Sequence[str] = (), source: str = "owner") -> ConsolidatedBlob:
    """Replace one section's bullets (none: the section goes), adding it when new."""
    scope, _, _ = _scope(key)
    title = section_name(storable(name, "path section"))
    if not title or title == SOURCE_SECTION:
        raise InvalidInput("path section", "a section name of letters and words, not SOURCE (the writer's note)")
    lines = _lines(bullets, scope, settings, people, "bullets")
    current = store.blobs.get_blob(agent_id, key)
    _, sections = parse_blob(current.consolidated_content if current else "")
    sections = [s for s in sections if s.name != SOURCE_SECTION]
    names = [s.name for s in sections]
    if title in names:
        sections = [BlobSection(name=title, bullets=lines) if s.name == title else s for s in sections]
    else:
        sections.append(BlobSection(name=title, bullets=lines))
    sections = [s for s in sections if s.bullets or s.name != title]
    return _save(store, settings, agent_id, key, sections, by=by, now=now, expected=current, where="bullets",
                 source=source)


def replace_user_blob(store: BlobEdits, settings, agent_id: str, user_id: str, content: str, *, by: str,
                      now: datetime) -> ConsolidatedBlob:
    """Replace a user's blob with ``content`` (blob format or plain lines, read as
    ``parse_blob`` reads a migrated blob), as a new version."""
    key = scope_key("user", user_id=user_id)
    _, parsed = parse_blob(storable(content, "content"))
    sections = [BlobSection(name=s.name, bullets=_lines(s.bullets, "user", settings, [user_id], "content"))
                for s in parsed if s.name != SOURCE_SECTION]
    if not sections:
        raise InvalidInput("content", "the new blob holds no line")
    return _save(store, settings, agent_id, key, sections, by=by, now=now, expected=store.blobs.get_blob(agent_id, key),
                 where="content", source="owner")


def merge_sections(store: BlobEdits, settings, agent_id: str, key: str, sections: Sequence[BlobSection], *, by: str,
                   now: datetime, people: Sequence[str] = (), where: str = "bullets") -> ConsolidatedBlob | None:
    """Add to the blob at ``key`` the bullets of ``sections`` it does not hold yet, section by
    section (a new section at the end), as a new version: how an import restores what an export
    gave. None when every bullet is there already (importing twice changes nothing)."""
    scope, _, _ = _scope(key)
    current = store.blobs.get_blob(agent_id, key)
    _, kept = parse_blob(current.consolidated_content if current else "")
    merged = {s.name: list(s.bullets) for s in kept if s.name != SOURCE_SECTION}
    added = 0
    for section in sections:
        title = section_name(storable(section.name, where))
        if not title or title == SOURCE_SECTION:
            continue
        have = merged.setdefault(title, [])
        for line in _lines(section.bullets, scope, settings, people, where):
            if line not in have:
                have.append(line)
                added += 1
    if not added:
        return None
    out = [BlobSection(name=name, bullets=bullets) for name, bullets in merged.items() if bullets]
    return _save(store, settings, agent_id, key, out, by=by, now=now, expected=current, where=where, source="import")
