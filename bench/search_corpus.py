"""The synthetic corpus of ``bench.search``: facts of a target agent and user among at least
3x as many others, random unit vectors, blobs and reflections for the context, and queries
with their vectors prepared in advance (see that module's docstring for the layout)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import numpy as np

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.text import text_hash
from schemas.documents import ConsolidatedBlob, Fact, Reflection

DIM = 384
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
TARGET = "agent-0"
USER = "U0"
OTHER_USERS = 9
BATCH = 5_000


class LookupEmbedder(Embedder):
    """Query vectors prepared in advance: no model time in the figures."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.model, self.dim, self.table = f"bench-random-{DIM}", DIM, table

    def embed(self, texts: Sequence[str]) -> Embeddings:
        return Embeddings([self.table.get(t, self.table[""]).tolist() for t in texts], self.model, self.dim)


def vocabulary(rng: random.Random, n: int = 5000) -> list[str]:
    """``n`` made-up words of two to four syllables, sorted."""
    syllables = ["ka", "lo", "mi", "ra", "te", "sun", "vel", "dor", "pan", "gri", "tho", "bex", "qua", "ni", "zor",
                 "fel", "ash", "orn", "lin", "mur"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` random float32 unit vectors of ``DIM`` dimensions."""
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def corpus_layout(n_target: int) -> list[tuple[str, str, int]]:
    """(agent, scope key, count): the target's visible facts, then at least 3x as many others."""
    user_facts = max(1, n_target // 50)
    rows = [(TARGET, "agent", n_target - user_facts), (TARGET, f"user:{USER}", user_facts)]
    rows += [(TARGET, f"user:U{i}", user_facts) for i in range(1, OTHER_USERS + 1)]
    for agent in ("agent-1", "agent-2"):
        rows += [(agent, "agent", n_target - user_facts), (agent, f"user:{USER}", user_facts)]
    others = sum(c for a, k, c in rows[2:])
    if others < 2 * n_target:  # at least 3x in all
        rows.append(("agent-3", "agent", 2 * n_target - others))
    return rows


def fact_batches(layout, words, rng, nrng, *, vectors_for_others: bool):
    """The facts of ``layout`` with their vectors, ``BATCH`` at a time; other agents' facts carry
    none unless ``vectors_for_others``."""
    serial = 0
    for agent, key, count in layout:
        for start in range(0, count, BATCH):
            size = min(BATCH, count - start)
            with_vectors = agent == TARGET and key in ("agent", f"user:{USER}") or vectors_for_others
            vecs = unit_vectors(nrng, size) if with_vectors else None
            batch = []
            for i in range(size):
                serial += 1
                content = " ".join(rng.choice(words) for _ in range(rng.randint(6, 12))) + f" ref{serial}"
                scope = "agent" if key == "agent" else "user"
                batch.append((Fact(
                    fact_id=f"f{serial}", agent_id=agent, scope=scope, user_id=key[5:] if scope == "user" else None,
                    scope_key=key, content=content, hash=text_hash(content),
                    embedding_model=f"bench-random-{DIM}" if with_vectors else None,
                    formed_at=NOW - timedelta(minutes=rng.randint(0, 60 * 24 * 30)),
                ), None if vecs is None else vecs[i]))
            yield batch


def load_sqlite(store, batches) -> None:
    """Bulk insert into a ``SQLiteStore``, vectors packed as the store keeps them."""
    columns = store.facts._fact_columns
    marks = ", ".join("?" for _ in columns.split(","))
    for batch in batches:
        rows = []
        for fact, vec in batch:
            values = list(store.facts._fact_values(fact))
            values[7] = None if vec is None else vec.astype(np.float32).tobytes()
            rows.append(values)
        with store.db.write() as conn:
            conn.executemany(f"INSERT INTO {store.db.t('facts')} ({columns}) VALUES ({marks})", rows)


def load_mongo(store, batches) -> None:
    """Bulk insert into a ``MongoStore``, documents as the store writes them."""
    from pipeline.store.mongo.codec import to_doc
    from pipeline.store.mongo.facts import LIVE

    for batch in batches:
        docs = []
        for fact, vec in batch:
            doc = to_doc(fact, fact.fact_id)
            doc["embedding"] = None if vec is None else vec.tolist()
            doc[LIVE] = True
            docs.append(doc)
        store.col("facts").insert_many(docs)


def add_memory(store) -> None:
    """Blobs and buffered reflections for the scopes the context shows."""
    for key, scope, user, session in [("agent", "agent", None, None), (f"user:{USER}", "user", USER, None)] + [
        (f"session:s{i}", "session", None, f"s{i}") for i in range(20)
    ]:
        store.blobs.save_blob(ConsolidatedBlob(
            agent_id=TARGET, scope=scope, scope_key=key, user_id=user, session_id=session,
            consolidated_content="VERSION: 1\n" + " ".join(["memory"] * 150), word_limit=1200, version=1,
        ), expected_version=0)
        store.reflections.insert_reflections([Reflection(
            reflection_id=f"r-{key}-{i}", agent_id=TARGET, scope=scope, user_id=user, session_id=session,
            scope_key=key, content=f"reflection {i} about {key}", formed_at=NOW,
        ) for i in range(3)])
    store.leases.bump_scope_versions(TARGET, ["agent", f"user:{USER}", *(f"session:s{i}" for i in range(20))])


def make_queries(store, words, rng, nrng, n: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """``n`` distinct queries of three words of a visible fact (a third with a typo) and the
    vector of each (a noisy copy of that fact's, or for a quarter of them an unrelated one)."""
    visible = store.facts.search_candidates(TARGET, ["agent", f"user:{USER}"], f"bench-random-{DIM}")
    table: dict[str, np.ndarray] = {"": unit_vectors(nrng, 1)[0]}
    queries: list[str] = []
    while len(queries) < n:
        cand = rng.choice(visible)
        terms = [w for w in cand.content.split() if not w.startswith("ref")]
        picked = rng.sample(terms, min(3, len(terms)))
        if len(queries) % 3 == 0:  # a typo: two inner letters swapped
            w = picked[0]
            i = rng.randint(1, len(w) - 3)
            picked[0] = w[:i] + w[i + 1] + w[i] + w[i + 2:]
        text = " ".join(picked)
        if text in table:
            continue
        base = np.asarray(cand.embedding, dtype=np.float32)
        if len(queries) % 4 == 3:
            vec = unit_vectors(nrng, 1)[0]
        else:
            vec = base + 0.45 * unit_vectors(nrng, 1)[0]
            vec /= np.linalg.norm(vec)
        table[text] = vec
        queries.append(text)
    return queries, table
