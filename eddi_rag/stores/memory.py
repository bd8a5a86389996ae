"""``in-memory``: a numpy float32 matrix per knowledge base. Fast, not persistent.

The data lives in the application's StoreContext (keyed by configuration id), not in this
object, so a factory may evict and rebuild store objects freely.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    METADATA_FILTERING,
    SEARCH,
    Chunk,
    KeywordHit,
    SearchHit,
    StoreContext,
    check_dimension,
    check_vectors,
    filtered_top_k,
    normalise,
    parameters_schema,
)
from eddi_rag.stores.bm25 import Bm25Index
from eddi_rag.stores.masks import MetadataColumns


@dataclass
class _Collection:
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    matrix: np.ndarray | None = None  # (n, d) float32, unit rows
    lock: threading.RLock = field(default_factory=threading.RLock)
    generation: int = 0  # bumped by every write; keys the BM25 index below
    bm25: tuple[int, Bm25Index] | None = None
    columns: tuple[int, MetadataColumns] | None = None  # filter columns of this generation

    def mask(self, node: filters.Node | None) -> np.ndarray:
        if self.columns is None or self.columns[0] != self.generation:
            self.columns = (self.generation, MetadataColumns(self.metadata))
        return self.columns[1].mask(node)

    def rows(self, node: filters.Node | None) -> np.ndarray:
        return np.arange(len(self.ids)) if node is None else np.flatnonzero(self.mask(node))


class InMemoryStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({})

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        spaces = context.state.setdefault("in-memory", {})
        self._c: _Collection = spaces.setdefault(kb_id, _Collection())
        self._spaces = spaces

    def _remove_rows(self, keep: np.ndarray) -> None:
        c = self._c
        c.generation += 1
        c.ids = [c.ids[i] for i in keep]
        c.texts = [c.texts[i] for i in keep]
        c.metadata = [c.metadata[i] for i in keep]
        c.matrix = c.matrix[keep] if c.matrix is not None and len(keep) else None

    def _upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        c = self._c
        matrix = check_vectors(chunks)
        check_dimension(None if c.matrix is None else c.matrix.shape[1], matrix.shape[1], self.kb_id)
        last = {ch.id: i for i, ch in enumerate(chunks)}  # last write of an id wins
        incoming = set(last)
        keep = np.array([i for i, id in enumerate(c.ids) if id not in incoming], dtype=np.int64)
        self._remove_rows(keep)
        order = sorted(last.values())
        c.ids += [chunks[i].id for i in order]
        c.texts += [chunks[i].text for i in order]
        c.metadata += [dict(chunks[i].metadata) for i in order]
        c.generation += 1
        new = matrix[order]
        c.matrix = new if c.matrix is None else np.ascontiguousarray(np.vstack([c.matrix, new]))

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        with self._c.lock:
            self._upsert(chunks)

    def replace(self, where: dict[str, Any], chunks: Sequence[Chunk]) -> None:
        node = filters.parse(where)
        if chunks:
            check_vectors(chunks)  # fail before touching anything
        with self._c.lock:
            c = self._c
            snapshot = (c.ids, c.texts, c.metadata, c.matrix)
            try:
                self._delete_rows(set(c.rows(node).tolist()))
                self._upsert(chunks)
            except BaseException:
                c.ids, c.texts, c.metadata, c.matrix = snapshot
                raise

    def _delete_rows(self, drop: set[int]) -> int:
        if not drop:
            return 0
        keep = np.array([i for i in range(len(self._c.ids)) if i not in drop], dtype=np.int64)
        self._remove_rows(keep)
        return len(drop)

    def delete(self, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None) -> int:
        """Delete chunks whose id is in ``ids`` and that match ``where``; neither given: nothing."""
        node = filters.parse(where)
        if ids is None and node is None:
            return 0
        with self._c.lock:
            c = self._c
            wanted = None if ids is None else set(ids)
            return self._delete_rows({i for i in c.rows(node).tolist() if wanted is None or c.ids[i] in wanted})

    def search(self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None, text: str | None = None) -> list[SearchHit]:
        node = filters.parse(where)
        with self._c.lock:
            c = self._c
            if c.matrix is None or not c.ids:
                return []
            q = normalise(vector)[0]
            check_dimension(c.matrix.shape[1], q.shape[0], self.kb_id)
            picks = filtered_top_k(c.matrix, q, c.ids, k, None if node is None else c.rows(node))
            return [SearchHit(c.ids[i], c.texts[i], dict(c.metadata[i]), sim) for i, sim in picks]

    def keyword_search(self, text: str, k: int, where: dict[str, Any] | None = None) -> list[KeywordHit]:
        """BM25 (bm25s) over the chunk texts; the index is rebuilt after writes, on first use."""
        node = filters.parse(where)
        with self._c.lock:
            c = self._c
            if c.bm25 is None or c.bm25[0] != c.generation:
                c.bm25 = (c.generation, Bm25Index(c.ids, c.texts))
            index, rows = c.bm25[1], {id: i for i, id in enumerate(c.ids)}
            ranked = index.search(text, len(c.ids) if node is not None else k)
            allowed = None if node is None else c.mask(node)
            hits = [KeywordHit(id, c.texts[rows[id]], dict(c.metadata[rows[id]]), score) for id, score in ranked
                    if allowed is None or allowed[rows[id]]]
        return hits[:k]

    def get(
        self, where: dict[str, Any] | None = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        node = filters.parse(where)
        with self._c.lock:
            c = self._c
            wanted = None if ids is None else set(ids)
            rows = sorted((i for i in c.rows(node).tolist() if wanted is None or c.ids[i] in wanted), key=lambda i: c.ids[i])
            rows = rows[offset : None if limit is None else offset + limit]
            return [Chunk(c.ids[i], c.texts[i], dict(c.metadata[i]), c.matrix[i].tolist()) for i in rows]

    def count(self, where: dict[str, Any] | None = None) -> int:
        node = filters.parse(where)
        with self._c.lock:
            return len(self._c.rows(node))

    def health(self) -> dict[str, Any]:
        with self._c.lock:
            m = self._c.matrix
            return {
                "status": "ok",
                "details": {
                    "documents": len(self._c.ids),
                    "dimension": None if m is None else int(m.shape[1]),
                    "storage_bytes": 0 if m is None else int(m.nbytes),
                },
            }

    def drop(self) -> None:
        with self._c.lock:
            self._remove_rows(np.array([], dtype=np.int64))
