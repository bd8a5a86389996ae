"""The KnowledgeStore protocol (docs/architecture.md §4) and what every backend shares."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from typing_extensions import NotRequired, TypedDict

from eddi_rag.common.citations import source_label
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import Database
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
    ranking: dict[str, Any] | None = None  # why it stands where it does, when not by score (retriever.explain)

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
            **({"ranking": self.ranking} if self.ranking is not None else {}),
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

    def path(self, value: Any) -> str:
        """A file or folder a configuration names (``storeParameters.path``): a relative one lies
        under the data directory (eddi_rag.common.paths checks where it may lie); ``:memory:`` stays."""
        path = Path(str(value)).expanduser()
        if str(value) == ":memory:" or path.is_absolute() or self.data_dir is None:
            return str(value) if str(value) == ":memory:" else str(path)
        return str(self.data_dir / path)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the application closes (e.g. save an index built in memory)."""
        self.closers.append(closer)

    def close(self) -> None:
        for closer in self.closers:
            closer()


class StoreUnavailableError(EddiRagError, RuntimeError):
    """A knowledge base's engine is down, refused the connection or timed out (HTTP 503). Raised by
    the application's store factory around every store call; a ValueError (the request's or the
    configuration's fault) passes through as it is."""
    status = 503


class DimensionMismatchError(EddiRagError, ValueError):
    status = 409
    pass


class HealthDetails(TypedDict, total=False):
    documents: int  # chunks in the KB
    dimension: int | None
    storage_bytes: int
    index: str  # how a search runs: "exact", "hnsw", an engine's own index...
    # what some engines add: where the KB lives and the engine's version
    path: str  # sqlite's file
    table: str  # pgvector's, sqlite-vec's
    collection: str  # Chroma's, Qdrant's, Typesense's, MongoDB's
    collections: int  # how many the engine holds
    version: str  # Elasticsearch's
    pgvector: str  # the extension's version
    sqlite_vec: str  # the extension's version


class StoreHealth(TypedDict):
    """What ``health()`` returns: ``status`` "ok" or "error" (then ``error`` says why); a
    backend may add engine-specific entries to ``details``."""

    status: Literal["ok", "error"]
    details: HealthDetails
    error: NotRequired[str]


@runtime_checkable
class KnowledgeStore(Protocol):
    """A knowledge base's chunks in one engine (docs/architecture.md §4); ``testing/store_conformance.py`` is the
    suite every implementation passes.

    **Construction.** ``cls(kb_id, params, context)``: ``params`` are the storeParameters, resolved (secrets read)
    and checked against ``connection_schema()`` by the factory, plus EDDI's layout keys (``stores.langchain4j``);
    ``context`` (``StoreContext``) holds the embedded engines' database and data folder. A store object serves one
    knowledge base; the factory caches it, and asks ``place()``/``exists()`` of a network engine first (who owns the
    physical table: ``stores.ownership``). Building it may connect; the table or collection is made when first
    needed (a vector's dimension is known at the first write).

    **Errors.** A ``ValueError`` (``DimensionMismatchError`` among them, HTTP 409) is the caller's or the
    configuration's fault: bad parameters, a malformed filter, a chunk without a vector, vectors of another
    dimension than the store holds. Anything else means the engine is down, refused or timed out: the factory's
    ``GuardedStore`` reports it as ``StoreUnavailableError`` (HTTP 503) and builds the store again at its next use.
    A failed ``replace`` or ``upsert`` leaves what was stored before (or, for engines without transactions,
    ``OverwriteThenPrune``'s documented middle state).

    **Duplicates.** A chunk is identified by its ``id``: writing an id that exists overwrites it (text, metadata,
    vector; ``test_upsert_replaces_by_id``). Scores are cosine-based (``SearchHit.score``).

    ``where`` is the parsed filter tree (``filters.parse``, done once by the caller); a mapping is also accepted and
    parsed. Every read and delete is exact against the reference evaluator (``filters``)."""

    capabilities: frozenset[str]

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        """JSON Schema of the storeParameters this backend accepts."""

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Write ``chunks`` (each with a vector), overwriting those with the same ids; the first write creates the
        table or collection for the vectors' dimension. An empty sequence does nothing."""
    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        """Atomically delete what ``where`` matches and upsert ``chunks`` (a document re-ingested: its old chunks
        go, its new ones come, in one step)."""
    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        """Delete the chunks whose id is in ``ids`` (when given) and that match ``where`` (when given); neither
        given deletes nothing. Returns how many were deleted; an id not stored is no error."""
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        """The k chunks nearest ``vector`` (cosine), best first, ties broken by chunk id."""
    def get(
        self, where: filters.Where = None, limit: int | None = None, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[Chunk]:
        """Chunks matching ``where`` (and, when given, whose id is in ``ids``), ordered by id; ``limit`` None: all
        of them, ``offset`` skips that many (paging through thousands returns each chunk once)."""
    def count(self, where: filters.Where = None) -> int:
        """How many chunks match ``where`` (all of them when None)."""
    def health(self) -> StoreHealth:
        """``{"status": "ok", "details": {documents, dimension, …}}``, or status "error" with ``error`` saying why;
        it reports an unreachable engine instead of raising."""
    def drop(self) -> None:
        """Remove every chunk, and the table or collection itself where the engine has one. Only a knowledge base
        that alone holds a store this product created calls it (``verbs.documents.Documents.drop``)."""


@runtime_checkable
class KeywordSearch(Protocol):
    """What a backend declaring KEYWORD_SEARCH also offers: full-text (BM25 or the engine's own)
    ranking over the chunk texts."""

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]: ...


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

    def _dimension(self) -> int | None:
        raise NotImplementedError

    def _ids_matching(self, where: filters.Where) -> list[str]:
        raise NotImplementedError

    def _write(self, chunks: Sequence[Chunk]) -> None:
        raise NotImplementedError

    def _delete_ids(self, ids: list[str]) -> None:
        raise NotImplementedError

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        filters.node(where)
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


def engine_name(kb_id: str, allowed: str = "A-Za-z0-9_-", *, prefix: str = "eddi_kb_", lower: bool = False,
                max_length: int = 255) -> str:
    """The one way a KB id becomes an engine's collection/table/index name: ``prefix`` + the id,
    characters outside ``allowed`` (a regex character class body) as ``_``, lower-cased when the
    engine folds case. When that changed the id or the name is too long, a hash of the id is
    appended (within ``max_length``), so two ids never share a name ("a-b" and "a_b" stay apart)."""
    cleaned = re.sub(f"[^{allowed}]", "_", kb_id.lower() if lower else kb_id)
    name = prefix + cleaned
    if cleaned == kb_id and len(name) <= max_length:
        return name
    digest = "_" + hashlib.sha256(kb_id.encode()).hexdigest()[:10]
    return name[: max_length - len(digest)] + digest


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


def top_k(similarities: np.ndarray, ids: Sequence[str | None], k: int) -> list[int]:
    """Indices of the k best rows, by similarity descending, ties broken by id ascending (a
    dead row's id is None)."""
    n = len(similarities)
    if n == 0 or k <= 0:
        return []
    if k < n:
        kth = np.partition(similarities, n - k)[n - k]
        candidates = np.flatnonzero(similarities >= kth)
    else:
        candidates = np.arange(n)
    return sorted(candidates.tolist(), key=lambda i: (-float(similarities[i]), ids[i] or ""))[:k]


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
            "the embedding model changed; re-embed all (POST .../reembed, or Re-embed all on its Documents page) "
            "or use the matching model"
        )
