"""The KnowledgeStore protocol (docs/architecture.md §4): the types a backend takes and answers, its errors
and capabilities, and what each method promises. What backends share to keep it is ``stores/toolkit.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from typing_extensions import NotRequired, TypedDict

from eddi_rag.common.citations import source_label
from eddi_rag.errors import CONFIGURATION, EddiRagError
from eddi_rag.state.sqlite import Database
from eddi_rag.stores import filters

# Capability names a backend may declare.
COLLECTIONS = "collections"  # one collection/table/namespace per knowledge base
SEARCH = "search"  # vector similarity search
METADATA_FILTERING = "metadata_filtering"
KEYWORD_SEARCH = "keyword_search"
TTL = "ttl"
PERSISTENT = "persistent"
LIST_FILTERING = "list_filtering"  # $containsAny / $containsNone over list fields (a document's acl), in the engine's query
DISABLED = "chunk_disabled"  # metadata of a chunk switched off on its document's page: never a search candidate


@dataclass
class Chunk:
    id: str
    text: str
    metadata: dict[str, Any]
    vector: Sequence[float] | None = None


@dataclass
class SearchHit:
    """One search result. ``score`` is what results are ordered by and ``minScore`` keeps to: EDDI's relevance
    (cos + 1) / 2 in [0, 1], or the fused relevance a hybrid or keyword search set (``ranked``, on the same scale)."""

    id: str
    text: str
    metadata: dict[str, Any]
    similarity: float
    rerank_score: float | None = None  # a reranker's relevance, when one reordered the results
    ranking: dict[str, Any] | None = None  # how its score was made, when not by the vector alone (retriever.explain)
    ranked: float | None = None  # the fused relevance of a hybrid or keyword search (retrieval.fusion)

    @property
    def score(self) -> float:
        return (self.similarity + 1.0) / 2.0 if self.ranked is None else self.ranked

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


def position(item: Chunk | SearchHit) -> int:
    """A chunk's place in its document (``position_in_doc``; 0 when it has none)."""
    value = item.metadata.get("position_in_doc")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


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

    db: Database = field(default_factory=Database)  # (default: a private one in memory)
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

    def real_path(self, value: Any) -> str:
        """``path`` resolved to the place it names (``..`` and symbolic links followed): one folder, one spelling."""
        path = self.path(value)
        return path if path == ":memory:" else str(Path(path).resolve())

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
    failure = CONFIGURATION


class LayoutMismatchError(EddiRagError, ValueError):
    """A place in another layout than the store writes (EDDI's langchain4j collection, written as ours): refused before
    anything is written (HTTP 409)."""
    status = 409
    failure = CONFIGURATION


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


@runtime_checkable
class KeywordScores(Protocol):
    """What a keyword-searching backend may also offer: the score ``keyword_search`` would give each of some chunks
    (0 where a chunk holds none of the words), so a hybrid search scores a chunk only the vector side found on the
    keyword side too."""

    def keyword_scores(self, text: str, ids: Sequence[str]) -> dict[str, float]: ...


@runtime_checkable
class RankedIds(Protocol):
    """What a backend may also offer: its vector and keyword searches as ids and scores alone, and the rows of the ids
    a caller keeps. A hybrid search ranks a pool of candidates a side (retrieval.retriever.POOL) and keeps ``k`` of
    them: it then reads the text and metadata of those ``k``, not of the whole pool."""

    def nearest(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, cosine) of what ``search`` finds, in its order."""
        ...

    def keyword_ranked(self, text: str, k: int, where: filters.Where = None) -> list[tuple[str, float]]:
        """(id, score) of what ``keyword_search`` finds, in its order."""
        ...

    def rows(self, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """(text, metadata) of each of ``ids`` that exists."""
        ...


@runtime_checkable
class Similarities(Protocol):
    """What a backend may also offer: the cosine of some stored chunks to a vector, computed where the vectors are
    (a hybrid search scores the keyword side's finds on the vector side so, instead of reading their vectors)."""

    def similarities(self, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]: ...
