"""The retrieve/ingest contracts: RAGContext, IngestionResult, per-chunk content hashes, atomic
documents, user isolation, TTL, recency, maxDistance and the 5-minute result cache."""

import socket
import time

import pytest

from eddi_rag.ingest.pipeline import Document
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.contract import RagPipeline
from eddi_rag.verbs.contract_types import InvalidQueryError, VectorDBUnavailableError
from eddi_rag.verbs.search import Search
from tests.support.kbs import make_kb

TEA = "Green tea is steeped at eighty degrees for two minutes."
TRAINS = "The night train to Vienna leaves at 22:10 from platform 4."


def kb(runtime: Runtime, **overrides) -> str:
    return make_kb(runtime, **{"chunkStrategy": "paragraph", "chunkSize": 200, "chunkOverlap": 0, **overrides})


def openai_kb(runtime: Runtime, server, **overrides) -> str:
    return kb(runtime, embeddingProvider="openai",
              embeddingParameters={"apiKey": "sk-test", "baseUrl": server.base_url, "dimensions": 16}, **overrides)


def embedded_texts(server) -> list[str]:
    return [t for r in server.requests if r["path"].endswith("/embeddings") for t in r["json"]["input"]]


@pytest.fixture
def uncached(tmp_path):
    """No embedding cache: every text the provider sees is one the pipeline chose to embed."""
    rt = Runtime(tmp_path / "data", embedding_cache="none")
    yield rt
    rt.close()


# --- ingest ---------------------------------------------------------------------------------


def test_ingest_returns_an_ingestion_result(runtime):
    k = kb(runtime, requiredMetadata=["author"])
    result = runtime.pipeline.ingest([
        {"document_id": "tea", "text": TEA, "metadata": {"author": "ann"}},
        {"document_id": "trains", "text": TRAINS, "metadata": {}},
        {"document_id": "", "text": "no id"},
        {"document_id": "x", "text": "t", "colour": "red"},
    ], context_key=k)
    assert (result.documents_processed, result.documents_failed, result.chunk_count, result.embedding_count) == (1, 3, 1, 1)
    assert result.job_id and result.duration >= 0
    errors = {e["document_id"]: e["error"] for e in result.errors}
    assert errors["trains"] == "document 'trains': missing required metadata author"
    assert errors[""] == "document_id is required"
    assert "unknown field(s) colour" in errors["x"]
    meta = runtime.stores.get(k, runtime.rag_config(k)).get({"document_id": "tea"})[0].metadata
    assert meta["author"] == "ann" and meta["source"] == "tea" and meta["position_in_doc"] == 0


def test_chunks_longer_than_the_model_input_are_warned_about(runtime):
    k = kb(runtime, chunkStrategy="recursive", chunkSize=4000, chunkOverlap=0)
    result = runtime.pipeline.ingest([Document("long", " ".join(f"word{i}" for i in range(600)))], context_key=k)
    assert result.documents_processed == 1
    assert result.warnings == ["document 'long': 2 chunk(s) exceed the embedding model's 256-token input and are "
                               "truncated when embedded; lower chunkSize"]


@pytest.mark.parametrize("metadata, message", [
    ({"kbId": "other"}, "metadata.kbId is reserved"),
    ({"tags": ["a", "b"]}, "metadata.tags must be a string, number or boolean"),
    ({"ttl_seconds": "3600"}, "ttl_seconds must be a finite number of seconds, got '3600'"),
    ({"ttl_seconds": -5}, "ttl_seconds must be positive, got -5"),
    ({"expires_at": "tomorrow"}, "expires_at must be a finite number of seconds"),
    ({"user_id": ""}, "user_id must be a non-empty string"),
])
def test_bad_documents_are_rejected_with_the_field_named(runtime, metadata, message):
    fields = metadata if "metadata" not in str(message) else {"metadata": metadata}
    k = kb(runtime)
    runtime.pipeline.ingest([Document("d", "The old version.")], context_key=k)
    result = runtime.pipeline.ingest([{"document_id": "d", "text": TEA, **fields}], context_key=k)
    assert result.documents_failed == 1 and message in result.errors[0]["error"]
    assert [c.text for c in runtime.stores.get(k, runtime.rag_config(k)).get()] == ["The old version."]  # untouched


