"""``mongodb-atlas``: MongoDB Atlas Vector Search through pymongo (pooled clients).

A collection per KB with an Atlas ``vectorSearch`` index on ``embedding`` (cosine). Metadata is
kept whole and again in typed fields (``m_str``/``m_num``/``m_bool``), so MQL filters keep our
meaning (no "3" == 3, missing fields only match ``$ne``/``$nin``, as MongoDB already does).
``$vectorSearch`` can only pre-filter on fields declared in its index, so filters run as a
``$match`` after it, over-fetching (3×, then more) until k chunks pass. Writes of one
``replace`` happen in a transaction (Atlas clusters are replica sets). Keyword search is Atlas
Search (Lucene BM25, the analyzer of the knowledge base's language, English's by default) over a ``search`` index on ``text``, filtered by a ``$match``.

storeParameters: ``connectionString``, ``databaseName`` (``eddi``), ``collectionName``
(``eddi_kb_<sanitised id>``), ``indexName`` (``vector_index``), ``numCandidates`` (100).

In EDDI's layout (``storeNamespace``, stores.langchain4j) the collection is langchain4j's ``MongoDbEmbeddingStore``'s,
read and written in place: a document per chunk (``_id`` a UUID, ``embedding``, ``text``, ``metadata`` of strings and
numbers, our chunk id kept as ``chunkId``), no typed copies, no text index (vector search, EDDI's). As EDDI reads it,
retrieval in the ``"id"`` layout is filtered on ``metadata.kbId`` inside ``$vectorSearch`` only when ``collectionName``
is named (the index must declare ``metadata.kbId`` a filter field, as EDDI's docs ask; one made here does); other
filters run on the documents read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pymongo import MongoClient, ReplaceOne
from pymongo.operations import SearchIndexModel

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
from eddi_rag.stores.languages import atlas_analyzer
from eddi_rag.stores.toolkit import (
    TYPED_FIELDS,
    check_dimension,
    check_vectors,
    engine_name,
    overfetch,
    parameters_schema,
    query_vector,
    string_lists,
    typed_fields,
)


def collection_name(kb_id: str) -> str:
    return engine_name(kb_id)



def _path(field: str, value: Any) -> str:
    return f"{TYPED_FIELDS[filters.scalar_kind(value)]}.{field}"


def to_mql(node: filters.Node | None) -> dict[str, Any]:
    """Compile the filter AST to a MongoDB query document over the typed fields."""
    if node is None:
        return {}
    if isinstance(node, (filters.And, filters.Or)):
        return {"$and" if isinstance(node, filters.And) else "$or": [to_mql(n) for n in node.children]}
    if node.op in filters.CONTAINS:  # MongoDB's $in / $nin on an array: any element / no element among them
        return {f"m_list.{node.field}": {"$in" if node.op == "$containsAny" else "$nin": list(node.value)}}
    if node.op in ("$in", "$nin"):
        if not node.value:
            return {"_id": {"$in": []}} if node.op == "$in" else {}
        by_path: dict[str, list[Any]] = {}
        for v in node.value:
            by_path.setdefault(_path(node.field, v), []).append(v)
        parts = [{p: {node.op: vs}} for p, vs in by_path.items()]
        return parts[0] if len(parts) == 1 else {"$or" if node.op == "$in" else "$and": parts}
    return {_path(node.field, node.value): {node.op: node.value}}


PREFILTERED = ("acl",)  # list fields the vector index declares as filters: who may read is decided before the limit


def prefilter(node: filters.Node | None) -> tuple[dict[str, Any], filters.Node | None]:
    """(the part of ``node`` $vectorSearch filters before its limit: the conditions on PREFILTERED lists an And
    requires, the rest); MongoDB's $in / $nin keep their meaning there."""
    parts = list(node.children) if isinstance(node, filters.And) else [] if node is None else [node]
    early = [p for p in parts if isinstance(p, filters.Compare) and p.op in filters.CONTAINS and p.field in PREFILTERED]
    rest = [p for p in parts if p not in early]
    first = to_mql(filters.And(tuple(early))) if early else {}
    return first, (None if not rest else rest[0] if len(rest) == 1 else filters.And(tuple(rest)))


