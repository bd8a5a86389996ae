"""The asynchronous embedding buffer (embedding-rag.md REQ-EMB-004).

Callers ``enqueue`` texts and get a Future of their vectors; one background thread sends the
model batches of up to ``batch_size`` texts, drawn across callers, as soon as a batch is full or
``max_wait`` seconds after its first text. The queue holds at most ``max_pending`` texts, so a
producer faster than the model waits (back-pressure) instead of filling memory. ``stop`` (or
leaving the ``with`` block) embeds everything already queued before the thread exits.

A batch that fails is retried caller by caller, so one text the provider rejects fails only the
request it came in.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

_STOP = object()


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
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)
            self._send(batch)

    def _send(self, batch: list[tuple[str, _Request, int]]) -> None:
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