@pytest.mark.integration
def test_unchanged_chunks_are_not_embedded_again(uncached, openai_server):
    k = openai_kb(uncached, openai_server)
    paragraphs = [f"Paragraph {i} says something of its own about topic number {i}." for i in range(6)]
    first = uncached.pipeline.ingest([{"document_id": "doc", "text": "\n\n".join(paragraphs)}], context_key=k)
    assert first.chunk_count == 2 and first.embedding_count == 2 and len(embedded_texts(openai_server)) == 2
    openai_server.requests.clear()
    paragraphs[5] = "Paragraph 5 was rewritten."
    second = uncached.pipeline.ingest([{"document_id": "doc", "text": "\n\n".join(paragraphs)}], context_key=k)
    assert second.embedding_count == 1
    assert embedded_texts(openai_server) == ["\n\n".join(paragraphs[3:])]  # only the changed chunk went out
    openai_server.requests.clear()
    assert uncached.pipeline.ingest([{"document_id": "doc", "text": "\n\n".join(paragraphs)}], context_key=k).embedding_count == 0
    assert embedded_texts(openai_server) == []


@pytest.mark.integration
def test_a_failure_mid_document_leaves_the_old_version_whole(uncached, openai_server):
    k = openai_kb(uncached, openai_server, chunkSize=60)
    old = "\n\n".join(f"Old paragraph number {i} of the handbook." for i in range(70))
    assert uncached.pipeline.ingest([Document("handbook", old)], context_key=k).chunk_count == 70
    store = uncached.stores.get(k, uncached.rag_config(k))
    before = [(c.id, c.text) for c in store.get({"document_id": "handbook"})]
    route = openai_server.handler
    openai_server.handler = lambda r: (500, {"error": {"message": "overloaded"}}) if any(
        "POISON" in t for t in r["json"]["input"]) else route(r)
    new = "\n\n".join(f"New paragraph number {i} of the handbook." for i in range(69)) + "\n\nPOISON paragraph."
    result = uncached.pipeline.ingest([Document("handbook", new)], context_key=k)
    assert result.documents_failed == 1 and "overloaded" in result.errors[0]["error"]
    assert [(c.id, c.text) for c in store.get({"document_id": "handbook"})] == before  # 64 new vectors were never written


# --- retrieve -------------------------------------------------------------------------------


def test_retrieve_returns_a_rag_context(runtime):
    k = kb(runtime)
    runtime.pipeline.ingest([Document("tea", TEA), Document("trains", TRAINS)], context_key=k)
    ctx = runtime.pipeline.retrieve("When does the night train to Vienna leave?", k, max_chunks=2, min_relevance=0.6)
    assert ctx.meets_threshold and ctx.context_key == k and ctx.context_id and ctx.query_id
    assert [c.id for c in ctx.chunks][:1] == [runtime.stores.get(k, runtime.rag_config(k)).get({"document_id": "trains"})[0].id]
    assert all(c.relevance_score >= 0.6 for c in ctx.chunks) and ctx.chunks[0].position_in_doc == 0
    assert ctx.chunks == sorted(ctx.chunks, key=lambda c: -c.relevance_score)
    assert ctx.avg_relevance > 0.6


def test_an_average_below_min_relevance_empties_the_context(runtime):
    k = kb(runtime)
    runtime.pipeline.ingest([Document("tea", TEA), Document("trains", TRAINS)], context_key=k)
    ctx = runtime.pipeline.retrieve("quantum chromodynamics of gluons", k, min_relevance=0.7)
    assert ctx.avg_relevance < 0.7 and not ctx.meets_threshold and ctx.chunks == []


@pytest.mark.parametrize("query", ["", "   ", "x" * 2001])
def test_invalid_queries_are_refused(runtime, query):
    with pytest.raises(InvalidQueryError):
        runtime.pipeline.retrieve(query, kb(runtime))


def test_an_unreachable_store_raises_vector_db_unavailable(runtime):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    k = kb(runtime, storeType="pgvector", storeParameters={"host": "127.0.0.1", "port": port, "password": "secret"})
    with pytest.raises(VectorDBUnavailableError, match="pgvector store unavailable"):
        runtime.pipeline.retrieve("night train", k)


def test_results_are_cached_until_the_kb_changes(runtime):
    k = kb(runtime)
    runtime.pipeline.ingest([Document("trains", TRAINS)], context_key=k)
    first = runtime.pipeline.retrieve("night train to Vienna", k)
    again = runtime.pipeline.retrieve("night train to Vienna", k)
    assert again.cached and again.context_id == first.context_id and not first.cached
    assert not runtime.pipeline.retrieve("night train to Vienna", k, max_chunks=1).cached  # another question
    runtime.pipeline.ingest([Document("trains", TRAINS.replace("22:10", "23:45"))], context_key=k)
    fresh = runtime.pipeline.retrieve("night train to Vienna", k)
    assert not fresh.cached and "23:45" in fresh.chunks[0].text


