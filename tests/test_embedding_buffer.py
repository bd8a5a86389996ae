"""The asynchronous embedding buffer (REQ-EMB-004) and ingestion that overlaps embedding with
splitting and writing."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from eddi_rag.embeddings.buffer import EmbeddingBuffer, SharedBuffers


class Recorder:
    """A model that returns each text's length and remembers the batches it was sent."""

    def __init__(self, fail_on: str | None = None, gate: threading.Event | None = None):
        self.batches: list[list[str]] = []
        self.fail_on, self.gate = fail_on, gate
        self.called = threading.Event()  # the model was sent a batch

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.called.set()
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append(list(texts))
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"the provider rejects {self.fail_on!r}")
        return [[float(len(t))] for t in texts]


def test_texts_of_many_callers_share_batches_and_come_back_in_order():
    model = Recorder()
    with EmbeddingBuffer(model, batch_size=16, max_wait=0.5) as buffer:
        futures = [buffer.enqueue([f"{c}" * (i + 1) for i in range(10)]) for c in "abc"]
        results = [f.result(timeout=10) for f in futures]
    assert results == [[[float(i + 1)] for i in range(10)]] * 3
    assert [len(b) for b in model.batches] == [16, 14]  # the size threshold, then the rest after max_wait


def test_a_partial_batch_goes_out_after_the_wait_without_a_stop():
    model = Recorder()
    buffer = EmbeddingBuffer(model, batch_size=64, max_wait=0.01).start()
    try:
        assert buffer.enqueue(["one", "three"]).result(timeout=10) == [[3.0], [5.0]]
    finally:
        buffer.stop()


class Slow(Sequence[str]):
    """Texts a caller produces a millisecond apart (the buffer's thread wakes between two of them)."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i):  # noqa: ANN001, ANN204
        time.sleep(0.001)
        return self.texts[i]


def test_a_callers_texts_leave_together_when_the_buffer_sends_at_once():
    """With ``max_wait`` 0 (the shared buffers') the thread used to send the first text of a call alone when it woke
    before the caller had queued the rest: a document of n chunks took up to n model runs."""
    model = Recorder()
    with EmbeddingBuffer(model, batch_size=64, max_wait=0) as buffer:
        for n in (2, 5, 40):
            texts = [f"text {i}" for i in range(n)]
            assert buffer.enqueue(Slow(texts)).result(timeout=10) == [[float(len(t))] for t in texts]
    assert [len(b) for b in model.batches] == [2, 5, 40]


def test_a_full_queue_holds_the_producer_back():
    gate = threading.Event()
    model = Recorder(gate=gate)
    buffer = EmbeddingBuffer(model, batch_size=1, max_wait=0, max_pending=2).start()
    produced = []

    def produce():
        for i in range(6):
            produced.append(buffer.enqueue([f"t{i}"]))

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(0.3)
    assert producer.is_alive() and len(produced) < 6  # waiting for room, not queueing without bound
    gate.set()
    producer.join(10)
    buffer.stop()
    assert [f.result(timeout=10) for f in produced] == [[[2.0]]] * 6


def test_stop_drains_what_is_queued():
    model = Recorder()
    buffer = EmbeddingBuffer(model, batch_size=8, max_wait=60).start()
    futures = [buffer.enqueue([f"text {i}"]) for i in range(20)]
    buffer.stop()
    assert all(f.done() for f in futures) and sum(len(b) for b in model.batches) == 20
    with pytest.raises(RuntimeError, match="not running"):
        buffer.enqueue(["late"])


def test_a_rejected_text_fails_only_its_own_request():
    model = Recorder(fail_on="poison")
    with EmbeddingBuffer(model, batch_size=10, max_wait=5) as buffer:
        good, bad, other = buffer.enqueue(["a", "bb"]), buffer.enqueue(["ccc", "poison"]), buffer.enqueue(["d"])
    assert good.result() == [[1.0], [2.0]] and other.result() == [[1.0]]
    with pytest.raises(ValueError, match="rejects 'poison'"):
        bad.result()


def test_a_request_cancelled_before_its_batch_is_not_sent():
    gate = threading.Event()
    model = Recorder(gate=gate)
    with EmbeddingBuffer(model, batch_size=8, max_wait=0) as buffer:
        first = buffer.enqueue(["first"])
        assert model.called.wait(10)  # the model holds it until the gate opens
        dropped, kept = buffer.enqueue(["dropped"]), buffer.enqueue(["kept"])
        assert dropped.cancel()
        gate.set()
        assert kept.result(timeout=10) == [[4.0]] and first.result(timeout=10) == [[5.0]]
    assert "dropped" not in [t for b in model.batches for t in b]


class Model:
    def __init__(self, recorder: Recorder):
        self.embed_documents = recorder


def test_shared_buffers_put_what_ingestions_queue_meanwhile_into_one_batch_per_model():
    """One buffer per model for the process: while the model embeds one ingestion's texts, the texts two others
    queue go out together next; another model has its own buffer."""
    gate = threading.Event()
    one, other = Recorder(gate=gate), Recorder()
    shared = SharedBuffers(batch_size=64)
    a, b = Model(one), Model(other)
    try:
        first = shared.enqueue(a, ["first"])
        assert one.called.wait(10)  # the model holds it until the gate opens
        second, third = shared.enqueue(a, ["s1", "s2"]), shared.enqueue(a, ["t1"])
        assert shared.enqueue(b, ["alone"]).result(timeout=10) == [[5.0]]  # its own buffer, not behind the gate
        gate.set()
        assert first.result(timeout=10) == [[5.0]] and second.result(timeout=10) == [[2.0], [2.0]]
        assert third.result(timeout=10) == [[2.0]]
        assert one.batches == [["first"], ["s1", "s2", "t1"]] and other.batches == [["alone"]]
    finally:
        shared.close()
    assert not shared._buffers


def test_batch_ingestion_shares_model_calls_across_documents(runtime, monkeypatch):
    kb = runtime.resources.create("rags", {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite"}).id
    config = runtime.rag_config(kb)
    model = runtime.embeddings.for_config(config)
    calls = []
    original = model.embed_documents
    monkeypatch.setattr(model, "embed_documents", lambda texts: calls.append(len(texts)) or original(texts))
    docs = [{"document_id": f"doc{i}", "text": f"Night train number {i} leaves from platform {i % 7}."} for i in range(30)]
    docs.insert(12, {"document_id": "empty", "text": "  "})
    result = runtime.ingesting.batch(docs, kb)
    assert (result.documents_processed, result.documents_failed, result.chunk_count) == (30, 1, 30)
    assert result.errors[0]["document_id"] == "empty" and "text is empty" in result.errors[0]["error"]
    assert sum(calls) == 30 and len(calls) < 30  # texts of several documents per model call
    hits = runtime.query(kb, "Night train number 17", max_results=1)
    assert hits[0].metadata["document_id"] == "doc17"
