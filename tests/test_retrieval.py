"""searchMode vector | keyword | hybrid through the retriever, on stores with keyword search."""

import pytest

from eddi_rag.config import ConfigValidationError
from tests.support.kbs import make_kb
from tests.support.marks import engines

DOCS = {
    "codes.md": "Error ERR-4711 means the payment gateway rejected the card.",
    "cards.md": "We accept Visa, Mastercard and American Express credit cards for online payments.",
    "declined.md": "If your card is declined, check the expiry date and your bank's daily limit.",
    "refunds.md": "Refunds go back to the card you paid with within seven business days.",
    "wallets.md": "Apple Pay and Google Pay are accepted in the app.",
}


SERVED = {"pgvector": "pgvector_params", "typesense": "typesense_params"}  # stores needing a running server


@pytest.fixture(params=engines("in-memory", "sqlite", "sqlite-vec", "pgvector", "typesense", "qdrant", served=tuple(SERVED)))
def kb(request):
    params = request.getfixturevalue(SERVED[request.param]) if request.param in SERVED else {}
    runtime = request.getfixturevalue("runtime")  # made after its server started (the guard lets it reach it); a test
    # names ``kb`` before ``runtime`` for that
    if request.param == "qdrant":
        params = {"path": ":memory:"}  # qdrant-client's local mode

    def make(**cfg):
        id = make_kb(runtime, "payments", storeType=request.param, storeParameters=params, minScore=0, **cfg)
        for doc, text in DOCS.items():
            runtime.ingest(id, doc, text)
        return id
    return make


def sources(runtime, kb_id, query, **kw):
    return [h.metadata["source"] for h in runtime.query(kb_id, query, **kw)]


def test_keyword_mode_finds_exact_identifiers(kb, runtime):
    kb_id = kb(searchMode="keyword")
    assert sources(runtime, kb_id, "ERR-4711", max_results=1) == ["codes.md"]
    assert sources(runtime, kb_id, "zeppelin") == []


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_hybrid_puts_the_exact_match_first_and_keeps_semantic_neighbours(kb, runtime, fusion):
    kb_id = kb(searchMode="hybrid", fusion=fusion)
    found = sources(runtime, kb_id, "what does ERR-4711 mean", max_results=3)
    assert found[0] == "codes.md" and len(found) == 3
    assert sources(runtime, kb_id, "my card was declined", max_results=1) == ["declined.md"]


def test_every_mode_orders_by_the_score_it_shows_so_min_score_keeps_a_prefix(kb, runtime):
    """Issue 45, point 1: minScore 0.79 had dropped the first-ranked right page (cosine 0.783) and kept two wrong
    ones; now a result's score is the one it is ordered by, so minScore only ever cuts the order's tail."""
    for mode, fusion in (("keyword", "weighted"), ("hybrid", "weighted"), ("hybrid", "rrf"), ("vector", "weighted")):
        kb_id = kb(searchMode=mode, fusion=fusion)
        hits = runtime.query(kb_id, "is my card accepted", max_results=5)
        scores = [h.score for h in hits]
        assert hits and scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores), (mode, fusion)
        # the first scores the best relevance among the candidates: minScore keeps it whenever vector search would
        assert scores[0] >= max((h.similarity + 1) / 2 for h in hits) - 1e-6, (mode, fusion)
        for cut in scores:
            kept = runtime.query(kb_id, "is my card accepted", max_results=5, min_score=cut)
            assert [h.id for h in kept] == [h.id for h in hits if h.score >= cut], (mode, fusion, cut)
        assert all(-1 <= h.similarity <= 1 for h in hits)  # (each result keeps its cosine)


@pytest.mark.parametrize("mode,fusion", [("hybrid", "weighted"), ("hybrid", "rrf"), ("keyword", "weighted")])
def test_the_first_results_do_not_depend_on_how_many_are_asked_for(kb, runtime, mode, fusion):
    """Issue 45, point 1: a pool of candidates per side that grew with maxResults made the first result at k=1 and
    at k=5 differ (17 of 100 questions); each k's results are now the start of a larger k's."""
    kb_id = kb(searchMode=mode, fusion=fusion)
    for question in ("card payments", "what does ERR-4711 mean", "declined card bank limit", "refund to my card"):
        ten = [h.id for h in runtime.query(kb_id, question, max_results=10)]
        for k in range(1, 6):
            assert [h.id for h in runtime.query(kb_id, question, max_results=k)] == ten[:k], (question, k)


def test_a_chunk_only_the_vector_side_found_is_scored_on_the_keyword_side_too(runtime, monkeypatch):
    """A keyword side that finds one chunk (as a pool too small for the corpus would): the vector side's finds still
    have their BM25, from the store's keyword_scores, the same the keyword search gives them."""
    from eddi_rag.stores.embedded.sqlite import SqliteStore

    kb_id = make_kb(runtime, "payments", storeType="sqlite", minScore=0, searchMode="hybrid")
    for doc, text in DOCS.items():
        runtime.ingest(kb_id, doc, text)
    store = runtime.stores.get(kb_id, runtime.knowledge_bases.get(kb_id))
    full = {h.id: h.bm25 for h in store.keyword_search("card payments", 10)}
    assert store.keyword_scores("card payments", list(full)) == pytest.approx(full)
    search = SqliteStore.keyword_search
    monkeypatch.setattr(SqliteStore, "keyword_search", lambda self, text, k, where=None: search(self, text, k, where)[:1])
    hits = runtime.query(kb_id, "card payments", max_results=5)
    scored = {h.id: (h.ranking["keyword"] or {}).get("bm25") for h in hits}
    assert {i: b for i, b in scored.items() if i in full} == pytest.approx({i: round(b, 4) for i, b in full.items()}, abs=1e-4)


def test_hybrid_needs_a_store_with_keyword_search(runtime):
    with pytest.raises(ConfigValidationError, match=r"\$.searchMode: 'hybrid' needs keyword search; storeType 'chroma'"):
        runtime.validate_rag({"name": "kb", "embeddingProvider": "local", "storeType": "chroma", "searchMode": "hybrid"})


def test_filters_apply_in_every_mode(kb, runtime):
    kb_id = kb(searchMode="hybrid")
    assert set(sources(runtime, kb_id, "card", max_results=5, where={"source": {"$in": ["cards.md", "refunds.md"]}})) == {"cards.md", "refunds.md"}
