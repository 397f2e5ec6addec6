import math

import numpy as np
import pytest

from pipeline.search import scoring
from pipeline.search.text_index import TextIndex


@pytest.mark.parametrize(
    ("cosine", "expected"),
    [(1.0, 1.0), (0.0, 0.5), (-1.0, 0.0), (0.3, 0.65), (0.4, 0.7)],
)
def test_semantic_score_maps_cosine_onto_the_atlas_scale(cosine, expected):
    assert scoring.semantic_score(cosine) == pytest.approx(expected)


def test_semantic_score_is_vectorized():
    out = scoring.semantic_score(np.array([1.0, -1.0, 0.0]))
    assert out.tolist() == pytest.approx([1.0, 0.0, 0.5])


@pytest.mark.parametrize(
    ("n_docs", "doc_freq", "expected"),
    [(10, 1, math.log(1 + 9.5 / 1.5)), (1, 1, math.log(1 + 0.5 / 1.5)), (100, 100, math.log(1 + 0.5 / 100.5))],
)
def test_bm25_idf_is_lucenes_always_positive_form(n_docs, doc_freq, expected):
    assert scoring.bm25_idf(n_docs, doc_freq) == pytest.approx(expected)
    assert scoring.bm25_idf(n_docs, doc_freq) > 0


@pytest.mark.parametrize(
    ("tf", "doc_len", "avg_len", "expected"),
    [
        (1, 10, 10, 1 / (1 + 1.2)),            # average length: norm = k1
        (2, 10, 10, 2 / (2 + 1.2)),
        (1, 20, 10, 1 / (1 + 1.2 * 1.75)),     # long document is penalised by b
        (1, 5, 10, 1 / (1 + 1.2 * 0.625)),
    ],
)
def test_bm25_term_score_uses_k1_1_2_and_b_0_75(tf, doc_len, avg_len, expected):
    assert scoring.bm25_term_score(tf, doc_len, avg_len, idf=1.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("festival", "festival", 0),
        ("festival", "festivl", 1),      # deletion
        ("festival", "festivall", 1),    # insertion
        ("festival", "festeval", 1),     # substitution
        ("festival", "fesitval", 1),     # adjacent transposition counts once
        ("festival", "fstivla", 2),      # beyond the limit: reported as limit + 1
        ("budget", "gadget", 2),
    ],
)
def test_edit_distance_counts_damerau_edits_up_to_the_limit(a, b, expected):
    assert scoring.edit_distance(a, b, limit=1) == min(expected, 2)


@pytest.mark.parametrize(
    ("query_term", "vocabulary", "expected"),
    [
        ("festival", ["festival", "carnival"], {"festival": 1.0}),
        ("festivel", ["festival", "carnival"], {"festival": 1 - 1 / 8}),
        ("budgte", ["budget", "budgets"], {"budget": 1 - 1 / 6}),
        ("cat", ["cat", "car", "hat"], {"cat": 1.0}),           # short terms match exactly only
        ("2023", ["2023", "2024"], {"2023": 1.0}),              # numbers match exactly only
        ("mars", ["bars", "mars"], {"mars": 1.0}),               # the first letter must match
        ("marz", ["bars", "mars"], {"mars": 0.75}),
        ("zebra", ["festival"], {}),
    ],
)
def test_fuzzy_matches_finds_terms_one_edit_away(query_term, vocabulary, expected):
    assert TextIndex([vocabulary]).matches(query_term) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Alice's e-mail: ALICE@Example.com!", ["alic", "e", "mail", "alic", "exampl", "com"]),
        ("What did she paint?", ["paint"]),                    # question words are stopwords
        ("She painted paintings", ["paint", "paint"]),          # stems meet
        ("Ｆｕｌｌ width", ["full", "width"]),                   # NFKC
        ("the of and", []),
    ],
)
def test_tokenize_casefolds_drops_stopwords_and_stems(text, terms):
    assert scoring.tokenize(text) == terms


def test_rrf_uses_one_based_ranks_and_k():
    fused = scoring.rrf({"semantic": [("a", 0.9), ("b", 0.8)], "text": [("b", 3.0)]}, k=60)
    assert [f.fact_id for f in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)
    assert fused[0].ranks == {"semantic": 2, "text": 1}
    assert fused[0].scores == {"semantic": 0.8, "text": 3.0}


@pytest.mark.parametrize(
    ("rank", "kept"),
    [(1, True), (6, True), (7, False)],  # 1/66 >= 0.015 > 1/67
)
def test_rrf_threshold_drops_items_found_low_by_one_signal_only(rank, kept):
    ranked = [(f"x{i}", 1.0) for i in range(1, rank)] + [("target", 1.0)]
    fused = scoring.rrf({"semantic": ranked}, k=60, min_score=0.015)
    assert ("target" in {f.fact_id for f in fused}) is kept


def test_rrf_weights_scale_each_signal():
    fused = scoring.rrf(
        {"semantic": [("a", 0.9)], "text": [("b", 2.0)]}, k=60, weights={"semantic": 2.0, "text": 1.0}
    )
    assert [(f.fact_id, round(f.score, 6)) for f in fused] == [("a", round(2 / 61, 6)), ("b", round(1 / 61, 6))]


def test_merge_best_keeps_the_best_entry_per_id_best_first():
    one = scoring.rrf({"semantic": [("a", 0.9), ("b", 0.8)]}, k=60)
    two = scoring.rrf({"semantic": [("b", 0.95)], "text": [("b", 4.0)]}, k=60)
    merged = scoring.merge_best([one, two])
    assert [f.fact_id for f in merged] == ["b", "a"]
    assert merged[0].score == pytest.approx(2 / 61)


@pytest.mark.parametrize(("score", "threshold", "ok"), [(0.65, 0.65, True), (0.64, 0.65, False), (0.1, None, True)])
def test_passes_is_inclusive_and_none_means_no_threshold(score, threshold, ok):
    assert scoring.passes(score, threshold) is ok


@pytest.mark.parametrize(
    ("excerpt", "date", "expected"),
    [
        ((), None, "Alice: fine"),
        (("Bob: how was it?", "  "), "8 May, 2023", "[8 May, 2023] Bob: how was it?\nAlice: fine"),
        (("a", "b"), None, "a\nb\nAlice: fine"),
    ],
)
def test_retrieval_text_joins_a_fact_to_its_date_and_source_excerpt(excerpt, date, expected):
    from pipeline.retrieval import retrieval_text

    assert retrieval_text("Alice: fine", excerpt=excerpt, date=date) == expected


def test_stemming_from_many_threads_at_once_gives_every_thread_the_right_stems():
    import threading

    import snowballstemmer

    words = [f"painting{i}s" for i in range(3000)] + [f"organization{i}al" for i in range(3000)]
    reference = snowballstemmer.stemmer("english")
    expected = {w: reference.stemWord(w) for w in words}
    scoring.stem.cache_clear()
    errors, wrong = [], []

    def work(chunk):
        try:
            for w in chunk:
                if scoring.stem(w) != expected[w]:
                    wrong.append(w)
        except Exception as exc:  # a stemmer shared by threads raised IndexError here
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(words[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []
