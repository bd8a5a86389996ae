"""``in-memory``: a numpy float32 matrix per knowledge base. Fast, not persistent.

The rows live in a RowTable (eddi_rag.stores.embedded.rows: writes cost what they write; exact or HNSW
search) kept in the application's StoreContext, keyed by configuration id, not in this object,
so a factory may evict and rebuild store objects freely.

storeParameters: ``index`` (``exact``, ``hnsw`` or ``auto``: HNSW from 10,000 chunks on),
``efSearch`` (HNSW search breadth: higher is slower and finds more of the true nearest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    LIST_FILTERING,
    METADATA_FILTERING,
    SEARCH,
    Chunk,
    KeywordHit,
    SearchHit,
    StoreContext,
    StoreHealth,
)
from eddi_rag.stores.embedded.keywords import KeywordIndex, keyword_row
from eddi_rag.stores.embedded.rows import INDEXES, RowTable
from eddi_rag.stores.toolkit import check_dimension, check_vectors, parameters_schema, query_vector

INDEX_PARAMETERS = {
    "index": {"enum": list(INDEXES), "default": "auto",
              "description": "exact: scan every vector; hnsw: an HNSW graph (faiss); auto: hnsw from 10,000 chunks on."},
    "efSearch": {"type": "integer", "minimum": 1, "maximum": 1024,
                 "description": "HNSW search breadth (default 64 up to 100,000 chunks, 192 at 1M): higher finds more of the true nearest, slower."},
}


class InMemoryStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema(INDEX_PARAMETERS)

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        spaces = context.state.setdefault("in-memory", {})
        if kb_id not in spaces:
            spaces[kb_id] = RowTable(params.get("index", "auto"), params.get("efSearch"))
        self._t: RowTable = spaces[kb_id]
        self._t.index, self._t.ef_search = params.get("index", "auto"), params.get("efSearch")
        self._keywords: tuple[int, KeywordIndex] | None = None

    def _add(self, chunks: Sequence[Chunk], matrix: np.ndarray) -> None:
        check_dimension(self._t.dim, matrix.shape[1], self.kb_id)
        self._t.add([c.id for c in chunks], matrix, [c.metadata for c in chunks],
                    [(c.text, dict(c.metadata)) for c in chunks])

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        matrix = check_vectors(chunks)
        with self._t.lock:
            self._add(chunks, matrix)

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        node = filters.node(where)
        matrix = check_vectors(chunks) if chunks else None
        with self._t.lock:
            if matrix is not None:
                check_dimension(self._t.dim, matrix.shape[1], self.kb_id)  # fail before touching anything
            self._t.remove(self._t.rows(node).tolist())
            if matrix is not None:
                self._add(chunks, matrix)

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        """Delete chunks whose id is in ``ids`` and that match ``where``; neither given: nothing."""
        node = filters.node(where)
        if ids is None and node is None:
            return 0
        with self._t.lock:
            t = self._t
            if ids is None:
                return t.remove(t.rows(node).tolist())
            rows = [t.row_of[i] for i in set(ids) if i in t.row_of]
            if node is not None:
                mask = t.columns.mask(node)
                rows = [r for r in rows if mask[r]]
            return t.remove(rows)

    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        node = filters.node(where)
        with self._t.lock:
            t = self._t
            q = query_vector(vector, t.dim, k, self.kb_id)
            if q is None:
                return []
            return [SearchHit(t.id_of(r), t.payload[r][0], dict(t.payload[r][1]), sim) for r, sim in t.search(q, k, node)]

    def similarities(self, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that exists to ``vector`` (Similarities)."""
        with self._t.lock:
            q = query_vector(vector, self._t.dim, len(ids), self.kb_id)
            return {} if q is None else self._t.similarities(q, ids)

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """BM25 over the chunk texts, each in its language (embedded.keywords, as the ``sqlite`` store's); the index is
        rebuilt after writes, on first use."""
        node = filters.node(where)
        with self._t.lock:
            t = self._t
            ranked = self._index().search(text, len(t) if node is not None else k)
            allowed = None if node is None else t.select(node)
            hits = [KeywordHit(id, t.payload[t.row_of[id]][0], t.payload[t.row_of[id]][1], score) for id, score in ranked
                    if allowed is None or allowed[t.row_of[id]]]
        return [KeywordHit(h.id, h.text, dict(h.metadata), h.bm25) for h in hits[:k]]

    def keyword_scores(self, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score ``keyword_search`` gives each of ``ids`` (KeywordScores)."""
        with self._t.lock:
            return self._index().scores(text, ids)

    def _index(self) -> KeywordIndex:
        """The keyword index of the chunks as they are now, built again after writes (under the table's lock)."""
        t = self._t
        if self._keywords is None or self._keywords[0] != t.version:
            rows = t.rows(None)
            self._keywords = (t.version, KeywordIndex(keyword_row(t.ids[r], *t.payload[r]) for r in rows))
        return self._keywords[1]

    def get(
        self, where: filters.Where = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        node = filters.node(where)
        with self._t.lock:
            t = self._t
            if ids is None:
                rows = t.rows(node).tolist()
            else:
                mask = t.select(node)
                rows = [t.row_of[i] for i in set(ids) if i in t.row_of and (mask is None or mask[t.row_of[i]])]
            rows = sorted(rows, key=lambda r: t.ids[r])[offset : None if limit is None else offset + limit]
            return [Chunk(t.ids[r], t.payload[r][0], dict(t.payload[r][1]), t.vectors[r].tolist()) for r in rows]

    def count(self, where: filters.Where = None) -> int:
        node = filters.node(where)
        with self._t.lock:
            return len(self._t) if node is None else len(self._t.rows(node))

    def health(self) -> StoreHealth:
        with self._t.lock:
            t = self._t
            return {"status": "ok", "details": {"documents": len(t), "dimension": t.dim, "storage_bytes": t.nbytes(),
                                                "index": "hnsw" if t.uses_hnsw() else "exact"}}

    def drop(self) -> None:
        with self._t.lock:
            self._t.clear()
