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


def test_every_mode_reports_cosine_relevance_so_min_score_keeps_its_meaning(kb, runtime):
    for mode in ("keyword", "hybrid"):
        kb_id = kb(searchMode=mode)
        hits = runtime.query(kb_id, "ERR-4711", max_results=5)
        assert all(0 <= h.score <= 1 and h.score == pytest.approx((h.similarity + 1) / 2) for h in hits)
        best = max(h.score for h in hits)
        assert runtime.query(kb_id, "ERR-4711", max_results=5, min_score=best + 1e-6) == []


def test_hybrid_needs_a_store_with_keyword_search(runtime):
    with pytest.raises(ConfigValidationError, match=r"\$.searchMode: 'hybrid' needs keyword search; storeType 'chroma'"):
        runtime.validate_rag({"name": "kb", "embeddingProvider": "local", "storeType": "chroma", "searchMode": "hybrid"})


def test_filters_apply_in_every_mode(kb, runtime):
    kb_id = kb(searchMode="hybrid")
    assert set(sources(runtime, kb_id, "card", max_results=5, where={"source": {"$in": ["cards.md", "refunds.md"]}})) == {"cards.md", "refunds.md"}
