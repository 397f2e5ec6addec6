"""Import (design §13 "Direct writes and import"): JSON Lines into one agent's memory, a line at
a time (``schemas.imports`` names the two forms), every good line kept and every bad one
reported with its number, the field as the line spells it, and why.

Idempotent by a key, so that a file can be imported again after an interruption:

- an export line keeps the id it was exported with (``fact_id``, ``reflection_id``); a simple
  line's fact id is derived from the agent, the user and its ``import_key`` (a CRM row's id),
  or the normalized text when it has none. A fact line whose key is stored already leaves the
  fact ``unchanged`` when it says the same, ``updated`` (a new version, with history) when it
  says something newer, and is ``skipped`` when the fact is retired (``usecases.import_keys``
  decides). A reflection whose id is stored is kept as it is (``unchanged``).
- a blob line adds the bullets its blob does not hold yet, and nothing (``unchanged``) when it
  holds them all.

Each fact written live is announced to the agent's webhooks as ``fact.created`` (``source``
import), and each blob line that adds bullets as ``memory.consolidated``, as formation announces
the same changes; a reflection, as formation's, when a merge takes it into the blob.

An item whose text its scope already holds live (formed from messages, written by an owner) is
reported as already there, naming the holder. Imported items are stamped ``source: import`` and
rest on the line's person (``source_user_ids``), so that ``forget-user`` erases them as it
erases memory formed from their messages.

Streamed: ``usecases.import_lines`` cuts the bytes into lines as they arrive, with a bound on
one line, and ``Importer.feed`` takes lines as they come; neither holds the whole file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from pipeline.errors import Duplicate, InvalidInput
from pipeline.owner.blobs import merge_sections
from pipeline.owner.curation import checked_line
from pipeline.prompts.consolidation import BlobSection, parse_blob
from pipeline.text import text_hash
from pipeline.webhooks import outbox
from schemas.documents import Fact, FactHistoryEntry, Reflection, scope_key
from schemas.imports import EXPORTED, SKIPPED_KINDS, ExportedBlob, ExportedFact, ExportedReflection, \
    ExportedSection, SimpleLine
from usecases import import_keys
from usecases.import_lines import MAX_LINE_BYTES, TooLong, split_lines
from usecases.writes import FactWrite, WriteDeps, check_writable, new_fact, target
from usecases.audit import Audited

#: the facts embedded in one call: an import in batches of 64 ran 2.5x faster than one text at
#: a time (35.0 vs 14.2 lines/s, all-MiniLM-L6-v2 int8, load 10.6; docs/benchmarks.md)
EMBED_BATCH = 64
#: the rejects a summary keeps (every one is also handed to the caller as it happens)
KEPT_REJECTS = 1000
#: history texts were screened when stored; their word limit is the one they had then
_HISTORY_WORDS = 10_000

Outcome = Literal["added", "updated", "unchanged", "exists", "skipped", "rejected"]


@dataclass(frozen=True)
class LineResult:
    """What became of one line: ``item_id`` the item added or updated (or the one already
    holding it); ``why`` a reject's reason, or why a line changed nothing."""

    line: int
    outcome: Outcome
    kind: str = ""
    item_id: str | None = None
    field: str | None = None
    why: str | None = None


@dataclass
class ImportSummary:
    added: int = 0
    updated: int = 0     # facts whose key was stored, now saying the newer line
    unchanged: int = 0   # lines whose key holds what they say already (imported before)
    exists: int = 0      # lines whose text another item of the scope holds
    skipped: int = 0
    rejected: int = 0
    rejects: list[LineResult] = field(default_factory=list)
    #: fact lines skipped because the fact under their key is retired, with why (as many as rejects)
    skips: list[LineResult] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)   # added, per kind

    def count(self, result: LineResult) -> None:
        setattr(self, result.outcome, getattr(self, result.outcome) + 1)
        if result.outcome == "added":
            self.by_kind[result.kind] = self.by_kind.get(result.kind, 0) + 1
        if result.outcome == "rejected" and len(self.rejects) < KEPT_REJECTS:
            self.rejects.append(result)
        if result.outcome == "skipped" and result.kind == "fact" and len(self.skips) < KEPT_REJECTS:
            self.skips.append(result)


@dataclass
class _Pending:
    """A checked fact of line ``line``, waiting for its vector (embedded with its batch)."""

    line: int
    fact: Fact
    where: str   # the field the line gives the text in
    keeps_metadata: bool = False   # the line gives no ``metadata``: a stored fact's stays


@dataclass(frozen=True)
class _Update:
    """A line newer than the live fact under its key: applied after the lines before it."""

    line: int
    stored: Fact
    wanted: Fact
    where: str


