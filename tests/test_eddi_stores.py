"""EDDI's stored vectors adopted in place (row 1 of ``../shared/EDDI-REFERENCE.md``'s differences): a pgvector
table laid out exactly as langchain4j's ``PgVectorEmbeddingStore`` creates it for EDDI (``embedding_id UUID
PRIMARY KEY, embedding vector(n), text TEXT NULL, metadata JSON NULL``), named as EDDI names it
(labsai/EDDI ``configs/rag/model/KnowledgeBaseStorage.java``), read and written here without re-ingesting,
and what we write still readable as langchain4j reads it; on the real PostgreSQL the tests run."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from pgvector.psycopg import register_vector

from eddi_rag.config import ConfigValidationError
from eddi_rag.stores import langchain4j

EDDI_DOCS = [("refunds.txt", "Refunds are paid within 14 days to the card used for the booking."),
             ("pets.txt", "Small dogs and cats travel in the cabin in a carrier of at most 8 kg.")]


def langchain4j_table(url: str, table: str, dimension: int) -> None:
    """The table as langchain4j's PgVectorEmbeddingStore (createTable(true), default COMBINED_JSON metadata) makes it."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute(f"CREATE TABLE IF NOT EXISTS {table} (embedding_id UUID PRIMARY KEY, embedding vector({dimension}), "
                  "text TEXT NULL, metadata JSON NULL)")


def eddi_writes(url: str, table: str, model, kb_tag: str, docs=EDDI_DOCS) -> None:
    """Rows as EDDI's ingestion writes them: a random UUID, the segment's text, metadata {source, kbId}."""
    with psycopg.connect(url, autocommit=True) as c:
        register_vector(c)
        for (name, text), vector in zip(docs, model.embed_documents([t for _, t in docs])):
            import numpy as np

            c.execute(f"INSERT INTO {table} (embedding_id, embedding, text, metadata) VALUES (%s, %s, %s, %s::json)",
                      (uuid.uuid4(), np.asarray(vector, dtype=np.float32), text, json.dumps({"source": name, "kbId": kb_tag})))


def langchain4j_reads(url: str, table: str) -> list[tuple[str, str, dict]]:
    """What langchain4j's store reads back: every row's id, text and metadata, whose values it accepts only as
    strings and numbers (Metadata refuses anything else)."""
    with psycopg.connect(url) as c:
        rows = c.execute(f"SELECT embedding_id, text, metadata::text FROM {table} ORDER BY embedding_id").fetchall()
        columns = c.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                            "AND column_name IN ('embedding_id', 'embedding', 'text', 'metadata') ORDER BY column_name",
                            (table,)).fetchall()
    assert columns == [("embedding", "USER-DEFINED"), ("embedding_id", "uuid"), ("metadata", "json"), ("text", "text")]
    out = []
    for rid, text, metadata in rows:
        meta = json.loads(metadata)
        assert all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in meta.values()), meta
        out.append((str(rid), text, meta))
    return out


@pytest.fixture
def eddi_kb(runtime, pgvector_params):
    made = []

    def make(name: str, namespace: str, language: str = "auto", searchMode: str = "hybrid", **params):
        config = {"name": name, "embeddingProvider": "local", "storeType": "pgvector", "storeNamespace": namespace,
                  "minScore": 0, "contextExpansion": "none", "storeParameters": {**pgvector_params, **params},
                  "language": language, "searchMode": searchMode}
        kb = runtime.resources.create("rags", config).id
        made.append(kb)
        return kb

    yield make
    for kb in made:
        runtime.documents.drop(kb)


