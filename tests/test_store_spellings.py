"""Sealed at every spelling (issue 42, point 1): ownership is keyed by the place a name reaches, not by how it is
written. Tenant A keeps a secret in a store it names; tenant B names that store every other way it can be spelled
(relative paths, ``..``, a symbolic link, case, quoting, schema-qualified names, surrounding space) on every store
the tests serve (Qdrant local mode, PostgreSQL + pgvector, Chroma, Typesense, the Elasticsearch stand-in; the embedded
stores keep each knowledge base's chunks in tables of its own id, whatever file they name), and reaches nothing: each
is refused when saved, and nothing of A's is ever read."""

from __future__ import annotations

import os

import pytest

from eddi_rag.errors import EddiRagError
from eddi_rag.runtime import Runtime
from eddi_rag.stores.ownership import location_errors

SECRET = "The A-tenant launch code is 4711."


def config(engine: str, params: dict, **store) -> dict:
    return {"name": "docs", "embeddingProvider": "local", "storeType": engine, "minScore": 0, "searchMode": "vector",
            "contextExpansion": "none", "storeParameters": {**params, **store}}


def walk(runtime: Runtime, engine: str, params: dict, own: dict, spellings: list[dict]) -> None:
    """A's KB at ``own``; B's tries at each of ``spellings``: every one refused, A's secret never seen."""
    a = runtime.saving.create("rags", config(engine, params, **own), tenant="A").id
    runtime.ingest(a, "codes.md", SECRET)
    for spelling in spellings:
        with pytest.raises(EddiRagError) as refused:
            runtime.saving.create("rags", config(engine, params, **spelling), tenant="B")
        assert refused.value.status == 400, spelling
        assert "not available to this tenant" in str(refused.value) or "may not start with" in str(refused.value) \
            or "plain table name" in str(refused.value), (spelling, str(refused.value))
    assert [h.text for h in runtime.query(a, "launch code")] == [SECRET]  # A's store whole


def test_qdrant_local_folders_by_their_real_path(tmp_path):
    """``qd2/../qd`` was saved (201) and read, wrote and locked tenant A's collection."""
    with Runtime(tmp_path) as runtime:
        (tmp_path / "qd2").mkdir()
        os.symlink(tmp_path / "qd", tmp_path / "link")
        spellings = [{"path": p, "collectionName": "docs"} for p in
                     ("qd", "./qd", "qd/", "qd2/../qd", "qd2/.././qd/", str(tmp_path / "qd"), str(tmp_path / "qd2" / ".." / "qd"))]
        spellings += [{"path": "link", "collectionName": "docs"}, {"path": "qd", "collectionName": "DOCS"},
                      {"path": "qd", "collectionName": " docs"}]
        walk(runtime, "qdrant", {}, {"path": "qd", "collectionName": "docs"}, spellings)
        # B's own folder beside it works, and its errors never show the server's data directory
        b = runtime.saving.create("rags", config("qdrant", {}, path="qd_b", collectionName="docs"), tenant="B").id
        runtime.ingest(b, "b.md", "B's page.")
        assert [h.text for h in runtime.query(b, "launch code")] == ["B's page."]
        with pytest.raises(EddiRagError) as refused:
            runtime.saving.create("rags", config("qdrant", {}, path="qd2/../qd", collectionName="docs"), tenant="B")
        assert str(tmp_path) not in str(refused.value)


@pytest.mark.integration
@pytest.mark.services
def test_pgvector_tables_as_postgresql_names_them(tmp_path, pgvector_params):
    """``EDDI_KB_<A>`` and ``public.eddi_kb_<A>`` were saved and addressed other relations; a quoted name escaped the
    case folding. Every spelling of a table means the one table PostgreSQL reads, or is refused."""
    with Runtime(tmp_path) as runtime:
        spellings = [{"tableName": t} for t in ("a_docs", "A_DOCS", "public.a_docs", "PUBLIC.A_Docs", " a_docs ",
                                                '"a_docs"', '"A_DOCS"', "public.\"a_docs\"", "a_docs; --")]
        spellings += [{"table": "A_Docs"}, {"tableName": "EDDI_KB_X"}, {"tableName": "public.eddi_kb_x"},
                      {"table": "Eddi_Kb_launch"}]
        walk(runtime, "pgvector", pgvector_params, {"tableName": "a_docs"}, spellings)
        # another schema is refused rather than quietly meaning a table of its own name in public
        with pytest.raises(EddiRagError, match="schema other than public"):
            runtime.saving.create("rags", config("pgvector", pgvector_params, tableName="other.a_docs"), tenant="B")


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.parametrize("engine, key", [("chroma", "collectionName"), ("typesense", "collectionName"),
                                         ("elasticsearch", "indexName")])
def test_collections_and_indexes_without_case(tmp_path, engine, key, request):
    params = request.getfixturevalue(f"{engine}_params")
    with Runtime(tmp_path) as runtime:
        spellings = [{key: n} for n in ("a_docs", "A_DOCS", "A_docs", " a_docs")]
        spellings += [{key: "EDDI_KB_x"}, {key: "eddi_kbid_x"}]
        walk(runtime, engine, params, {key: "a_docs"}, spellings)


def test_eddis_guard_rules_for_a_named_location():
    """EDDI's KnowledgeBaseStorageGuard: the reserved prefix in any part, a plain pgvector identifier; a value the
    version before held already is not judged again."""
    assert location_errors("qdrant", {"collectionName": "Eddi_KBID_1"})[0]["path"] == "$.storeParameters.collectionName"
    assert location_errors("pgvector", {"table": "x.eddi_kb_1"})
    assert location_errors("pgvector", {"table": "my table"})[0]["message"].startswith("must be a plain table name")
    # (issue 67, point 7: EDDI's guard since its isolation change refuses a reference as a location)
    assert location_errors("pgvector", {"table": "${vars:table}"})[0]["message"].startswith("must be a literal name")
    assert location_errors("pgvector", {"tableName": "eddi_kb_old"}, {"tableName": "eddi_kb_old"}) == []
    assert location_errors("elasticsearch", {"indexName": "team_docs"}) == []
