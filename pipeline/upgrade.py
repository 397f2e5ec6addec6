"""Bringing a store formed by an earlier version up to the provenance guarantees (design §11
"Provenance and erasure"), in place and idempotently: ``memoryctl migrate``.

- Indexes: every index the store declares, the provenance ones included
  (``Store.create_indexes``; on SQLite the ``user_refs`` table is filled from the documents
  when it is first made).
- Sources: a fact or reflection stored without ``source_user_ids`` gets those its run's
  messages give (``pipeline.erasure.attribute``: the senders of its source messages, or else
  every human of the run's range), while that run record and its messages are stored.
- Usage roll-ups (design §11 "Observability and cost"): derived again from the runs and usage records
  (``Store.rebuild_rollups``), which fills them on a store made before them and replaces, so
  a second run writes the same rows. SQLite rebuilds in one transaction; on MongoDB run it
  with the workers stopped (a stage completed during the rebuild may be counted twice or not).
- What cannot be attributed (its run is gone, or it never had one: v1 text) is counted, and
  so are blobs holding text that no merge of reflections made. Nothing is guessed.

A second run finds nothing left to derive and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from pipeline import erasure
from pipeline.sources import message_sources, range_sources
from pipeline.store.port import Store


@dataclass
class UpgradeReport:
    indexes: list[str] = field(default_factory=list)
    items_attributed: int = 0       # sources derived and written now
    unattributed_items: int = 0     # no source can be derived: left, listed by forget-user --verify
    unexplained_blobs: int = 0      # blob text no merge of reflections made (v1 shards)
    rejected_indexed: int = 0       # rejected events given their id index field (Mongo)
    rollup_rows: int = 0            # usage roll-up rows derived from the runs and usage records

    def counts(self) -> dict:
        return asdict(self)


def upgrade_store(store: Store, progress: Callable[[str], None] | None = None) -> UpgradeReport:
    """Create the indexes and derive the sources that can be derived; see the module doc."""
    say = progress or (lambda line: None)
    report = UpgradeReport()
    say("creating indexes")
    report.indexes = store.create_indexes()
    backfill = getattr(store.provenance, "backfill_rejected_ids", None)  # Mongo only: SQLite fills at open
    if backfill is not None:
        report.rejected_indexed = backfill()
    say("rolling usage up per agent, user, session and day")
    report.rollup_rows = store.rollups.rebuild_rollups()
    loose = store.provenance.unattributed(None)
    say(f"deriving sources of {len(loose)} item(s) stored without them")
    runs: dict[str, list] = {}
    for kind, items in (("facts", loose.facts), ("reflections", loose.reflections)):
        for item in items:
            run_id = item.source_run_id or ""
            if run_id and run_id not in runs:
                run = store.runs.get_run(run_id)
                runs[run_id] = store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to) if run else []
            found = erasure.attribute(item, runs)
            if not found:
                report.unattributed_items += 1
                continue
            messages = runs.get(run_id) or []
            ids = list(item.source_message_ids) or range_sources(messages)[0]
            users = message_sources(ids, messages) if item.source_message_ids else sorted(found)
            ident = item.fact_id if kind == "facts" else item.reflection_id
            report.items_attributed += store.provenance.set_item_sources(kind, ident, users or sorted(found), ids)
    report.unexplained_blobs = len(store.provenance.unexplained_blobs(None))
    return report