@pytest.mark.integration
@pytest.mark.services
def test_a_table_eddi_6_5_wrote_is_read_and_written_in_place(runtime, eddi_kb, postgres_url, local_model):
    table = "eddi_kb_product_docs"  # EDDI 6.5.0's name for a knowledge base called "Product Docs"
    assert langchain4j.physical_name("pgvector", "name", "any-id", "Product Docs") == table
    langchain4j_table(postgres_url, table, 384)
    eddi_writes(postgres_url, table, local_model, "Product Docs")
    kb = eddi_kb("Product Docs", "name")

    hits = runtime.query(kb, "How long do refunds take?", min_score=0)  # EDDI's vectors, not ingested again
    assert hits[0].metadata["source"] == "refunds.txt" and hits[0].metadata["document_id"] == "refunds.txt"
    runtime.ingest(kb, "luggage.md", "Each passenger may bring one suitcase of 23 kg.")
    assert runtime.query(kb, "How heavy may a suitcase be?", min_score=0)[0].metadata["source"] == "luggage.md"

    rows = langchain4j_reads(postgres_url, table)  # EDDI can still read the table, ours included
    assert len(rows) == 3 and {r[2]["source"] for r in rows} == {"refunds.txt", "pets.txt", "luggage.md"}
    ours = next(r for r in rows if r[2]["source"] == "luggage.md")
    assert uuid.UUID(ours[0]) and ours[1] == "Each passenger may bring one suitcase of 23 kg."

    runtime.ingest(kb, "luggage.md", "Each passenger may bring two suitcases of 23 kg.")  # replaced in place
    assert [r[1] for r in langchain4j_reads(postgres_url, table) if r[2]["source"] == "luggage.md"] == \
        ["Each passenger may bring two suitcases of 23 kg."]
    assert runtime.documents.delete_where(kb, {"document_id": "pets.txt"}) == 1  # an EDDI document, by its name
    assert {r[2]["source"] for r in langchain4j_reads(postgres_url, table)} == {"refunds.txt", "luggage.md"}


@pytest.mark.integration
@pytest.mark.services
def test_eddis_id_namespace_tags_chunks_and_keeps_a_shared_table_apart(runtime, eddi_kb, postgres_url, local_model):
    one = eddi_kb("One", "id")
    runtime.ingest(one, "a.md", "Trains to Vienna leave hourly.")
    table = langchain4j.physical_name("pgvector", "id", one, "One")
    assert table == f"eddi_kbid_{one}"
    (row,) = langchain4j_reads(postgres_url, table)
    assert row[2]["kbId"] == one and row[2]["document_id"] == "a.md"

    shared = "shared_kb_table"
    langchain4j_table(postgres_url, shared, 384)
    a, b = eddi_kb("A", "id", table=shared), eddi_kb("B", "id", table=shared)
    eddi_writes(postgres_url, shared, local_model, b)  # EDDI wrote B's chunks into the shared table
    runtime.ingest(a, "a.md", "Refunds for A are paid within 3 days.")
    assert {h.metadata["source"] for h in runtime.query(a, "refunds", max_results=10, min_score=0)} == {"a.md"}
    assert {h.metadata["source"] for h in runtime.query(b, "refunds", max_results=10, min_score=0)} == {"refunds.txt", "pets.txt"}
    assert runtime.stores.get(a, runtime.rag_config(a)).count() == 1
    runtime.documents.drop(b)  # (the shared table goes with the first drop)


@pytest.mark.integration
@pytest.mark.services
def test_a_table_eddi_wrote_is_searched_in_the_knowledge_base_s_language(runtime, eddi_kb, postgres_url, local_model):
    """Issue 57, point 2: PostgreSQL's full-text search over an adopted table reads the knowledge base's language
    (German's stemmer finds "Nachtzüge" by "Nachtzug"; English's, before, did not)."""
    rows = [("wien.txt", "Die Nachtzüge nach Wien fahren um zweiundzwanzig Uhr ab."),
            ("kaese.txt", "Der Käse reift sechs Monate im Keller.")]
    for table, name in (("eddi_kb_fahrplan", "Fahrplan"), ("eddi_kb_fahrplan_auto", "Fahrplan auto")):
        langchain4j_table(postgres_url, table, 384)
        eddi_writes(postgres_url, table, local_model, name, rows)
    kb = eddi_kb("Fahrplan", "name", language="de", searchMode="keyword")
    assert [h.metadata["source"] for h in runtime.query(kb, "Nachtzug", min_score=0)] == ["wien.txt"]
    english = eddi_kb("Fahrplan auto", "name", searchMode="keyword")  # language auto: English's configuration, as before
    assert runtime.query(english, "Nachtzug", min_score=0) == []


