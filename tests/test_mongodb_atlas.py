"""mongodb-atlas: no MongoDB runs here, so our side is checked against Atlas's documented request
shapes and a recorded response; with MONGODB_URI set, the conformance suite runs against it."""

import pytest

from eddi_rag.stores.filters import parse
from eddi_rag.stores.mongodb_atlas import (
    MongoAtlasStore,
    _document,
    collection_name,
    hits_from,
    prefilter,
    search_pipeline,
    to_mql,
)
from eddi_rag.testing.store_conformance import ACL_FILTERS, FILTERS, acl_chunks, rand_chunks


def test_the_vector_search_pipeline_has_the_documented_shape():
    # https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-stage/
    pipeline = search_pipeline("vector_index", [0.1, 0.2], limit=21, num_candidates=100, where={"m_str.source": {"$eq": "a.md"}})
    assert pipeline[0] == {"$vectorSearch": {"index": "vector_index", "path": "embedding", "queryVector": [0.1, 0.2],
                                             "numCandidates": 100, "limit": 21}}
    assert pipeline[1]["$project"]["score"] == {"$meta": "vectorSearchScore"}
    assert pipeline[2] == {"$match": {"m_str.source": {"$eq": "a.md"}}}
    assert search_pipeline("i", [1.0], 5, 2, {})[0]["$vectorSearch"]["numCandidates"] == 5  # never below limit
    assert len(search_pipeline("i", [1.0], 5, 100, {})) == 2


def test_a_recorded_response_becomes_hits_with_eddi_scores():
    recorded = [{"_id": "c1", "text": "alpha", "metadata": {"source": "a.md"}, "score": 0.9},
                {"_id": "c2", "text": "beta", "metadata": {}, "score": 0.5}]
    c1, c2 = hits_from(recorded)
    assert (c1.id, c1.score, c1.similarity) == ("c1", pytest.approx(0.9), pytest.approx(0.8))
    assert c2.similarity == pytest.approx(0.0) and c2.metadata == {}


def test_filters_compile_to_mql_on_typed_fields():
    assert to_mql(parse({"n": {"$gte": 3}, "colour": {"$ne": "red"}})) == {"$and": [
        {"m_num.n": {"$gte": 3}}, {"m_str.colour": {"$ne": "red"}}]}
    assert to_mql(parse({"x": {"$in": [1, "1", True]}})) == {"$or": [
        {"m_num.x": {"$in": [1]}}, {"m_str.x": {"$in": ["1"]}}, {"m_bool.x": {"$in": [True]}}]}
    assert to_mql(parse({"x": {"$nin": ["a", 2]}})) == {"$and": [{"m_str.x": {"$nin": ["a"]}}, {"m_num.x": {"$nin": [2]}}]}
    assert to_mql(parse({"x": {"$in": []}})) == {"_id": {"$in": []}}
    for where in FILTERS:  # every conformance filter compiles
        assert isinstance(to_mql(parse(where)), dict)


def test_parameters_and_names():
    assert collection_name("kb-1") == "eddi_kb_kb-1" and collection_name("kb.1").startswith("eddi_kb_kb_1_")
    assert MongoAtlasStore.connection_schema()["required"] == ["connectionString"]


def test_keyword_search_uses_atlas_search_with_the_documented_shapes():
    # https://www.mongodb.com/docs/atlas/atlas-search/text/ and .../atlas-search/create-index/
    from eddi_rag.stores.mongodb_atlas import keyword_pipeline, search_indexes

    pipeline = keyword_pipeline("text_index", "night train", 5, {"m_str.source": {"$eq": "a.md"}})
    assert pipeline[0] == {"$search": {"index": "text_index", "text": {"query": "night train", "path": "text"}}}
    assert pipeline[1] == {"$match": {"m_str.source": {"$eq": "a.md"}}} and pipeline[2] == {"$limit": 5}
    assert pipeline[3]["$project"]["score"] == {"$meta": "searchScore"}
    assert [stage for stage in keyword_pipeline("t", "q", 5, {}) if "$match" in stage] == []
    vector, text = (m.document for m in search_indexes("vector_index", "text_index", 384))
    assert vector == {"name": "vector_index", "type": "vectorSearch", "definition": {"fields": [
        {"type": "vector", "path": "embedding", "numDimensions": 384, "similarity": "cosine"},
        {"type": "filter", "path": "m_list.acl"}]}}
    assert text == {"name": "text_index", "type": "search", "definition": {"mappings": {
        "dynamic": False, "fields": {"text": {"type": "string", "analyzer": "lucene.english"}}}}}


def test_the_text_index_reads_the_knowledge_base_s_language():
    """Issue 57, point 2: Atlas Search's language analyzers (https://www.mongodb.com/docs/atlas/atlas-search/analyzers/language/)."""
    from eddi_rag.stores.languages import atlas_analyzer
    from eddi_rag.stores.mongodb_atlas import search_indexes

    assert {str(lang): atlas_analyzer(lang) for lang in ("de", "zh", "ja", ["ko"], "auto", "en", ["de", "fr"], "xx")} == {
        "de": "lucene.german", "zh": "lucene.smartcn", "ja": "lucene.kuromoji", "['ko']": "lucene.nori",
        "auto": "lucene.english", "en": "lucene.english", "['de', 'fr']": "lucene.english", "xx": "lucene.english"}
    text = search_indexes("v", "t", 384, "lucene.german")[1].document
    assert text["definition"]["mappings"]["fields"]["text"] == {"type": "string", "analyzer": "lucene.german"}


@pytest.mark.parametrize("where", FILTERS + ACL_FILTERS, ids=[str(f) for f in FILTERS + ACL_FILTERS])
def test_compiled_filters_mean_in_mongodb_what_the_reference_means(where):
    """Every conformance filter, compiled to MQL, run by mongomock (MongoDB's query language in Python, arrays
    included) over the documents the store writes: the reference evaluator's answer."""
    import mongomock

    from eddi_rag.stores import filters

    chunks = rand_chunks(20) + acl_chunks()
    collection = mongomock.MongoClient().db.chunks
    collection.insert_many([_document(c, [0.0]) for c in chunks])
    node = parse(where)
    expected = sorted(c.id for c in chunks if filters.matches(node, c.metadata))
    assert sorted(d["_id"] for d in collection.find(to_mql(node))) == expected


def test_who_may_read_is_decided_inside_vector_search_before_its_limit():
    """Atlas applies $vectorSearch's ``filter`` before ``limit``; the acl conditions go there (the index declares
    ``m_list.acl`` a filter field), the rest stays in the $match after it."""
    from eddi_rag.stores.mongodb_atlas import search_indexes

    node = parse({"$and": [{"acl": {"$containsAny": ["group:finance", "public"]}}, {"acl": {"$containsNone": ["deny:group:finance"]}},
                           {"source": "a.md"}]})
    first, rest = prefilter(node)
    assert first == {"$and": [{"m_list.acl": {"$in": ["group:finance", "public"]}}, {"m_list.acl": {"$nin": ["deny:group:finance"]}}]}
    assert rest == parse({"source": "a.md"})
    stage = search_pipeline("vector_index", [1.0], 5, 100, to_mql(rest), first)[0]["$vectorSearch"]
    assert stage["filter"] == first and stage["limit"] == 5
    vector = search_indexes("vector_index", "text_index", 384)[0].document
    assert {"type": "filter", "path": "m_list.acl"} in vector["definition"]["fields"]
    assert prefilter(parse({"source": "a.md"}))[0] == {}
