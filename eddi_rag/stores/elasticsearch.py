"""``elasticsearch``: an index per KB, ``dense_vector`` (cosine) + approximate kNN, BM25 on
``text``, through the official client.

Metadata is kept whole (``metadata``, not indexed) and again in typed fields, ``m_str.<f>``
(keyword), ``m_num.<f>`` (double) and ``m_bool.<f>`` (boolean), a list's strings in ``m_list.<f>`` (keyword), so a filter on "3" never
matches 3 (Elasticsearch would coerce) and a missing field is simply absent. Filters compile
to a ``bool`` query used both as the kNN pre-filter and for get/count/delete. Writes are
not transactional: ``replace`` validates first, indexes the new chunks, then deletes the old.

storeParameters: ``url`` (or ``host``/``port``/``useTls``), ``apiKey`` or ``username``/``password``,
``indexName`` (default ``eddi_kb_<sanitised id>``), ``numCandidates`` (default 100).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elasticsearch import Elasticsearch, NotFoundError, helpers

from eddi_rag.common.parameters import alias
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
from eddi_rag.stores.languages import elasticsearch_analyzer
from eddi_rag.stores.toolkit import (
    TYPED_FIELDS,
    OverwriteThenPrune,
    check_dimension,
    check_vectors,
    engine_name,
    parameters_schema,
    query_vector,
    string_lists,
    typed_fields,
)

_PAGE = 1000
_LISTS = {"lists": {"path_match": "m_list.*", "mapping": {"type": "keyword"}}}


def index_name(kb_id: str) -> str:
    return engine_name(kb_id, "a-z0-9_-", lower=True)



def _field(name: str, value: Any) -> str:
    return f"{TYPED_FIELDS[filters.scalar_kind(value)]}.{name}"


def _eq(name: str, value: Any) -> dict[str, Any]:
    return {"term": {_field(name, value): value}}


def to_elasticsearch(node: filters.Node | None) -> dict[str, Any]:
    """Compile the filter AST to an Elasticsearch query (a ``bool`` of term/terms/range)."""
    if node is None:
        return {"match_all": {}}
    if isinstance(node, filters.And):
        return {"bool": {"filter": [to_elasticsearch(n) for n in node.children]}}
    if isinstance(node, filters.Or):
        return {"bool": {"should": [to_elasticsearch(n) for n in node.children], "minimum_should_match": 1}}
    if node.op == "$eq":
        return _eq(node.field, node.value)
    if node.op == "$ne":
        return {"bool": {"must_not": [_eq(node.field, node.value)]}}
    if node.op in filters.CONTAINS:
        held = {"terms": {f"m_list.{node.field}": list(node.value)}}
        return held if node.op == "$containsAny" else {"bool": {"must_not": [held]}}
    if node.op in ("$in", "$nin"):
        if not node.value:  # unambiguous: an empty `should` means different things in different places
            return {"bool": {"must_not": [{"match_all": {}}]}} if node.op == "$in" else {"match_all": {}}
        any_of = {"bool": {"should": [_eq(node.field, v) for v in node.value], "minimum_should_match": 1}}
        return any_of if node.op == "$in" else {"bool": {"must_not": [any_of]}}
    bound = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}[node.op]
    return {"range": {_field(node.field, node.value): {bound: node.value}}}


def _document(chunk: Chunk, vector: list[float]) -> dict[str, Any]:
    return {"chunk_id": chunk.id, "text": chunk.text, "metadata": chunk.metadata, "embedding": vector,
            **typed_fields(chunk.metadata), "m_list": string_lists(chunk.metadata)}


class ElasticsearchStore(OverwriteThenPrune):
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({
            "url": {"type": "string", "description": "e.g. https://es.example:9200"},
            "serverUrl": alias("url"),
            "host": {"type": "string", "default": "localhost"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 9200},
            "useTls": {"type": "boolean", "default": False},
            "apiKey": {"type": "string", "description": "Use a reference: ${eddivault:KEY}."},
            "username": {"type": "string"},
            "userName": alias("username"),
            "password": {"type": "string"},
            "indexName": {"type": "string", "description": "Default eddi_kb_<sanitised id>."},
            "numCandidates": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
        })

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical index this store addresses (stores.ownership records who owns it)."""
        return str(params.get("indexName") or index_name(kb_id))

    def exists(self) -> bool:
        return bool(self.es.indices.exists(index=self.index))

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        self.index = str(params.get("indexName") or index_name(kb_id))
        self.num_candidates = int(params.get("numCandidates", 100))
        self.analyzer = elasticsearch_analyzer(params.get(langchain4j.LANGUAGE))  # (set when the index is made)
        clients = context.state.setdefault("elasticsearch-clients", {})
        key = tuple(sorted((k, str(v)) for k, v in params.items() if k not in ("indexName", "numCandidates", langchain4j.LANGUAGE)))
        if key not in clients:
            url = params.get("url") or f"{'https' if params.get('useTls') else 'http'}://{params.get('host', 'localhost')}:{params.get('port', 9200)}"
            auth: dict[str, Any] = {}
            if params.get("apiKey"):
                auth["api_key"] = params["apiKey"]
            elif params.get("username"):
                auth["basic_auth"] = (params["username"], params.get("password", ""))
            clients[key] = Elasticsearch(str(url), request_timeout=30, **auth)
        self.es: Elasticsearch = clients[key]

    def _dimension(self) -> int | None:
        try:
            mapping = self.es.indices.get_mapping(index=self.index)
        except NotFoundError:
            return None
        return int(mapping[self.index]["mappings"]["properties"]["embedding"]["dims"])

    def _lists_mapped(self) -> None:
        """An index made before lists were filterable learns to map ``m_list.*`` as keywords before the first list is
        written (a text mapping would split "group:public" into words and match "public")."""
        if getattr(self, "_lists_checked", False):
            return
        templates = self.es.indices.get_mapping(index=self.index)[self.index]["mappings"].get("dynamic_templates", [])
        if not any("lists" in t for t in templates):
            self.es.indices.put_mapping(index=self.index, dynamic_templates=[*templates, _LISTS])
        self._lists_checked = True

    def _create(self, dim: int) -> None:
        self.es.indices.create(index=self.index, mappings={
            "dynamic_templates": [
                {"strings": {"path_match": "m_str.*", "mapping": {"type": "keyword"}}},
                {"numbers": {"path_match": "m_num.*", "mapping": {"type": "double"}}},
                {"booleans": {"path_match": "m_bool.*", "mapping": {"type": "boolean"}}},
                _LISTS,
            ],
            "properties": {
                "chunk_id": {"type": "keyword"},
                "text": {"type": "text", **({"analyzer": self.analyzer} if self.analyzer else {})},
                "metadata": {"type": "object", "enabled": False},
                "embedding": {"type": "dense_vector", "dims": dim, "index": True, "similarity": "cosine"},
            },
        })

    # -- writes ---------------------------------------------------------------------------
    def _write(self, chunks: Sequence[Chunk]) -> None:
        matrix = check_vectors(chunks)
        dim = self._dimension()
        check_dimension(dim, matrix.shape[1], self.kb_id)
        if dim is None:
            self._create(matrix.shape[1])
        self._lists_mapped()
        last = {c.id: i for i, c in enumerate(chunks)}
        actions = [{"_op_type": "index", "_index": self.index, "_id": chunks[i].id, "_source": _document(chunks[i], matrix[i].tolist())}
                   for i in sorted(last.values())]
        helpers.bulk(self.es, actions, chunk_size=_PAGE, refresh=True)

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self._write(chunks)

    def _ids_matching(self, where: filters.Where) -> list[str]:
        if self._dimension() is None:
            return []
        return [s["chunk_id"] for s in self._scan(self._query(filters.node(where)), ["chunk_id"])]

    def _delete_ids(self, ids: list[str]) -> None:
        if ids:
            helpers.bulk(self.es, ({"_op_type": "delete", "_index": self.index, "_id": i} for i in ids),
                         chunk_size=_PAGE, refresh=True, raise_on_error=False)

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        node = filters.node(where)
        if (ids is None and node is None) or self._dimension() is None:
            return 0
        query = self._query(node, ids)
        return int(self.es.delete_by_query(index=self.index, query=query, refresh=True)["deleted"])

    def drop(self) -> None:
        self.es.indices.delete(index=self.index, ignore_unavailable=True)

    # -- reads ----------------------------------------------------------------------------
    @staticmethod
    def _query(node: filters.Node | None, ids: Sequence[str] | None = None) -> dict[str, Any]:
        query = to_elasticsearch(node)
        if ids is not None:
            query = {"bool": {"filter": [query, {"terms": {"chunk_id": list(ids)}}]}}
        return query

    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        node = filters.node(where)
        dim = self._dimension()
        q = query_vector(vector, dim, k, self.kb_id)
        if q is None:
            return []
        fetch = k + 16  # a few extra so ties at the cut are broken by id
        knn: dict[str, Any] = {"field": "embedding", "query_vector": q.tolist(), "k": fetch,
                               "num_candidates": max(self.num_candidates, fetch)}
        if node is not None:
            knn["filter"] = to_elasticsearch(node)
        response = self.es.search(index=self.index, knn=knn, size=fetch, source=["chunk_id", "text", "metadata"])  # type: ignore[arg-type]  # source filtering takes a list
        # Elasticsearch's cosine kNN score is (1 + cos) / 2: EDDI's relevance, so cos = 2s - 1.
        hits = [SearchHit(h["_source"]["chunk_id"], h["_source"]["text"], h["_source"]["metadata"], 2.0 * float(h["_score"]) - 1.0)
                for h in response["hits"]["hits"]]
        return sorted(hits, key=lambda h: (-h.similarity, h.id))[:k]

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """BM25 over ``text`` with Elasticsearch's ``match`` query, filtered by ``where``."""
        node = filters.node(where)
        if self._dimension() is None or k <= 0 or not text.strip():
            return []
        query = {"bool": {"must": [{"match": {"text": text}}], "filter": [to_elasticsearch(node)]}}
        hits = self.es.search(index=self.index, query=query, size=k, source=["chunk_id", "text", "metadata"])["hits"]["hits"]  # type: ignore[arg-type]
        return [KeywordHit(h["_source"]["chunk_id"], h["_source"]["text"], h["_source"]["metadata"], float(h["_score"])) for h in hits]

    def keyword_scores(self, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score ``keyword_search`` gives each of ``ids`` that matches (KeywordScores)."""
        if self._dimension() is None or not ids or not text.strip():
            return {}
        query = {"bool": {"must": [{"match": {"text": text}}], "filter": [{"terms": {"chunk_id": list(ids)}}]}}
        hits = self.es.search(index=self.index, query=query, size=len(ids), source=["chunk_id"])["hits"]["hits"]  # type: ignore[arg-type]
        return {h["_source"]["chunk_id"]: float(h["_score"]) for h in hits}

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        if self._dimension() is None or (ids is not None and not ids):
            return []
        wanted = None if limit is None else offset + limit
        sources = self._scan(self._query(filters.node(where), ids), ["chunk_id", "text", "metadata", "embedding"], wanted)
        return [Chunk(s["chunk_id"], s["text"], s["metadata"], s["embedding"]) for s in sources[offset:wanted]]

    def _scan(self, query: dict[str, Any], fields: list[str], wanted: int | None = None) -> list[dict[str, Any]]:
        """``_source`` (just ``fields``) of the matching chunks in id order, paged with search_after;
        stops once ``wanted`` are in hand."""
        out: list[dict[str, Any]] = []
        after = None
        while wanted is None or len(out) < wanted:
            extra: dict[str, Any] = {"search_after": after} if after else {}
            hits = self.es.search(index=self.index, query=query, sort=[{"chunk_id": "asc"}], size=_PAGE,
                                  source=fields, **extra)["hits"]["hits"]  # type: ignore[arg-type]
            out += [h["_source"] for h in hits]
            if len(hits) < _PAGE:
                break
            after = hits[-1]["sort"]
        return out

    def count(self, where: filters.Where = None) -> int:
        if self._dimension() is None:
            return 0
        return int(self.es.count(index=self.index, query=to_elasticsearch(filters.node(where)))["count"])

    def health(self) -> StoreHealth:
        try:
            info = self.es.info()
            return {"status": "ok", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                "index": self.index, "version": info["version"]["number"]}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"index": self.index}}
