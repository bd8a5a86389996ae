import pytest

from eddi_rag.config import RagConfiguration
from eddi_rag.ingest import pipeline
from eddi_rag.ingest.chunking import split_text
from eddi_rag.runtime import Runtime

DOC = "\n\n".join(f"Paragraph {i}. " + f"Sentence about topic {i}. " * 12 for i in range(12))


def test_recursive_chunking_respects_size_and_overlap():
    chunks = split_text(DOC, RagConfiguration(name="x", chunkSize=200, chunkOverlap=40))
    assert len(chunks) > 10 and all(len(c) <= 200 for c in chunks)
    assert any(a[-20:] in b for a, b in zip(chunks, chunks[1:]))  # neighbours overlap


@pytest.mark.parametrize("strategy", ["paragraph", "sentence"])
def test_other_strategies_stay_within_size(strategy):
    chunks = split_text(DOC, RagConfiguration(name="x", chunkStrategy=strategy, chunkSize=300, chunkOverlap=0))
    assert chunks and all(len(c) <= 300 for c in chunks)


def rag(runtime: Runtime, **overrides) -> str:
    config = {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "chunkSize": 200, "chunkOverlap": 20, **overrides}
    return runtime.resources.create("rags", config).id


def test_reingesting_a_document_replaces_its_chunks(runtime):
    kb = rag(runtime)
    first = runtime.ingest(kb, "guide.md", DOC)
    runtime.ingest(kb, "other.md", "Completely different content about volcanoes.")
    second = runtime.ingest(kb, "guide.md", "A much shorter guide about tea.")
    store = runtime.stores.get(kb, runtime.rag_config(kb))
    assert first > 1 and second == 1
    assert store.count({"source": "guide.md"}) == 1  # no stale chunks, no duplicates
    assert store.count({"source": "other.md"}) == 1
    assert [c.text for c in store.get({"source": "guide.md"})] == ["A much shorter guide about tea."]
    meta = store.get({"source": "other.md"})[0].metadata
    assert meta == {"source": "other.md", "kbId": kb, "document_id": "other.md", "position_in_doc": 0}


def test_a_failure_half_way_leaves_the_previous_version_whole(runtime, openai_server, monkeypatch):
    monkeypatch.setattr(pipeline, "EMBED_BATCH", 4)
    kb = rag(runtime, embeddingProvider="openai",
             embeddingParameters={"apiKey": "sk", "baseUrl": openai_server.base_url, "maxRetries": 0})
    runtime.ingest(kb, "guide.md", "The original guide.")
    store = runtime.stores.get(kb, runtime.rag_config(kb))
    before = [(c.id, c.text) for c in store.get()]
    openai_server.fail_next = [500] * 3  # every attempt at the first batch of the new version fails
    with pytest.raises(Exception):
        runtime.ingest(kb, "guide.md", DOC)
    assert [(c.id, c.text) for c in store.get()] == before
    openai_server.fail_next = []
    runtime.ingest(kb, "guide.md", DOC)
    assert store.count({"source": "guide.md"}) > 4


def test_ingestion_jobs_complete_or_fail_with_a_message(runtime):
    kb = rag(runtime)
    runtime.jobs.start()
    ok = runtime.jobs.submit(kb, 1, "doc.md", "Some text about trains.")
    assert ok.status == "pending"
    bad = runtime.jobs.submit(kb, 1, "blank.md", "   ")
    assert runtime.jobs.wait_idle(60)
    done = runtime.jobs.status(ok.id)
    assert done.status == "completed" and done.chunks == 1
    assert runtime.jobs.status(bad.id).status == "failed: document 'blank.md' is empty"
    assert runtime.jobs.status("nope") is None


def test_ingestion_statuses_and_pending_jobs_survive_a_restart(tmp_path):
    first = Runtime(tmp_path)
    kb = rag(first)
    done = first.jobs.submit(kb, 1, "a.md", "Text about apples.")
    first.jobs.process(done.id)
    waiting = first.jobs.submit(kb, 1, "b.md", "Text about bananas.")  # no worker ran it
    first.close()

    second = Runtime(tmp_path)
    try:
        assert second.jobs.status(done.id).status == "completed"
        assert second.jobs.status(waiting.id).status == "pending"
        second.jobs.start()
        assert second.jobs.wait_idle(60)
        assert second.jobs.status(waiting.id).status == "completed"
        assert [h.metadata["source"] for h in second.query(kb, "bananas", min_score=0)][:1] == ["b.md"]
    finally:
        second.close()


def test_reingesting_unchanged_text_calls_no_provider(runtime, openai_server):
    kb = rag(runtime, embeddingProvider="openai", embeddingParameters={"apiKey": "sk", "baseUrl": openai_server.base_url})
    runtime.ingest(kb, "guide.md", DOC)
    calls = len(openai_server.calls("/embeddings"))
    assert calls >= 1
    runtime.ingest(kb, "guide.md", DOC)
    runtime.ingest(kb, "copy.md", DOC)  # same text under another name: same vectors
    assert len(openai_server.calls("/embeddings")) == calls
