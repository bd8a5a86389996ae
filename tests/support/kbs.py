"""The one way the tests make a knowledge base: offline unless told (the local model, the sqlite store),
through the face under test: a REST client (``POST /ragstore/rags``, its 201 checked) or a ``Runtime``
(the saving verb: every save rule, as REST applies them). A field given as None is left out. Returns the new
KB's id."""

from __future__ import annotations

from typing import Any

from eddi_rag.runtime import Runtime

OFFLINE = {"embeddingProvider": "local", "storeType": "sqlite"}


def make_kb(face: Any, name: str = "kb", **config: Any) -> str:
    body = {k: v for k, v in {"name": name, **OFFLINE, **config}.items() if v is not None}  # None: leave it out
    if isinstance(face, Runtime):
        return face.saving.create("rags", body).id
    created = face.post("/ragstore/rags", json=body)
    assert created.status_code == 201, created.text
    return created.headers["Location"].split("/")[-1].split("?")[0]


def sources_read(runtime: Runtime, kb: str, reader: Any, query: str) -> set[str]:
    """The documents (their ``source``) whose chunks a search for ``query`` finds, read as ``reader``."""
    from eddi_rag.verbs.search import SearchRequest

    return {h.metadata["source"] for h in runtime.search.hits(SearchRequest(kb, query, reader=reader))}


def sources_held(runtime: Runtime, kb: str) -> set[str]:
    """The documents (their ``source``) the knowledge base holds chunks of."""
    return {c.metadata["source"] for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None)}
