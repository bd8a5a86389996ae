"""A new knowledge base gets the best measured configuration (issue 22 point 9; the figures are in
benchmarks/README.md): Markdown-aware chunks, hybrid search fused by RRF, 4 neighbours around each hit.
What a configuration names is kept; EDDI's stored vectors keep EDDI's defaults; stored versions that
left them out keep what they had."""

import importlib

from eddi_rag import state
from eddi_rag.backends.registry import BUILTIN, STORES
from eddi_rag.config import EDDI_DEFAULTS, NO_KEYWORD_SEARCH, validate_rag_configuration
from eddi_rag.runtime import Runtime
from eddi_rag.stores.base import KEYWORD_SEARCH


def test_a_new_knowledge_base_gets_the_best_measured_defaults():
    c = validate_rag_configuration({"name": "kb", "embeddingProvider": "local", "storeType": "sqlite"})
    assert (c.chunkStrategy, c.searchMode, c.fusion, c.contextExpansion, c.expansionNeighbors) == (
        "markdown", "hybrid", "weighted", "neighbors", 4)


def test_named_values_are_kept():
    c = validate_rag_configuration({"name": "kb", "chunkStrategy": "recursive", "searchMode": "vector", "fusion": "weighted"})
    assert (c.chunkStrategy, c.searchMode, c.fusion) == ("recursive", "vector", "weighted")


def test_eddis_stored_vectors_keep_eddis_defaults():
    c = validate_rag_configuration({"name": "kb", "storeType": "pgvector", "storeNamespace": "name"})
    assert (c.chunkStrategy, c.searchMode, c.fusion) == ("recursive", "vector", "weighted")
    c = validate_rag_configuration({"name": "kb", "storeType": "pgvector", "storeNamespace": "name", "searchMode": "hybrid"})
    assert c.searchMode == "hybrid"


def test_a_store_without_keyword_search_searches_by_vector_unless_told():
    for name, target in BUILTIN[STORES].items():
        module, cls = target.split(":")
        lacks = KEYWORD_SEARCH not in getattr(importlib.import_module(module), cls).capabilities
        assert (name in NO_KEYWORD_SEARCH) == lacks, name
        expected = "vector" if lacks else "hybrid"
        assert validate_rag_configuration({"name": "kb", "storeType": name}).searchMode == expected, name
    assert validate_rag_configuration({"name": "kb", "storeType": "chroma", "searchMode": "keyword"}).searchMode == "keyword"


def test_stored_versions_that_left_them_out_keep_what_they_had(tmp_path):
    data = tmp_path / "data"
    with Runtime(data) as rt:
        old = rt.resources.create("rags", {"name": "old", "embeddingProvider": "local"}).id
        rt.resources.update("rags", old, 1, {"name": "old", "embeddingProvider": "local", "chunkStrategy": "paragraph"})
        with rt.db.transaction() as c:  # (PRAGMA user_version on SQLite)
            rt.db.set_schema_version(c, 5)
    with Runtime(data) as rt:
        assert state.version(rt.db) == state.LATEST
        assert {k: rt.resources.read("rags", old, 1)[k] for k in EDDI_DEFAULTS} == EDDI_DEFAULTS
        assert rt.resources.read("rags", old, 2)["chunkStrategy"] == "paragraph"  # named: kept
        config = rt.knowledge_bases.get(old)
        assert (config.chunkStrategy, config.searchMode) == ("paragraph", "vector")
