"""What the elasticsearch store sends, checked against Elasticsearch's documented request shapes
(index mapping with dense_vector, _bulk, kNN search with a pre-filter, search_after paging)."""

import pytest

from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.elasticsearch import (
    ElasticsearchStore,
    index_name,
    to_elasticsearch,
)
from eddi_rag.stores.filters import parse
from tests.support.elasticsearch_standin import ElasticsearchStandIn


def test_index_names_are_lower_case_and_safe():
    assert index_name("64f1a") == "eddi_kb_64f1a"
    assert index_name("64F1a.B c").startswith("eddi_kb_64f1a_b_c_")  # changed by cleaning: a hash keeps it apart
    assert index_name("a-b") != index_name("a_b") != index_name("A_b")


def test_filters_compile_to_typed_bool_queries():
    assert to_elasticsearch(parse({"n": {"$gte": 3}, "colour": {"$ne": "red"}})) == {"bool": {"filter": [
        {"range": {"m_num.n": {"gte": 3}}},
        {"bool": {"must_not": [{"term": {"m_str.colour": "red"}}]}},
    ]}}
    assert to_elasticsearch(parse({"even": {"$in": [True, "yes"]}})) == {"bool": {"should": [
        {"term": {"m_bool.even": True}}, {"term": {"m_str.even": "yes"}}], "minimum_should_match": 1}}


@pytest.mark.integration
def test_requests_have_the_documented_shape():
    with ElasticsearchStandIn() as server:
        store = ElasticsearchStore("kb1", {"url": server.url, "numCandidates": 50}, StoreContext(Database()))
        store.upsert([Chunk("a", "alpha", {"source": "x.md", "n": 1}, [1.0, 0.0, 0.0]),
                      Chunk("b", "beta", {"source": "y.md", "n": 2}, [0.0, 1.0, 0.0])])
        hits = store.search([1.0, 0.1, 0.0], 1, where={"source": "x.md"})
    assert [h.id for h in hits] == ["a"] and abs(hits[0].score - (1 + hits[0].similarity) / 2) < 1e-9
    create = next(r for r in server.requests if r["method"] == "PUT")
    assert create["path"] == "/eddi_kb_kb1"
    assert create["json"]["mappings"]["properties"]["embedding"] == {"type": "dense_vector", "dims": 3, "index": True, "similarity": "cosine"}
    bulk = next(r for r in server.requests if r["path"].startswith("/_bulk"))
    assert "refresh=true" in bulk["path"] and bulk["headers"]["content-type"].startswith("application/vnd.elasticsearch+x-ndjson")
    search = [r for r in server.requests if r["path"].endswith("/_search")][-1]
    knn = search["json"]["knn"]
    assert knn["field"] == "embedding" and knn["k"] == 17 and knn["num_candidates"] == 50
    assert knn["filter"] == {"term": {"m_str.source": "x.md"}}
    assert server.requests[0]["headers"]["accept"].startswith("application/vnd.elasticsearch+json")


@pytest.mark.integration
def test_a_knowledge_base_s_language_names_the_text_field_s_analyzer():
    """Issue 57, point 2: the index of a German knowledge base analyses its text with Elasticsearch's built-in german
    analyzer, a Chinese one with cjk; auto and English keep standard, as before (Elasticsearch's documented mapping)."""
    analyzers = {}
    for language in ("de", "zh", ["ja"], "auto", "en", ["de", "en"]):
        with ElasticsearchStandIn() as server:
            store = ElasticsearchStore("kb1", {"url": server.url, "kbLanguage": language}, StoreContext(Database()))
            store.upsert([Chunk("a", "Die Nachtzüge fahren ab.", {"source": "x.md"}, [1.0, 0.0, 0.0])])
            create = next(r for r in server.requests if r["method"] == "PUT")
            analyzers[str(language)] = create["json"]["mappings"]["properties"]["text"].get("analyzer")
    assert analyzers == {"de": "german", "zh": "cjk", "['ja']": "cjk", "auto": None, "en": None, "['de', 'en']": None}
