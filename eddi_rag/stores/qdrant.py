"""``qdrant``: Qdrant through qdrant-client, a collection per knowledge base.

Local mode (``path`` = a folder, or ``":memory:"``) runs in-process; otherwise ``host``/``port``
(EDDI's default 6334 is gRPC), ``apiKey``, ``useTls``. Clients are shared per connection (in the
StoreContext), so an in-memory Qdrant outlives any one store object.

Filters compile to Qdrant ``Filter``s exactly: every scalar metadata value is also stored under
``m.<field>`` with its type under ``t.<field>``, so equality never confuses 1, 1.0, "1" and true.
String ranges (which Qdrant cannot express) and dotted field names fall back to the reference
evaluator over the matching candidates.

Writes are not transactional in Qdrant: ``replace`` validates everything first, writes the new
chunks, then deletes the old ones that were not overwritten.

In EDDI's layout (``storeNamespace``, stores.langchain4j) the collection is langchain4j's: a point per chunk
(a UUID), the text under ``text_segment`` and the metadata flat beside it (strings and numbers, our chunk id
as ``chunkId``); filters then run on the points (langchain4j's payload has no typed copy to filter on).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from eddi_rag.stores import filters, langchain4j
from eddi_rag.stores.base import (
    COLLECTIONS,
    KEYWORD_SEARCH,
    LIST_FILTERING,
    METADATA_FILTERING,
    PERSISTENT,
    SEARCH,
    Chunk,
    KeywordHit,
    SearchHit,
    StoreContext,
    StoreHealth,
)
from eddi_rag.stores.languages import qdrant_text_index
from eddi_rag.stores.toolkit import OverwriteThenPrune, check_dimension, check_vectors, engine_name, overfetch, parameters_schema, query_vector, string_lists

_NAMESPACE = uuid.UUID("6f1f6a52-7a3c-4a0e-9d0e-0c2f5f1b6e11")
_NEVER = models.FieldCondition(key="t.__never__", match=models.MatchValue(value="never"))
_PAGE = 1024


def collection_name(kb_id: str) -> str:
    return engine_name(kb_id)



def _payload(chunk: Chunk) -> dict[str, Any]:
    typed = {k: v for k, v in chunk.metadata.items() if filters.value_kind(v) is not None}
    return {"id": chunk.id, "text": chunk.text, "metadata": chunk.metadata,
            "m": typed, "t": {k: filters.value_kind(v) for k, v in typed.items()}, "l": string_lists(chunk.metadata)}


def _native(node: filters.Node) -> bool:
    if isinstance(node, (filters.And, filters.Or)):
        return all(_native(n) for n in node.children)
    ranged_string = node.op in ("$gt", "$gte", "$lt", "$lte") and isinstance(node.value, str)
    return "." not in node.field and not ranged_string


def _eq(field: str, value: Any) -> models.Filter:
    typed = models.FieldCondition(key=f"t.{field}", match=models.MatchValue(value=filters.scalar_kind(value)))
    if isinstance(value, (bool, str)):
        cond = models.FieldCondition(key=f"m.{field}", match=models.MatchValue(value=value))
    else:
        cond = models.FieldCondition(key=f"m.{field}", range=models.Range(gte=value, lte=value))
    return models.Filter(must=[typed, cond])


def to_qdrant(node: filters.Node) -> models.Filter:
    """Compile a (natively expressible) filter AST to a Qdrant Filter."""
    if isinstance(node, filters.And):
        return models.Filter(must=[to_qdrant(n) for n in node.children])
    if isinstance(node, filters.Or):
        return models.Filter(should=[to_qdrant(n) for n in node.children])
    if node.op == "$eq":
        return _eq(node.field, node.value)
    if node.op == "$ne":
        return models.Filter(must_not=[_eq(node.field, node.value)])
    if node.op in filters.CONTAINS:  # a list's strings, kept under l.<field>
        held = (models.FieldCondition(key=f"l.{node.field}", match=models.MatchAny(any=list(node.value)))
                if node.value else _NEVER)
        return models.Filter(must=[held]) if node.op == "$containsAny" else models.Filter(must_not=[held])
    if node.op in ("$in", "$nin"):
        any_of = models.Filter(should=[_eq(node.field, v) for v in node.value]) if node.value else models.Filter(must=[_NEVER])
        return any_of if node.op == "$in" else models.Filter(must_not=[any_of])
    bound = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}[node.op]
    return models.Filter(must=[
        models.FieldCondition(key=f"t.{node.field}", match=models.MatchValue(value="number")),
        models.FieldCondition(key=f"m.{node.field}", range=models.Range(**{bound: node.value})),
    ])


class QdrantStore(OverwriteThenPrune):
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({
            "path": {"type": "string", "description": "Local mode: a folder, or \":memory:\"."},
            "host": {"type": "string", "default": "localhost"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 6334,
                     "description": "6334 (gRPC, EDDI's default) or 6333 (REST)."},
            "apiKey": {"type": "string", "description": "Use a reference: ${eddivault:KEY}."},
            "useTls": {"type": "boolean", "default": False},
            "collectionName": {"type": "string", "description": "Default eddi_kb_<sanitised id>."},
        })

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical collection (in local mode: its folder#collection) this store addresses (stores.ownership records who owns it)."""
        name = str(params.get("collectionName") or collection_name(kb_id))
        return f"{context.real_path(params['path'])}#{name}" if params.get("path") else name

    def exists(self) -> bool:
        return bool(self.client.collection_exists(self.collection))

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        self.l4j = params.get("layout") == langchain4j.LAYOUT  # EDDI's (langchain4j's) collection, adopted in place
        if self.l4j:  # langchain4j's payload holds scalars only: no list to filter on
            self.capabilities = type(self).capabilities - {LIST_FILTERING}
        self.kb_tag = params.get("kbTag")
        self.text_key = "text_segment" if self.l4j else "text"
        # The full-text index in the knowledge base's language, set when it is made; local mode (``path``) reads only
        # Qdrant's default tokenization ("Text queries in the local Qdrant only support ... the default").
        self.text_index = {} if params.get("path") else qdrant_text_index(params.get(langchain4j.LANGUAGE))
        params = {k: v for k, v in params.items() if k not in ("layout", "kbTag", langchain4j.LANGUAGE)}
        self.collection = str(params.get("collectionName") or collection_name(kb_id))
        clients = context.state.setdefault("qdrant-clients", {})
        if params.get("path"):  # one client per folder, however it is spelled (local mode locks its folder)
            params = {**params, "path": context.real_path(params["path"])}
        key = tuple(sorted((k, str(v)) for k, v in params.items() if k != "collectionName"))
        if key not in clients:
            clients[key] = self._connect(params)
        self.client: QdrantClient = clients[key]

    @staticmethod
    def _connect(params: dict[str, Any]) -> QdrantClient:
        if params.get("path"):
            path = str(params["path"])
            return QdrantClient(location=":memory:") if path == ":memory:" else QdrantClient(path=path)
        port = int(params.get("port", 6334))
        return QdrantClient(
            host=str(params.get("host", "localhost")),
            port=6333 if port == 6334 else port,
            grpc_port=port if port != 6333 else 6334,
            prefer_grpc=port != 6333,
            api_key=params.get("apiKey"),
            https=bool(params.get("useTls", False)),
        )

    # -- helpers --------------------------------------------------------------------------
    def _info(self) -> models.CollectionInfo | None:
        if not self.client.collection_exists(self.collection):
            return None
        return self.client.get_collection(self.collection)

    def _dimension(self) -> int | None:
        info = self._info()
        vectors = None if info is None else info.config.params.vectors
        return int(vectors.size) if isinstance(vectors, models.VectorParams) else None  # one unnamed vector per point

    def _native_filter(self, node: filters.Node | None) -> tuple[models.Filter | None, filters.Node | None]:
        """(filter Qdrant applies, filter we still apply in Python, on ``_row``'s view)."""
        if self.kb_tag is not None:  # EDDI's "id" namespace: only this knowledge base's chunks
            scope = filters.Compare("kbId", "$eq", self.kb_tag)
            node = scope if node is None else filters.And((node, scope))
        if node is None:
            return None, None
        if self.l4j:
            filters.refuse_lists(node, "EDDI's langchain4j points hold scalar metadata only, no lists")
            return None, langchain4j.encode_node(node)
        return (to_qdrant(node), None) if _native(node) else (None, node)

    def _point_id(self, chunk_id: str) -> str:
        return langchain4j.row_id(chunk_id) if self.l4j else str(uuid.uuid5(_NAMESPACE, chunk_id))

    def _payload(self, chunk: Chunk) -> dict[str, Any]:
        if self.l4j:
            return {"text_segment": chunk.text, **langchain4j.encode(chunk.id, chunk.metadata)}
        return _payload(chunk)

    def _row(self, point: Any) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
        """(chunk id, text, metadata, what a filter run here sees) of a point, ours or langchain4j's."""
        payload = point.payload or {}
        if not self.l4j:
            return payload["id"], payload["text"], payload["metadata"], payload["metadata"]
        stored = {k: v for k, v in payload.items() if k != "text_segment"}
        chunk_id, metadata = langchain4j.decode(str(point.id), stored)
        return chunk_id, payload.get("text_segment") or "", metadata, {**stored, "document_id": metadata.get("document_id")}

    def _scroll(self, flt: models.Filter | None, with_vectors: bool = False) -> list[Any]:
        points, offset = [], None
        while True:
            page, offset = self.client.scroll(self.collection, scroll_filter=flt, limit=_PAGE, offset=offset,
                                              with_payload=True, with_vectors=with_vectors)
            points += page
            if offset is None:
                return points

    def _matching(self, where: filters.Where, with_vectors: bool = False) -> list[Any]:
        if self._dimension() is None:
            return []
        flt, rest = self._native_filter(filters.node(where))
        points = self._scroll(flt, with_vectors)
        return [p for p in points if rest is None or filters.matches(rest, self._row(p)[3])]

    # -- writes ---------------------------------------------------------------------------
    def _write(self, chunks: Sequence[Chunk]) -> None:
        matrix = check_vectors(chunks)
        dim = self._dimension()
        check_dimension(dim, matrix.shape[1], self.kb_id)
        if dim is None:
            self.client.create_collection(self.collection, vectors_config=models.VectorParams(
                size=matrix.shape[1], distance=models.Distance.COSINE))
            self._text_index()
        last = {c.id: i for i, c in enumerate(chunks)}
        for start in range(0, len(chunks), _PAGE):
            batch = [chunks[i] for i in sorted(last.values())[start : start + _PAGE]]
            self.client.upsert(self.collection, points=[
                models.PointStruct(id=self._point_id(c.id), vector=matrix[last[c.id]].tolist(), payload=self._payload(c))
                for c in batch
            ])

    def _text_index(self) -> None:
        """Qdrant's full-text index on the chunk text, with BM25 scoring (its default tokenizer:
        lowercased words, so local mode can score it too), in the knowledge base's language (languages.qdrant_text_index)."""
        self.client.create_payload_index(self.collection, self.text_key, field_schema=models.TextIndexParams(**{
            "type": models.TextIndexType.TEXT, "tokenizer": models.TokenizerType.WORD, "lowercase": True,
            "scoring": models.TextScoringParams(type=models.TextScoringType.BM25), **self.text_index}))

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self._write(chunks)

    def _ids_matching(self, where: filters.Where) -> list[str]:
        return [self._row(p)[0] for p in self._matching(where)]

    def _delete_ids(self, ids: list[str]) -> None:
        for start in range(0, len(ids), _PAGE):
            part: list[models.ExtendedPointId] = [self._point_id(i) for i in ids[start : start + _PAGE]]
            self.client.delete(self.collection, points_selector=models.PointIdsList(points=part))

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if (ids is None and node is None) or self._dimension() is None:
            return 0
        wanted = None if ids is None else set(ids)
        found = [i for i in (self._row(p)[0] for p in self._matching(where)) if wanted is None or i in wanted]
        self._delete_ids(found)
        return len(found)

    def drop(self) -> None:
        if self.client.collection_exists(self.collection):
            self.client.delete_collection(self.collection)

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        node = filters.node(where)
        dim = self._dimension()
        q = query_vector(vector, dim, k, self.kb_id)
        if q is None:
            return []
        flt, rest = self._native_filter(node)
        total = self.client.count(self.collection, count_filter=flt, exact=True).count

        def candidates(n: int) -> list[SearchHit]:
            points = self.client.query_points(self.collection, query=q.tolist(), query_filter=flt, limit=n, with_payload=True).points
            rows = [(self._row(p), float(p.score)) for p in points if p.payload is not None]
            return [SearchHit(r[0], r[1], r[2], score) for r, score in rows if rest is None or filters.matches(rest, r[3])]

        return overfetch(candidates, k, total)

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """Qdrant's native BM25 over the text index (a query scores on any of its words)."""
        node = filters.node(where)
        info = self._info()
        if k <= 0 or not text.strip() or info is None:
            return []
        if self.text_key not in (info.payload_schema or {}):
            self._text_index()  # a collection made before keyword search existed
        flt, rest = self._native_filter(node)
        limit = k if rest is None else 3 * k + 10
        while True:
            points = self.client.query_points(self.collection, query=models.TextQuery(text=text), using=self.text_key,
                                              query_filter=flt, limit=limit, with_payload=True).points
            rows = [(self._row(p), float(p.score)) for p in points if p.payload is not None]
            hits = [KeywordHit(r[0], r[1], r[2], score) for r, score in rows if rest is None or filters.matches(rest, r[3])]
            if len(hits) >= k or len(points) < limit:
                return sorted(hits, key=lambda h: (-h.bm25, h.id))[:k]
            limit *= 3

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        wanted = None if ids is None else set(ids)
        rows = sorted(((self._row(p), p.vector) for p in self._matching(where, with_vectors=True)), key=lambda rv: rv[0][0])
        rows = [rv for rv in rows if wanted is None or rv[0][0] in wanted][offset : None if limit is None else offset + limit]
        return [Chunk(r[0], r[1], r[2], list(vector)) for r, vector in rows]

    def count(self, where: filters.Where = None) -> int:
        node = filters.node(where)
        if self._dimension() is None:
            return 0
        flt, rest = self._native_filter(node)
        if rest is None:
            return self.client.count(self.collection, count_filter=flt, exact=True).count
        return len(self._matching(where))

    def health(self) -> StoreHealth:
        try:
            collections = len(self.client.get_collections().collections)
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                "collections": collections, "collection": self.collection}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"collection": self.collection}}