@pytest.mark.integration
@pytest.mark.services
def test_private_and_expiring_chunks_keep_their_meaning_in_langchain4j_rows(runtime, eddi_kb, postgres_url):
    kb = eddi_kb("Private", "id")
    runtime.ingest(kb, "mine.md", "Alice's locker code is 4711.", user_id="alice")
    runtime.ingest(kb, "temp.md", "The lounge is closed today.", ttl_seconds=0.001)
    (row, *_) = [r for r in langchain4j_reads(postgres_url, f"eddi_kbid_{kb}") if r[2]["source"] == "mine.md"]
    assert row[2]["private"] == "true"  # a string for langchain4j; a flag here
    assert runtime.query(kb, "locker code", min_score=0) == []  # not for everyone
    assert [h.metadata["source"] for h in runtime.query(kb, "locker code", min_score=0, user_id="alice")] == ["mine.md"]
    assert runtime.query(kb, "lounge", min_score=0, user_id="alice")[0].metadata["source"] == "mine.md"  # temp expired


def test_store_namespace_follows_eddis_defaults_and_is_refused_where_it_is_not_supported(runtime):
    params = langchain4j.adopt("pgvector", "name", "x", "Docs", {"password": "p"})
    assert (params["tableName"], params["database"], params["user"]) == ("eddi_kb_docs", "eddi", "eddi")
    assert langchain4j.adopt("pgvector", None, "x", "Docs", {"password": "p"}) == {"password": "p"}  # ours: unchanged
    with pytest.raises(ConfigValidationError) as e:
        runtime.knowledge_bases.checked("rags", {"name": "x", "storeType": "elasticsearch", "storeNamespace": "id",
                                                 "storeParameters": {"url": "http://127.0.0.1:9200"}}, "default")
    assert e.value.errors[0]["path"] == "$.storeNamespace"
    # a store whose chunks are the KB's own (in-memory, embedded): kept, as today's EDDI stamps "id" on every KB
    assert runtime.knowledge_bases.checked("rags", {"name": "x", "storeType": "sqlite", "storeNamespace": "id"}, "default")


@pytest.mark.integration
@pytest.mark.services
def test_a_chroma_collection_langchain4j_wrote_is_read_and_written_in_place(runtime, chroma_params, local_model):
    """The same for Chroma: a collection as langchain4j's ChromaEmbeddingStore makes it for EDDI (cosine space,
    UUID ids, the segment as the document, metadata {source, kbId}), named as EDDI 6.5.0 names it."""
    import chromadb

    name = langchain4j.physical_name("chroma", "name", "any-id", "Help Desk!")
    assert name == "eddi_kb_help_desk"  # trailing underscores dropped, as EDDI's legacyCollectionName does
    client = chromadb.HttpClient(host=chroma_params["host"], port=int(chroma_params["port"]))
    try:
        client.delete_collection(name)
    except Exception:  # noqa: BLE001, S110 - not there yet
        pass
    collection = client.create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    collection.add(ids=[str(uuid.uuid4()) for _ in EDDI_DOCS], embeddings=local_model.embed_documents([t for _, t in EDDI_DOCS]),
                   documents=[t for _, t in EDDI_DOCS], metadatas=[{"source": n, "kbId": "Help Desk!"} for n, _ in EDDI_DOCS])
    kb = runtime.resources.create("rags", {"name": "Help Desk!", "embeddingProvider": "local", "storeType": "chroma",
                                           "storeNamespace": "name", "minScore": 0, "contextExpansion": "none",
                                           "storeParameters": chroma_params}).id
    try:
        assert runtime.query(kb, "How long do refunds take?")[0].metadata["document_id"] == "refunds.txt"
        runtime.ingest(kb, "luggage.md", "Each passenger may bring one suitcase of 23 kg.", user_id="alice")
        assert runtime.query(kb, "suitcase weight", user_id="alice")[0].metadata["source"] == "luggage.md"
        assert all(h.metadata["source"] != "luggage.md" for h in runtime.query(kb, "suitcase weight"))  # private
        rows = collection.get(include=["metadatas", "documents"])
        assert len(rows["ids"]) == 3 and all(uuid.UUID(i) for i in rows["ids"])
        for metadata in rows["metadatas"]:  # what langchain4j's Metadata accepts: strings and numbers
            other = {k: v for k, v in metadata.items() if not isinstance(v, (str, int, float)) or isinstance(v, bool)}
            assert other == {}, metadata
        assert runtime.documents.delete_where(kb, {"document_id": "pets.txt"}) == 1
        assert collection.count() == 2
    finally:
        runtime.documents.drop(kb)