def test_the_cache_expires_after_its_time_to_live(runtime):
    k = kb(runtime)
    runtime.pipeline.ingest([Document("trains", TRAINS)], context_key=k)
    clock = [1000.0]
    search = Search(runtime.knowledge_bases, runtime.embeddings, runtime.retriever, runtime.generations, timer=lambda: clock[0])
    pipeline = RagPipeline(search, runtime.ingesting)
    pipeline.retrieve("night train", k)
    clock[0] += 299
    assert pipeline.retrieve("night train", k).cached
    clock[0] += 2
    assert not pipeline.retrieve("night train", k).cached


# --- scoping, TTL, recency, maxDistance ------------------------------------------------------


def test_a_user_never_receives_another_users_chunks(runtime):
    k = kb(runtime)
    runtime.pipeline.ingest([
        Document("alice-notes", "Alice's salary is 91,000 euros a year.", user_id="alice"),
        Document("bob-notes", "Bob's salary is 87,000 euros a year.", user_id="bob"),
        Document("policy", "Salaries are reviewed every year in March."),
    ], context_key=k)
    for user, own in (("alice", "Alice"), ("bob", "Bob")):
        other = "Bob" if own == "Alice" else "Alice"
        for question in (f"What is {other}'s salary?", f"{other}'s salary is euros a year", "salary"):
            texts = [c.text for c in runtime.pipeline.retrieve(question, k, max_chunks=10, min_relevance=0, user_id=user).chunks]
            assert not any(other in t for t in texts) and any(own in t for t in texts)
            hits = runtime.query(k, question, max_results=10, min_score=0, user_id=user, where={"source": f"{other.lower()}-notes"})
            assert hits == []  # not even when asking for that document by name
    anonymous = runtime.pipeline.retrieve("salary", k, max_chunks=10, min_relevance=0)
    assert [c.metadata["document_id"] for c in anonymous.chunks] == ["policy"]


def test_expired_chunks_are_never_returned_and_purge_removes_them(runtime):
    k = kb(runtime, ttlSeconds=3600)
    now = time.time()
    runtime.pipeline.ingest([
        Document("old-offer", "Spring offer: train tickets to Vienna at half price.", expires_at=now - 1),
        Document("offer", "Summer offer: train tickets to Vienna at half price."),
        Document("timetable", TRAINS, ttl_seconds=10 ** 9),
    ], context_key=k)
    store = runtime.stores.get(k, runtime.rag_config(k))
    offer = store.get({"document_id": "offer"})[0].metadata
    assert offer["expires"] is True and now + 3590 < offer["expiresAt"] < now + 3610  # the KB's ttlSeconds
    found = {c.metadata["document_id"] for c in runtime.pipeline.retrieve("train tickets Vienna", k, 10, 0).chunks}
    assert found == {"offer", "timetable"}
    assert runtime.documents.purge_expired(k) == 1 and store.count() == 2
    assert runtime.documents.purge_expired(k, now=now + 7200) == 1  # the offer's hour has passed
    assert [c.metadata["document_id"] for c in store.get()] == ["timetable"]


def test_newer_chunks_come_first_among_near_equal_scores(runtime):
    k = kb(runtime, searchMode="vector")  # recencyWindow orders scores; a fused order is not one
    runtime.pipeline.ingest([Document("v1", TRAINS)], context_key=k)
    runtime.pipeline.ingest([Document("v2", TRAINS)], context_key=k)
    ids = [h.metadata["document_id"] for h in runtime.query(k, "night train", min_score=0)]
    assert ids[:2] == ["v2", "v1"]
    runtime.resources.update("rags", k, 1, {**runtime.resources.read("rags", k), "recencyWindow": 0})
    by_id = sorted(runtime.stores.get(k, runtime.rag_config(k)).get(), key=lambda c: c.id)
    assert [h.id for h in runtime.query(k, "night train", min_score=0)][:2] == [c.id for c in by_id]  # ties by id


def test_max_distance_drops_far_chunks(runtime):
    k = kb(runtime, maxDistance=0.5)
    runtime.pipeline.ingest([Document("tea", TEA), Document("trains", TRAINS)], context_key=k)
    hits = runtime.query(k, "When does the night train to Vienna leave?", min_score=0)
    assert [h.metadata["document_id"] for h in hits] == ["trains"] and hits[0].distance <= 0.5