def _where(loc: tuple) -> str:
    """A pydantic error location as the line spells the field: ``history[0].content``."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue  # pydantic's mark of a dict's key that is wrong: the key is the field
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "line"


def _first_error(exc: ValidationError) -> tuple[str, str]:
    """The field and reason to report of a line's errors: an unknown field first (a misspelt
    ``categories`` also leaves a field missing, and the spelling is the thing to fix)."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    if first["type"] == "extra_forbidden":
        return _where(tuple(first["loc"])), f"unknown field; a simple line has {', '.join(SimpleLine.model_fields)}"
    return _where(tuple(first["loc"])), first["msg"]


class Importer:
    """Imports lines into ``agent_id`` (None: each export line's own agent; a simple line then
    needs the caller to name one), as ``by`` (a credential id, or ``cli``)."""

    def __init__(self, deps: WriteDeps, agent_id: str | None, *, by: str) -> None:
        self.deps, self.agent_id, self.by = deps, agent_id, by
        self.summary = ImportSummary()
        self.line = 0

    @property
    def audit(self) -> Audited:
        """The import's audit entry, with its counts so far (never a line's content)."""
        done = self.summary
        return Audited("import", self.agent_id, "agent", {"added": done.added, "updated": done.updated,
                                                         "unchanged": done.unchanged, "exists": done.exists,
                                                         "rejected": done.rejected})

    def feed(self, lines: Iterable[bytes | str]) -> list[LineResult]:
        """The results of ``lines`` (numbered on from the last call), in order; blank lines are
        skipped without a result. The facts of up to ``EMBED_BATCH`` lines are embedded in one
        call, after their checks (a refused text never reaches the embedder)."""
        results: list[LineResult] = []
        batch: list[LineResult | _Pending] = []
        for raw in lines:
            self.line += 1
            outcome = self._one(raw)
            if isinstance(outcome, _Update):   # in order: a line before it may hold its new text
                results += self._settle(batch)
                batch = []
                outcome = self._update(outcome)
            if outcome is not None:
                batch.append(outcome)
            if sum(isinstance(o, _Pending) for o in batch) >= EMBED_BATCH:
                results += self._settle(batch)
                batch = []
        return results + self._settle(batch)

    def run(self, chunks: Iterable[bytes], on_result: Callable[[LineResult], None] | None = None) -> ImportSummary:
        """Import every line of ``chunks``, ``EMBED_BATCH`` lines at a time; ``on_result``
        hears each line's result as its batch is done (a rejected line, to report it)."""
        hear = on_result or (lambda result: None)
        group: list[bytes] = []
        for line in split_lines(chunks):
            group.append(line)
            if len(group) >= EMBED_BATCH:
                for result in self.feed(group):
                    hear(result)
                group = []
        for result in self.feed(group):
            hear(result)
        return self.summary

    def _settle(self, batch: list[LineResult | _Pending]) -> list[LineResult]:
        pending = [o for o in batch if isinstance(o, _Pending)]
        if pending:
            vectors = self.deps.embedder.embed([p.fact.content for p in pending]).vectors
            model = self.deps.embedder.model
            for p, vector in zip(pending, vectors):
                p.fact = p.fact.model_copy(update={"embedding": vector, "embedding_model": model})
        results = [self._insert(o) if isinstance(o, _Pending) else o for o in batch]
        for result in results:
            self.summary.count(result)
        # a fact that came back already retired changed nothing live: formation announces none either
        added = {r.item_id for r in results if r.outcome == "added" and r.kind == "fact"}
        live = [p.fact for p in pending if p.fact.fact_id in added and p.fact.retired_at is None]
        outbox.announce_changed(self.deps.store.webhooks, live, "fact.created", "import", self.deps.clock.now())
        return results

    def _one(self, raw: bytes | str) -> LineResult | _Pending | _Update | None:
        n = self.line
        if isinstance(raw, TooLong):
            return LineResult(n, "rejected", field="line", why=f"longer than {MAX_LINE_BYTES} bytes")
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            return LineResult(n, "rejected", field="line", why=f"not UTF-8: {exc.reason} at byte {exc.start}")
        if not text.strip():
            return None
        try:
            data = json.loads(text)
        except RecursionError:
            return LineResult(n, "rejected", field="line", why="the JSON nests deeper than an import reads")
        except ValueError as exc:
            return LineResult(n, "rejected", field="line", why=f"not JSON: {str(exc).split(';')[0]}")
        if not isinstance(data, dict):
            return LineResult(n, "rejected", field="line", why="a line is one JSON object")
        try:
            return self._record(n, data)
        except ValidationError as exc:
            field, why = _first_error(exc)
            return LineResult(n, "rejected", str(data.get("kind", "fact")), field=field, why=why)
        except Duplicate as exc:
            return LineResult(n, "exists", str(data.get("kind", "fact")), item_id=exc.existing_id)
        except InvalidInput as exc:
            return LineResult(n, "rejected", str(data.get("kind", "fact")), field=exc.field, why=exc.reason)

    def _record(self, n: int, data: dict[str, Any]) -> LineResult | _Pending | _Update:
        kind = data.get("kind")
        if kind is None:
            return self._simple(n, SimpleLine.model_validate(data))
        if kind in SKIPPED_KINDS:
            return LineResult(n, "skipped", str(kind), why="not memory: a message would be formed again; "
                                                             "a cost is a record of the past")
        model: type[BaseModel] | None = EXPORTED.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise InvalidInput("kind", f"expected one of {', '.join(sorted(EXPORTED))} (or none: a simple line)")
        record = model.model_validate(data)
        agent = self._agent(record.agent_id)  # type: ignore[attr-defined]
        if isinstance(record, ExportedFact):
            return self._fact(n, agent, record)
        if isinstance(record, ExportedReflection):
            return self._reflection(n, agent, record)
        return self._blob(n, agent, record)  # type: ignore[arg-type]

    def _agent(self, line_agent: str) -> str:
        if self.agent_id is not None and line_agent != self.agent_id:
            raise InvalidInput("agent_id", f"this line is of agent {line_agent!r}, the import is into "
                                           f"{self.agent_id!r}")
        return line_agent

    def _simple(self, n: int, line: SimpleLine) -> _Pending | LineResult | _Update:
        if self.agent_id is None:
            raise InvalidInput("agent_id", "a simple line names no agent: give the agent to import into")
        key = line.import_key or text_hash(line.text)
        fact_id = "imp-" + hashlib.sha256(f"{self.agent_id}\x1f{line.user_id}\x1f{key}".encode()).hexdigest()[:32]
        write = FactWrite(self.agent_id, line.text, "import", user_id=line.user_id, expires_at=line.expires_at,
                          categories=line.categories, metadata=line.metadata, where="text")
        return self._keyed(n, new_fact(self.deps, write, fact_id=fact_id, embed=False), "text",
                           "metadata" not in line.model_fields_set)

    def _keyed(self, n: int, fact: Fact, where: str, keeps_metadata: bool) -> _Pending | LineResult | _Update:
        """A checked fact line: new (to embed and insert), or meeting the fact under its key."""
        stored = self.deps.store.facts.get_facts([fact.fact_id])
        if stored:
            return self._meets(n, stored[0], fact, where, keeps_metadata)
        return _Pending(n, fact, where, keeps_metadata)

    def _meets(self, n: int, stored: Fact, wanted: Fact, where: str, keeps_metadata: bool) -> LineResult | _Update:
        if keeps_metadata:
            wanted = wanted.model_copy(update={"metadata": stored.metadata})
        outcome, why = import_keys.verdict(stored, wanted, self.deps.clock.now())
        if outcome == "update":
            return _Update(n, stored, wanted, where)
        return LineResult(n, outcome, "fact", item_id=stored.fact_id, why=why)

    def _update(self, u: _Update) -> LineResult:
        try:
            updated = import_keys.update(self.deps, u.stored, u.wanted, where=u.where)
        except InvalidInput as exc:
            return LineResult(u.line, "rejected", "fact", field=exc.field, why=exc.reason)
        if updated is None:
            return LineResult(u.line, "exists", "fact", item_id=u.stored.fact_id,
                              why="another fact of its scope says this text, or the fact changed meanwhile")
        return LineResult(u.line, "updated", "fact", item_id=updated.fact_id)

    def _insert(self, p: _Pending) -> LineResult:
        fact = p.fact
        inserted, holder = self.deps.store.facts.insert_fact(fact)
        if not inserted:
            if found := self.deps.store.facts.get_facts([fact.fact_id]):   # a line before it stored its key
                met = self._meets(p.line, found[0], fact, p.where, p.keeps_metadata)
                return self._update(met) if isinstance(met, _Update) else met
            return LineResult(p.line, "exists", "fact", item_id=holder)
        self.deps.store.leases.bump_scope_versions(fact.agent_id, [fact.scope_key])
        return LineResult(p.line, "added", "fact", item_id=fact.fact_id)

    def _scope_key(self, scope: str, record) -> str:
        """The key an export line's item goes back to: the agent's, the person's own, or a
        session's. A user-scope item of someone else's memory (an export names only its
        person) is refused."""
        own = scope_key("user", user_id=record.user_id)
        if scope == "agent":
            return "agent"
        if scope == "user":
            if record.scope_key != own:
                # an export leaves the key out (null) of an item of someone else's user memory
                raise InvalidInput("scope_key", f"{record.scope_key or 'null'}: another person's user memory; an "
                                                f"import restores the memory of its line's user_id only")
            return own
        if not record.scope_key or not record.scope_key.startswith("session:") or record.scope_key == "session:":
            raise InvalidInput("scope_key", "a session-scope line names its session (session:<id>)")
        return record.scope_key

    def _fact(self, n: int, agent: str, r: ExportedFact) -> _Pending | LineResult | _Update:
        key = self._scope_key(r.scope, r)
        people = [r.user_id]
        history = [FactHistoryEntry(content=checked_line(h.content, r.scope, settings=self.deps.settings,
                                                         word_limit=_HISTORY_WORDS, people=people,
                                                         where=f"history[{i}].content"),
                                    version=h.version, changed_at=h.changed_at, valid_from=h.valid_from,
                                    valid_to=h.valid_to, run_id=None)
                   for i, h in enumerate(r.history)]
        write = FactWrite(agent, r.content, "import", user_id=r.user_id if key != "agent" else None,
                          expires_at=r.expires_at, categories=r.categories)
        kept = dict(formed_at=r.formed_at, updated_at=r.updated_at,
                    valid_from=r.valid_from or r.updated_at or r.formed_at, valid_to=r.valid_to, retired_at=r.retired_at, retired_reason=r.retired_reason, version=r.version, history=history,
                    source_message_ids=r.source_message_ids, source_user_ids=people, metadata=r.metadata,
                    retired_by="import" if r.retired_at else None)
        return self._keyed(n, new_fact(self.deps, write, fact_id=r.fact_id, embed=False, **_set(kept)), "content",
                           "metadata" not in r.model_fields_set)

    def _reflection(self, n: int, agent: str, r: ExportedReflection) -> LineResult:
        key = self._scope_key(r.scope, r)
        check_writable(self.deps, agent, target(r.user_id if r.scope == "user" else None))
        text = checked_line(r.content, r.scope, settings=self.deps.settings,
                            word_limit=self.deps.settings.reflection_word_limit,
                            people=[r.user_id] if r.scope == "agent" else (), where="content")
        reflection = Reflection(
            reflection_id=r.reflection_id, agent_id=agent, scope=r.scope, scope_key=key,
            user_id=r.user_id if r.scope == "user" else None,
            session_id=key.split(":", 1)[1] if r.scope == "session" else None, content=text,
            source_message_ids=r.source_message_ids, source_user_ids=[r.user_id], source="import",
            formed_at=r.formed_at, absorbed=r.absorbed, absorbed_at=r.formed_at if r.absorbed else None,
            consolidated_into=r.consolidated_into)
        if not self.deps.store.reflections.insert_reflections([reflection]):   # kept as it is
            return LineResult(n, "unchanged", "reflection", item_id=r.reflection_id)
        self.deps.store.leases.bump_scope_versions(agent, [key])
        return LineResult(n, "added", "reflection", item_id=r.reflection_id)

    def _blob(self, n: int, agent: str, r: ExportedBlob | ExportedSection) -> LineResult:
        key = r.scope_key or ""
        scope = "agent" if key == "agent" else key.split(":", 1)[0]
        if scope not in ("agent", "user", "session"):
            raise InvalidInput("scope_key", "expected agent, user:<id> or session:<id>")
        self._scope_key(scope, r)
        if isinstance(r, ExportedBlob):
            sections = parse_blob(r.content)[1]
        else:
            sections = [BlobSection(name=r.section, bullets=list(r.bullets))]
        people = [r.user_id] if scope == "agent" else []
        blob = merge_sections(self.deps.store, self.deps.settings, agent, key, sections, by=f"import:{self.by}",
                              now=self.deps.clock.now(), people=people,
                              where="content" if isinstance(r, ExportedBlob) else "bullets")
        if blob is None:
            return LineResult(n, "unchanged", r.kind, item_id=key)
        return LineResult(n, "added", r.kind, item_id=key)


def _set(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` less those the record does not give (the document's rules fill them)."""
    return {k: v for k, v in values.items() if v is not None}


def import_file(deps: WriteDeps, chunks: Iterable[bytes], agent_id: str | None, *, by: str) -> ImportSummary:
    """Import every line of ``chunks`` (a file read in pieces)."""
    return Importer(deps, agent_id, by=by).run(chunks)
