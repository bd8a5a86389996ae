"""A local stand-in for Elasticsearch's REST API: the requests eddi-rag's store sends, answered in
Elasticsearch's response format, with the query DSL subset we emit (match_all, term, range, bool
filter/should/must_not, terms over arrays) and exact kNN with Elasticsearch's cosine score (1 + cos) / 2.

It runs the official client end to end over real HTTP; it is not Elasticsearch. Where a real
server is available, the same conformance suite runs against it (set ES_URL)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import numpy as np

from tests.support.wire import WireStandIn


def _get(doc: dict, path: str) -> Any:
    for part in path.split(".", 1) if path.startswith(("m_str.", "m_num.", "m_bool.", "m_list.")) else [path]:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _terms(text: str) -> set[str]:
    import re

    return set(re.findall(r"\w+", text.lower()))  # roughly ES's standard analyzer


def bm25(query_terms: set[str], doc_text: str, corpus: list[str], k1: float = 1.2, b: float = 0.75) -> float:
    """Okapi BM25, the similarity Elasticsearch uses by default."""
    import math
    import re

    tokens = re.findall(r"\w+", doc_text.lower())
    avg = sum(len(re.findall(r"\w+", t.lower())) for t in corpus) / max(len(corpus), 1)
    score = 0.0
    for term in query_terms:
        df = sum(term in _terms(t) for t in corpus)
        tf = tokens.count(term)
        if tf:
            idf = math.log(1 + (len(corpus) - df + 0.5) / (df + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(tokens) / max(avg, 1e-9)))
    return score


def matches(query: dict, doc: dict) -> bool:
    (kind, body), = query.items()
    if kind == "match_all":
        return True
    if kind == "term":
        (field, value), = body.items()
        actual = _get(doc, field)
        if isinstance(actual, bool) or isinstance(value, bool):
            return actual is value
        return actual == value
    if kind == "terms":  # as Elasticsearch: a field holding an array matches when one of its values is among them
        (field, values), = body.items()
        actual = _get(doc, field)
        return any(v in values for v in (actual if isinstance(actual, list) else [actual]))
    if kind == "range":
        (field, bounds), = body.items()
        v = _get(doc, field)
        if v is None:
            return False
        import operator

        ops = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}
        return all(ops[op](v, bound) for op, bound in bounds.items())
    if kind == "match":
        (field, text), = body.items()
        return bool(_terms(text) & set(_terms(str(doc.get(field, "")))))
    if kind == "bool":
        ok = all(matches(q, doc) for q in body.get("filter", []) + body.get("must", []))
        ok = ok and not any(matches(q, doc) for q in body.get("must_not", []))
        if body.get("should"):
            ok = ok and sum(matches(q, doc) for q in body["should"]) >= body.get("minimum_should_match", 1)
        return ok
    raise ValueError(f"stand-in does not know query {kind}")


class ElasticsearchStandIn(WireStandIn):
    def __init__(self):
        self.indices: dict[str, dict[str, Any]] = {}  # name -> {"mappings": ..., "docs": {id: source}}
        super().__init__(self._route, headers={"X-Elastic-Product": "Elasticsearch"})

    @staticmethod
    def _missing(index: str) -> tuple[int, Any]:
        return 404, {"error": {"type": "index_not_found_exception", "reason": f"no such index [{index}]", "index": index},
                     "status": 404}

    def _route(self, req: dict[str, Any]) -> tuple[int, Any]:
        path = urlparse(req["path"]).path.strip("/")
        parts, method, body = path.split("/") if path else [], req["method"], req["json"]
        if not parts:
            return 200, {"name": "stand-in", "cluster_name": "eddi-rag-tests", "version": {"number": "9.1.0", "build_flavor": "default"},
                         "tagline": "You Know, for Search"}
        if parts == ["_bulk"]:
            return 200, self._bulk(req["raw"])
        index = parts[0]
        if len(parts) == 1:
            if method == "PUT":
                if index in self.indices:
                    return 400, {"error": {"type": "resource_already_exists_exception", "reason": f"index [{index}] already exists"}, "status": 400}
                self.indices[index] = {"mappings": body["mappings"], "docs": {}}
                return 200, {"acknowledged": True, "shards_acknowledged": True, "index": index}
            if method == "DELETE":
                self.indices.pop(index, None)
                return 200, {"acknowledged": True}
            return (200, {}) if index in self.indices else self._missing(index)
        if index not in self.indices:
            return self._missing(index)
        docs = self.indices[index]["docs"]
        action = parts[1]
        if action == "_mapping" and method == "PUT":  # (dynamic templates replace the old list, as Elasticsearch does)
            self.indices[index]["mappings"].update(body)
            return 200, {"acknowledged": True}
        if action == "_mapping":
            return 200, {index: {"mappings": self.indices[index]["mappings"]}}
        if action == "_count":
            return 200, {"count": sum(matches(body.get("query", {"match_all": {}}) if body else {"match_all": {}}, d) for d in docs.values())}
        if action == "_delete_by_query":
            gone = [i for i, d in docs.items() if matches(body["query"], d)]
            for i in gone:
                del docs[i]
            return 200, {"deleted": len(gone), "total": len(gone), "failures": []}
        if action == "_search":
            return 200, self._search(index, body)
        return 400, {"error": {"type": "illegal_argument_exception", "reason": f"stand-in: no route {req['path']}"}, "status": 400}

    def _bulk(self, body: str) -> dict[str, Any]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        items, i = [], 0
        while i < len(lines):
            (op, meta), = lines[i].items()
            docs = self.indices.setdefault(meta["_index"], {"mappings": {}, "docs": {}})["docs"]
            if op == "delete":
                status = 200 if docs.pop(meta["_id"], None) is not None else 404
                i += 1
            else:
                docs[meta["_id"]] = lines[i + 1]
                status = 201
                i += 2
            items.append({op: {"_index": meta["_index"], "_id": meta["_id"], "status": status}})
        return {"took": 1, "errors": False, "items": items}

    def _source(self, doc: dict, includes: list[str] | None) -> dict:
        return {k: v for k, v in doc.items() if includes is None or k in includes}

    def _search(self, index: str, body: dict) -> dict[str, Any]:
        docs = self.indices[index]["docs"]
        includes = body.get("_source")
        if "knn" in body:
            knn = body["knn"]
            q = np.asarray(knn["query_vector"], dtype=np.float64)
            scored = []
            for i, d in docs.items():
                if "filter" in knn and not matches(knn["filter"], d):
                    continue
                v = np.asarray(d[knn["field"]], dtype=np.float64)
                cos = float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
                scored.append(((1 + cos) / 2, i))
            scored.sort(key=lambda s: -s[0])
            hits = [{"_index": index, "_id": i, "_score": s, "_source": self._source(docs[i], includes)} for s, i in scored[: knn["k"]]]
            return {"hits": {"total": {"value": len(hits), "relation": "eq"}, "max_score": None, "hits": hits[: body.get("size", 10)]}}
        query = body.get("query", {"match_all": {}})
        musts = query.get("bool", {}).get("must", [])
        if any("match" in m for m in musts):  # a scored full-text query: rank by BM25
            terms = _terms(next(m["match"] for m in musts if "match" in m)["text"])
            corpus = [d["text"] for d in docs.values()]
            scored = sorted(((bm25(terms, d["text"], corpus), i) for i, d in docs.items() if matches(query, d)), key=lambda s: -s[0])
            hits = [{"_index": index, "_id": i, "_score": sc, "_source": self._source(docs[i], includes)} for sc, i in scored]
            return {"hits": {"total": {"value": len(hits), "relation": "eq"}, "max_score": None, "hits": hits[: body.get("size", 10)]}}
        selected = sorted((d for d in docs.values() if matches(query, d)), key=lambda d: d["chunk_id"])
        if body.get("search_after"):
            selected = [d for d in selected if d["chunk_id"] > body["search_after"][0]]
        page = selected[body.get("from", 0): body.get("from", 0) + body.get("size", 10)]
        hits = [{"_index": index, "_id": d["chunk_id"], "_score": None, "_source": self._source(d, includes), "sort": [d["chunk_id"]]}
                for d in page]
        return {"hits": {"total": {"value": len(selected), "relation": "eq"}, "max_score": None, "hits": hits}}
