"""The collections API, every scenario of the rag-providers spec with its exact messages."""

from __future__ import annotations

import json

import pytest


def doc(text: str, emb=(0.1, 0.2, 0.3), **metadata):
    return {"text": text, "metadata": metadata, "embedding": list(emb)}


def where(client, name: str, filter_: dict | str | None = None, **params):
    query = dict(params)
    if filter_ is not None:
        query["where"] = filter_ if isinstance(filter_, str) else json.dumps(filter_)
    return client.get(f"/collections/{name}/documents", params=query)


def test_create_get_update_list_with_metadata(client):
    r = client.post("/collections", json={"name": "manual", "embedding_provider": "openai",
                                          "embedding_model": "text-embedding-3-small", "metadata": {"team": "docs"}})
    assert r.status_code == 201
    assert r.json()["metadata"] == {"team": "docs", "embedding_provider": "openai", "embedding_model": "text-embedding-3-small"}
    client.post("/collections", json={"name": "any-provider", "embedding_provider": "not-a-real-provider"})  # no validation
    got = client.get("/collections/manual").json()
    assert got["name"] == "manual" and got["metadata"]["team"] == "docs" and got["count"] == 0
    r = client.put("/collections/manual/metadata", json={"metadata": {"team": "support"}})
    assert r.status_code == 200 and r.json()["success"] and r.json()["metadata"] == {"team": "support"}
    listed = client.get("/collections").json()["collections"]
    assert [(c["name"], c["metadata"]) for c in listed] == [("any-provider", {"embedding_provider": "not-a-real-provider"}),
                                                           ("manual", {"team": "support"})]
    assert client.post("/collections", json={"name": "manual"}).status_code == 409


def test_add_documents_with_precomputed_embeddings(client):
    client.post("/collections", json={"name": "c"})
    r = client.post("/collections/c/documents", json={"documents": [doc("one"), doc("two")]})
    assert r.status_code == 200 and r.json()["success"] and r.json()["count"] == 2
    assert client.get("/collections/c").json()["count"] == 2


@pytest.mark.parametrize("body,message", [
    ({"documents": [doc("one"), {"text": "two", "metadata": {}}]}, "All documents must include pre-computed embeddings"),
    ({"documents": []}, "Documents array is required"),
    ({}, "Documents array is required"),
    ({"documents": [doc("one", emb=["a", "b"])]}, "Invalid embedding format for document 0: element 0 is \"a\", not a finite number"),
    ({"documents": [{"text": "x", "embedding": "0.1,0.2"}]}, "Invalid embedding format for document 0: embedding must be a non-empty array of numbers"),
    ({"documents": [doc("one"), doc("two", emb=(0.1, 0.2))]}, "Embedding dimension mismatch: document 0 has 3 dimensions, document 1 has 2"),
])
def test_bad_documents_are_400_with_the_spec_message(client, body, message):
    client.post("/collections", json={"name": "c"})
    r = client.post("/collections/c/documents", json=body)
    assert r.status_code == 400 and r.json()["error"] == message
    assert client.get("/collections/c").json()["count"] == 0  # nothing half-written


def test_dimension_mismatch_against_the_collection(client):
    client.post("/collections", json={"name": "c"})
    client.post("/collections/c/documents", json={"documents": [doc("one")]})
    r = client.post("/collections/c/documents", json={"documents": [doc("two", emb=(0.1, 0.2, 0.3, 0.4))]})
    assert r.status_code == 400
    assert r.json()["error"] == "Embedding dimension mismatch: collection 'c' holds 3-dimensional embeddings, these have 4"


@pytest.fixture
def book(client):
    client.post("/collections", json={"name": "book"})
    docs = []
    for chapter in ("1", "2", "3"):
        for n, kind in enumerate(["heading", "paragraph", "paragraph", "code", "list"]):
            docs.append(doc(f"chapter {chapter} part {n}", chapter_id=chapter, chapter=chapter, doc_type=kind,
                            section_id=f"s{chapter}"))
    client.post("/collections/book/documents", json={"documents": docs})
    return client


def test_metadata_queries(book):
    r = where(book, "book", {"section_id": "s2"}).json()
    assert r["count"] == r["total"] == 5 and {d["metadata"]["section_id"] for d in r["documents"]} == {"s2"}
    assert set(r["documents"][0]) == {"id", "text", "metadata"}
    both = where(book, "book", {"chapter_id": "1", "doc_type": "paragraph"}).json()
    assert both["count"] == 2 and all(d["metadata"]["chapter_id"] == "1" and d["metadata"]["doc_type"] == "paragraph"
                                      for d in both["documents"])
    kinds = where(book, "book", {"doc_type": {"$in": ["heading", "paragraph"]}}).json()
    assert kinds["count"] == 9 and {d["metadata"]["doc_type"] for d in kinds["documents"]} == {"heading", "paragraph"}
    either = where(book, "book", {"$or": [{"chapter": "1"}, {"chapter": "3"}]}).json()
    assert either["count"] == 10 and {d["metadata"]["chapter"] for d in either["documents"]} == {"1", "3"}


def test_sibling_gathering_returns_the_whole_section(book):
    """A semantic hit names its section_id; the section comes back whole, sortable by doc_type."""
    section = where(book, "book", {"section_id": "s1"}).json()["documents"]
    assert sorted(d["text"] for d in section) == [f"chapter 1 part {n}" for n in range(5)]


def test_no_filter_limit_offset_and_empty_matches(client):
    client.post("/collections", json={"name": "big"})
    docs = [doc(f"document {i:03d}", n=i) for i in range(250)]
    client.post("/collections/big/documents", json={"documents": docs})
    first = where(client, "big").json()
    assert first["count"] == 100 and first["total"] == 250
    page = where(client, "big", limit=50, offset=100).json()
    again = where(client, "big", limit=50, offset=100).json()
    assert page["count"] == 50 and page == again  # a stable order
    everything = [d["id"] for p in range(5) for d in where(client, "big", limit=50, offset=50 * p).json()["documents"]]
    assert len(set(everything)) == 250
    assert where(client, "big", limit=5000).json()["count"] == 250  # at most 1000 a page
    empty = where(client, "big", {"n": -1})
    assert empty.status_code == 200 and empty.json() == {"documents": [], "count": 0, "total": 0}


def test_unknown_collection_and_bad_filters(client):
    r = where(client, "nonexistent")
    assert r.status_code == 404 and r.json()["error"] == "Collection 'nonexistent' not found"
    assert client.get("/collections/nonexistent").status_code == 404
    assert client.post("/collections/nonexistent/documents", json={"documents": [doc("x")]}).status_code == 404
    client.post("/collections", json={"name": "c"})
    r = where(client, "c", "invalid-json-string")
    assert r.status_code == 400 and r.json()["error"] == "Invalid 'where' filter: must be valid JSON"
    r = where(client, "c", {"n": {"$regex": "x"}})
    assert r.status_code == 400 and "$regex" in r.json()["error"]
    assert client.post("/collections", json={"name": "bad name!"}).status_code == 400


def test_limit_above_1000_is_capped(client):
    client.post("/collections", json={"name": "c"})
    client.post("/collections/c/documents", json={"documents": [doc(f"d{i}", n=i) for i in range(1005)]})
    r = where(client, "c", limit=5000).json()
    assert r["count"] == 1000 and r["total"] == 1005
