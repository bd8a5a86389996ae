"""``typesense``: a Typesense collection per KB (vector field, cosine), through the typesense client.

Metadata is kept whole (``metadata_json``, not indexed) and again in typed fields
``m_str__<f>`` / ``m_num__<f>`` / ``m_bool__<f>`` (wildcard schema fields), a list's strings in
``m_list__<f>`` (``string[]``), so filters keep our meaning. ``filter_by`` covers equality, lists, numeric ranges and and/or; what Typesense 0.24
cannot say (``!=`` on numbers, ranges over strings, odd field names or backticks in values) runs on
the candidates with the reference evaluator. A filter on a field no document has yet is decided
here (Typesense would answer 404). Writes are not transactional: ``replace`` validates first,
upserts the new chunks, then deletes the old ones.

storeParameters: ``host`` (localhost), ``port`` (8108), ``protocol`` (http), ``apiKey``,
``collectionName`` (``eddi_kb_<sanitised id>``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import typesense
from typesense.exceptions import ObjectNotFound

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
from eddi_rag.stores.languages import typesense_locale
from eddi_rag.stores.toolkit import OverwriteThenPrune, check_dimension, check_vectors, engine_name, overfetch, parameters_schema, query_vector, string_lists

_TYPED = {"string": "m_str__", "number": "m_num__", "bool": "m_bool__"}
_SAFE_FIELD = re.compile(r"^[A-Za-z0-9_-]+$")
_PAGE = 250  # Typesense's largest page
_LISTS = {"name": "m_list__.*", "type": "string[]", "optional": True}
TRUE, FALSE = "TRUE", "FALSE"  # filter constants, simplified away before reaching Typesense


def collection_name(kb_id: str) -> str:
    return engine_name(kb_id)



_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`{value}`"
    text = repr(value)
    if "e" in text or "inf" in text or "nan" in text:
        raise _Unsupported  # no exponent notation in filter_by
    return text


class _Unsupported(Exception):
    pass


def _combine(parts: list[str], joiner: str) -> str:
    absorbing, neutral = (FALSE, TRUE) if joiner == "&&" else (TRUE, FALSE)
    if absorbing in parts:
        return absorbing
    parts = [p for p in parts if p != neutral]
    if not parts:
        return neutral
    return parts[0] if len(parts) == 1 else "(" + f" {joiner} ".join(parts) + ")"


def _leaf(field: str, op: str, values: list[Any], fields: set[str], approx: list[bool]) -> str:
    """One comparison of one field with values of one type. Typesense keeps numbers as 32-bit
    floats: a numeric comparison runs on float32(value), which selects a superset (rounding is
    monotonic), and ``approx`` records that the exact filter must run again on the results."""
    path = _TYPED[filters.scalar_kind(values[0])] + field
    negated = op in ("$ne", "$nin")
    if path not in fields:
        return TRUE if negated else FALSE
    if isinstance(values[0], str) and any("`" in v for v in values):
        raise _Unsupported
    if isinstance(values[0], str):
        approx.append(True)  # Typesense compares strings without case ("RED" = "red"): narrowed here after,
        if negated:  # and a negation would drop too much: it runs here alone
            return TRUE
    if isinstance(values[0], (int, float)) and not isinstance(values[0], bool) and negated:
        raise _Unsupported  # Typesense 0.24 has no != for numbers
    if filters.value_kind(values[0]) == "number":
        approx.append(True)
        values = [float(np.float32(v)) for v in values]
        op = {"$gt": "$gte", "$lt": "$lte"}.get(op, op)  # x > v only implies float32(x) >= float32(v)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(values[0], str):
            raise _Unsupported
        return f"{path}:{_RANGE[op]}{_literal(values[0])}"
    listed = _literal(values[0]) if len(values) == 1 else "[" + ",".join(_literal(v) for v in values) + "]"
    return f"{path}:{'!=' if negated else '='}{listed}"


def to_typesense(node: filters.Node | None, fields: set[str]) -> tuple[str | None, bool]:
    """(a ``filter_by`` string or TRUE/FALSE, or None when Typesense cannot express the filter;
    whether it is only a superset that the exact filter must narrow)."""
    approx: list[bool] = []
    try:
        return (TRUE if node is None else _compile(node, fields, approx)), bool(approx)
    except _Unsupported:
        return None, True


def _compile(node: filters.Node, fields: set[str], approx: list[bool]) -> str:
    if isinstance(node, (filters.And, filters.Or)):
        return _combine([_compile(n, fields, approx) for n in node.children], "&&" if isinstance(node, filters.And) else "||")
    if not _SAFE_FIELD.match(node.field):
        raise _Unsupported
    if node.op in filters.CONTAINS:
        path, negated = "m_list__" + node.field, node.op == "$containsNone"
        if not node.value or path not in fields:
            return TRUE if negated else FALSE
        if any("`" in v for v in node.value):
            raise _Unsupported
        approx.append(True)  # Typesense matches strings without case ("group:Finance" too): narrowed here after,
        if negated:  # and a negation would drop too much: it runs here alone
            return TRUE
        return f"{path}:=[" + ",".join(_literal(v) for v in node.value) + "]"
    if node.op in ("$in", "$nin"):
        if not node.value:
            return FALSE if node.op == "$in" else TRUE
        by_kind: dict[str, list[Any]] = {}
        for v in node.value:
            by_kind.setdefault(filters.scalar_kind(v), []).append(v)
        parts: list[str] = []
        for kind, vs in by_kind.items():
            if node.op == "$nin" and kind == "bool":  # Typesense 0.24's `!=[false,true]` matches documents it should not
                parts += [_leaf(node.field, "$ne", [v], fields, approx) for v in vs]
            else:
                parts.append(_leaf(node.field, node.op, vs, fields, approx))
        return _combine(parts, "||" if node.op == "$in" else "&&")
    return _leaf(node.field, node.op, [node.value], fields, approx)


def _document(chunk: Chunk, vector: list[float]) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": chunk.id, "chunk_id": chunk.id, "text": chunk.text,
                           "metadata_json": json.dumps(chunk.metadata), "embedding": vector}
    for k, v in chunk.metadata.items():
        if filters.value_kind(v) is not None and _SAFE_FIELD.match(k):
            doc[_TYPED[filters.scalar_kind(v)] + k] = float(v) if filters.value_kind(v) == "number" else v
    doc.update({"m_list__" + k: strings for k, strings in string_lists(chunk.metadata).items() if strings and _SAFE_FIELD.match(k)})
    return doc


class TypesenseStore(OverwriteThenPrune):
    capabilities = frozenset({COLLECTIONS, SEARCH, METADATA_FILTERING, LIST_FILTERING, PERSISTENT, KEYWORD_SEARCH})

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return parameters_schema({
            "host": {"type": "string", "default": "localhost"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 8108},
            "protocol": {"enum": ["http", "https"], "default": "http"},
            "apiKey": {"type": "string", "description": "Use a reference: ${eddivault:KEY}."},
            "collectionName": {"type": "string", "description": "Default eddi_kb_<sanitised id>."},
        }, ("apiKey",))

    @staticmethod
    def place(kb_id: str, params: dict[str, Any], context: StoreContext) -> str:
        """The physical collection this store addresses (stores.ownership records who owns it)."""
        return str(params.get("collectionName") or collection_name(kb_id))

    def exists(self) -> bool:
        return self._schema() is not None

    def __init__(self, kb_id: str, params: dict[str, Any], context: StoreContext):
        self.kb_id = kb_id
        self.name = str(params.get("collectionName") or collection_name(kb_id))
        clients = context.state.setdefault("typesense-clients", {})
        key = (params.get("host", "localhost"), int(params.get("port", 8108)), params.get("protocol", "http"), params["apiKey"])
        if key not in clients:
            clients[key] = typesense.Client({"nodes": [{"host": key[0], "port": key[1], "protocol": key[2]}],
                                             "api_key": key[3], "connection_timeout_seconds": 30})
        self.client = clients[key]
        self.locale = typesense_locale(params.get(langchain4j.LANGUAGE))  # (set when the collection is made)

    def _schema(self) -> dict[str, Any] | None:
        try:
            return self.client.collections[self.name].retrieve()
        except ObjectNotFound:
            return None

    @staticmethod
    def _dimension_of(schema: dict[str, Any] | None) -> int | None:
        if schema is None:
            return None
        return next(int(f["num_dim"]) for f in schema["fields"] if f["name"] == "embedding")

    def _dimension(self) -> int | None:
        return self._dimension_of(self._schema())

    def _plan(self, where: filters.Where) -> tuple[str, filters.Node | None, dict | None]:
        """(filter_by or TRUE/FALSE, what still runs in Python, the collection schema)."""
        node, schema = filters.node(where), self._schema()
        fields = {f["name"] for f in schema["fields"]} if schema else set()
        native, approx = to_typesense(node, fields)
        return (TRUE if native is None else native), (node if approx else None), schema

    @staticmethod
    def _params(native: str, **extra: Any) -> dict[str, Any]:
        return {"q": "*", **({"filter_by": native} if native != TRUE else {}), **extra}

    def _search(self, params: dict[str, Any]) -> dict[str, Any]:
        """One search, sent by multi_search: the query goes in the body, so a long filter or a
        384-d vector is not cut by the URL length limit (4,000 characters)."""
        found = self.client.multi_search.perform({"searches": [{"collection": self.name, **params}]}, {})["results"][0]
        if "error" in found:
            raise RuntimeError(f"typesense search failed: {found['error']}")
        return found

    def _documents(self, where: filters.Where, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        native, rest, schema = self._plan(where)
        if schema is None or native == FALSE or (ids is not None and not ids):
            return []
        if ids is not None:
            listed = "id:=[" + ",".join(f"`{i}`" for i in ids) + "]"
            native = listed if native == TRUE else f"({native}) && {listed}"
        out, page = [], 1
        while True:
            found = self._search(
                self._params(native, sort_by="chunk_id:asc", per_page=_PAGE, page=page, exclude_fields="embedding"))
            out += [h["document"] for h in found["hits"]]
            if len(found["hits"]) < _PAGE:
                break
            page += 1
        return [d for d in out if rest is None or filters.matches(rest, json.loads(d["metadata_json"]))]

    # -- writes ---------------------------------------------------------------------------
    def _write(self, chunks: Sequence[Chunk]) -> None:
        matrix = check_vectors(chunks)
        dim = self._dimension()
        check_dimension(dim, matrix.shape[1], self.kb_id)
        if dim is None:
            self.client.collections.create({"name": self.name, "fields": [
                {"name": "chunk_id", "type": "string", "sort": True},
                {"name": "text", "type": "string", **({"locale": self.locale} if self.locale else {})},
                {"name": "metadata_json", "type": "string", "index": False, "optional": True},
                {"name": "embedding", "type": "float[]", "num_dim": int(matrix.shape[1])},
                {"name": "m_str__.*", "type": "string", "optional": True},
                {"name": "m_num__.*", "type": "float", "optional": True},
                {"name": "m_bool__.*", "type": "bool", "optional": True},
                _LISTS,
            ]})
        elif not getattr(self, "_lists_checked", False):  # a collection made before lists were filterable learns them
            if not any(f["name"] == _LISTS["name"] for f in (self._schema() or {}).get("fields", [])):
                self.client.collections[self.name].update({"fields": [_LISTS]})
            self._lists_checked = True
        last = {c.id: i for i, c in enumerate(chunks)}
        docs = [_document(chunks[i], matrix[i].tolist()) for i in sorted(last.values())]
        for start in range(0, len(docs), 1000):
            results = self.client.collections[self.name].documents.import_(docs[start : start + 1000], {"action": "upsert"})
            failed = [r for r in results if not r.get("success")]
            if failed:
                raise RuntimeError(f"typesense refused {len(failed)} chunk(s): {failed[0].get('error')}")

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if chunks:
            self._write(chunks)

    def _ids_matching(self, where: filters.Where) -> list[str]:
        return [d["id"] for d in self._documents(where)]

    def _delete_ids(self, ids: list[str]) -> None:
        """Deleted by id lists short enough for a URL (a delete's filter travels in the query string)."""
        part: list[str] = []
        for i, id in enumerate(ids):
            part.append(f"`{id}`")
            if i == len(ids) - 1 or sum(map(len, part)) + len(part) + len(ids[i + 1]) > 3_000:
                self.client.collections[self.name].documents.delete({"filter_by": "id:=[" + ",".join(part) + "]"})
                part = []

    def delete(self, ids: Sequence[str] | None = None, where: filters.Where = None) -> int:
        if ids is None and filters.node(where) is None:
            return 0
        found = [d["id"] for d in self._documents(where, ids)]
        self._delete_ids(found)
        return len(found)

    def drop(self) -> None:
        try:
            self.client.collections[self.name].delete()
        except ObjectNotFound:
            pass

    # -- reads ----------------------------------------------------------------------------
    def search(self, vector: Sequence[float], k: int, where: filters.Where = None) -> list[SearchHit]:
        native, rest, schema = self._plan(where)
        dim = self._dimension_of(schema)
        q = query_vector(vector, dim, k, self.kb_id)
        if q is None or native == FALSE:
            return []
        total = self._search(self._params(native, per_page=0))["found"]
        vec = "[" + ",".join(repr(float(x)) for x in q) + "]"

        def candidates(n: int) -> list[SearchHit]:
            found = self._search(self._params(native, vector_query=f"embedding:({vec}, k:{n})", per_page=n,
                                              exclude_fields="embedding"))
            hits = [SearchHit(h["document"]["chunk_id"], h["document"]["text"], json.loads(h["document"]["metadata_json"]),
                              1.0 - float(h["vector_distance"])) for h in found["hits"]]
            return [h for h in hits if rest is None or filters.matches(rest, h.metadata)]

        return overfetch(candidates, k, min(total, _PAGE))

    def keyword_search(self, text: str, k: int, where: filters.Where = None) -> list[KeywordHit]:
        """Typesense's own full-text search on the chunk text, ranked by its ``text_match``; words
        are dropped from the query until k chunks match (so any word can find a chunk)."""
        native, rest, schema = self._plan(where)
        # words, not Typesense's syntax: a leading "-" excludes a word there, and "*" alone matches every document
        text = " ".join(word.lstrip("-") for word in text.split() if word.strip("-*"))
        if schema is None or native == FALSE or k <= 0 or not text.strip():
            return []
        n = min(_PAGE, k if rest is None else 3 * k + 10)
        found = self._search(self._params(
            native, q=text, query_by="text", per_page=n, prefix="false", drop_tokens_threshold=n,
            exclude_fields="embedding"))
        hits = [KeywordHit(h["document"]["chunk_id"], h["document"]["text"], json.loads(h["document"]["metadata_json"]),
                           float(h.get("text_match", 0))) for h in found["hits"]]
        hits = [h for h in hits if rest is None or filters.matches(rest, h.metadata)]
        return sorted(hits, key=lambda h: (-h.bm25, h.id))[:k]

    def get(self, where: filters.Where = None, limit: int | None = None, offset: int = 0,
            ids: Sequence[str] | None = None) -> list[Chunk]:
        docs = self._documents(where, ids)[offset : None if limit is None else offset + limit]
        if not docs:
            return []
        vectors = {}
        for start in range(0, len(docs), _PAGE):  # fetch the vectors of just this page
            part = docs[start : start + _PAGE]
            found = self._search(self._params(
                "id:=[" + ",".join(f"`{d['id']}`" for d in part) + "]", per_page=_PAGE, include_fields="id,embedding"))
            vectors.update({h["document"]["id"]: h["document"]["embedding"] for h in found["hits"]})
        return [Chunk(d["chunk_id"], d["text"], json.loads(d["metadata_json"]), vectors.get(d["id"])) for d in docs]

    def count(self, where: filters.Where = None) -> int:
        native, rest, schema = self._plan(where)
        if schema is None or native == FALSE:
            return 0
        if rest is not None:
            return len(self._documents(where))
        return int(self._search(self._params(native, per_page=0))["found"])

    def health(self) -> StoreHealth:
        try:
            ok = self.client.operations.is_healthy()
            return {"status": "ok" if ok else "error", "details": {"documents": self.count(), "dimension": self._dimension(),
                                                                   "collection": self.name}}
        except Exception as e:  # noqa: BLE001 - health reports, never raises
            return {"status": "error", "error": str(e), "details": {"collection": self.name}}