def search_pipeline(index: str, vector: list[float], limit: int, num_candidates: int, where: dict[str, Any],
                    first: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The aggregation Atlas documents for vector search (``first``: its pre-filter), then our filter."""
    pipeline: list[dict[str, Any]] = [
        {"$vectorSearch": {"index": index, "path": "embedding", "queryVector": vector,
                           "numCandidates": max(num_candidates, limit), "limit": limit, **({"filter": first} if first else {})}},
        {"$project": {"text": 1, "metadata": 1, "m_str": 1, "m_num": 1, "m_bool": 1, "m_list": 1, "score": {"$meta": "vectorSearchScore"}}},
    ]
    if where:
        pipeline.append({"$match": where})
    return pipeline


def search_indexes(vector_index: str, text_index: str, dim: int, analyzer: str = "lucene.english") -> list[SearchIndexModel]:
    """The vectorSearch index, and the search index whose ``analyzer`` reads the text (languages.atlas_analyzer)."""
    return [
        SearchIndexModel(definition={"fields": [{"type": "vector", "path": "embedding", "numDimensions": dim,
                                                 "similarity": "cosine"},
                                                *({"type": "filter", "path": f"m_list.{f}"} for f in PREFILTERED)]},
                         name=vector_index, type="vectorSearch"),
        SearchIndexModel(definition={"mappings": {"dynamic": False, "fields": {
            "text": {"type": "string", "analyzer": analyzer}}}}, name=text_index, type="search"),
    ]


def keyword_pipeline(index: str, text: str, limit: int, where: dict[str, Any]) -> list[dict[str, Any]]:
    """Atlas Search ``$search`` (a ``text`` operator: any of the words, BM25-ranked), then our filter."""
    return [
        {"$search": {"index": index, "text": {"query": text, "path": "text"}}},
        *([{"$match": where}] if where else []),
        {"$limit": limit},
        {"$project": {"text": 1, "metadata": 1, "score": {"$meta": "searchScore"}}},
    ]


def hits_from(documents: list[dict[str, Any]]) -> list[SearchHit]:
    """Atlas's cosine ``vectorSearchScore`` is (1 + cos) / 2, EDDI's relevance: cos = 2s - 1."""
    return [SearchHit(str(d["_id"]), d["text"], d["metadata"], 2.0 * float(d["score"]) - 1.0) for d in documents]


def _document(chunk: Chunk, vector: list[float]) -> dict[str, Any]:
    return {"_id": chunk.id, "text": chunk.text, "metadata": chunk.metadata, "embedding": vector,
            **typed_fields(chunk.metadata), "m_list": string_lists(chunk.metadata)}


def eddi_document(chunk: Chunk, vector: list[float]) -> dict[str, Any]:
    """A chunk as langchain4j's MongoDbEmbeddingStore writes a segment (EDDI reads it back)."""
    return {"_id": langchain4j.row_id(chunk.id), "embedding": vector, "text": chunk.text,
            "metadata": langchain4j.encode(chunk.id, chunk.metadata)}


def eddi_indexes(vector_index: str, dim: int) -> list[SearchIndexModel]:
    """The vectorSearch index of a langchain4j collection made here, ``metadata.kbId`` a filter field (EDDI's filter)."""
    return [SearchIndexModel(definition={"fields": [{"type": "vector", "path": "embedding", "numDimensions": dim, "similarity": "cosine"},
                                                    {"type": "filter", "path": "metadata.kbId"}]},
                             name=vector_index, type="vectorSearch")]


class MongoAtlasStore:
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({
            "connectionString": {"type": "string", "description": "mongodb+srv://...; use a reference."},
            "databaseName": {"type": "string", "default": "eddi"},
            "collectionName": {"type": "string", "description": "Default eddi_kb_<sanitised id>."},
            "indexName": {"type": "string", "default": "vector_index"},
            "textIndexName": {"type": "string", "default": "text_index"},
            "numCandidates": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
        }, ("connectionString",))

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical database.collection this store addresses (stores.ownership records who owns it)."""
        return f"{params.get('databaseName', 'eddi')}.{params.get('collectionName') or collection_name(kb_id)}"

    def exists(self) -> bool:
        return self.collection.name in self.db.list_collection_names()

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        clients = context.state.setdefault("mongodb-clients", {})
        uri = str(params["connectionString"])
        if uri not in clients:  # pymongo pools connections per client: one client per cluster
            clients[uri] = MongoClient(uri, appname="eddi-rag")
        self.client = clients[uri]
        self.db = self.client[str(params.get("databaseName", "eddi"))]
        self.collection = self.db[str(params.get("collectionName") or collection_name(kb_id))]
        self.index = str(params.get("indexName", "vector_index"))
        self.text_index = str(params.get("textIndexName", "text_index"))
        self.num_candidates = int(params.get("numCandidates", 100))
        self.analyzer = atlas_analyzer(params.get(langchain4j.LANGUAGE))  # (set when the index is made)
        self._meta = self.db["eddi_kb_meta"]
        self.l4j = params.get("layout") == langchain4j.LAYOUT  # EDDI's (langchain4j's) collection, read in place
        if self.l4j:  # scalar metadata only, no text index
            self.capabilities = type(self).capabilities - {LIST_FILTERING, KEYWORD_SEARCH}
        self.scope = {"metadata.kbId": params["kbTag"]} if params.get("kbTag") else {}  # EDDI's "id" layout: its own chunks

    def _dimension(self) -> int | None:
        if self.l4j:  # (nothing of ours is written beside EDDI's collection)
            doc = self.collection.find_one({"embedding": {"$exists": True}}, {"embedding": 1})
            return None if doc is None else len(doc["embedding"])
        doc = self._meta.find_one({"_id": self.collection.name})
        return None if doc is None else int(doc["dimension"])

    def _ensure_index(self, dim: int, wait_seconds: float = 120) -> None:
        """Create the vectorSearch and text search indexes and wait until Atlas says they are queryable."""
        if self.collection.name not in self.db.list_collection_names():
            self.db.create_collection(self.collection.name)  # a search index needs an existing collection
        if not self.l4j:
            self.collection.create_search_indexes(search_indexes(self.index, self.text_index, dim, self.analyzer))
        elif not list(self.collection.list_search_indexes(self.index)):  # (EDDI's operator may have made it)
            self.collection.create_search_indexes(eddi_indexes(self.index, dim))
        deadline = time.monotonic() + wait_seconds
        for name in (self.index,) if self.l4j else (self.index, self.text_index):
            while not any(i.get("queryable") for i in self.collection.list_search_indexes(name)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Atlas search index {name!r} on {self.collection.name} not queryable after {wait_seconds:.0f} s")
                time.sleep(1)
        if not self.l4j:
            self._meta.replace_one({"_id": self.collection.name}, {"_id": self.collection.name, "dimension": dim}, upsert=True)

    # -- writes ---------------------------------------------------------------------------
    def _prepare(self, chunks: Sequence[Chunk]) -> list[ReplaceOne]:
        matrix = check_vectors(chunks)
        dim = self._dimension()
        check_dimension(dim, matrix.shape[1], self.kb_id)
        if dim is None:
            self._ensure_index(matrix.shape[1])
        docs = [(eddi_document if self.l4j else _document)(c, matrix[i].tolist()) for i, c in enumerate(chunks)]
        return [ReplaceOne({"_id": d["_id"]}, d, upsert=True) for d in docs]

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self.collection.bulk_write(self._prepare(chunks), ordered=True)

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        query = self._eddi_query(where) if self.l4j else to_mql(filters.node(where))
        ops = self._prepare(chunks) if chunks else []
        with self.client.start_session() as session, session.start_transaction():
            self.collection.delete_many(query, session=session)
            if ops:
                self.collection.bulk_write(ops, ordered=True, session=session)

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if ids is None and node is None:
            return 0
        if self.l4j:
            return self.collection.delete_many(self._eddi_query(where, ids)).deleted_count
        query = to_mql(node)
        if ids is not None:
            query = {"$and": [query, {"_id": {"$in": list(ids)}}]}
        return self.collection.delete_many(query).deleted_count

    def drop(self) -> None:
        self.collection.drop()
        self._meta.delete_one({"_id": self.collection.name})

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        first, rest = prefilter(filters.node(where))
        mql = to_mql(rest)
        dim = self._dimension()
        q = query_vector(vector, dim, k, self.kb_id)
        if q is None:
            return []
        total = self.collection.estimated_document_count()
        if self.l4j:
            node = self._eddi_node(where)

            def eddi_candidates(n: int) -> list[SearchHit]:
                found = self.collection.aggregate(search_pipeline(self.index, q.tolist(), n, self.num_candidates, {}, self.scope))
                return [SearchHit(chunk_id, d["text"], metadata, 2.0 * float(d["score"]) - 1.0)
                        for chunk_id, d, metadata in self._eddi_rows(found, node)]

            return overfetch(eddi_candidates, k, total, first=3 * (k + 16) if node else k + 16)

        def candidates(n: int) -> list[SearchHit]:
            return hits_from(list(self.collection.aggregate(search_pipeline(self.index, q.tolist(), n, self.num_candidates, mql, first))))

        return overfetch(candidates, k, total, first=3 * (k + 16) if mql else k + 16)  # 3×: the filter runs after the search

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        mql = {} if self.l4j else to_mql(filters.node(where))
        if self.l4j or k <= 0 or not text.strip() or self._dimension() is None:  # (EDDI's collection: no text index)
            return []
        found = self.collection.aggregate(keyword_pipeline(self.text_index, text, k, mql))
        return [KeywordHit(str(d["_id"]), d["text"], d["metadata"], float(d["score"])) for d in found]

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        if self.l4j:
            rows = self._eddi_find(where, ids, ("text", "metadata", "embedding"))[offset:]
            return [Chunk(chunk_id, d["text"], metadata, d["embedding"]) for chunk_id, d, metadata in rows[:limit]]
        query = to_mql(filters.node(where))
        if ids is not None:
            query = {"$and": [query, {"_id": {"$in": list(ids)}}]}
        cursor = self.collection.find(query, {"text": 1, "metadata": 1, "embedding": 1}).sort("_id", 1).skip(offset)
        if limit is not None:
            cursor = cursor.limit(limit)
        return [Chunk(str(d["_id"]), d["text"], d["metadata"], d["embedding"]) for d in cursor]

    def count(self, where: filters.Where = None) -> int:
        if self.l4j:
            return len(self._eddi_find(where))
        return self.collection.count_documents(to_mql(filters.node(where)))

    # -- EDDI's layout: langchain4j's documents hold scalar metadata; filters run on what is read ------------------------
    def _eddi_node(self, where: filters.Where) -> filters.Node | None:
        node = filters.node(where)
        filters.refuse_lists(node, "EDDI's langchain4j documents hold scalar metadata only, no lists")
        return None if node is None else langchain4j.encode_node(node)

    @staticmethod
    def _eddi_rows(documents: Any, node: filters.Node | None) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(chunk id, document, our metadata) of each document ``node`` (as ``encode_node`` made it) matches."""
        out = []
        for d in documents:
            stored = d.get("metadata") or {}
            chunk_id, metadata = langchain4j.decode(str(d["_id"]), stored)
            if node is None or filters.matches(node, {**stored, "document_id": metadata.get("document_id")}):
                out.append((chunk_id, d, metadata))
        return out

    def _eddi_find(self, where: filters.Where, ids: Sequence[str] | None = None,
                   fields: Sequence[str] = ("metadata",)) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        query: dict[str, Any] = dict(self.scope)
        if ids is not None:
            query["_id"] = {"$in": [langchain4j.row_id(i) for i in ids]}
        found = self.collection.find(query, {f: 1 for f in ("metadata", *fields)}).sort("_id", 1)
        return self._eddi_rows(found, self._eddi_node(where))

    def _eddi_query(self, where: filters.Where, ids: Sequence[str] | None = None) -> dict[str, Any]:
        """The documents ``where`` (and ``ids``) select, by their ids (for a delete)."""
        return {"_id": {"$in": [d["_id"] for _, d, _ in self._eddi_find(where, ids)]}}

    def health(self) -> StoreHealth:
        try:
            self.client.admin.command("ping")
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                "collections": len(self.db.list_collection_names()),
                                                "collection": self.collection.name}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"collection": self.collection.name}}
