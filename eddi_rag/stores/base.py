"""The KnowledgeStore protocol (DESIGN §4) and what every backend shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from eddi_rag.db import Database
from eddi_rag.citations import source_label
from eddi_rag.stores import filters

# Capability names a backend may declare.
COLLECTIONS = "collections"  # one collection/table/namespace per knowledge base
SEARCH = "search"  # vector similarity search
METADATA_FILTERING = "metadata_filtering"
KEYWORD_SEARCH = "keyword_search"
TTL = "ttl"
PERSISTENT = "persistent"


@dataclass
class Chunk:
    id: str
    text: str
    metadata: dict[str, Any]
    vector: Sequence[float] | None = None


@dataclass
class SearchHit:
    """One search result. ``score`` is EDDI's relevance (cos + 1) / 2 in [0, 1]."""

    id: str
    text: str
    metadata: dict[str, Any]
    similarity: float
    rerank_score: float | None = None  # a reranker's relevance, when one reordered the results

    @property
    def score(self) -> float:
        return (self.similarity + 1.0) / 2.0

    @property
    def distance(self) -> float:
        return 1.0 - self.similarity

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "score": round(self.score, 6),
            "similarity": round(self.similarity, 6),
            "distance": round(self.distance, 6),
            "source": self.metadata.get("source"),
            "citation": source_label(self.metadata),
            **({"rerankScore": self.rerank_score} if self.rerank_score is not None else {}),
            "metadata": self.metadata,
        }


@dataclass
class KeywordHit:
    """A keyword (BM25 or native full-text) match; ``bm25`` is the engine's own score, only
    comparable within one query's results."""

    id: str
    text: str
    metadata: dict[str, Any]
    bm25: float


@dataclass
class StoreContext:
    """What the application lends to backends: the embedded database, a data directory, and
    state that outlives any one store object (so evicting a cached store loses nothing)."""

    db: Database
    data_dir: Path | None = None
    state: dict[str, Any] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the application closes (e.g. save an index built in memory)."""
        self.closers.append(closer)

    def close(self) -> None:
        for closer in self.closers:
            closer()


class DimensionMismatchError(ValueError):
    pass


@runtime_checkable
class KnowledgeStore(Protocol):
    capabilities: frozenset[str]

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        """JSON Schema of the storeParameters this backend accepts."""

    def upsert(self, chunks: Sequence[Chunk]) -> None: ...
    def replace(self, where: dict[str, Any], chunks: Sequence[Chunk]) -> None:
        """Atomically delete what ``where`` matches and upsert ``chunks``."""
    def delete(self, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None) -> int: ...
    def search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None, text: str | None = None
    ) -> list[SearchHit]: ...
    def get(
        self, where: dict[str, Any] | None = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        """Chunks matching ``where`` (and, when given, whose id is in ``ids``), ordered by id."""
    def count(self, where: dict[str, Any] | None = None) -> int: ...
    def health(self) -> dict[str, Any]: ...
    def drop(self) -> None: ...

    # Backends declaring KEYWORD_SEARCH also offer:
    # def keyword_search(self, text: str, k: int, where: dict | None = None) -> list[KeywordHit]


TYPED_FIELDS = {"string": "m_str", "number": "m_num", "bool": "m_bool"}


def typed_fields(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Scalar metadata split by type ({"m_str": {...}, "m_num": {...}, "m_bool": {...}}), so an
    engine that coerces types ("3" == 3) or mixes them in one index still filters exactly."""
    out: dict[str, dict[str, Any]] = {prefix: {} for prefix in TYPED_FIELDS.values()}
    for key, value in metadata.items():
        kind = filters.value_kind(value)
        if kind is not None:
            out[TYPED_FIELDS[kind]][key] = value
    return out


class OverwriteThenPrune:
    """``replace`` for engines without transactions: validate everything first, write the new
    chunks (overwriting equal ids), then delete the old ones that were not overwritten. A
    failure before the write changes nothing; a failure after it leaves old and new side by side.
    Users implement ``_dimension``, ``_ids_matching``, ``_write`` and ``_delete_ids``."""

    kb_id: str

    def replace(self, where: dict[str, Any], chunks: Sequence[Chunk]) -> None:
        filters.parse(where)
        if chunks:
            check_dimension(self._dimension(), check_vectors(chunks).shape[1], self.kb_id)
        old = self._ids_matching(where)
        if chunks:
            self._write(chunks)
        keep = {c.id for c in chunks}
        self._delete_ids([i for i in old if i not in keep])


def overfetch(search: Callable[[int], list[SearchHit]], k: int, available: int, first: int | None = None) -> list[SearchHit]:
    """The best k of ``search(n)``, asking for n > k candidates (so ties at the cut are broken by
    id, and a filter applied after the engine's search still leaves k), tripling n until more than
    k come back or all ``available`` candidates were asked for."""
    n = min(available, 2 * k + 10 if first is None else first)
    while True:
        hits = search(max(n, 1))
        if len(hits) > k or n >= available:
            return sorted(hits, key=lambda h: (-h.similarity, h.id))[:k]
        n = min(available, n * 3)


def parameters_schema(properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """The JSON Schema of a backend's storeParameters: unknown keys are errors."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False, **extra}


def normalise(vectors: Any) -> np.ndarray:
    """Rows as contiguous float32 unit vectors."""
    m = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def top_k(similarities: np.ndarray, ids: Sequence[str], k: int) -> list[int]:
    """Indices of the k best rows, by similarity descending, ties broken by id ascending."""
    n = len(similarities)
    if n == 0 or k <= 0:
        return []
    if k < n:
        kth = np.partition(similarities, n - k)[n - k]
        candidates = np.flatnonzero(similarities >= kth)
    else:
        candidates = np.arange(n)
    return sorted(candidates.tolist(), key=lambda i: (-float(similarities[i]), ids[i]))[:k]


def query_vector(vector: Sequence[float], dim: int | None, k: int, kb_id: str) -> np.ndarray | None:
    """The query as a unit float32 vector checked against the KB's dimension; None when there is
    nothing to search (an empty KB, or k <= 0)."""
    if dim is None or k <= 0:
        return None
    q = np.array(vector, dtype=np.float32).reshape(-1)
    check_dimension(dim, q.shape[0], kb_id)
    norm = float(np.sqrt(q @ q))
    return q / norm if norm else q


def check_vectors(chunks: Sequence[Chunk]) -> np.ndarray:
    if any(c.vector is None for c in chunks):
        missing = next(c.id for c in chunks if c.vector is None)
        raise ValueError(f"chunk {missing!r} has no vector")
    matrix = normalise([c.vector for c in chunks])
    return matrix


def check_dimension(expected: int | None, got: int, kb: str) -> None:
    if expected is not None and expected != got:
        raise DimensionMismatchError(
            f"knowledge base {kb!r} holds {expected}-dimensional vectors, got {got}: "
            "the embedding model changed; re-create the store or use a matching model"
        )