@pytest.mark.integration
@pytest.mark.services
def test_rows_of_our_layout_never_land_in_a_collection_langchain4j_made(chroma_params, tmp_path):
    """Issue 56, finding 13: a row with our layout's ``__eddi_list_acl`` appeared once in EDDI's Chroma collection (a
    store of our layout addressing it by name). Such a write is refused before anything is written; one in EDDI's
    layout goes on, and a boolean written there reads back as one."""
    import chromadb

    from eddi_rag.state.sqlite import Database
    from eddi_rag.stores.base import Chunk, LayoutMismatchError, StoreContext
    from eddi_rag.stores.chroma import ChromaStore

    name = f"eddi_kb_layout_{uuid.uuid4().hex[:8]}"
    client = chromadb.HttpClient(host=chroma_params["host"], port=int(chroma_params["port"]))
    collection = client.create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    collection.add(ids=[str(uuid.uuid4())], embeddings=[[1.0, 0.0]], documents=["EDDI's"], metadatas=[{"source": "a.txt"}])
    ctx = StoreContext(Database(tmp_path / "s.db"), tmp_path)
    chunk = Chunk("c1", "ours", {"source": "b.md", "acl": ["group:finance"], "reviewed": True}, [0.0, 1.0])
    try:
        ours = ChromaStore("kb-ours", {**chroma_params, "collectionName": name}, ctx)
        with pytest.raises(LayoutMismatchError, match="storeNamespace"):
            ours.upsert([chunk])
        assert collection.count() == 1 and not any(k.startswith("__eddi_list") for m in collection.get()["metadatas"] for k in m)
        theirs = ChromaStore("kb-theirs", {**chroma_params, "collectionName": name, "layout": "langchain4j"}, ctx)
        theirs.upsert([Chunk("c1", "ours", {"source": "b.md", "reviewed": True}, [0.0, 1.0])])
        assert theirs.get(ids=["c1"])[0].metadata["reviewed"] is True  # (stored "true", its mark beside it)
        assert theirs.get(where={"reviewed": {"$gt": "a"}}) == []  # a string never matches a boolean
    finally:
        client.delete_collection(name)


def test_a_qdrant_collection_in_langchain4j_layout_is_read_and_written_in_place(runtime, tmp_path, local_model):
    """And Qdrant: points as langchain4j's QdrantEmbeddingStore writes them for EDDI (a UUID, the segment under
    text_segment, its metadata flat beside it), in a cosine collection named as EDDI names it ("id" namespace)."""
    from qdrant_client import QdrantClient, models

    folder = tmp_path / "qdrant"
    kb = runtime.resources.create("rags", {"name": "Qd", "embeddingProvider": "local", "storeType": "qdrant",
                                           "storeNamespace": "id", "minScore": 0, "contextExpansion": "none",
                                           "storeParameters": {"path": str(folder)}}).id
    name = langchain4j.physical_name("qdrant", "id", kb, "Qd")
    eddi = QdrantClient(path=str(folder))  # (local mode: one client per folder at a time)
    eddi.create_collection(name, vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
    eddi.upsert(name, points=[models.PointStruct(id=str(uuid.uuid4()), vector=v, payload={"text_segment": t, "source": n, "kbId": kb})
                              for (n, t), v in zip(EDDI_DOCS, local_model.embed_documents([t for _, t in EDDI_DOCS]))])
    eddi.upsert(name, points=[models.PointStruct(id=str(uuid.uuid4()), vector=local_model.embed_query("refunds"),
                                                 payload={"text_segment": "Another KB's refunds.", "source": "x", "kbId": "other"})])
    eddi.close()
    try:
        hits = runtime.query(kb, "How long do refunds take?", max_results=5)
        assert hits[0].metadata["document_id"] == "refunds.txt" and "x" not in {h.metadata["source"] for h in hits}
        runtime.ingest(kb, "luggage.md", "Each passenger may bring one suitcase of 23 kg.")
        assert runtime.query(kb, "suitcase weight")[0].metadata["source"] == "luggage.md"
        client = runtime.stores.get(kb, runtime.rag_config(kb)).client
        points, _ = client.scroll(name, limit=100, with_payload=True)
        ours = next(p for p in points if p.payload["source"] == "luggage.md")
        assert ours.payload["text_segment"] == "Each passenger may bring one suitcase of 23 kg." and ours.payload["kbId"] == kb
        assert all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in ours.payload.values())
    finally:
        runtime.documents.drop(kb)
