"""pgvector specifics, against a real PostgreSQL + pgvector (started by the fixtures)."""

import psycopg
import pytest

from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, DimensionMismatchError, StoreContext
from eddi_rag.stores.pgvector import PgVectorStore, connection_string, table_name


@pytest.fixture
def ctx(tmp_path):
    return StoreContext(Database(tmp_path / "x.db"))


def test_table_names_are_sanitised_and_cut_to_63_characters():
    assert table_name("64f1ab") == "eddi_kb_64f1ab"
    assert table_name("64f1A-b.c").startswith("eddi_kb_64f1a_b_c_") and table_name("64f1a_b_c") == "eddi_kb_64f1a_b_c"
    assert len(table_name("x" * 100)) == 63


def test_password_is_required_without_a_url():
    with pytest.raises(ValueError, match="storeParameters.password"):
        connection_string({"host": "db.example", "user": "eddi"})
    assert "password=s3cret" in connection_string({"host": "db.example", "password": "s3cret"})


@pytest.mark.integration
@pytest.mark.services
def test_table_per_kb_with_the_configured_dimension(pgvector_params, ctx):
    store = PgVectorStore("Kb-One", {**pgvector_params, "dimension": 3}, ctx)
    try:
        with pytest.raises(DimensionMismatchError, match="dimension is 3"):
            store.upsert([Chunk("a", "t", {}, [1.0, 0.0])])
        store.upsert([Chunk("a", "t", {}, [1.0, 0.0, 0.0])])
        with psycopg.connect(pgvector_params["url"]) as c:
            typ = c.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                            "WHERE attrelid = %s::regclass AND attname = 'embedding'", (store.table,)).fetchone()[0]
        assert typ == "vector(3)" and store.table.startswith("eddi_kb_kb_one_")  # "Kb-One" was cleaned: a hash keeps it apart
        # A model that changed dimension is caught when the store is opened.
        with pytest.raises(DimensionMismatchError, match="holds 3-dimensional"):
            PgVectorStore("Kb-One", {**pgvector_params, "dimension": 384}, ctx)
        assert store.health()["details"]["documents"] == 1
    finally:
        store.drop()


@pytest.mark.integration
@pytest.mark.services
def test_a_knowledge_base_on_pgvector_end_to_end(runtime, pgvector_params):
    kb = runtime.resources.create("rags", {"name": "pg", "embeddingProvider": "local", "storeType": "pgvector",
                                           "storeParameters": pgvector_params}).id
    try:
        runtime.ingest(kb, "rail.md", "The night train to Vienna leaves at 22:10 from platform 4.")
        runtime.ingest(kb, "food.md", "The dining car serves goulash until 21:00.")
        hits = runtime.query(kb, "When does the train to Vienna leave?", min_score=0)
        assert [h.metadata["source"] for h in hits] == ["rail.md", "food.md"]
    finally:
        runtime.documents.drop(kb)


@pytest.mark.integration
@pytest.mark.services
def test_bulk_load_then_build_the_index(pgvector_params, ctx):
    import numpy as np

    store = PgVectorStore("bulk", {**pgvector_params, "index": "none"}, ctx)
    try:
        rng = np.random.default_rng(1)
        store.upsert([Chunk(f"c{i:03d}", "t", {"i": i}, rng.standard_normal(32).tolist()) for i in range(200)])
        before = store.search(store.get(ids=["c042"])[0].vector, 3)
        store.create_index()
        with psycopg.connect(pgvector_params["url"]) as c:
            names = {r[0] for r in c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'eddi_kb_bulk'")}
        assert names == {"eddi_kb_bulk_pkey", "eddi_kb_bulk_hnsw", "eddi_kb_bulk_tsv", "eddi_kb_bulk_doc", "eddi_kb_bulk_acl"}
        after = store.search(store.get(ids=["c042"])[0].vector, 3)
        assert [h.id for h in after][0] == [h.id for h in before][0] == "c042"
    finally:
        store.drop()


@pytest.mark.integration
@pytest.mark.services
def test_a_documents_chunks_are_found_by_its_index(pgvector_params, ctx):
    """The neighbour context's fetch (a document, a range of positions, the caller's scope) is answered from the
    index of chunks by document, not by reading the whole table."""
    from psycopg import sql

    from eddi_rag.stores import filters
    from eddi_rag.stores.pgvector import to_postgres

    store = PgVectorStore("bydoc", pgvector_params, ctx)
    try:
        store.upsert([Chunk(f"d{d}-{i}", "t", {"document_id": f"d{d}", "position_in_doc": i}, [1.0, float(i), float(d)])
                      for d in range(20) for i in range(10)])
        where = {"document_id": "d7", "position_in_doc": {"$gte": 2, "$lte": 6}}
        assert [c.id for c in store.get(where=where)] == [f"d7-{i}" for i in range(2, 7)]
        cond, params = to_postgres(filters.parse(where))
        with psycopg.connect(pgvector_params["url"]) as c:
            c.execute("SET enable_seqscan = off")  # (so few rows would be read whole otherwise)
            plan = " ".join(r[0] for r in c.execute(sql.SQL("EXPLAIN SELECT id FROM eddi_kb_bydoc WHERE {}").format(cond), params))
        assert "eddi_kb_bydoc_doc" in plan, plan
    finally:
        store.drop()


@pytest.mark.integration
@pytest.mark.services
def test_a_selective_filter_still_gets_the_exact_k_nearest_that_pass_it(pgvector_params, ctx):
    """HNSW filters after its candidate list (pgvector before 0.8): a filter that passes few rows gets a wider list,
    then an exact scan, so it still gets the k nearest rows that pass; a filter passing most rows gets them from the
    first list. Either way the same rows as an exact search over them."""
    import numpy as np

    store = PgVectorStore("selective", pgvector_params, ctx)
    try:
        rng = np.random.default_rng(3)
        vectors = rng.standard_normal((3000, 16)).astype(np.float32)
        store.upsert([Chunk(f"c{i:04d}", "t", {"rare": i % 50 == 0, "i": i}, vectors[i].tolist()) for i in range(3000)])
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        q = rng.standard_normal(16).astype(np.float32)
        sims = unit @ (q / np.linalg.norm(q))
        for where, passing in (({"rare": True}, [i for i in range(3000) if i % 50 == 0]), ({"rare": False}, None)):
            hits = store.search(q.tolist(), 20, where=where)
            assert len(hits) == 20 and all(h.metadata["rare"] == where["rare"] for h in hits)
            if passing is not None:  # (few pass: the exact answer; many: HNSW's, approximate)
                exact = sorted(passing, key=lambda i: -sims[i])[:20]
                assert [h.id for h in hits] == [f"c{i:04d}" for i in exact]
    finally:
        store.drop()
