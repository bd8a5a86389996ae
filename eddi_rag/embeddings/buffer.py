"""The asynchronous embedding buffer (embedding-rag.md REQ-EMB-004).

Callers ``enqueue`` texts and get a Future of their vectors; one background thread sends the
model batches of up to ``batch_size`` texts, drawn across callers, as soon as a batch is full or
``max_wait`` seconds after its first text, but not before the texts its callers are still queueing (a caller's
texts leave together, up to ``batch_size``). The queue holds at most ``max_pending`` texts, so a
producer faster than the model waits (back-pressure) instead of filling memory. ``stop`` (or
leaving the ``with`` block) embeds everything already queued before the thread exits.

A batch that fails is retried caller by caller, so one text the provider rejects fails only the
request it came in. A Future cancelled before its texts were sent is skipped (a cancelled ingestion).

``SharedBuffers`` keeps one running buffer per model for a whole process: every ingestion (each job of
the ingestion workers, each document of a batch) embeds through it, so documents ingested at once share
the model's batches, and one document's splitting and writing overlap another's embedding. Its buffers
send as soon as the model is free (``max_wait`` 0): what is queued meanwhile makes the next batch, so a
lone document never waits for company.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

_STOP = object()
REST_OF_CALL = 0.05  # seconds a batch waits at most for the texts a caller is still queueing


class _Request:
    def __init__(self, size: int):
        self.future: Future[list[Any]] = Future()
        self.vectors: list[Any] = [None] * size
        self.remaining = size


class EmbeddingBuffer:
    def __init__(self, embed: Callable[[list[str]], Sequence[Any]], batch_size: int = 64, max_wait: float = 0.05,
                 max_pending: int = 1024):
        if batch_size < 1 or max_pending < 1:
            raise ValueError(f"batch_size and max_pending must be at least 1, got {batch_size} and {max_pending}")
        self.embed, self.batch_size, self.max_wait = embed, batch_size, max_wait
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._thread = threading.Thread(target=self._run, name="embedding-buffer", daemon=True)
        self._started = self._stopped = False
        self.batches = 0  # model calls made (for tests and benchmarks)

    def start(self) -> EmbeddingBuffer:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def stop(self) -> None:
        """Embed what is queued, then end the background thread."""
        if self._started and not self._stopped:
            self._stopped = True
            self._queue.put(_STOP)
            self._thread.join()

    def __enter__(self) -> EmbeddingBuffer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def enqueue(self, texts: Sequence[str]) -> Future[list[Any]]:
        """A Future of ``texts``' vectors, in order; blocks while the queue is full."""
        if self._stopped or not self._started:
            raise RuntimeError("the embedding buffer is not running")
        request = _Request(len(texts))
        if not texts:
            request.future.set_result([])
        for i, text in enumerate(texts):
            self._queue.put((text, request, i))
        return request.future

    def _run(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is _STOP:
                return
            batch = [item]
            deadline = time.monotonic() + self.max_wait
            while len(batch) < self.batch_size:
                _, request, i = batch[-1]
                # the rest of a caller's texts is being queued right now: a batch does not leave without it
                more = i < len(request.vectors) - 1
                try:
                    item = self._queue.get(timeout=REST_OF_CALL if more else max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)
            self._send(batch)

    def _send(self, batch: list[tuple[str, _Request, int]]) -> None:
        batch = [item for item in batch if not item[1].future.cancelled()]
        if not batch:
            return
        self.batches += 1
        try:
            vectors = list(self.embed([text for text, _, _ in batch]))
            if len(vectors) != len(batch):
                raise RuntimeError(f"the embedding model returned {len(vectors)} vectors for {len(batch)} texts")
        except Exception as e:  # noqa: BLE001 - handed to the callers
            requests = {id(r): r for _, r, _ in batch}
            if len(requests) == 1:
                request = next(iter(requests.values()))
                if not request.future.done():
                    request.future.set_exception(e)
                return
            for request in requests.values():  # find the caller whose text failed
                self._send([item for item in batch if item[1] is request])
            return
        for (_, request, i), vector in zip(batch, vectors):
            request.vectors[i] = vector
            request.remaining -= 1
            if request.remaining == 0 and not request.future.done():
                request.future.set_result(request.vectors)


class SharedBuffers:
    """One running EmbeddingBuffer per model (the ``max_models`` used last), shared by a process's ingestions."""

    def __init__(self, batch_size: int = 64, max_models: int = 16):
        self.batch_size, self.max_models = batch_size, max_models
        self._lock = threading.Lock()
        self._buffers: OrderedDict[int, tuple[Any, EmbeddingBuffer]] = OrderedDict()  # id(model) -> (model, its buffer)

    def enqueue(self, model: Any, texts: Sequence[str]) -> Future[list[Any]]:
        """A Future of ``texts``' vectors by ``model`` (an Embeddings), in order; blocks while its queue is full."""
        evicted: list[EmbeddingBuffer] = []
        with self._lock:  # (held while enqueueing, so a buffer is never stopped between being found and used)
            entry = self._buffers.get(id(model))  # (the entry holds its model, so no other object takes its id)
            if entry is None:
                entry = (model, EmbeddingBuffer(lambda texts: model.embed_documents(texts), self.batch_size, max_wait=0).start())
                self._buffers[id(model)] = entry
                while len(self._buffers) > self.max_models:
                    evicted.append(self._buffers.popitem(last=False)[1][1])
            self._buffers.move_to_end(id(model))
            future = entry[1].enqueue(texts)
        for buffer in evicted:  # (what they hold is embedded first)
            buffer.stop()
        return future

    def close(self) -> None:
        with self._lock:
            buffers = [buffer for _, buffer in self._buffers.values()]
            self._buffers.clear()
        for buffer in buffers:
            buffer.stop()
